/* SPDX-License-Identifier: MIT */
/*
 * The soak: many client processes through one ved for minutes while faults
 * are injected at random, and the figures that must stay zero.
 *
 *   ve_soak [--seconds S] [--sim-clients N] [--fake-clients N] [--cmd CMD]...
 *        [--cmd-timeout S] [--fault-ms MS] [--policy P] [--seed N]
 *        [--out DIR] [--json FILE] [--machine TEXT] [--client-env NAME=V]...
 *        [--ved-env VE_VED_KEY=V]... [--no-faults] [--quiet]
 *
 * Clients, each restarted when it ends until the time is up:
 *   sim    tests/soak/soak_client.c: a simulated GPU of its own, rounds of
 *          random work on several streams checked op by op (lost, duplicated
 *          or out-of-order ops are failures)
 *   fake   the shim's self-checking programs (tests/shim/prog_shim_*) on the
 *          CPU fake driver under libve.so: results checked by the program
 *   cmd    any command (sh -c CMD) with VE_DAEMON set to the soak's ved: a
 *          real CUDA or PyTorch job on a GPU machine; exit status 0 = right
 * Faults, one every --fault-ms on average (docs/security.md lists them):
 * SIGKILL of a client, SIGSTOP/SIGCONT of a client (a slow client) or of
 * ved (past the clients' heartbeat timeout at times), SIGKILL of ved and a
 * restart, SIGTERM of ved and a restart, and rogue connections (garbage,
 * truncated or malformed control messages, idle connections). ved runs with
 * its self-check on (VE_VED_CHECK=1) and small rings (full rings often).
 *
 * Figures (JSON, at the top level): leases_leaked (entries still held once
 * every client is gone, or held across two checks by a client that died),
 * clients_hung (a client past its deadline, not stopped by the soak),
 * results_lost, results_wrong (a client that reported lost or wrong ops, or
 * failed its own checks), ved_failures (ved dying of itself or exiting
 * non-zero on SIGTERM), ops, faults, kills. Exit status 0 when every goal
 * held. Progress lines with timestamps; the ved log and the output of every
 * failed client are kept under --out.
 */
#include "ipc/ctl.h"
#include "pool/pool.h"
#include "util/util.h"
#include "../unit/ved_helper.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_SLOTS 64
#define MAX_CMDS  8
#define OUT_KEEP  6000

enum kind { K_SIM = 0, K_FAKE, K_CMD };

struct client {
	pid_t pid;
	int kind, fd;
	uint64_t start_ns, deadline_ns;
	uint64_t stopped_until; /* SIGSTOPped by us until then (0: running) */
	bool killed;		/* by us */
	char out[OUT_KEEP];
	size_t len;
	char what[256];
};

enum fault {
	F_KILL_CLIENT,
	F_STOP_CLIENT,
	F_STOP_VED,
	F_KILL_VED,
	F_TERM_VED,
	F_ROGUE,
	F_COUNT
};
static const char *const fault_name[] = {"kill_client", "stop_client", "stop_ved",
					 "kill_ved",	"term_ved",    "rogue_connection"};

static struct {
	uint64_t seconds, fault_ms, cmd_timeout, seed;
	int nsim, nfake, ncmd;
	const char *cmds[MAX_CMDS];
	const char *policy, *json, *machine;
	const char *client_env[16], *ved_env[8];
	int nclient_env, nved_env;
	char out[256];
	bool faults, quiet;
} O = {.seconds = 60, .fault_ms = 700, .cmd_timeout = 600, .seed = 1, .nsim = 4, .nfake = 2,
       .policy = "tput", .faults = true};

static char g_build[PATH_MAX], g_sock[108], g_ved[PATH_MAX + 8], g_log[300], g_sanrt[PATH_MAX];
static pid_t g_vpid;
static uint64_t g_ved_stopped_until, g_ved_restart_at, g_t0;
static uint64_t g_rng;
static struct client slots[MAX_SLOTS];
static int nslots;

static struct {
	uint64_t ops, clients_run, clients_ok, ended_killed, hung, lost, wrong, leaked, killed, ved_kills,
	    ved_restarts, ved_failures, start_failures;
	uint64_t faults[F_COUNT];
	uint64_t by_kind_ops[3], by_kind_runs[3];
} S;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	if (O.quiet)
		return;
	char t[32];
	time_t now = time(NULL);
	strftime(t, sizeof(t), "%H:%M:%S", localtime(&now));
	printf("[%s +%5.1fs] ", t, (double)(ve__now_ns() - g_t0) / 1e9);
	va_list ap;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

static uint32_t rnd(uint32_t n)
{
	return ve__rand_below(&g_rng, n);
}

static bool sanitized(void)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	return true;
#else
	return false;
#endif
}

static void find_paths(void)
{
	const char *b = getenv("VE_BUILD");
	if (b && *b) {
		if (!realpath(b, g_build))
			snprintf(g_build, sizeof(g_build), "%s", b);
	} else {
		char exe[PATH_MAX];
		ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		exe[n > 0 ? n : 0] = 0;
		for (int k = 0; k < 2; k++) {
			char *s = strrchr(exe, '/');
			if (s)
				*s = 0;
		}
		snprintf(g_build, sizeof(g_build), "%s", exe);
	}
	snprintf(g_ved, sizeof(g_ved), "%.4000s/ved", g_build);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	/* Programs under libve.so need this build's sanitizer runtime first. */
	Dl_info di;
	void *sym = dlsym(RTLD_DEFAULT, "__asan_init");
	if (!sym)
		sym = dlsym(RTLD_DEFAULT, "__tsan_init");
	if (sym && dladdr(sym, &di) && di.dli_fname && strstr(di.dli_fname, ".so"))
		snprintf(g_sanrt, sizeof(g_sanrt), "%s", di.dli_fname);
#endif
}

/* ------------------------------------------------------------------ ved */

static void ved_start(void)
{
	static const char *const env[] = {"VE_VED_CHECK=1",	    "VE_VED_RING_RECORDS=64",
					  "VE_VED_CLIENT_OPS=1024",   "VE_VED_HELLO_TIMEOUT_MS=1000",
					  "VE_VED_WATCHDOG_MS=2000",  "VE_VED_STATS_INTERVAL=0",
					  "VE_VED_LOG_LEVEL=info",    "VE_VED_MAX_CLIENTS=64",
					  NULL,			      NULL};
	const char *e[24];
	int n = 0;
	for (; env[n]; n++)
		e[n] = env[n];
	char pol[300];
	snprintf(pol, sizeof(pol), "VE_VED_POLICY=%s", O.policy);
	e[n++] = pol;
	for (int i = 0; i < O.nved_env; i++)
		e[n++] = O.ved_env[i]; /* later ones win (setenv in order) */
	e[n] = NULL;
	g_vpid = vh_start(g_ved, g_sock, g_log, e);
	if (g_vpid <= 0) {
		S.ved_failures++;
		say("ved did not start (see %s)", g_log);
		g_vpid = 0;
		return;
	}
	S.ved_restarts++;
}

/* ved exited without us killing it: a failure (self-check abort, crash). */
static void ved_reap(void)
{
	if (!g_vpid)
		return;
	int st;
	if (waitpid(g_vpid, &st, WNOHANG) != g_vpid)
		return;
	S.ved_failures++;
	say("ved %d died by itself (status %#x): see %s", (int)g_vpid, st, g_log);
	g_vpid = 0;
	g_ved_restart_at = ve__now_ns();
}

/* SIGTERM: must exit 0 within 5 s. */
static void ved_term(void)
{
	if (!g_vpid)
		return;
	if (g_ved_stopped_until) {
		kill(g_vpid, SIGCONT);
		g_ved_stopped_until = 0;
	}
	int rc = vh_stop(g_vpid);
	if (rc != 0) {
		S.ved_failures++;
		say("ved %d exited with %d on SIGTERM: see %s", (int)g_vpid, rc, g_log);
	}
	g_vpid = 0;
}

static union {
	uint8_t b[VE_CTL_MAX_MSG];
	uint64_t align;
} g_msg;

static const struct ve_ctl_status *ved_status(void)
{
	if (!g_vpid || g_ved_stopped_until)
		return NULL;
	int fd = ve_ctl_connect(g_sock);
	if (fd < 0)
		return NULL;
	struct ve_ctl_status_req q;
	memset(&q, 0, sizeof(q));
	ve_ctl_hdr_init(&q.h, VE_CTL_STATUS_REQ, sizeof(q));
	int n = -1;
	if (ve_ctl_send(fd, &q, sizeof(q)) == 0)
		n = ve_ctl_recv(fd, g_msg.b, sizeof(g_msg.b), NULL, 3000);
	close(fd);
	if (n <= 0 || ve_ctl_check(g_msg.b, (size_t)n, VE_CTL_FROM_VED))
		return NULL;
	const struct ve_ctl_status *m = (const void *)g_msg.b;
	return m->h.type == VE_CTL_STATUS ? m : NULL;
}

/* Leases held by a client that is not registered or whose process is dead.
 * A suspect seen again at the next check is a leak (ved reclaims within
 * milliseconds of a hang-up). */
static uint64_t suspects[2][256];
static void check_leases(bool final)
{
	const struct ve_ctl_status *m = ved_status();
	if (!m)
		return;
	const struct ve_ctl_entry *e = (const void *)(m + 1);
	const struct ve_ctl_client *c = (const void *)(e + m->nentries);
	bool live[VE_CTL_MAX_CLIENTS] = {0};
	for (uint32_t i = 0; i < m->nclients; i++)
		live[c[i].id] = !(kill(c[i].pid, 0) != 0 && errno == ESRCH);
	memcpy(suspects[0], suspects[1], sizeof(suspects[0]));
	memset(suspects[1], 0, sizeof(suspects[1]));
	for (uint32_t i = 0; i < m->nentries && i < 256; i++) {
		int32_t who = -1;
		if (final && (e[i].state != VE_ENTRY_IDLE || e[i].outstanding))
			who = e[i].holder >= 0 ? e[i].holder : 999;
		else if (e[i].state == VE_ENTRY_LEASED && e[i].holder >= 0 && !live[e[i].holder])
			who = e[i].holder;
		else if (e[i].reserve_for >= 0 && !live[e[i].reserve_for])
			who = e[i].reserve_for;
		if (who < 0)
			continue;
		uint64_t key = (uint64_t)(uint32_t)who + 1;
		if (final || suspects[0][i] == key) {
			S.leaked++;
			say("LEAK: entry %u (%s, outstanding %u) held by client %d%s", i,
			    ve_entry_state_name(e[i].state), e[i].outstanding, who,
			    final ? " after every client left" : ", which is gone");
		} else {
			suspects[1][i] = key;
		}
	}
}

/* ------------------------------------------------------------------ clients */

static void build_env(char **env, int *n, char *bufs, size_t each, const char *kv)
{
	char *b = bufs + (size_t)(*n) * each;
	snprintf(b, each, "%s", kv);
	env[(*n)++] = b;
}

static int spawn(struct client *c, int kind)
{
	memset(c, 0, sizeof(*c));
	c->kind = kind;
	int p[2];
	if (pipe(p))
		return -1;
	char a[8][PATH_MAX + 64];
	const char *argv[12] = {0};
	uint64_t secs = 0;
	/* The programs' tests without timing checks: the gated ones expect a
	 * kernel to start within 3 s, which a ved stopped longer cannot meet. */
	static const char *const tests[] = {"chains", "per_thread", "memops"};
	uint32_t seed = rnd(1000000) + 1;
	if (kind == K_SIM) {
		secs = 2 + rnd(6);
		snprintf(a[0], sizeof(a[0]), "%s/tests/soak_client", g_build);
		snprintf(a[1], sizeof(a[1]), "%u", seed);
		snprintf(a[2], sizeof(a[2]), "%llu", (unsigned long long)secs);
		argv[0] = a[0];
		argv[1] = g_sock;
		argv[2] = a[1];
		argv[3] = a[2];
		snprintf(c->what, sizeof(c->what), "soak_client seed %u, %llu s", seed,
			 (unsigned long long)secs);
		secs += 60;
	} else if (kind == K_FAKE) {
		bool cudart = rnd(4) == 0;
		snprintf(a[0], sizeof(a[0]), "%s/tests/%s", g_build,
			 cudart ? "prog_shim_cudart_style" : "prog_shim_streams");
		argv[0] = a[0];
		int k = 1;
		if (!cudart)
			for (int t = 0, m = 1 + (int)rnd(3); t < m; t++)
				argv[k++] = tests[rnd(3)];
		int w = snprintf(c->what, sizeof(c->what), "%s", strrchr(a[0], '/') + 1);
		for (int t = 1; t < k && w > 0 && (size_t)w < sizeof(c->what); t++)
			w += snprintf(c->what + w, sizeof(c->what) - (size_t)w, " %s", argv[t]);
		secs = 120;
	} else {
		static int next;
		const char *cmd = O.cmds[next++ % O.ncmd];
		argv[0] = "/bin/sh";
		argv[1] = "-c";
		argv[2] = cmd;
		snprintf(c->what, sizeof(c->what), "%s", cmd);
		secs = O.cmd_timeout;
	}
	if (sanitized())
		secs *= 4;
	/* The environment: ours minus Vitamin-E's and the fake's, then theirs. */
	static char bufs[16][PATH_MAX * 3];
	char *env[512];
	int ne = 0, nb = 0;
	extern char **environ;
	for (char **e = environ; *e && ne < 480; e++)
		if (strncmp(*e, "VE_", 3) && strncmp(*e, "FAKECUDA_", 9) &&
		    strncmp(*e, "VETEST_", 7) && strncmp(*e, "LD_PRELOAD=", 11) &&
		    strncmp(*e, "LD_LIBRARY_PATH=", 16))
			env[ne++] = *e;
	char kv[PATH_MAX * 3];
	snprintf(kv, sizeof(kv), "VE_DAEMON=%s", g_sock);
	build_env(env + ne, &nb, bufs[0], sizeof(bufs[0]), kv);
	build_env(env + ne, &nb, bufs[0], sizeof(bufs[0]), "VE_LOG_LEVEL=warn");
	if (kind == K_FAKE) {
		snprintf(kv, sizeof(kv), "LD_LIBRARY_PATH=%s/fakecuda", g_build);
		build_env(env + ne, &nb, bufs[0], sizeof(bufs[0]), kv);
		snprintf(kv, sizeof(kv), "VE_LIBCUDA=%s/fakecuda/libcuda.so.1", g_build);
		build_env(env + ne, &nb, bufs[0], sizeof(bufs[0]), kv);
		snprintf(kv, sizeof(kv), "LD_PRELOAD=%s%s%s/libve.so", g_sanrt, g_sanrt[0] ? ":" : "",
			 g_build);
		build_env(env + ne, &nb, bufs[0], sizeof(bufs[0]), kv);
		snprintf(kv, sizeof(kv), "FAKECUDA_JITTER_US=%u", rnd(4) ? rnd(300) : 0);
		build_env(env + ne, &nb, bufs[0], sizeof(bufs[0]), kv);
		snprintf(kv, sizeof(kv), "FAKECUDA_SEED=%u", seed);
		build_env(env + ne, &nb, bufs[0], sizeof(bufs[0]), kv);
		snprintf(kv, sizeof(kv), "VETEST_SEED=%u", seed);
		build_env(env + ne, &nb, bufs[0], sizeof(bufs[0]), kv);
		build_env(env + ne, &nb, bufs[0], sizeof(bufs[0]), "VETEST_EXPECT_GREEN=1");
		/* Policies that take SMs from one client for another. */
		build_env(env + ne, &nb, bufs[0], sizeof(bufs[0]),
			  rnd(2) ? "VE_BIND=op" : "VE_BIND=grant");
	}
	/* The caller's settings last: they override ours. */
	for (int i = 0; i < O.nclient_env && ne + nb < 510; i++)
		env[ne + nb++] = (char *)O.client_env[i];
	env[ne + nb] = NULL;
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		dup2(p[1], 1);
		dup2(p[1], 2);
		close(p[0]);
		close(p[1]);
		setpgid(0, 0);
		execve(argv[0], (char *const *)argv, env);
		fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(p[1]);
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	c->pid = pid;
	c->fd = p[0];
	c->start_ns = ve__now_ns();
	c->deadline_ns = c->start_ns + secs * 1000000000ull;
	S.clients_run++;
	S.by_kind_runs[kind]++;
	return 0;
}

static void drain_output(struct client *c)
{
	for (;;) {
		char tmp[4096];
		ssize_t k = read(c->fd, tmp, sizeof(tmp));
		if (k <= 0)
			return;
		for (ssize_t i = 0; i < k; i++) {
			if (c->len == sizeof(c->out) - 1) {
				/* Keep the head and the newest tail: drop the middle. */
				memmove(c->out + 1000, c->out + 3000, c->len - 3000);
				c->len -= 2000;
			}
			c->out[c->len++] = tmp[i];
		}
		c->out[c->len] = 0;
	}
}

static uint64_t count_after(const char *out, const char *key)
{
	const char *p = strstr(out, key);
	return p ? strtoull(p + strlen(key), NULL, 10) : 0;
}

static void keep_output(const struct client *c, const char *why)
{
	char path[400];
	snprintf(path, sizeof(path), "%s/client-%d.log", O.out, (int)c->pid);
	FILE *f = fopen(path, "w");
	if (f) {
		fprintf(f, "%s: %s\n%s", c->what, why, c->out);
		fclose(f);
	}
	say("%s: %s (pid %d, output in %s)", c->what, why, (int)c->pid, path);
}

/* A client ended: classify it. */
static void finished(struct client *c, int st)
{
	drain_output(c);
	close(c->fd);
	bool sig = WIFSIGNALED(st);
	int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	uint64_t ops = c->kind == K_SIM	   ? count_after(c->out, "ops=")
		       : c->kind == K_FAKE ? count_after(c->out, "launch-log: ")
					   : 0;
	if (c->killed) {
		/* Killed by us: nothing to judge but that it died. */
		S.ended_killed++;
	} else if (code == 0 && (c->kind != K_FAKE || strstr(c->out, " 0 failed checks") ||
				 strstr(c->out, "\n0 failed checks"))) {
		S.clients_ok++;
		S.ops += ops;
		S.by_kind_ops[c->kind] += ops;
	} else if (c->kind == K_SIM && code == 3) {
		S.lost++;
		keep_output(c, "LOST ops");
	} else {
		S.wrong++;
		char why[64];
		snprintf(why, sizeof(why), "FAILED (%s %d)", sig ? "signal" : "status",
			 sig ? WTERMSIG(st) : code);
		keep_output(c, why);
	}
	c->pid = 0;
}

static void reap_clients(uint64_t now)
{
	for (int i = 0; i < nslots; i++) {
		struct client *c = &slots[i];
		if (!c->pid)
			continue;
		drain_output(c);
		if (c->stopped_until && now >= c->stopped_until) {
			kill(c->pid, SIGCONT);
			c->stopped_until = 0;
		}
		int st;
		if (waitpid(c->pid, &st, WNOHANG) == c->pid) {
			finished(c, st);
			continue;
		}
		if (!c->stopped_until && now > c->deadline_ns) {
			S.hung++;
			keep_output(c, "HUNG past its deadline: killed");
			kill(-c->pid, SIGKILL);
			kill(c->pid, SIGKILL);
			waitpid(c->pid, &st, 0);
			c->killed = true;
			finished(c, st);
		}
	}
}

/* ------------------------------------------------------------------ faults */

static struct client *random_client(void)
{
	int live[MAX_SLOTS], n = 0;
	for (int i = 0; i < nslots; i++)
		if (slots[i].pid && !slots[i].killed && !slots[i].stopped_until)
			live[n++] = i;
	return n ? &slots[live[rnd((uint32_t)n)]] : NULL;
}

static void rogue_connection(void)
{
	int fd = ve_ctl_connect(g_sock);
	if (fd < 0)
		return;
	union {
		uint8_t b[2048];
		struct ve_ctl_hello h;
		uint64_t align;
	} m;
	memset(&m, 0, sizeof(m));
	uint32_t how = rnd(5);
	size_t len = sizeof(m.h);
	ve_ctl_hdr_init(&m.h.h, VE_CTL_HELLO, sizeof(m.h));
	m.h.ipc_version = 1;
	m.h.nleaves = 1;
	m.h.leaf_sms[0] = 132;
	if (how == 0) { /* random bytes */
		len = 1 + rnd(sizeof(m.b) - 1);
		for (size_t i = 0; i < len; i++)
			m.b[i] = (uint8_t)rnd(256);
	} else if (how == 1) { /* a truncated HELLO */
		len = rnd((uint32_t)sizeof(m.h));
	} else if (how == 2) { /* a HELLO with a field out of range */
		m.h.nleaves = 65 + rnd(100);
	} else if (how == 3) { /* a header that lies about the length */
		m.h.h.len = (uint32_t)len + 1 + rnd(100);
	}
	if (how != 4) /* 4: an idle connection, closed at the HELLO deadline */
		send(fd, m.b, len ? len : 1, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (how == 4 && rnd(2)) {
		/* Held past the deadline: ved must close it with a reason. */
		int k = ve_ctl_recv(fd, g_msg.b, sizeof(g_msg.b), NULL, 3000);
		(void)k;
	}
	close(fd);
}

static void inject(uint64_t now)
{
	int f = (int)rnd(F_COUNT);
	struct client *c;
	switch (f) {
	case F_KILL_CLIENT:
		if (!(c = random_client()))
			return;
		kill(-c->pid, SIGKILL);
		kill(c->pid, SIGKILL);
		c->killed = true;
		S.killed++;
		break;
	case F_STOP_CLIENT:
		if (!(c = random_client()))
			return;
		kill(c->pid, SIGSTOP);
		{
			uint64_t d = (100 + rnd(2400)) * 1000000ull;
			c->stopped_until = now + d;
			c->deadline_ns += d;
		}
		break;
	case F_STOP_VED:
		if (!g_vpid || g_ved_stopped_until)
			return;
		kill(g_vpid, SIGSTOP);
		/* Past the clients' 5 s heartbeat timeout one time in four. */
		g_ved_stopped_until = now + (rnd(4) ? 200 + rnd(2000) : 5500 + rnd(1500)) * 1000000ull;
		for (int i = 0; i < nslots; i++)
			slots[i].deadline_ns += g_ved_stopped_until - now;
		break;
	case F_KILL_VED:
		if (!g_vpid || g_ved_stopped_until)
			return;
		kill(g_vpid, SIGKILL);
		waitpid(g_vpid, NULL, 0);
		g_vpid = 0;
		S.ved_kills++;
		g_ved_restart_at = now + rnd(1500) * 1000000ull;
		break;
	case F_TERM_VED:
		if (!g_vpid || g_ved_stopped_until)
			return;
		ved_term();
		g_ved_restart_at = now + rnd(500) * 1000000ull;
		break;
	case F_ROGUE:
		if (!g_vpid || g_ved_stopped_until)
			return;
		rogue_connection();
		break;
	}
	S.faults[f]++;
}

/* ------------------------------------------------------------------ main */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: ve_soak [--seconds S] [--sim-clients N] [--fake-clients N] [--cmd CMD]...\n"
		"               [--cmd-timeout S] [--fault-ms MS] [--policy P] [--seed N] [--out DIR]\n"
		"               [--json FILE] [--machine TEXT] [--client-env NAME=V]...\n"
		"               [--ved-env VE_VED_KEY=V]... [--no-faults] [--quiet]\n"
		"Many clients through one ved with random faults; see tests/soak/ve_soak.c.\n");
}

static bool num(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
	return ve__parse_u64(s, out) == 0 && *out >= lo && *out <= hi;
}

static void write_json(double secs)
{
	FILE *f = fopen(O.json, "w");
	if (!f) {
		fprintf(stderr, "soak: cannot write %s: %s\n", O.json, strerror(errno));
		return;
	}
	char date[32];
	time_t now = time(NULL);
	strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
	struct utsname u;
	uname(&u);
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	char machine[512];
	if (O.machine)
		snprintf(machine, sizeof(machine), "%s", O.machine);
	else
		snprintf(machine, sizeof(machine), "%s %s, %ld CPUs, no GPU (simulated GPU and CPU fake driver)",
			 u.sysname, u.machine, cpus);
	uint64_t faults = 0;
	for (int i = 0; i < F_COUNT; i++)
		faults += S.faults[i];
	fprintf(f, "{\n  \"leases_leaked\": %llu,\n  \"clients_hung\": %llu,\n  \"results_lost\": %llu,\n"
		   "  \"results_wrong\": %llu,\n  \"ved_failures\": %llu,\n",
		(unsigned long long)S.leaked, (unsigned long long)S.hung, (unsigned long long)S.lost,
		(unsigned long long)S.wrong, (unsigned long long)S.ved_failures);
	fprintf(f, "  \"ops\": %llu,\n  \"faults\": %llu,\n  \"kills\": %llu,\n",
		(unsigned long long)S.ops, (unsigned long long)faults,
		(unsigned long long)(S.killed + S.ved_kills));
	fprintf(f, "  \"date\": \"%s\",\n  \"machine\": \"%s\",\n  \"duration_s\": %.1f,\n", date,
		machine, secs);
	fprintf(f, "  \"tool\": \"tests/soak/ve_soak.c\",\n  \"seed\": %llu,\n  \"policy\": \"%s\",\n",
		(unsigned long long)O.seed, O.policy);
	fprintf(f, "  \"clients\": {\"run\": %llu, \"ok\": %llu, \"killed\": %llu, \"sim\": %llu, "
		   "\"fake\": %llu, \"cmd\": %llu, \"concurrent\": %d},\n",
		(unsigned long long)S.clients_run, (unsigned long long)S.clients_ok,
		(unsigned long long)S.killed, (unsigned long long)S.by_kind_runs[K_SIM],
		(unsigned long long)S.by_kind_runs[K_FAKE], (unsigned long long)S.by_kind_runs[K_CMD],
		nslots);
	fprintf(f, "  \"ops_by_kind\": {\"sim_ops\": %llu, \"fake_kernel_launches\": %llu},\n",
		(unsigned long long)S.by_kind_ops[K_SIM], (unsigned long long)S.by_kind_ops[K_FAKE]);
	fprintf(f, "  \"faults_by_kind\": {");
	for (int i = 0; i < F_COUNT; i++)
		fprintf(f, "%s\"%s\": %llu", i ? ", " : "", fault_name[i],
			(unsigned long long)S.faults[i]);
	fprintf(f, "},\n  \"ved\": {\"killed\": %llu, \"starts\": %llu, \"self_check\": true, "
		   "\"ring_records\": 64, \"watchdog_ms\": 2000}\n}\n",
		(unsigned long long)S.ved_kills, (unsigned long long)S.ved_restarts);
	fclose(f);
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		uint64_t u;
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "--no-faults")) {
			O.faults = false;
			continue;
		} else if (!strcmp(a, "--quiet")) {
			O.quiet = true;
			continue;
		} else if (!v) {
			fprintf(stderr, "soak: %s needs a value\n", a);
			return 2;
		}
		i++;
		if (!strcmp(a, "--seconds") && num(v, 1, 86400, &u))
			O.seconds = u;
		else if (!strcmp(a, "--sim-clients") && num(v, 0, 32, &u))
			O.nsim = (int)u;
		else if (!strcmp(a, "--fake-clients") && num(v, 0, 32, &u))
			O.nfake = (int)u;
		else if (!strcmp(a, "--cmd") && O.ncmd < MAX_CMDS && *v)
			O.cmds[O.ncmd++] = v;
		else if (!strcmp(a, "--cmd-timeout") && num(v, 1, 86400, &u))
			O.cmd_timeout = u;
		else if (!strcmp(a, "--fault-ms") && num(v, 10, 600000, &u))
			O.fault_ms = u;
		else if (!strcmp(a, "--seed") && num(v, 0, UINT64_MAX, &u))
			O.seed = u;
		else if (!strcmp(a, "--policy") && *v)
			O.policy = v;
		else if (!strcmp(a, "--out") && *v)
			snprintf(O.out, sizeof(O.out), "%s", v);
		else if (!strcmp(a, "--json") && *v)
			O.json = v;
		else if (!strcmp(a, "--machine") && *v)
			O.machine = v;
		else if (!strcmp(a, "--client-env") && strchr(v, '=') && O.nclient_env < 16)
			O.client_env[O.nclient_env++] = v;
		else if (!strcmp(a, "--ved-env") && !strncmp(v, "VE_VED_", 7) && strchr(v, '=') &&
			 O.nved_env < 8)
			O.ved_env[O.nved_env++] = v;
		else {
			fprintf(stderr, "soak: bad option %s %s\n", a, v);
			usage(stderr);
			return 2;
		}
	}
	int ncmd_slots = O.ncmd ? O.ncmd : 0;
	nslots = O.nsim + O.nfake + ncmd_slots;
	if (nslots == 0 || nslots > MAX_SLOTS) {
		fprintf(stderr, "soak: between 1 and %d clients, please\n", MAX_SLOTS);
		return 2;
	}
	g_t0 = ve__now_ns();
	g_rng = O.seed * 0x9e3779b97f4a7c15ull + 7;
	signal(SIGPIPE, SIG_IGN);
	find_paths();
	if (access(g_ved, X_OK)) {
		fprintf(stderr, "soak: no ved at %s (set VE_BUILD)\n", g_ved);
		return 2;
	}
	if (!O.out[0])
		snprintf(O.out, sizeof(O.out), "/tmp/ve-soak-%d", (int)getpid());
	mkdir(O.out, 0700);
	/* Logs of an earlier run in the same folder would read as this one's. */
	DIR *od = opendir(O.out);
	for (struct dirent *de; od && (de = readdir(od));) {
		if (strncmp(de->d_name, "client-", 7) && strcmp(de->d_name, "ved.log"))
			continue;
		char old[600];
		snprintf(old, sizeof(old), "%s/%s", O.out, de->d_name);
		unlink(old);
	}
	if (od)
		closedir(od);
	if (O.json && ve__path_writable(O.json)) {
		fprintf(stderr, "soak: cannot write %s\n", O.json);
		return 2;
	}
	/* The socket in a folder of our own; its device lock there too. */
	char dir[96];
	snprintf(dir, sizeof(dir), "%.60s/ve-soak-%d", vh_tmpdir(), (int)getpid());
	mkdir(dir, 0700);
	snprintf(g_sock, sizeof(g_sock), "%s/ved-0.sock", dir);
	snprintf(g_log, sizeof(g_log), "%s/ved.log", O.out);
	say("soak: %llu s, %d sim + %d fake + %d command clients at once, policy %s, %s, seed "
	    "%llu; logs in %s",
	    (unsigned long long)O.seconds, O.nsim, O.nfake, ncmd_slots, O.policy,
	    O.faults ? "faults on" : "no faults", (unsigned long long)O.seed, O.out);
	ved_start();
	int kinds[MAX_SLOTS];
	for (int i = 0; i < nslots; i++)
		kinds[i] = i < O.nsim ? K_SIM : i < O.nsim + O.nfake ? K_FAKE : K_CMD;
	uint64_t end = g_t0 + O.seconds * 1000000000ull, next_fault = g_t0 + 2000000000ull;
	uint64_t next_check = g_t0 + 2000000000ull, next_report = g_t0 + 10000000000ull;
	for (;;) {
		uint64_t now = ve__now_ns();
		bool running = now < end;
		reap_clients(now);
		ved_reap();
		if (g_ved_stopped_until && now >= g_ved_stopped_until) {
			kill(g_vpid, SIGCONT);
			g_ved_stopped_until = 0;
		}
		if (!g_vpid && g_ved_restart_at && now >= g_ved_restart_at) {
			g_ved_restart_at = 0;
			ved_start();
		}
		int live = 0;
		for (int i = 0; i < nslots; i++) {
			if (!slots[i].pid && running && spawn(&slots[i], kinds[i]))
				S.start_failures++;
			live += slots[i].pid != 0;
		}
		if (!running && !live)
			break;
		if (running && O.faults && now >= next_fault) {
			inject(now);
			next_fault = now + (O.fault_ms / 2 + rnd((uint32_t)O.fault_ms)) * 1000000ull;
		}
		if (now >= next_check) {
			check_leases(false);
			next_check = now + 2000000000ull;
		}
		if (now >= next_report) {
			uint64_t faults = 0;
			for (int i = 0; i < F_COUNT; i++)
				faults += S.faults[i];
			say("%llu clients run (%llu ok), %llu ops, %llu faults, %llu kills; leaked "
			    "%llu, hung %llu, lost %llu, wrong %llu, ved failures %llu",
			    (unsigned long long)S.clients_run, (unsigned long long)S.clients_ok,
			    (unsigned long long)S.ops, (unsigned long long)faults,
			    (unsigned long long)(S.killed + S.ved_kills), (unsigned long long)S.leaked,
			    (unsigned long long)S.hung, (unsigned long long)S.lost,
			    (unsigned long long)S.wrong, (unsigned long long)S.ved_failures);
			next_report = now + 10000000000ull;
		}
		usleep(10000);
	}
	/* Every client is gone: ved must hold nothing. */
	if (g_ved_stopped_until) {
		kill(g_vpid, SIGCONT);
		g_ved_stopped_until = 0;
	}
	if (!g_vpid)
		ved_start();
	uint64_t t = ve__now_ns();
	const struct ve_ctl_status *m = NULL;
	while (ve__now_ns() - t < 5000000000ull) {
		m = ved_status();
		bool idle = m && m->nclients == 0;
		const struct ve_ctl_entry *e = m ? (const void *)(m + 1) : NULL;
		for (uint32_t i = 0; idle && i < m->nentries; i++)
			idle = e[i].state == VE_ENTRY_IDLE && !e[i].outstanding && e[i].reserve_for < 0;
		if (idle)
			break;
		usleep(50000);
	}
	check_leases(true);
	ved_term();
	double secs = (double)(ve__now_ns() - g_t0) / 1e9;
	uint64_t faults = 0;
	for (int i = 0; i < F_COUNT; i++)
		faults += S.faults[i];
	printf("\n%-22s %12s\n", "figure", "value");
	printf("%-22s %12.1f\n", "duration_s", secs);
	printf("%-22s %12llu\n", "clients run", (unsigned long long)S.clients_run);
	printf("%-22s %12llu\n", "ops", (unsigned long long)S.ops);
	printf("%-22s %12llu\n", "faults injected", (unsigned long long)faults);
	printf("%-22s %12llu\n", "clients killed", (unsigned long long)S.killed);
	printf("%-22s %12llu\n", "clients ok", (unsigned long long)S.clients_ok);
	printf("%-22s %12llu\n", "ended killed", (unsigned long long)S.ended_killed);
	printf("%-22s %12llu\n", "ved killed", (unsigned long long)S.ved_kills);
	printf("%-22s %12llu  (goal 0)\n", "leases leaked", (unsigned long long)S.leaked);
	printf("%-22s %12llu  (goal 0)\n", "clients hung", (unsigned long long)S.hung);
	printf("%-22s %12llu  (goal 0)\n", "results lost", (unsigned long long)S.lost);
	printf("%-22s %12llu  (goal 0)\n", "results wrong", (unsigned long long)S.wrong);
	printf("%-22s %12llu  (goal 0)\n", "ved failures", (unsigned long long)S.ved_failures);
	if (O.json)
		write_json(secs);
	unlink(g_sock);
	char p[200];
	snprintf(p, sizeof(p), "%s/ved-0.lock", dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/vitamin-e/ved-0.lock", dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/vitamin-e", dir);
	rmdir(p);
	rmdir(dir);
	bool good = !S.leaked && !S.hung && !S.lost && !S.wrong && !S.ved_failures && S.clients_ok;
	return good ? 0 : 1;
}
