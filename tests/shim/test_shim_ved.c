/* SPDX-License-Identifier: MIT */
/*
 * The shim under ved, on the fake driver: the self-checking programs
 * (prog_shim_streams, prog_shim_launch) run with libve.so while a ved serves
 * the device, so their kernels are bound by the daemon through the remote
 * link (start_runtime picks it: VE_DAEMON, or ved's socket found at the
 * default path).
 *   shim_ved_found      ved found at the default path ($XDG_RUNTIME_DIR),
 *                       every launch bound by ved, BYE at exit; VE_PROFILE_OUT
 *                       saves the profile ved measured
 *   shim_ved_two        two programs at once: two clients of one ved
 *   shim_ved_phase_two_decoders  two decode loops with VE_PHASE=1 through one
 *                       ved: each learns from ved that another process is
 *                       there (the others word) and holds a step now and then;
 *                       both finish correctly
 *   shim_ved_dies       ved killed mid-run: the program finishes correctly in
 *                       safe mode
 *   shim_ved_knob       VE_DAEMON=0 forces embedded (VE_PROFILE_OUT saves the
 *                       embedded coordinator's profile); a bad VE_DAEMON is refused
 *   shim_ved_stopped_client  a SIGSTOPped client loses its grant after
 *                       stale_ms, stays registered, and finishes once continued
 *   shim_ved_decode_no_doorbell  a decode loop (graph replay, read, sync per
 *                       step) wakes a sleeping ved at no step: its profile
 *                       samples wait for ved's next pass, and still arrive
 *   shim_ved_late_ops_reported  a latency client's ops late for their
 *                       deadline (VE_TPOT_MS) show in ved's status while it
 *                       runs and in ved's log when it leaves; none when on time
 *   shim_ved_turns_host_phases_first  two processes of GPU-wide kernels, one
 *                       with host phases: ved grants them the GPU in turns,
 *                       the host-phase one while it runs, never both at once
 * Needs $VE_BUILD/ved, libve.so, the fake libcuda and the programs; skips
 * otherwise.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "../harness.h"
#include "../unit/ved_helper.h"
#include "shim_harness.h"

#include "ipc/ctl.h"

static char g_xdg[128], g_sock[256], g_ved[PATH_MAX + 16];
static const char *g_ved_log; /* where the next ved started logs; NULL: nowhere */
static pid_t g_ved_pid;

/* SIGTERM and a bounded wait; ved's exit status (its self-check aborts, a
 * sanitizer report fails it), -1 if it had to be killed, 0 if none ran. */
static int stop_ved(void)
{
	if (g_ved_pid <= 0)
		return 0;
	int rc = vh_stop(g_ved_pid);
	g_ved_pid = 0;
	return rc;
}

static void at_exit(void)
{
	stop_ved(); /* a failed check must not leave a ved running */
	char p[300];
	snprintf(p, sizeof(p), "%s/vitamin-e", g_xdg);
	rmdir(p);
	rmdir(g_xdg);
}

/* ved on $XDG_RUNTIME_DIR/vitamin-e/ved-0.sock of a folder of our own: where
 * the shim looks for it by default. */
static bool start_ved_env(const char *extra)
{
	static bool registered;
	if (!registered) {
		atexit(at_exit);
		registered = true;
	}
	stop_ved();
	if (!vh_find(sh_build, g_ved, sizeof(g_ved)))
		return false;
	snprintf(g_xdg, sizeof(g_xdg), "%s/ve-test-shim-ved-%d", vh_tmpdir(), (int)getpid());
	mkdir(g_xdg, 0700);
	char dir[200];
	snprintf(dir, sizeof(dir), "%s/vitamin-e", g_xdg);
	mkdir(dir, 0700);
	snprintf(g_sock, sizeof(g_sock), "%s/ved-0.sock", dir);
	const char *env[] = {"VE_VED_CHECK=1", "VE_VED_POLICY=tput", extra, NULL};
	pid_t pid = vh_start(g_ved, g_sock, g_ved_log, env);
	g_ved_pid = pid > 0 ? pid : 0;
	return pid > 0;
}

static bool start_ved(void)
{
	return start_ved_env(NULL);
}

/* A ved logging at info to log (tests/test_shim_ved.<pid>.<tag>.ved.log in
 * the build, emptied first), for tests that read what it logged. */
static bool start_ved_logging(char *log, size_t n, const char *tag)
{
	snprintf(log, n, "%s/tests/test_shim_ved.%d.%s.ved.log", sh_build, (int)getpid(), tag);
	unlink(log);
	g_ved_log = log;
	bool started = start_ved_env("VE_VED_LOG_LEVEL=info");
	g_ved_log = NULL;
	return started;
}

static union {
	uint8_t b[VE_CTL_MAX_MSG];
	uint64_t align;
} g_msg;

static const struct ve_ctl_status *status(void)
{
	int fd = ve_ctl_connect(g_sock);
	if (fd < 0)
		return NULL;
	struct ve_ctl_status_req q;
	memset(&q, 0, sizeof(q));
	ve_ctl_hdr_init(&q.h, VE_CTL_STATUS_REQ, sizeof(q));
	int n = -1;
	if (ve_ctl_send(fd, &q, sizeof(q)) == 0)
		n = ve_ctl_recv(fd, g_msg.b, sizeof(g_msg.b), NULL, 5000);
	close(fd);
	if (n <= 0 || ve_ctl_check(g_msg.b, (size_t)n, VE_CTL_FROM_VED))
		return NULL;
	return (const void *)g_msg.b;
}

static struct sh_result g_res, g_res2;

/* Keys with at least one measured time in a saved profile ("k <key> <ns|->..."). */
static int profile_measured(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	char line[4096];
	int n = 0;
	while (fgets(line, sizeof(line), f)) {
		char *save = NULL, *t = strtok_r(line, " \n", &save);
		if (!t || strcmp(t, "k") != 0 || !strtok_r(NULL, " \n", &save))
			continue;
		bool measured = false;
		while ((t = strtok_r(NULL, " \n", &save)))
			measured |= *t >= '0' && *t <= '9';
		n += measured;
	}
	fclose(f);
	return n;
}

/* The tests of each program that hold under the shim (test_shim_semantics.c
 * lists the known deviations, e.g. prog_shim_streams' "progress"). */
#define STREAMS_TESTS                                                                              \
	"chains", "legacy", "per_thread", "events", "hostfn", "memops", "threads", "destroy_pending"
#define LAUNCH_TESTS                                                                               \
	"params", "launch_ex", "launch_errors", "config_errors", "graphs", "passthrough", "foreign"

static void opts_for(struct sh_opts *o, bool by_path)
{
	static char xdg[160], daemon[300];
	memset(o, 0, sizeof(*o));
	o->shim = true;
	o->expect_green = 1;
	o->timeout_s = 60;
	snprintf(xdg, sizeof(xdg), "XDG_RUNTIME_DIR=%s", g_xdg);
	snprintf(daemon, sizeof(daemon), "VE_DAEMON=%s", g_sock);
	o->env[0] = xdg;
	o->env[1] = "VE_LOG_LEVEL=info";
	/* The harness pins VE_DAEMON=0 (hermetic runs); "NAME=" unsets it again. */
	o->env[2] = by_path ? daemon : "VE_DAEMON=";
}

#define NEED_VED()                                                                                 \
	do {                                                                                       \
		if (!sh_locate())                                                                  \
			VE_SKIP("libve.so or the fake libcuda is not built in $VE_BUILD");         \
		if (!start_ved())                                                                  \
			VE_SKIP("no ved in $VE_BUILD");                                            \
	} while (0)

VE_TEST(shim_ved_found)
{
	SH_PROG(prog, "prog_shim_streams");
	NEED_VED();
	struct sh_opts o;
	opts_for(&o, false); /* found at $XDG_RUNTIME_DIR/vitamin-e/ved-0.sock */
	/* The profile saved at exit is the one ved measured and decided with. */
	char prof[300], prof_env[320];
	snprintf(prof, sizeof(prof), "%s/profile-ved.txt", g_xdg);
	snprintf(prof_env, sizeof(prof_env), "VE_PROFILE_OUT=%s", prof);
	o.env[3] = prof_env;
	const char *argv[] = {prog, STREAMS_TESTS, NULL};
	sh_run(argv, &o, &g_res);
	if (g_res.rc || !strstr(g_res.out, "coordinator: ved at"))
		sh_dump(&g_res);
	VE_CHECK_EQ(g_res.rc, 0);
	VE_CHECK(strstr(g_res.out, "coordinator: ved at") != NULL);
	VE_CHECK(strstr(g_res.out, "bound by ved") != NULL);
	/* The start-up line names the policy that decides: ved's. */
	VE_CHECK(strstr(g_res.out, "policy tput (ved's)") != NULL);
	int measured = profile_measured(prof);
	unlink(prof);
	VE_CHECK_MSG(measured > 0, "VE_PROFILE_OUT under ved: %d measured keys", measured);
	const struct ve_ctl_status *s = status();
	VE_CHECK(s != NULL);
	printf("# ved: %llu bindings, %llu completions, %llu joined, %llu left\n",
	       (unsigned long long)s->bindings, (unsigned long long)s->completions,
	       (unsigned long long)s->joined, (unsigned long long)s->left);
	/* Grant mode (the default): ved grants entries and the shim binds its
	 * own launches, so ved counts no binding; per-op, every one. */
	VE_CHECK(s->bindings == s->completions);
	VE_CHECK_EQ(s->joined, 1);
	VE_CHECK_EQ(s->left, 1);
	VE_CHECK_EQ(s->nclients, 0);
	VE_CHECK_EQ(stop_ved(), 0);
}

/* prog_shim_busy under the shim through ved in a forked child, with extra
 * environment @e1 and @e2 (NULL: none); the child's exit status says
 * whether it passed. */
/* The busy client in a child process; it exits 1 if it failed, 3 if its
 * output lacks 'expect' (NULL: nothing expected), else 0. */
static pid_t spawn_busy_expect(const char *busy, unsigned seed, const char *e1, const char *e2,
			       const char *expect)
{
	pid_t kid = fork();
	if (kid == 0) {
		struct sh_opts o;
		opts_for(&o, true);
		o.seed = seed;
		o.env[3] = e1;
		o.env[4] = e1 ? e2 : NULL;
		const char *argv[] = {busy, NULL};
		sh_run(argv, &o, &g_res2);
		if (g_res2.rc)
			sh_dump(&g_res2);
		_exit(g_res2.rc ? 1 : expect && !strstr(g_res2.out, expect) ? 3 : 0);
	}
	return kid;
}

static pid_t spawn_busy(const char *busy, unsigned seed, const char *e1, const char *e2)
{
	return spawn_busy_expect(busy, seed, e1, e2, NULL);
}

VE_TEST(shim_ved_two)
{
	SH_PROG(p1, "prog_shim_streams");
	SH_PROG(p2, "prog_shim_launch");
	NEED_VED();
	pid_t kid = fork();
	if (kid == 0) {
		struct sh_opts o;
		opts_for(&o, true);
		o.seed = 7;
		o.jitter = 300;
		const char *argv[] = {p2, LAUNCH_TESTS, NULL};
		sh_run(argv, &o, &g_res2);
		if (g_res2.rc)
			sh_dump(&g_res2);
		_exit(g_res2.rc ? 1 : 0);
	}
	struct sh_opts o;
	opts_for(&o, true);
	o.seed = 3;
	o.jitter = 200;
	const char *argv[] = {p1, STREAMS_TESTS, NULL};
	sh_run(argv, &o, &g_res);
	if (g_res.rc)
		sh_dump(&g_res);
	int st = 0;
	waitpid(kid, &st, 0);
	VE_CHECK_EQ(g_res.rc, 0);
	VE_CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "prog_shim_launch under ved failed");
	const struct ve_ctl_status *s = status();
	VE_CHECK(s != NULL);
	VE_CHECK_EQ(s->joined, 2);
	VE_CHECK_EQ(s->nclients, 0);
	VE_CHECK_EQ(s->protocol_errors, 0);
	VE_CHECK_EQ(stop_ved(), 0);
}

/* A latency-class process shaped like a decode server (bursts of short
 * kernels with a synchronize each, idle gaps between requests) beside a
 * busy batch process, both through ved in grant mode: the server keeps
 * being served (a grant target that moved every tick starved it on the GPU:
 * 53,000 grant changes in a minute, no request finished). */
static void latency_beside_busy(const char *cluster_env, const char *graph_env)
{
	SH_PROG(busy, "prog_shim_busy");
	SH_PROG(bursty, "prog_shim_bursty");
	NEED_VED();
	pid_t kid = spawn_busy(busy, 5, "VETEST_SECONDS=6", NULL);
	usleep(300000);
	struct sh_opts o;
	opts_for(&o, true);
	o.seed = 6;
	o.env[3] = "VE_CLASS=latency";
	o.env[4] = "VETEST_MAX_MS=20000"; /* a bound that catches a starved server, sanitizers too */
	o.env[5] = cluster_env;
	o.env[6] = graph_env;
	const char *argv[] = {bursty, NULL};
	sh_run(argv, &o, &g_res);
	if (g_res.rc)
		sh_dump(&g_res);
	int st = 0;
	waitpid(kid, &st, 0);
	VE_CHECK_MSG(g_res.rc == 0, "the latency client was not served in time");
	VE_CHECK(strstr(g_res.out, "bursty: slowest request") != NULL);
	VE_CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the busy client failed");
	VE_CHECK_EQ(stop_ved(), 0);
}

VE_TEST(shim_ved_latency_beside_busy)
{
	latency_beside_busy(NULL, NULL);
}

/* The same with one launch per token in a thread-block cluster of 4: the
 * server keeps being served while the busy client holds SMs. */
VE_TEST(shim_ved_latency_clusters_beside_busy)
{
	latency_beside_busy("VETEST_CLUSTER=4", NULL);
}

/* The same with each token one CUDA graph launch whose kernels include a
 * cluster of 4 (a decode server with graphs: PyTorch's captured cuBLAS
 * kernels). The graph's minimum comes from the driver's occupancy
 * calculator as a kernel's does, so it runs on a pool entry: when every
 * graph with such a cluster needed the whole GPU, the H200 server waited
 * for the training beside it to drain every token, or starved under tput. */
VE_TEST(shim_ved_latency_graph_clusters_beside_busy)
{
	latency_beside_busy("VETEST_CLUSTER=4", "VETEST_GRAPH=1");
	VE_CHECK_MSG(strstr(g_res.out, "graph launches: 256 may run on a pool entry, 0 need the "
				       "whole GPU") != NULL,
		     "the server's graphs were not placed on pool entries");
}

static const struct ve_ctl_client *status_clients(const struct ve_ctl_status *s)
{
	return (const void *)((const uint8_t *)(s + 1) + s->nentries * sizeof(struct ve_ctl_entry));
}

/* A poller of ved's status while clients run: the most late ops any
 * latency-class client had, and how many polls showed a batch client with a
 * lend wider than its grant. */
struct status_poll {
	_Atomic int stop;
	unsigned every_us;
	unsigned long long max_late;
	int polls, lent;
};

static void *poll_status(void *arg)
{
	struct status_poll *sp = arg;
	while (!atomic_load(&sp->stop)) {
		const struct ve_ctl_status *s = status();
		for (uint32_t i = 0; s && i < s->nclients; i++) {
			const struct ve_ctl_client *c = &status_clients(s)[i];
			bool lat = c->class_flags & VE_CTL_CLASS_LATENCY;
			if (lat && c->late > sp->max_late)
				sp->max_late = c->late;
			if (!lat && c->lend_entry != 0xffff && c->lent_sms > c->granted_sms)
				sp->lent++;
		}
		sp->polls += s != NULL;
		usleep(sp->every_us);
	}
	return NULL;
}

/* "(N after their deadline)" in ved's log line for a client that left; 0 if
 * the line has none, -1 if no client left. */
static long long late_in_log(const char *log)
{
	FILE *f = fopen(log, "r");
	if (!f)
		return -1;
	char line[1024];
	long long n = -1;
	while (fgets(line, sizeof(line), f)) {
		if (!strstr(line, ") left ("))
			continue;
		const char *p = strstr(line, " ops done (");
		unsigned long long v = 0;
		n = p && sscanf(p, " ops done (%llu after their deadline)", &v) == 1 ? (long long)v : 0;
	}
	fclose(f);
	return n;
}

/* An operator sees whether a latency client meets its deadlines: ops that
 * finished after theirs (here VE_TPOT_MS, a step budget no op can meet) are
 * counted in ved's status while the client runs (ve-ctl, metrics) and in
 * ved's log line when it leaves, at most what the process itself counted;
 * with a budget every op meets, none. */
VE_TEST(shim_ved_late_ops_reported)
{
	SH_PROG(bursty, "prog_shim_bursty");
	if (!sh_locate())
		VE_SKIP("libve.so or the fake libcuda is not built in $VE_BUILD");
	static const char *const budgets[2] = {"VE_TPOT_MS=0.001", "VE_TPOT_MS=60000"};
	for (int b = 0; b < 2; b++) {
		char log[PATH_MAX + 64];
		if (!start_ved_logging(log, sizeof(log), b ? "late1" : "late0"))
			VE_SKIP("no ved in $VE_BUILD");
		struct status_poll lp = {.every_us = 10000};
		pthread_t th;
		VE_CHECK_EQ(pthread_create(&th, NULL, poll_status, &lp), 0);
		struct sh_opts o;
		opts_for(&o, true);
		o.seed = 11;
		o.env[3] = "VE_CLASS=latency";
		o.env[4] = budgets[b];
		const char *argv[] = {bursty, NULL};
		sh_run(argv, &o, &g_res);
		atomic_store(&lp.stop, 1);
		pthread_join(th, NULL);
		if (g_res.rc)
			sh_dump(&g_res);
		VE_CHECK_EQ(g_res.rc, 0);
		VE_CHECK_EQ(stop_ved(), 0);
		const char *p = strstr(g_res.out, " ops finished after their deadline");
		unsigned long long own = 0;
		while (p && p > g_res.out && p[-1] >= '0' && p[-1] <= '9')
			p--;
		VE_CHECK_MSG(p && sscanf(p, "%llu", &own) == 1, "no late-op count in the exit summary");
		long long logged = late_in_log(log);
		VE_CHECK_MSG(logged >= 0, "no 'left' line in ved's log %s", log);
		if (b == 0) {
			VE_CHECK_MSG(own > 0, "no op late with a 1 us budget");
			VE_CHECK_MSG(lp.max_late > 0, "status never showed a late op (%d polls)",
				     lp.polls);
			VE_CHECK_MSG(logged > 0 && (unsigned long long)logged <= own,
				     "ved logged %lld late ops, the process counted %llu", logged,
				     own);
		} else {
			VE_CHECK_EQ(own, 0);
			VE_CHECK_EQ(lp.max_late, 0);
			VE_CHECK_EQ(logged, 0);
		}
		unlink(log);
	}
}

/* Lending through ved (docs/policies.md, "Lending"): a latency-class server
 * with idle gaps between its requests (30-50 ms) beside a busy batch process
 * whose kernels (1 ms in the fake) fit its lend bound (VE_LEND_US=20000
 * here; 400 us by default). The batch process is lent the server's idle
 * SMs (ve-ctl status shows it), ved takes the lends back when requests come
 * (and logs both at exit), the server stays within its bound, and both
 * finish. */
VE_TEST(shim_ved_lend_beside_bursty)
{
	SH_PROG(busy, "prog_shim_busy");
	SH_PROG(bursty, "prog_shim_bursty");
	if (!sh_locate())
		VE_SKIP("libve.so or the fake libcuda is not built in $VE_BUILD");
	char log[PATH_MAX + 64];
	if (!start_ved_logging(log, sizeof(log), "lend"))
		VE_SKIP("no ved in $VE_BUILD");
	/* Its kernels really ran on the lent SMs: its exit summary says so. */
	pid_t kid = spawn_busy_expect(busy, 5, "VETEST_SECONDS=4", "VE_LEND_US=20000",
				      "kernels ran on SMs lent to this");
	usleep(300000);
	struct status_poll lp = {.every_us = 5000};
	pthread_t th;
	VE_CHECK_EQ(pthread_create(&th, NULL, poll_status, &lp), 0);
	struct sh_opts o;
	opts_for(&o, true);
	o.seed = 6;
	o.env[3] = "VE_CLASS=latency";
	o.env[4] = "VETEST_MAX_MS=20000";
	const char *argv[] = {bursty, NULL};
	sh_run(argv, &o, &g_res);
	atomic_store(&lp.stop, 1);
	pthread_join(th, NULL);
	if (g_res.rc)
		sh_dump(&g_res);
	int st = 0;
	waitpid(kid, &st, 0);
	VE_CHECK_MSG(g_res.rc == 0, "the latency client was not served in time");
	VE_CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) != 3,
		     "the busy client ran no kernel on lent SMs (its exit summary)");
	VE_CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the busy client failed");
	VE_CHECK_EQ(stop_ved(), 0);
	FILE *f = fopen(log, "r");
	VE_CHECK(f != NULL);
	char line[1024];
	unsigned long long lends = 0, taken = 0;
	bool found = false;
	while (f && fgets(line, sizeof(line), f)) {
		const char *p = strstr(line, "; ");
		if (strstr(line, "ved: grants:") && p &&
		    sscanf(p, "; %llu lends, %llu taken back", &lends, &taken) == 2)
			found = true;
	}
	if (f)
		fclose(f);
	printf("# %llu lends, %llu taken back; status showed a lend in %d of %d polls\n", lends,
	       taken, lp.lent, lp.polls);
	VE_CHECK_MSG(found, "no grants line with lends in ved's log %s", log);
	VE_CHECK(lends > 0 && taken > 0);
	VE_CHECK_MSG(lp.lent > 0, "ve-ctl status never showed a lend (%d polls)", lp.polls);
	unlink(log);
}

/* Client `pid` in ved's status (its grant), or NULL. */
static const struct ve_ctl_client *status_client(const struct ve_ctl_status *s, pid_t pid)
{
	for (uint32_t i = 0; s && i < s->nclients; i++)
		if (status_clients(s)[i].pid == pid)
			return &status_clients(s)[i];
	return NULL;
}

/* Turns through ved (docs/policies.md, "Turns"): two processes whose kernels
 * are as wide as the GPU and hold it 2 ms (the fake's), one with host
 * phases (4 rounds, then 15 ms on the host), one busy all the time. Once
 * ved has seen their duty, ve-ctl status shows the whole GPU granted to the
 * one with host phases while it runs and none to the other, and the
 * reverse in its host phases; never both on the GPU at once. Both finish
 * and check their results. */
struct turn_poll {
	_Atomic int stop;
	int polls, a_turn, b_gap, both;
};

static void *poll_turns(void *arg)
{
	struct turn_poll *tp = arg;
	while (!atomic_load(&tp->stop)) {
		const struct ve_ctl_status *s = status();
		/* The dense client joined first: the older of the two. */
		const struct ve_ctl_client *a = NULL, *b = NULL;
		if (s && s->nclients == 2) {
			a = &status_clients(s)[0];
			b = &status_clients(s)[1];
			if (a->age_ns > b->age_ns) {
				const struct ve_ctl_client *x = a;
				a = b;
				b = x;
			}
		}
		if (a && b) {
			tp->polls++;
			tp->a_turn += a->granted_sms == 132 && b->granted_sms == 0;
			tp->b_gap += b->granted_sms == 132 && a->granted_sms == 0;
			tp->both += a->granted_sms && b->granted_sms;
		}
		usleep(2000);
	}
	return NULL;
}

VE_TEST(shim_ved_turns_host_phases_first)
{
	SH_PROG(busy, "prog_shim_busy");
	if (!sh_locate())
		VE_SKIP("libve.so or the fake libcuda is not built in $VE_BUILD");
	NEED_VED();
	pid_t dense = spawn_busy(busy, 5, "VETEST_SECONDS=4", "VETEST_WIDE=2");
	usleep(200000);
	pid_t kid = fork();
	if (kid == 0) {
		struct sh_opts o;
		opts_for(&o, true);
		o.seed = 6;
		o.env[3] = "VETEST_SECONDS=3";
		o.env[4] = "VETEST_WIDE=2";
		o.env[5] = "VETEST_BURST=4";
		o.env[6] = "VETEST_HOST_MS=15";
		const char *argv[] = {busy, NULL};
		sh_run(argv, &o, &g_res);
		if (g_res.rc)
			sh_dump(&g_res);
		_exit(g_res.rc ? 1 : 0);
	}
	/* After a second, when their duties are known. */
	usleep(1000000);
	struct turn_poll tp = {0};
	pthread_t th;
	VE_CHECK_EQ(pthread_create(&th, NULL, poll_turns, &tp), 0);
	int st = 0, st2 = 0;
	waitpid(kid, &st, 0);
	atomic_store(&tp.stop, 1);
	pthread_join(th, NULL);
	waitpid(dense, &st2, 0);
	printf("# %d polls: host-phase job's turn %d, dense in its gap %d, both granted %d\n",
	       tp.polls, tp.a_turn, tp.b_gap, tp.both);
	VE_CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the host-phase client failed");
	VE_CHECK_MSG(WIFEXITED(st2) && WEXITSTATUS(st2) == 0, "the dense client failed");
	VE_CHECK_MSG(tp.polls >= 100, "only %d status polls", tp.polls);
	VE_CHECK_MSG(tp.a_turn * 10 >= tp.polls && tp.b_gap * 10 >= tp.polls,
		     "turns: %d of %d polls the host-phase job's, %d the dense job's", tp.a_turn,
		     tp.polls, tp.b_gap);
	/* Both granted: at hand-overs, and where a step's host phase looks
	 * like work (the turn holder keeps its grant that long after its last
	 * op). Plain and address builds: 2-4% of the polls. ThreadSanitizer
	 * slows the clients' host code 5-15x, which stretches exactly those
	 * phases: 2-15% in unloaded runs on 2 cores, so the bound there is a
	 * quarter (the turns above still hold). */
	int most = sh_under_tsan() ? 4 : 10;
	VE_CHECK_MSG(tp.both * most <= tp.polls, "both granted in %d of %d polls", tp.both,
		     tp.polls);
}

static double mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* A process that joined ved first holds a grant while it creates its pool
 * (about 130 ms on the H200), its dispatcher not yet running. A second
 * process joining then must get SMs at once, not when the first one's
 * dispatcher first answers: on the H200 that reclaim took 80-110 ms in
 * every colocated start. The fake makes pool creation slow (5 ms a green
 * context, ~300 ms in all) and the second process joins meanwhile; ved's
 * slowest reclaim must stay far below that. */
VE_TEST(shim_ved_join_while_first_creates_pool)
{
	SH_PROG(busy, "prog_shim_busy");
	if (!sh_locate())
		VE_SKIP("libve.so or the fake libcuda is not built in $VE_BUILD");
	char log[PATH_MAX + 64];
	if (!start_ved_logging(log, sizeof(log), "join"))
		VE_SKIP("no ved in $VE_BUILD");
	pid_t kid = spawn_busy(busy, 8, "VETEST_SECONDS=2", "FAKECUDA_GREEN_CREATE_US=5000");
	usleep(120000); /* the first has joined and is creating its pool */
	struct sh_opts o;
	opts_for(&o, true);
	o.seed = 9;
	o.env[3] = "VETEST_SECONDS=2";
	const char *argv[] = {busy, NULL};
	sh_run(argv, &o, &g_res);
	if (g_res.rc)
		sh_dump(&g_res);
	int st = 0;
	waitpid(kid, &st, 0);
	VE_CHECK_EQ(g_res.rc, 0);
	VE_CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the first client failed");
	VE_CHECK_EQ(stop_ved(), 0);
	FILE *f = fopen(log, "r");
	VE_CHECK_MSG(f != NULL, "no ved log at %s", log);
	if (!f)
		return;
	char line[1024];
	double p50 = -1, p99 = -1, max = -1;
	unsigned long long reclaims = 0;
	while (fgets(line, sizeof(line), f)) {
		const char *p = strstr(line, "changes, ");
		if (p && strstr(p, "reclaim_us"))
			sscanf(p, "changes, %llu reclaims, reclaim_us p50 %lf p99 %lf max %lf",
			       &reclaims, &p50, &p99, &max);
	}
	fclose(f);
	VE_CHECK_MSG(max >= 0, "no grant statistics in ved's log %s", log);
	VE_CHECK_MSG(reclaims >= 1 && max < 100000.0,
		     "%llu reclaims, the slowest %.1f us (want under 100 ms while the first "
		     "process created its pool for ~300 ms)",
		     reclaims, max);
	unlink(log);
}

/* A client stopped with SIGSTOP loses its grant once its heartbeat has been
 * still for stale_ms (1 s by default), so its SMs can go to others; it stays
 * registered, and once continued it gets a grant again and finishes with
 * correct results. */
VE_TEST(shim_ved_stopped_client)
{
	SH_PROG(busy, "prog_shim_busy");
	NEED_VED();
	pid_t kid = spawn_busy(busy, 7, "VETEST_SECONDS=4", NULL);
	/* The program (a grandchild: sh_run forks it) once it holds a grant. */
	pid_t prog = 0;
	for (int i = 0; i < 1500 && !prog; i++) {
		const struct ve_ctl_status *s = status();
		if (s && s->nclients == 1 && status_clients(s)->grant_entry != 0xffff &&
		    status_clients(s)->granted_sms > 0)
			prog = status_clients(s)->pid;
		if (!prog)
			usleep(10000);
	}
	VE_CHECK_MSG(prog > 0, "the busy client never held a grant");
	if (prog > 0) {
		VE_CHECK_EQ(kill(prog, SIGSTOP), 0);
		double t0 = mono_ms();
		bool taken = false, listed = true;
		while (!taken && listed && mono_ms() - t0 < 8000) {
			usleep(20000);
			const struct ve_ctl_client *c = status_client(status(), prog);
			listed = c != NULL;
			taken = c && c->grant_entry == 0xffff && c->granted_sms == 0;
		}
		double ms = mono_ms() - t0;
		/* It may have been idle (then its SMs went at once); either way a
		 * stopped process must not get them back while it is stopped, past
		 * stale_ms, whatever demand its segment last showed. */
		bool kept_off = taken;
		for (double t1 = mono_ms(); kept_off && listed && mono_ms() - t1 < 1500;) {
			usleep(50000);
			const struct ve_ctl_client *c = status_client(status(), prog);
			listed = c != NULL;
			kept_off = c && c->grant_entry == 0xffff;
		}
		kill(prog, SIGCONT); /* before any check can end the test */
		printf("# grant taken back %.0f ms after SIGSTOP (stale_ms 1000)\n", ms);
		VE_CHECK_MSG(listed, "the stopped client was dropped instead of paused");
		VE_CHECK_MSG(taken, "the stopped client kept its grant for %.0f ms", ms);
		VE_CHECK_MSG(kept_off, "the stopped client got a grant again while stopped");
		/* Continued: granted again while it still has work. */
		bool again = false;
		for (int i = 0; i < 300 && !again; i++) {
			const struct ve_ctl_client *c = status_client(status(), prog);
			again = c && c->grant_entry != 0xffff;
			if (!again)
				usleep(10000);
		}
		VE_CHECK_MSG(again, "the continued client got no grant again");
	}
	int st = 0;
	waitpid(kid, &st, 0);
	VE_CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the stopped client failed");
	VE_CHECK_EQ(stop_ved(), 0);
}

/* A decode server's loop (bench/gpu/graphs/decode_replay.py): one graph
 * replay, a read of its result into pageable memory and a synchronize per
 * step. Every replay is timed by a marker of its own, so its completion is a
 * profile sample for ved. On the H200 two such servers under ved ran 0.992x
 * MPS: each sample rang ved's doorbell (ved sleeps between steps), an
 * eventfd write of ~3 us on the dispatcher thread before the step's token
 * was released, at every step; embedded, the sample costs nothing. Now the
 * samples wait for ved's next pass. ved spins 0 us here, so it is asleep
 * at every step's end: one doorbell per step without the change. The
 * profile ved measured still holds the samples (VE_PROFILE_OUT). */
VE_TEST(shim_ved_decode_no_doorbell)
{
	SH_PROG(prog, "prog_shim_decode");
	if (!sh_locate())
		VE_SKIP("libve.so or the fake libcuda is not built in $VE_BUILD");
	if (!start_ved_env("VE_VED_SPIN_US=0"))
		VE_SKIP("no ved in $VE_BUILD");
	enum { STEPS = 200 };
	struct sh_opts o;
	opts_for(&o, true);
	o.env[1] = "VE_LOG_LEVEL=debug";
	char prof[300], prof_env[320];
	snprintf(prof, sizeof(prof), "%s/profile-decode.txt", g_xdg);
	snprintf(prof_env, sizeof(prof_env), "VE_PROFILE_OUT=%s", prof);
	o.env[3] = prof_env;
	char steps_env[40];
	snprintf(steps_env, sizeof(steps_env), "VETEST_STEPS=%d", STEPS);
	o.env[4] = steps_env;
	/* Steps long against VE_AHEAD_US's 2 ms alone: a marker after each. */
	o.env[5] = "VETEST_STEP_US=500";
	const char *argv[] = {prog, NULL};
	sh_run(argv, &o, &g_res);
	const char *p = strstr(g_res.out, "exit: ved link: ");
	unsigned long long samples = 0, bells = 0;
	bool parsed = p && sscanf(p,
				  "exit: ved link: %llu samples sent without a doorbell, "
				  "%llu doorbells rung",
				  &samples, &bells) == 2;
	if (g_res.rc || !parsed)
		sh_dump(&g_res);
	VE_CHECK_EQ(g_res.rc, 0);
	VE_CHECK(strstr(g_res.out, "coordinator: ved at") != NULL);
	VE_CHECK_MSG(parsed, "no exit report of the ved link");
	printf("# %d steps under ved: %llu samples, %llu doorbells\n", STEPS, samples, bells);
	/* The test means something only if the steps were sampled. */
	VE_CHECK_MSG(samples >= STEPS / 2, "%llu samples in %d steps", samples, STEPS);
	/* A few for waiting on a grant at start, or for the profile at exit. */
	VE_CHECK_MSG(bells <= STEPS / 20, "%llu doorbells in %d steps", bells, STEPS);
	int measured = profile_measured(prof);
	unlink(prof);
	VE_CHECK_MSG(measured > 0, "VE_PROFILE_OUT under ved: %d measured keys", measured);
	VE_CHECK_EQ(stop_ved(), 0);
}

VE_TEST(shim_ved_dies)
{
	SH_PROG(prog, "prog_shim_streams");
	NEED_VED();
	pid_t killer = fork();
	if (killer == 0) {
		/* Once the program is ved's client (a slow start under a sanitizer
		 * must not find ved dead already), and a little after. */
		for (int i = 0; i < 1000; i++) {
			const struct ve_ctl_status *st = status();
			if (st && st->nclients > 0)
				break;
			usleep(10000);
		}
		usleep(50000);
		kill(g_ved_pid, SIGKILL);
		_exit(0);
	}
	struct sh_opts o;
	opts_for(&o, true);
	o.jitter = 500; /* slow enough to be running when ved dies */
	const char *argv[] = {prog, STREAMS_TESTS, NULL};
	sh_run(argv, &o, &g_res);
	waitpid(killer, NULL, 0);
	waitpid(g_ved_pid, NULL, 0);
	g_ved_pid = 0;
	bool lost = strstr(g_res.out, "lost ved") != NULL;
	if (g_res.rc || !lost)
		sh_dump(&g_res);
	VE_CHECK_EQ(g_res.rc, 0);
	VE_CHECK_MSG(lost, "the program never noticed that ved died");
}

/* One decode loop with VE_PHASE=1 (4000 steps of 100 us); the steps it
 * held, from its exit line, or -1 when it failed or printed none. */
static int phase_decoder(const char *prog, struct sh_result *res)
{
	struct sh_opts o;
	opts_for(&o, true);
	o.env[3] = "VE_PHASE=1";
	o.env[4] = "VETEST_STEPS=4000";
	o.env[5] = "VETEST_STEP_US=100";
	const char *argv[] = {prog, NULL};
	sh_run(argv, &o, res);
	if (res->rc) {
		sh_dump(res);
		return -1;
	}
	const char *p = strstr(res->out, "exit: VE_PHASE held ");
	unsigned long long held = 0;
	if (!p || sscanf(p, "exit: VE_PHASE held %llu", &held) != 1)
		return -1;
	return held > 100 ? 100 : (int)held;
}

VE_TEST(shim_ved_phase_two_decoders)
{
	SH_PROG(prog, "prog_shim_decode");
	NEED_VED();
	pid_t kid = fork();
	if (kid == 0) {
		int h = phase_decoder(prog, &g_res2);
		_exit(h < 0 ? 255 : h);
	}
	int mine = phase_decoder(prog, &g_res);
	int st = 0;
	waitpid(kid, &st, 0);
	VE_CHECK_MSG(mine >= 0, "the first decoder failed or printed no VE_PHASE line");
	VE_CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) != 255,
		     "the second decoder failed or printed no VE_PHASE line");
	int theirs = WIFEXITED(st) ? WEXITSTATUS(st) : 0;
	printf("# steps held: %d and %d\n", mine, theirs);
	/* A try is drawn at a third of the windows (15 each): none in both
	 * is a chance of about 1e-5. No phase pays on the fake driver: the
	 * tries back off, a handful at most. */
	VE_CHECK(mine + theirs >= 1);
	VE_CHECK(mine + theirs <= 24);
	VE_CHECK_EQ(stop_ved(), 0);
}

VE_TEST(shim_ved_knob)
{
	SH_PROG(prog, "prog_shim_streams");
	NEED_VED();
	struct sh_opts o;
	opts_for(&o, false);
	o.env[2] = "VE_DAEMON=0";
	char prof[300], prof_env[320];
	snprintf(prof, sizeof(prof), "%s/profile-embedded.txt", g_xdg);
	snprintf(prof_env, sizeof(prof_env), "VE_PROFILE_OUT=%s", prof);
	o.env[3] = prof_env;
	const char *argv[] = {prog, STREAMS_TESTS, NULL};
	sh_run(argv, &o, &g_res);
	if (g_res.rc)
		sh_dump(&g_res);
	VE_CHECK_EQ(g_res.rc, 0);
	VE_CHECK(strstr(g_res.out, "coordinator: embedded (VE_DAEMON=0)") != NULL);
	int measured = profile_measured(prof);
	unlink(prof);
	VE_CHECK_MSG(measured > 0, "VE_PROFILE_OUT embedded: %d measured keys", measured);
	o.env[3] = NULL;
	const struct ve_ctl_status *s = status();
	VE_CHECK(s && s->joined == 0);
	o.env[2] = "VE_DAEMON=relative/path";
	o.expect_green = 0;
	sh_run(argv, &o, &g_res);
	VE_CHECK(strstr(g_res.out, "VE_DAEMON=relative/path is none of") != NULL);
	VE_CHECK_EQ(stop_ved(), 0);
	char p[300];
	snprintf(p, sizeof(p), "%s/vitamin-e", g_xdg);
	rmdir(p);
	rmdir(g_xdg);
}
