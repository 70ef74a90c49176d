/* SPDX-License-Identifier: MIT */
/*
 * Runs prog_fakecuda_selftest (the fake libcuda exercised natively, no
 * Vitamin-E involved) under several schedules: no jitter, random jitter with
 * different seeds, and a smaller GPU. Every run must exit 0. The program is
 * found under $VE_BUILD (default "build"): $VE_BUILD/tests/prog_fakecuda_selftest,
 * with the fake at $VE_BUILD/fakecuda/libcuda.so.1; the test skips if either
 * is missing. Seeds derive from VE_SEED, so a failing schedule can be
 * replayed with VE_SEED=<seed> (FAKECUDA_SEED is printed too).
 */
#include "../harness.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char prog[PATH_MAX], libdir[PATH_MAX];

static int locate(void)
{
	const char *b = getenv("VE_BUILD");
	if (!b || !*b)
		b = "build";
	snprintf(prog, sizeof(prog), "%s/tests/prog_fakecuda_selftest", b);
	snprintf(libdir, sizeof(libdir), "%s/fakecuda", b);
	char lib[PATH_MAX + 16];
	snprintf(lib, sizeof(lib), "%s/libcuda.so.1", libdir);
	return access(prog, X_OK) == 0 && access(lib, R_OK) == 0;
}

/* Runs the selftest with the given environment; returns its exit status (128+sig if killed). */
static int run_selftest(uint64_t seed, unsigned jitter_us, int sms, unsigned timeout_s)
{
	char s_seed[32], s_jit[32], s_sms[32], ldpath[PATH_MAX * 2];
	snprintf(s_seed, sizeof(s_seed), "%llu", (unsigned long long)seed);
	snprintf(s_jit, sizeof(s_jit), "%u", jitter_us);
	snprintf(s_sms, sizeof(s_sms), "%d", sms);
	const char *old = getenv("LD_LIBRARY_PATH");
	snprintf(ldpath, sizeof(ldpath), "%s%s%s", libdir, old && *old ? ":" : "", old ? old : "");
	printf("# selftest: FAKECUDA_SEED=%s FAKECUDA_JITTER_US=%s FAKECUDA_SMS=%s\n", s_seed,
	       s_jit, s_sms);
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		setenv("LD_LIBRARY_PATH", ldpath, 1);
		setenv("FAKECUDA_SEED", s_seed, 1);
		setenv("FAKECUDA_JITTER_US", s_jit, 1);
		setenv("FAKECUDA_SMS", s_sms, 1);
		execl(prog, prog, (char *)NULL);
		_exit(127);
	}
	/* Bounded: a lost dependency in the fake could deadlock the program. */
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int st = 0;
	for (;;) {
		pid_t w = waitpid(pid, &st, WNOHANG);
		if (w == pid)
			break;
		if (w < 0 && errno != EINTR)
			return -errno;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - t0.tv_sec > (time_t)timeout_s) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			fprintf(stderr, "selftest timed out after %us\n", timeout_s);
			return 124;
		}
		struct timespec d = {0, 20 * 1000 * 1000};
		nanosleep(&d, NULL);
	}
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	return 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* Sanitizer builds run several times slower. */
static unsigned budget_s(void)
{
	const char *t = getenv("VE_TSAN");
	return t && *t ? 240 : 90;
}

VE_TEST(fakecuda_selftest_plain)
{
	if (!locate())
		VE_SKIP("prog_fakecuda_selftest or the fake libcuda is not built");
	VE_CHECK_EQ(run_selftest(1, 0, 132, budget_s()), 0);
}

VE_TEST(fakecuda_selftest_jitter)
{
	if (!locate())
		VE_SKIP("prog_fakecuda_selftest or the fake libcuda is not built");
	uint64_t s = ve_test_seed(0x5eedf00dull);
	printf("# VE_SEED=%llu\n", (unsigned long long)s);
	static const unsigned jitter[] = {50, 300, 1000};
	for (size_t i = 0; i < sizeof(jitter) / sizeof(jitter[0]); i++) {
		uint64_t seed = ve_test_rand(&s) % 1000000;
		int rc = run_selftest(seed, jitter[i], 132, budget_s());
		VE_CHECK_MSG(rc == 0,
			     "selftest failed (rc %d) with FAKECUDA_SEED=%llu jitter %u us", rc,
			     (unsigned long long)seed, jitter[i]);
	}
}

/* A GPU whose SM count is a multiple of 8: the split has no remainder to drop. */
VE_TEST(fakecuda_selftest_64_sms)
{
	if (!locate())
		VE_SKIP("prog_fakecuda_selftest or the fake libcuda is not built");
	uint64_t s = ve_test_seed(0x64);
	uint64_t seed = ve_test_rand(&s) % 1000000;
	VE_CHECK_EQ(run_selftest(seed, 200, 64, budget_s()), 0);
}
