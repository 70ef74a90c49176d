/* SPDX-License-Identifier: MIT */
/*
 * The fuzz target of tests/fuzz/fuzz_records.c without libFuzzer: a few
 * hundred thousand random and mutated inputs, from a printed seed, in bounded
 * time. Each must come back (no crash: the sanitizer builds run this too; no
 * hang: a watchdog, and the slowest input is reported) with the engine's
 * lease invariants intact (the target checks them after every step and finds
 * the pool idle once every client is removed).
 *
 * Inputs are half random bytes biased towards the target's command set, half
 * mutations (bit flips, byte changes, inserts, deletes, splices) of earlier
 * inputs that got records accepted. VE_SEED replays; VE_FUZZ_N sets the count
 * (default 300000, a tenth under sanitizers), VE_FUZZ_S the time bound (30 s).
 * `make fuzz` runs the same target under libFuzzer (docs/daemon.md).
 */
#include "../harness.h"

#define VE_FUZZ_NO_ENTRY
#include "../fuzz/fuzz_records.c"

#include <signal.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define FZ_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define FZ_SANITIZED 1
#endif
#endif
#ifndef FZ_SANITIZED
#define FZ_SANITIZED 0
#endif

#define MAXLEN 1024
#define POOL   64

static uint8_t pool[POOL][MAXLEN];
static size_t pool_len[POOL];
static int npool;

static uint32_t rnd(uint64_t *r, uint32_t n)
{
	return n ? (uint32_t)(((ve_test_rand(r) >> 32) * (uint64_t)n) >> 32) : 0;
}

/* Commands the target knows, with plausible argument bytes. */
static size_t gen_random(uint64_t *r, uint8_t *b)
{
	size_t n = 0, want = 8 + rnd(r, MAXLEN - 8);
	while (n + 80 < want) {
		uint32_t x = rnd(r, 100);
		uint8_t k = (uint8_t)(rnd(r, 4) << 4);
		if (x < 8) {
			b[n++] = k | (uint8_t)rnd(r, 2); /* add */
		} else if (x < 10) {
			b[n++] = k | 2; /* remove */
		} else if (x < 60) {
			b[n++] = k | (uint8_t)(4 + rnd(r, 4)); /* structured record */
			for (int i = 0; i < 12; i++)
				b[n++] = (uint8_t)(rnd(r, 8) == 0   ? ve_test_rand(r)
						   : rnd(r, 4) == 0 ? 0xff
								    : rnd(r, 24));
			b[n - 11] &= 0x3f; /* mostly no twist bits 6/7 */
		} else if (x < 75) {
			b[n++] = k | (uint8_t)(8 + rnd(r, 2)); /* schedule */
		} else if (x < 90) {
			b[n++] = k | (uint8_t)(10 + rnd(r, 2)); /* take */
		} else if (x < 94) {
			b[n++] = k | 3; /* raw record */
			for (int i = 0; i < 64; i++)
				b[n++] = (uint8_t)(rnd(r, 3) ? 0 : ve_test_rand(r));
			b[n - 64] = (uint8_t)rnd(r, 6);
		} else if (x < 97) {
			b[n++] = 0x1c; /* control message, plausible header */
			uint32_t len = 16 + rnd(r, 60);
			b[n++] = (uint8_t)len;
			b[n++] = 0;
			for (uint32_t i = 0; i < len && n < MAXLEN; i++)
				b[n++] = (uint8_t)(i == 6      ? 1 + rnd(r, 8)
						   : rnd(r, 2) ? 0
							       : ve_test_rand(r));
		} else if (x < 99) {
			b[n++] = 0x4c; /* a valid control message, then mutated or cut */
			b[n++] = 0;
			b[n++] = 0;
			for (int i = 0; i < 24; i++)
				b[n++] = (uint8_t)ve_test_rand(r);
		} else {
			b[n++] = k | (uint8_t)(13 + rnd(r, 3)); /* pure decoder */
			for (int i = 0; i < 64; i++)
				b[n++] = (uint8_t)ve_test_rand(r);
		}
	}
	return n;
}

static size_t mutate(uint64_t *r, uint8_t *b)
{
	int src = (int)rnd(r, (uint32_t)npool);
	size_t n = pool_len[src];
	memcpy(b, pool[src], n);
	for (int m = 1 + (int)rnd(r, 4); m > 0; m--) {
		uint32_t x = rnd(r, 6);
		size_t at = n ? rnd(r, (uint32_t)n) : 0;
		if (x == 0 && n) {
			b[at] ^= (uint8_t)(1u << rnd(r, 8));
		} else if (x == 1 && n) {
			b[at] = (uint8_t)ve_test_rand(r);
		} else if (x == 2 && n < MAXLEN) {
			memmove(b + at + 1, b + at, n - at);
			b[at] = (uint8_t)ve_test_rand(r);
			n++;
		} else if (x == 3 && n > 1) {
			memmove(b + at, b + at + 1, n - at - 1);
			n--;
		} else if (x == 4) {
			int o = (int)rnd(r, (uint32_t)npool);
			size_t k = pool_len[o] ? rnd(r, (uint32_t)pool_len[o]) : 0;
			size_t take_n = VE_MIN(pool_len[o] - k, MAXLEN - at);
			memcpy(b + at, pool[o] + k, take_n);
			n = at + take_n;
		} else if (n) {
			b[at] = (uint8_t)(b[at] + 1 + rnd(r, 3));
		}
	}
	return n;
}

static void on_alarm(int sig)
{
	(void)sig;
	static const char m[] = "\ntest_fuzz_records: watchdog: an input hung\n";
	ssize_t w = write(2, m, sizeof(m) - 1);
	(void)w;
	_exit(1);
}

VE_TEST(fuzz_records_and_control_messages)
{
	struct sigaction sa = {.sa_handler = on_alarm};
	sigaction(SIGALRM, &sa, NULL);
	uint64_t seed = ve_test_seed(0xf022ed);
	long n = ve_test_env_long("VE_FUZZ_N", FZ_SANITIZED ? 30000 : 300000);
	const char *tsan = getenv("VE_TSAN");
	if (!getenv("VE_FUZZ_N") && tsan && atoi(tsan) == 1)
		n = 30000;
	long secs = ve_test_env_long("VE_FUZZ_S", 30);
	printf("# seed %#llx, %ld inputs, at most %ld s\n", (unsigned long long)seed, n, secs);
	uint64_t r = seed, t0 = ve__now_ns(), slowest = 0;
	static uint8_t buf[MAXLEN];
	long done = 0;
	for (long i = 0; i < n; i++) {
		size_t len = npool < 8 || rnd(&r, 2) ? gen_random(&r, buf) : mutate(&r, buf);
		uint64_t st0, acc0, acc1, v, b;
		ve_fuzz_stats(&st0, &acc0, &v, &b);
		alarm(10);
		uint64_t s = ve__now_ns();
		int rc = ve_fuzz_records_one(buf, len);
		uint64_t dt = ve__now_ns() - s;
		alarm(0);
		if (dt > slowest)
			slowest = dt;
		if (rc) {
			fprintf(stderr, "input %ld (seed %#llx): %s\ninput (%zu bytes):", i,
				(unsigned long long)seed, ve_fuzz_why(), len);
			for (size_t k = 0; k < len; k++)
				fprintf(stderr, "%s%02x", k % 32 ? "" : "\n  ", buf[k]);
			fprintf(stderr, "\n");
			VE_CHECK_MSG(0, "lease state corrupted, see above; replay: VE_SEED=%#llx",
				     (unsigned long long)seed);
		}
		ve_fuzz_stats(&st0, &acc1, &v, &b);
		/* Keep inputs that got records accepted: they reach deep states. */
		if (acc1 > acc0 && (npool < POOL || rnd(&r, 4) == 0)) {
			int slot = npool < POOL ? npool++ : (int)rnd(&r, POOL);
			memcpy(pool[slot], buf, len);
			pool_len[slot] = len;
		}
		done++;
		if ((i & 1023) == 0 && ve__now_ns() - t0 > (uint64_t)secs * 1000000000ull)
			break;
	}
	uint64_t steps, acc, vio, binds;
	ve_fuzz_stats(&steps, &acc, &vio, &binds);
	printf("# %ld inputs in %.1f s (slowest %.2f ms): %llu steps, %llu records accepted, "
	       "%llu violations (client disconnected), %llu bindings checked\n",
	       done, (double)(ve__now_ns() - t0) / 1e9, (double)slowest / 1e6,
	       (unsigned long long)steps, (unsigned long long)acc, (unsigned long long)vio,
	       (unsigned long long)binds);
	/* The generator must reach the interesting states, or the test proves little. */
	VE_CHECK(acc > 1000);
	VE_CHECK(vio > 100);
	VE_CHECK(binds > 100);
}
