/* SPDX-License-Identifier: MIT */
/*
 * ved's record path, end to end: a running ved (policy tput) and clients that
 * talk to it through the remote link (src/ved/client.c), i.e. the same
 * records, rings, doorbells and daemon loop a process under the shim uses,
 * without a GPU (the client side stops at the link: no dispatcher, no
 * backend).
 *
 *  ring_roundtrip_us    READY pushed -> BIND received, the client spinning on
 *                       its ring, ved awake (each op's DONE goes out before
 *                       the next READY, untimed). Median and p99 over all
 *                       samples; spread = p10/p90 of the repetitions' medians.
 *  ..._sleeping_us      the same with 300 us between ops, so ved has gone to
 *                       sleep in epoll_wait and the client rings its doorbell.
 *  records_per_s        records ved handles per second (READY + DONE in, BIND
 *                       out, from ved's own counters over the interval) while
 *                       several client processes stream READY/DONE pairs with
 *                       a window of outstanding ops each.
 * Targets (docs/ipc.md): median round trip <= 5 us, >= 1 M records/s.
 * Writes bench/results/ipc.json (or $VE_BENCH_OUT). Needs $VE_BUILD/ved (or
 * ../ved next to this binary); without it the bench says so and exits 0.
 */
#include "backend/sim.h"
#include "dispatch/link.h"
#include "ved/client.h"
#include "ipc/ctl.h"
#include "util/futex.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "bench_util.h"

#define REPS	      7
#define RT_PER_REP    20000
#define SLEEP_REPS    5
#define SLEEP_PER_REP 1000
#define SLEEP_GAP_US  300
#define TP_REPS	      3
#define TP_CLIENTS    2
#define TP_WINDOW     48
#define TP_WARMUP_MS  300
#define TP_MEASURE_MS 1500

static char g_dir[128], g_sock[160], g_ved[PATH_MAX + 8];
static uint32_t g_leaves[VE_MAX_LEAVES];
static uint32_t g_nleaves;

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double pct_u64(uint64_t *v, size_t n, double p)
{
	qsort(v, n, sizeof(*v), cmp_u64);
	size_t i = (size_t)(p * (double)(n - 1) + 0.5);
	return (double)v[i];
}

static double pct_dbl(double *v, size_t n, double p)
{
	qsort(v, n, sizeof(*v), cmp_dbl);
	size_t i = (size_t)(p * (double)(n - 1) + 0.5);
	return v[i];
}

static bool find_ved(void)
{
	const char *b = getenv("VE_BUILD");
	if (b && *b) {
		snprintf(g_ved, sizeof(g_ved), "%.4000s/ved", b);
	} else {
		char exe[PATH_MAX];
		ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		if (n <= 0)
			return false;
		exe[n] = 0;
		for (int k = 0; k < 2; k++) {
			char *s = strrchr(exe, '/');
			if (s)
				*s = 0;
		}
		snprintf(g_ved, sizeof(g_ved), "%.4000s/ved", exe);
	}
	return access(g_ved, X_OK) == 0;
}

static pid_t start_ved(void)
{
	pid_t pid = fork();
	if (pid == 0) {
		setenv("VE_VED_POLICY", "tput", 1);
		setenv("VE_VED_LOG_LEVEL", "warn", 1);
		setenv("VE_VED_STATS_INTERVAL", "0", 1);
		unsetenv("VE_VED_CHECK");
		/* Its per-device lock in our folder, not next to a ved the machine runs. */
		setenv("XDG_RUNTIME_DIR", g_dir, 1);
		execl(g_ved, "ved", "--socket", g_sock, "--config", "/dev/null", (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 500; i++) {
		int fd = ve_ctl_connect(g_sock);
		if (fd >= 0) {
			close(fd);
			return pid;
		}
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return -1;
}

static struct ve_remote *client(struct ve_link *l)
{
	struct ve_remote_config rc = {.socket_path = g_sock,
				      .leaf_sms = g_leaves,
				      .nleaves = g_nleaves,
				      .name = "bench_ved",
				      .spin_ns = 0,
				      .heartbeat_timeout_ms = 10000,
				      .reconnect_ms = 0};
	struct ve_remote *r;
	char err[512];
	if (ve_remote_create(&rc, &r, err, sizeof(err))) {
		fprintf(stderr, "bench_ved: %s\n", err);
		return NULL;
	}
	ve_remote_link(r, l);
	if (l->ops->client_add(l->impl, 0, 0)) {
		ve_remote_destroy(r);
		return NULL;
	}
	return r;
}

static void mkop(struct ve_ready_op *op, uint64_t tok)
{
	memset(op, 0, sizeof(*op));
	op->tok = tok;
	op->key = 0x1234;
	op->blocks = 132;
	op->threads = 256;
	op->kind = VE_OP_KERNEL;
	op->ready_ns = ve__now_ns();
}

/* One timed READY -> BIND; the DONE follows untimed. Returns ns or 0. */
static uint64_t roundtrip(struct ve_link *l, uint64_t tok)
{
	struct ve_ready_op op;
	mkop(&op, tok);
	struct ve_binding b;
	uint64_t t0 = ve__now_ns();
	while (l->ops->ready(l->impl, &op) == -EAGAIN)
		l->ops->schedule(l->impl, &b, 0);
	uint64_t dl = t0 + 1000000000ull;
	int n;
	uint32_t spins = 0;
	/* Spin like a client waiting for its binding; yield now and then, as
	 * the link's own spin does, so ved can run if it shares our CPU. */
	while ((n = l->ops->schedule(l->impl, &b, 1)) == 0) {
		if (++spins % 64 == 0) {
			uint64_t t = ve__now_ns();
			if (t > dl)
				return 0;
			if (t - t0 > 5000)
				sched_yield();
		}
	}
	uint64_t dt = ve__now_ns() - t0;
	l->ops->done(l->impl, 0, b.entry, b.op.key, 1000);
	return dt;
}

static int status(struct ve_ctl_status *out)
{
	static union {
		uint8_t b[VE_CTL_MAX_MSG];
		uint64_t align;
	} m;
	int fd = ve_ctl_connect(g_sock);
	if (fd < 0)
		return -1;
	struct ve_ctl_status_req q;
	memset(&q, 0, sizeof(q));
	ve_ctl_hdr_init(&q.h, VE_CTL_STATUS_REQ, sizeof(q));
	int n = -1;
	if (ve_ctl_send(fd, &q, sizeof(q)) == 0)
		n = ve_ctl_recv(fd, m.b, sizeof(m.b), NULL, 5000);
	close(fd);
	if (n <= 0 || ve_ctl_check(m.b, (size_t)n, VE_CTL_FROM_VED))
		return -1;
	memcpy(out, m.b, sizeof(*out));
	return 0;
}

/* A streaming client process: up to TP_WINDOW ops outstanding, until killed. */
static void stream_main(void)
{
	struct ve_link l;
	struct ve_remote *r = client(&l);
	if (!r)
		_exit(1);
	struct ve_binding b[64];
	uint64_t tok = 1, outstanding = 0;
	for (;;) {
		while (outstanding < TP_WINDOW) {
			struct ve_ready_op op;
			mkop(&op, tok);
			if (l.ops->ready(l.impl, &op))
				break;
			tok++;
			outstanding++;
		}
		int n = l.ops->schedule(l.impl, b, 64);
		for (int i = 0; i < n; i++)
			l.ops->done(l.impl, 0, b[i].entry, b[i].op.key, 1000);
		outstanding -= (uint64_t)(n > 0 ? n : 0);
		if (n == 0)
			sched_yield();
	}
}

static double loadavg(void)
{
	double a = -1;
	FILE *f = fopen("/proc/loadavg", "r");
	if (f) {
		if (fscanf(f, "%lf", &a) != 1)
			a = -1;
		fclose(f);
	}
	return a;
}




int main(void)
{
	if (!find_ved()) {
		printf("bench_ved: no ved binary at %s (build it with 'make all'); skipped\n",
		       g_ved);
		return 0;
	}
	signal(SIGPIPE, SIG_IGN);
	/* $TMPDIR unless it is too long for a socket path below it. */
	const char *tmpdir = getenv("TMPDIR");
	if (!tmpdir || tmpdir[0] != '/' || strlen(tmpdir) > 60)
		tmpdir = "/tmp";
	snprintf(g_dir, sizeof(g_dir), "%s/ve-bench-ved-%d", tmpdir, (int)getpid());
	mkdir(g_dir, 0700);
	snprintf(g_sock, sizeof(g_sock), "%s/ved-0.sock", g_dir);
	g_nleaves = (uint32_t)ve_sim_default_split(132, 8, g_leaves);
	double load0 = loadavg();
	uint64_t t_start = ve__now_ns();
	pid_t v = start_ved();
	if (v < 0) {
		fprintf(stderr, "bench_ved: ved did not start\n");
		return 1;
	}
	int rc = 1;
	struct ve_link l;
	struct ve_remote *r = client(&l);
	if (!r)
		goto out;

	/* Warm up: the pool, the policy's profile entry, the caches. */
	uint64_t tok = 1;
	for (int i = 0; i < 2000; i++)
		roundtrip(&l, tok++);
	static uint64_t all[REPS * RT_PER_REP], rep[RT_PER_REP];
	double med[REPS];
	size_t nall = 0;
	for (int k = 0; k < REPS; k++) {
		size_t n = 0;
		for (int i = 0; i < RT_PER_REP; i++) {
			uint64_t dt = roundtrip(&l, tok++);
			if (dt)
				rep[n++] = dt;
		}
		memcpy(all + nall, rep, n * sizeof(*rep));
		nall += n;
		med[k] = pct_u64(rep, n, 0.5) / 1e3;
	}
	double rt_med = pct_u64(all, nall, 0.5) / 1e3, rt_p99 = pct_u64(all, nall, 0.99) / 1e3;
	double rt_p10 = pct_dbl(med, REPS, 0.1), rt_p90 = pct_dbl(med, REPS, 0.9);
	printf("bench_ved: READY -> BIND round trip, ved awake: median %.2f us, p99 %.2f us "
	       "(rep medians %.2f .. %.2f)\n",
	       rt_med, rt_p99, rt_p10, rt_p90);

	static uint64_t sall[SLEEP_REPS * SLEEP_PER_REP];
	double smed[SLEEP_REPS];
	size_t nsall = 0;
	struct ve_ctl_status s0, s1;
	status(&s0);
	for (int k = 0; k < SLEEP_REPS; k++) {
		size_t n0 = nsall;
		for (int i = 0; i < SLEEP_PER_REP; i++) {
			usleep(SLEEP_GAP_US);
			uint64_t dt = roundtrip(&l, tok++);
			if (dt)
				sall[nsall++] = dt;
		}
		static uint64_t tmp[SLEEP_PER_REP];
		memcpy(tmp, sall + n0, (nsall - n0) * sizeof(*tmp));
		smed[k] = pct_u64(tmp, nsall - n0, 0.5) / 1e3;
	}
	status(&s1);
	double slept = (double)(s1.sleeps - s0.sleeps) / (SLEEP_REPS * SLEEP_PER_REP);
	double sl_med = pct_u64(sall, nsall, 0.5) / 1e3, sl_p99 = pct_u64(sall, nsall, 0.99) / 1e3;
	double sl_p10 = pct_dbl(smed, SLEEP_REPS, 0.1), sl_p90 = pct_dbl(smed, SLEEP_REPS, 0.9);
	printf("bench_ved: round trip with ved asleep (%.0f us gaps, ved slept before %.0f%% of "
	       "them): median %.2f us, p99 %.2f us\n",
	       (double)SLEEP_GAP_US, 100 * slept, sl_med, sl_p99);
	ve_remote_destroy(r);
	r = NULL;

	double tp[TP_REPS];
	for (int k = 0; k < TP_REPS; k++) {
		pid_t kids[TP_CLIENTS];
		fflush(NULL);
		for (int i = 0; i < TP_CLIENTS; i++) {
			kids[i] = fork();
			if (kids[i] == 0)
				stream_main();
		}
		usleep(TP_WARMUP_MS * 1000);
		struct ve_ctl_status a, b;
		uint64_t ta = ve__now_ns();
		status(&a);
		usleep(TP_MEASURE_MS * 1000);
		status(&b);
		uint64_t tb = ve__now_ns();
		for (int i = 0; i < TP_CLIENTS; i++) {
			kill(kids[i], SIGKILL);
			waitpid(kids[i], NULL, 0);
		}
		tp[k] = (double)(b.records_in + b.records_out - a.records_in - a.records_out) /
			((double)(tb - ta) / 1e9);
		printf("bench_ved: %d clients streaming READY/DONE (window %d): %.2f M records/s\n",
		       TP_CLIENTS, TP_WINDOW, tp[k] / 1e6);
		usleep(200000); /* ved reclaims the killed clients */
	}
	double tps[TP_REPS];
	memcpy(tps, tp, sizeof(tps));
	double tp_med = pct_dbl(tps, TP_REPS, 0.5), tp_min = tps[0], tp_max = tps[TP_REPS - 1];

	char cpu[256], commit[80], date[64];
	cpu_model(cpu, sizeof(cpu));
	git_commit(commit, sizeof(commit));
	time_t now = time(NULL);
	strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
	struct utsname u;
	uname(&u);
	long nproc = sysconf(_SC_NPROCESSORS_ONLN);
	char machine[512];
	snprintf(machine, sizeof(machine), "%s %s %s, %ld cpus, %s", u.sysname, u.release,
		 u.machine, nproc, cpu);
	const char *path = getenv("VE_BENCH_OUT");
	if (!path || !*path) {
		mkdir("bench/results", 0755);
		path = "bench/results/ipc.json";
	}
	FILE *f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "bench_ved: cannot write %s\n", path);
		goto out;
	}
	fprintf(f, "{\n  \"bench\": \"ved\",\n  \"what\": ");
	json_str(f,
		 "READY->BIND round trips through a running ved (policy tput) via the remote "
		 "link, client spinning on its ring; records/s = ved's READY+DONE in and BIND out "
		 "with client processes streaming READY/DONE pairs");
	fprintf(f, ",\n  \"machine\": ");
	json_str(f, machine);
	fprintf(f,
		",\n  \"nproc\": %ld,\n  \"loadavg_1m_at_start\": %.2f,\n  \"date\": \"%s\",\n"
		"  \"commit\": ",
		nproc, load0, date);
	json_str(f, commit);
	fprintf(f,
		",\n  \"config\": {\"policy\": \"tput\", \"ved_spin_us\": 50, \"reps\": %d, "
		"\"roundtrips_per_rep\": %d, \"sleeping_reps\": %d, \"sleeping_per_rep\": %d, "
		"\"sleeping_gap_us\": %d, \"throughput_reps\": %d, \"throughput_clients\": %d, "
		"\"window\": %d, \"measure_ms\": %d},\n",
		REPS, RT_PER_REP, SLEEP_REPS, SLEEP_PER_REP, SLEEP_GAP_US, TP_REPS, TP_CLIENTS,
		TP_WINDOW, TP_MEASURE_MS);
	fprintf(f, "  \"ring_roundtrip_us_median\": %.3f,\n  \"ring_roundtrip_us_p99\": %.3f,\n",
		rt_med, rt_p99);
	fprintf(f,
		"  \"ring_roundtrip_sleeping_us_median\": %.3f,\n"
		"  \"ring_roundtrip_sleeping_us_p99\": %.3f,\n  \"sleeping_ved_slept_fraction\": "
		"%.3f,\n",
		sl_med, sl_p99, slept);
	fprintf(f, "  \"records_per_s\": %.0f,\n", tp_med);
	fprintf(
	    f,
	    "  \"spread\": {\n    \"ring_roundtrip_us_median\": {\"p10\": %.3f, \"p90\": %.3f},\n"
	    "    \"ring_roundtrip_sleeping_us_median\": {\"p10\": %.3f, \"p90\": %.3f},\n"
	    "    \"records_per_s\": {\"min\": %.0f, \"max\": %.0f}\n  },\n",
	    rt_p10, rt_p90, sl_p10, sl_p90, tp_min, tp_max);
	bool meets = rt_med <= 5.0 && tp_med >= 1e6;
	fprintf(f,
		"  \"targets\": {\"ring_roundtrip_us_median_max\": 5, \"records_per_s_min\": "
		"1000000},\n  \"meets_targets\": %s,\n  \"run_s\": %.1f\n}\n",
		meets ? "true" : "false", (double)(ve__now_ns() - t_start) / 1e9);
	fclose(f);
	printf("bench_ved: wrote %s (%s targets)\n", path, meets ? "meets" : "MISSES");
	rc = 0;
out:
	if (r)
		ve_remote_destroy(r);
	kill(v, SIGTERM);
	waitpid(v, NULL, 0);
	unlink(g_sock);
	char lock[200];
	snprintf(lock, sizeof(lock), "%s/ved-0.lock", g_dir);
	unlink(lock);
	snprintf(lock, sizeof(lock), "%s/vitamin-e/ved-0.lock", g_dir);
	unlink(lock);
	snprintf(lock, sizeof(lock), "%s/vitamin-e", g_dir);
	rmdir(lock);
	rmdir(g_dir);
	return rc;
}
