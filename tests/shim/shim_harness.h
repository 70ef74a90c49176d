/* SPDX-License-Identifier: MIT */
/*
 * Helpers of the harness tests that run the shim test programs
 * (tests/shim/prog_shim_*.c) natively, against the fake driver only, and under
 * libve.so. Include after ../harness.h.
 *
 * Paths come from $VE_BUILD (default "build"): $VE_BUILD/libve.so,
 * $VE_BUILD/fakecuda/libcuda.so.1, $VE_BUILD/tests/prog_*, $VE_BUILD/ve-run.
 * A test skips (VE_SKIP) when one it needs is missing.
 *
 * Every run is a child process with a bounded run time (killed past its
 * timeout), a hermetic environment (inherited VE_*, FAKECUDA_*, VETEST_* and
 * LD_PRELOAD are dropped, then set from the options) and its stdout and
 * stderr captured for checks and printed on failure.
 *
 * Sanitizer builds (SAN=address,undefined or SAN=thread in the same BUILD
 * dir) are detected at compile time: the runtime this harness was linked with
 * is preloaded ahead of libve.so (a sanitizer runtime must come first in the
 * library list, or ASan refuses to start; libve.so's dlsym is not
 * instrumented because the runtime calls it while it initializes), and time
 * limits are longer. Leak checking stays on: the programs, the fake and the
 * shim exit without leaks.
 */
#ifndef VE_TESTS_SHIM_HARNESS_H
#define VE_TESTS_SHIM_HARNESS_H

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define SH_SAN_INIT "__asan_init"
#elif defined(__SANITIZE_THREAD__)
#define SH_SAN_INIT "__tsan_init"
#endif

extern char **environ;

/* A ThreadSanitizer build (make check sets VE_TSAN=1 there too). */
static inline bool sh_under_tsan(void)
{
#if defined(__SANITIZE_THREAD__)
	return true;
#else
	const char *t = getenv("VE_TSAN");
	return t && *t && strcmp(t, "0") != 0;
#endif
}

static char sh_build[PATH_MAX], sh_libve[PATH_MAX + 16], sh_fake[PATH_MAX + 32],
    sh_fakedir[PATH_MAX + 16], sh_verun[PATH_MAX + 16], sh_sanrt[PATH_MAX];

static inline bool sh_exists(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* Resolves the paths once; true when libve.so and the fake driver exist. */
static inline bool sh_locate(void)
{
	if (!sh_build[0]) {
		const char *b = getenv("VE_BUILD");
		if (!b || !*b)
			b = "build";
		if (!realpath(b, sh_build))
			snprintf(sh_build, sizeof(sh_build), "%s", b);
		snprintf(sh_libve, sizeof(sh_libve), "%s/libve.so", sh_build);
		snprintf(sh_fakedir, sizeof(sh_fakedir), "%s/fakecuda", sh_build);
		snprintf(sh_fake, sizeof(sh_fake), "%s/fakecuda/libcuda.so.1", sh_build);
		snprintf(sh_verun, sizeof(sh_verun), "%s/ve-run", sh_build);
#ifdef SH_SAN_INIT
		/* The sanitizer runtime this binary runs with (same build, same flags). */
		Dl_info di;
		void *sym = dlsym(RTLD_DEFAULT, SH_SAN_INIT);
		if (sym && dladdr(sym, &di) && di.dli_fname && strstr(di.dli_fname, ".so"))
			snprintf(sh_sanrt, sizeof(sh_sanrt), "%s", di.dli_fname);
#endif
	}
	return sh_exists(sh_libve) && sh_exists(sh_fake);
}

static inline bool sh_sanitized(void)
{
#ifdef SH_SAN_INIT
	return true;
#else
	return false;
#endif
}

/* Seconds a single program run may take. */
static inline unsigned sh_timeout(unsigned plain)
{
	return sh_sanitized() ? plain * 4 : plain;
}

/* Path of test program @name, or VE_SKIP when it is not built. */
#define SH_PROG(var, name)                                                                         \
	char var[PATH_MAX + 64];                                                                   \
	do {                                                                                       \
		if (!sh_locate())                                                                  \
			VE_SKIP("libve.so or the fake libcuda is not built in $VE_BUILD");         \
		snprintf(var, sizeof(var), "%s/tests/%s", sh_build, name);                         \
		if (access(var, X_OK) != 0) {                                                      \
			static char sh_why_[PATH_MAX + 96];                                        \
			snprintf(sh_why_, sizeof(sh_why_), "%s is not built", var);                \
			VE_SKIP(sh_why_);                                                          \
		}                                                                                  \
	} while (0)

struct sh_opts {
	bool shim;	     /* LD_PRELOAD libve.so (VE_LIBCUDA always names the fake) */
	int expect_green;    /* VETEST_EXPECT_GREEN */
	unsigned jitter;     /* FAKECUDA_JITTER_US */
	uint64_t seed;	     /* FAKECUDA_SEED and VETEST_SEED */
	const char *policy;  /* VE_POLICY, NULL = unset */
	const char *env[12]; /* extra "NAME=value" (NULL-terminated; "NAME=" unsets) */
	unsigned timeout_s;  /* 0 = 60 (scaled for sanitizers) */
	bool no_preload;     /* leave LD_PRELOAD alone (ve-run sets it) */
};

struct sh_result {
	int rc; /* exit status; 128 + signal; 124 after the timeout */
	double secs;
	char out[1 << 18]; /* stdout and stderr, interleaved, truncated */
	size_t len;
};

static inline double sh_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline void sh_child_env(const struct sh_opts *o)
{
	/* Drop everything that could leak in from the caller's environment. */
	for (;;) {
		char name[256] = "";
		for (char **e = environ; *e; e++) {
			if (strncmp(*e, "VE_", 3) && strncmp(*e, "FAKECUDA_", 9) &&
			    strncmp(*e, "VETEST_", 7) && strncmp(*e, "LD_PRELOAD=", 11))
				continue;
			const char *eq = strchr(*e, '=');
			size_t n = eq ? (size_t)(eq - *e) : strlen(*e);
			if (n < sizeof(name)) {
				memcpy(name, *e, n);
				name[n] = 0;
			}
			break;
		}
		if (!name[0])
			break;
		unsetenv(name);
	}
	char buf[PATH_MAX * 3];
	const char *old = getenv("LD_LIBRARY_PATH");
	snprintf(buf, sizeof(buf), "%s%s%s", sh_fakedir, old && *old ? ":" : "", old ? old : "");
	setenv("LD_LIBRARY_PATH", buf, 1);
	setenv("VE_LIBCUDA", sh_fake, 1);
	snprintf(buf, sizeof(buf), "%u", o->jitter);
	setenv("FAKECUDA_JITTER_US", buf, 1);
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)o->seed);
	setenv("FAKECUDA_SEED", buf, 1);
	setenv("VETEST_SEED", buf, 1);
	setenv("VETEST_EXPECT_GREEN", o->expect_green ? "1" : "0", 1);
	if (o->policy)
		setenv("VE_POLICY", o->policy, 1);
	/* Embedded coordinator: never a ved that happens to run on this machine. */
	setenv("VE_DAEMON", "0", 1);
	if (o->shim && !o->no_preload) {
		if (sh_sanrt[0])
			snprintf(buf, sizeof(buf), "%s:%s", sh_sanrt, sh_libve);
		else
			snprintf(buf, sizeof(buf), "%s", sh_libve);
		setenv("LD_PRELOAD", buf, 1);
	} else if (o->no_preload && sh_sanrt[0]) {
		/* ve-run puts libve.so first; the runtime still has to be loaded early. */
		setenv("LD_PRELOAD", sh_sanrt, 1);
	}
	for (int i = 0; i < 12 && o->env[i]; i++) {
		const char *eq = strchr(o->env[i], '=');
		if (!eq)
			continue;
		char name[128];
		size_t n = (size_t)(eq - o->env[i]);
		if (n >= sizeof(name))
			continue;
		memcpy(name, o->env[i], n);
		name[n] = 0;
		if (eq[1])
			setenv(name, eq + 1, 1);
		else
			unsetenv(name);
	}
}

/* Runs argv (argv[0] is a path) with the options; always fills r. */
static inline void sh_run(const char *const *argv, const struct sh_opts *o, struct sh_result *r)
{
	unsigned limit = sh_timeout(o->timeout_s ? o->timeout_s : 60);
	r->len = 0;
	r->out[0] = 0;
	r->rc = -1;
	int fd[2];
	if (pipe(fd) != 0) {
		r->rc = -errno;
		return;
	}
	fflush(stdout);
	fflush(stderr);
	double t0 = sh_now();
	pid_t pid = fork();
	if (pid < 0) {
		r->rc = -errno;
		close(fd[0]);
		close(fd[1]);
		return;
	}
	if (pid == 0) {
		dup2(fd[1], 1);
		dup2(fd[1], 2);
		close(fd[0]);
		close(fd[1]);
		setpgid(0, 0); /* so a timeout can kill everything it started */
		sh_child_env(o);
		execv(argv[0], (char *const *)argv);
		fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(fd[1]);
	fcntl(fd[0], F_SETFL, O_NONBLOCK);
	bool timed_out = false, eof = false;
	while (!eof) {
		double left = (t0 + limit) - sh_now();
		if (left <= 0) {
			timed_out = true;
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
			break;
		}
		struct pollfd p = {fd[0], POLLIN, 0};
		int n = poll(&p, 1, (int)(left * 1000) + 1);
		if (n < 0 && errno != EINTR)
			break;
		if (n <= 0)
			continue;
		for (;;) {
			char tmp[4096];
			ssize_t k = read(fd[0], tmp, sizeof(tmp));
			if (k > 0) {
				size_t room = sizeof(r->out) - 1 - r->len;
				size_t c = (size_t)k < room ? (size_t)k : room;
				memcpy(r->out + r->len, tmp, c);
				r->len += c;
				r->out[r->len] = 0;
				continue;
			}
			if (k == 0)
				eof = true;
			break;
		}
	}
	close(fd[0]);
	int st = 0;
	/* The output closed; the child may still be exiting (atexit work): bounded too. */
	while (waitpid(pid, &st, timed_out ? 0 : WNOHANG) == 0) {
		if (sh_now() > t0 + limit) {
			timed_out = true;
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			break;
		}
		struct timespec d = {0, 5 * 1000 * 1000};
		nanosleep(&d, NULL);
	}
	r->secs = sh_now() - t0;
	if (timed_out)
		r->rc = 124;
	else if (WIFEXITED(st))
		r->rc = WEXITSTATUS(st);
	else
		r->rc = 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* The run's description, for messages. */
static inline void sh_describe(char *buf, size_t n, const char *const *argv,
			       const struct sh_opts *o)
{
	int k = snprintf(buf, n, "%s%s%s FAKECUDA_JITTER_US=%u FAKECUDA_SEED=%llu",
			 o->shim ? "LD_PRELOAD=libve.so " : "", o->policy ? "VE_POLICY=" : "",
			 o->policy ? o->policy : "", o->jitter, (unsigned long long)o->seed);
	for (int i = 0; i < 12 && o->env[i] && k > 0 && (size_t)k < n; i++)
		k += snprintf(buf + k, n - (size_t)k, " %s", o->env[i]);
	for (int i = 0; argv[i] && k > 0 && (size_t)k < n; i++) {
		const char *b = strrchr(argv[i], '/');
		k += snprintf(buf + k, n - (size_t)k, " %s", i == 0 && b ? b + 1 : argv[i]);
	}
}

/* Prints the tail of a run's output (on failure). */
static inline void sh_dump(const struct sh_result *r)
{
	const char *p = r->out;
	if (r->len > 6000)
		p = r->out + r->len - 6000;
	fprintf(stderr, "---- output (rc %d, %.2f s) ----\n%s%s----\n", r->rc, r->secs, p,
		r->len && r->out[r->len - 1] != '\n' ? "\n" : "");
}

/* Counts lines of the output that contain @needle. */
static inline int sh_count(const struct sh_result *r, const char *needle)
{
	int n = 0;
	const char *p = r->out;
	size_t nl = strlen(needle);
	while ((p = strstr(p, needle)) != NULL) {
		n++;
		p += nl;
		const char *e = strchr(p, '\n');
		if (!e)
			break;
		p = e + 1;
	}
	return n;
}

struct sh_launches {
	long total, green, foreign, graph;
};

/* Parses the programs' "launch-log:" line; false if there is none. */
static inline bool sh_launch_log(const struct sh_result *r, struct sh_launches *l)
{
	const char *p = strstr(r->out, "launch-log: ");
	return p && sscanf(p, "launch-log: %ld launches, %ld green, %ld foreign, %ld graph",
			   &l->total, &l->green, &l->foreign, &l->graph) == 4;
}

/*
 * Runs a program and checks: exit 0 within its time, and where the launches ran: under an
 * active shim every launch other than foreign or graph ones on a green context, natively or
 * in pass-through none (foreign ones may, on the app's own green context). Prints the
 * schedule so a failure can be replayed.
 */
#define SH_RUN_OK(argv, opts)                                                                      \
	do {                                                                                       \
		static struct sh_result sh_r_;                                                     \
		char sh_d_[1024];                                                                  \
		sh_describe(sh_d_, sizeof(sh_d_), (argv), (opts));                                 \
		printf("# %s\n", sh_d_);                                                           \
		sh_run((argv), (opts), &sh_r_);                                                    \
		struct sh_launches sh_l_ = {-1, -1, -1, -1};                                       \
		bool sh_have_ = sh_launch_log(&sh_r_, &sh_l_);                                     \
		bool sh_where_ =                                                                   \
		    sh_have_ && ((opts)->expect_green                                              \
				     ? sh_l_.green >= sh_l_.total - sh_l_.foreign - sh_l_.graph && \
					   sh_l_.total > sh_l_.foreign + sh_l_.graph               \
				     : sh_l_.green <= sh_l_.foreign);                              \
		if (sh_r_.rc != 0 || !sh_where_)                                                   \
			sh_dump(&sh_r_);                                                           \
		VE_CHECK_MSG(sh_r_.rc == 0, "exit %d after %.1f s: %s", sh_r_.rc, sh_r_.secs,      \
			     sh_d_);                                                               \
		VE_CHECK_MSG(                                                                      \
		    sh_where_,                                                                     \
		    "launches: %ld total, %ld green, %ld foreign, %ld graph (expected %s): "       \
		    "%s",                                                                          \
		    sh_l_.total, sh_l_.green, sh_l_.foreign, sh_l_.graph,                          \
		    (opts)->expect_green ? "all green" : "none green", sh_d_);                     \
	} while (0)

/* The policies every shim test runs under. */
static const char *const sh_policies[] = {"tput", "chaos", "whole", "fixed", "tpot"};
#define SH_NPOLICIES (sizeof(sh_policies) / sizeof(sh_policies[0]))

#endif
