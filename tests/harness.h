/* SPDX-License-Identifier: MIT */
/*
 * Vitamin-E test harness: header-only, one binary per feature, each run in
 * its own process by tests/run.sh so that a crash is one failure, not the end
 * of the run.
 *
 *   VE_TEST(name) { VE_CHECK(x == 1); VE_CHECK_EQ(a, b); VE_SKIP("why"); }
 *
 * main() (defined here unless VE_TEST_NO_MAIN) runs every registered test,
 * prints "ok", "FAIL" or "skip" per test and a closing
 *   # summary: P passed, F failed, S skipped
 * that the runner sums. Exit status: 0 when nothing failed, 77 when every test
 * skipped (the automake convention for "skipped"), 1 otherwise.
 * A single test can be run with: ./test_x <name>.
 */
#ifndef VE_TESTS_HARNESS_H
#define VE_TESTS_HARNESS_H

#include <inttypes.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct ve_test_case {
	const char *name;
	void (*fn)(void);
};

#define VE_TEST_MAX 256
extern struct ve_test_case ve_test_cases[VE_TEST_MAX];
extern int ve_test_ncases;
extern int ve_test_failed_now;
extern int ve_test_skipped_now;
extern jmp_buf ve_test_jmp;

#define VE_TEST(name)                                                                              \
	static void ve_test_##name(void);                                                          \
	__attribute__((constructor)) static void ve_test_reg_##name(void)                         \
	{                                                                                          \
		if (ve_test_ncases < VE_TEST_MAX)                                                  \
			ve_test_cases[ve_test_ncases++] =                                          \
				(struct ve_test_case){#name, ve_test_##name};                      \
	}                                                                                          \
	static void ve_test_##name(void)

/* A failed check ends the current test (longjmp) so later checks do not run on
 * state the failure already made meaningless. */
#define VE_CHECK(cond)                                                                             \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);   \
			ve_test_failed_now = 1;                                                    \
			longjmp(ve_test_jmp, 1);                                                   \
		}                                                                                  \
	} while (0)

#define VE_CHECK_EQ(a, b)                                                                          \
	do {                                                                                       \
		long long ve_a_ = (long long)(a), ve_b_ = (long long)(b);                          \
		if (ve_a_ != ve_b_) {                                                              \
			fprintf(stderr, "%s:%d: check failed: %s == %s (%lld vs %lld)\n",          \
				__FILE__, __LINE__, #a, #b, ve_a_, ve_b_);                         \
			ve_test_failed_now = 1;                                                    \
			longjmp(ve_test_jmp, 1);                                                   \
		}                                                                                  \
	} while (0)

#define VE_CHECK_MSG(cond, ...)                                                                    \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);   \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			ve_test_failed_now = 1;                                                    \
			longjmp(ve_test_jmp, 1);                                                   \
		}                                                                                  \
	} while (0)

#define VE_SKIP(why)                                                                               \
	do {                                                                                       \
		fprintf(stderr, "skip: %s\n", why);                                                \
		ve_test_skipped_now = 1;                                                           \
		longjmp(ve_test_jmp, 1);                                                           \
	} while (0)

/* Test-local deterministic PRNG (splitmix64): tests print their seed so a
 * failure can be replayed with VE_SEED=<seed>. */
static inline uint64_t ve_test_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline uint64_t ve_test_seed(uint64_t dflt)
{
	const char *s = getenv("VE_SEED");
	return s ? strtoull(s, NULL, 0) : dflt;
}

static inline long ve_test_env_long(const char *name, long dflt)
{
	const char *s = getenv(name);
	return s && *s ? strtol(s, NULL, 0) : dflt;
}

#ifndef VE_TEST_NO_MAIN
struct ve_test_case ve_test_cases[VE_TEST_MAX];
int ve_test_ncases;
int ve_test_failed_now;
int ve_test_skipped_now;
jmp_buf ve_test_jmp;

int main(int argc, char **argv)
{
	/* volatile: they live across setjmp/longjmp */
	volatile int passed = 0, failed = 0, skipped = 0;
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (volatile int i = 0; i < ve_test_ncases; i++) {
		struct ve_test_case *tc = &ve_test_cases[i];
		if (argc > 1 && strcmp(argv[1], tc->name) != 0)
			continue;
		ve_test_failed_now = 0;
		ve_test_skipped_now = 0;
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		if (setjmp(ve_test_jmp) == 0)
			tc->fn();
		clock_gettime(CLOCK_MONOTONIC, &t1);
		/* Slow tests name themselves: what to trim when the suite outgrows CI. */
		double secs = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
		if (secs >= 1.0)
			printf("# %s took %.1f s\n", tc->name, secs);
		if (ve_test_failed_now) {
			failed++;
			printf("FAIL %s\n", tc->name);
		} else if (ve_test_skipped_now) {
			skipped++;
			printf("skip %s\n", tc->name);
		} else {
			passed++;
			printf("ok   %s\n", tc->name);
		}
	}
	printf("# summary: %d passed, %d failed, %d skipped\n", passed, failed, skipped);
	if (failed)
		return 1;
	if (passed == 0 && skipped > 0)
		return 77;
	return 0;
}
#endif
#endif
