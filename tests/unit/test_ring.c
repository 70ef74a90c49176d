/* SPDX-License-Identifier: MIT */
/*
 * IPC transport tests: the SPSC record ring (single thread, two threads, two
 * processes with futex wake-ups, a ping-pong that would hang on a lost
 * wake-up, corrupted indices), the record decoder (valid records, every
 * field and reserved byte made malformed, random bytes), the segment
 * (create, attach, refusal of a wrong magic, version or geometry, seals,
 * permissions, names) and fd passing.
 *
 * Sizes shrink under ThreadSanitizer (or VE_TSAN=1); VE_RING_RECORDS sets
 * the two-thread count. Random parts print their seed; replay with
 * VE_SEED=<seed>.
 */
/* harness.h's main() keeps locals live across its setjmp; GCC 12 at -O1 and
 * above flags them (-Wclobbered) although no test longjmps past a change. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wclobbered"
#endif
#include "../harness.h"
#include "ipc/fdpass.h"
#include "ipc/proto.h"
#include "ipc/ring.h"
#include "ipc/shm.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif
#ifndef UNDER_TSAN
#define UNDER_TSAN 0
#endif

static int tsan(void)
{
	return UNDER_TSAN || ve_test_env_long("VE_TSAN", 0) != 0;
}

static uint64_t seed_once(void)
{
	static uint64_t s;
	if (!s) {
		s = ve_test_seed((uint64_t)ve__now_ns() | 1);
		printf("# seed %llu (replay: VE_SEED=%llu)\n", (unsigned long long)s,
		       (unsigned long long)s);
	}
	return s;
}

/* Ring memory of exactly the size a capacity needs (ASan sees any overrun). */
static void *ring_mem(uint32_t cap)
{
	size_t bytes = ve_ring_bytes(cap);
	void *m =
	    aligned_alloc(VE_CACHELINE, (bytes + VE_CACHELINE - 1) & ~(size_t)(VE_CACHELINE - 1));
	if (m)
		memset(m, 0, bytes);
	return m;
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000u),
			      .tv_nsec = (long)(ns % 1000000000u)};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* A valid READY carrying seq, with a payload pattern derived from it. */
static void mk_seq(struct ve_rec *r, uint32_t seq)
{
	ve_rec_init(r, VE_REC_READY);
	r->seq = seq;
	r->u.ready.tok = (uint64_t)seq + 1;
	r->u.ready.key = ve__mix64(seq);
	r->u.ready.blocks = 1 + (seq & 1023);
	r->u.ready.threads_per_block = 256;
	r->u.ready.kind = 1;
}

/* 0 if r is the record mk_seq(seq) makes. */
static int bad_seq(const struct ve_rec *r, uint32_t seq)
{
	return r->seq != seq || r->u.ready.tok != (uint64_t)seq + 1 ||
	       r->u.ready.key != ve__mix64(seq) || r->u.ready.blocks != 1 + (seq & 1023) ||
	       ve_proto_check(r, VE_DIR_TO_COORD) != 0;
}

/* ---------------------------------------------------------------- ring */

VE_TEST(ring_geometry)
{
	struct ve_ring r;
	void *m = ring_mem(128);
	VE_CHECK(m);
	VE_CHECK_EQ(ve_ring_init(&r, m, ve_ring_bytes(1)), -EINVAL);
	VE_CHECK_EQ(ve_ring_init(&r, (char *)m + 8, ve_ring_bytes(64)), -EINVAL);
	VE_CHECK_EQ(ve_ring_init(&r, m, ve_ring_bytes(100)), 0);
	VE_CHECK_EQ(r.cap, 64);
	VE_CHECK_EQ(ve_ring_init(&r, m, ve_ring_bytes(128)), 0);
	VE_CHECK_EQ(r.cap, 128);
	VE_CHECK_EQ(r.mask, 127);

	struct ve_ring a;
	VE_CHECK_EQ(ve_ring_attach(&a, m, ve_ring_bytes(128)), 0);
	VE_CHECK_EQ(a.cap, 128);
	VE_CHECK(a.recs == r.recs);
	/* Memory too small for the capacity it claims. */
	VE_CHECK_EQ(ve_ring_attach(&a, m, ve_ring_bytes(64)), -EINVAL);
	struct ve_ring_shared *sh = m;
	sh->capacity = 96;
	VE_CHECK_EQ(ve_ring_attach(&a, m, ve_ring_bytes(128)), -EINVAL);
	sh->capacity = 128;
	sh->rec_size = 32;
	VE_CHECK_EQ(ve_ring_attach(&a, m, ve_ring_bytes(128)), -EINVAL);
	sh->rec_size = VE_REC_SIZE;
	sh->magic ^= 1;
	VE_CHECK_EQ(ve_ring_attach(&a, m, ve_ring_bytes(128)), -EINVAL);
	sh->magic ^= 1;
	VE_CHECK_EQ(ve_ring_attach(&a, m, ve_ring_bytes(128)), 0);
	ve_ring_fini(&a);
	ve_ring_fini(&r);
	VE_CHECK(r.sh == NULL);
	free(m);
}

VE_TEST(ring_single_thread)
{
	struct ve_ring r;
	void *m = ring_mem(8);
	VE_CHECK(m && ve_ring_init(&r, m, ve_ring_bytes(8)) == 0);
	struct ve_ring_producer p;
	struct ve_ring_consumer c;
	VE_CHECK_EQ(ve_ring_producer_init(&p, &r), 0);
	VE_CHECK_EQ(ve_ring_consumer_init(&c, &r), 0);

	struct ve_rec in[16], out[16];
	for (uint32_t i = 0; i < 16; i++)
		mk_seq(&in[i], i);
	VE_CHECK_EQ(ve_ring_pop(&c, out, 16), 0);    /* empty */
	VE_CHECK_EQ(ve_ring_wait(&c, 0), 0);	     /* poll */
	VE_CHECK_EQ(ve_ring_push(&p, in, 8), 8);     /* fill */
	VE_CHECK_EQ(ve_ring_push(&p, in + 8, 1), 0); /* full: refused, nothing dropped */
	VE_CHECK_EQ(ve_ring_room(&p, 1), 0);
	VE_CHECK_EQ(ve_ring_wait_space(&p, 1, 0), 0);
	VE_CHECK_EQ(ve_ring_wait_space(&p, 9, 0), -EINVAL);
	VE_CHECK_EQ(ve_ring_pop(&c, out, 3), 3);
	for (uint32_t i = 0; i < 3; i++)
		VE_CHECK(!bad_seq(&out[i], i));
	VE_CHECK_EQ(ve_ring_wait_space(&p, 3, 0), 3);
	VE_CHECK_EQ(ve_ring_push(&p, in + 8, 5), 3); /* partial: only what fits (wraps) */
	VE_CHECK_EQ(ve_ring_avail(&c), 5);	     /* cached: not refreshed until empty */
	VE_CHECK_EQ(ve_ring_pop(&c, out, 16), 5);
	VE_CHECK_EQ(ve_ring_pop(&c, out + 5, 16), 3);
	for (uint32_t i = 0; i < 8; i++)
		VE_CHECK(!bad_seq(&out[i], 3 + i));
	VE_CHECK_EQ(ve_ring_pop(&c, out, 16), 0);

	/* Zero-copy: reserve stops at the end of the array, peek likewise. */
	struct ve_rec *slot = NULL;
	const struct ve_rec *view = NULL;
	VE_CHECK_EQ(p.tail & p.mask, 3);
	VE_CHECK_EQ(ve_ring_reserve(&p, &slot, 8), 5);
	for (uint32_t i = 0; i < 5; i++)
		mk_seq(&slot[i], 100 + i);
	ve_ring_commit(&p, 5);
	VE_CHECK_EQ(ve_ring_reserve(&p, &slot, 8), 3);
	for (uint32_t i = 0; i < 3; i++)
		mk_seq(&slot[i], 105 + i);
	ve_ring_commit(&p, 9); /* over-commit is clamped to the room */
	VE_CHECK_EQ(ve_ring_reserve(&p, &slot, 8), 0);
	VE_CHECK_EQ(ve_ring_peek(&c, &view, 8), 5);
	for (uint32_t i = 0; i < 5; i++)
		VE_CHECK(!bad_seq(&view[i], 100 + i));
	ve_ring_release(&c, 2);
	VE_CHECK_EQ(ve_ring_peek(&c, &view, 8), 3);
	VE_CHECK(!bad_seq(&view[0], 102));
	ve_ring_release(&c, 3);
	VE_CHECK_EQ(ve_ring_pop(&c, out, 16), 3);
	for (uint32_t i = 0; i < 3; i++)
		VE_CHECK(!bad_seq(&out[i], 105 + i));
	ve_ring_release(&c, 5); /* over-release is clamped: nothing is available */
	VE_CHECK_EQ(ve_ring_avail(&c), 0);
	VE_CHECK_EQ(ve_ring_room(&p, 8), 8);
	VE_CHECK_EQ(p.wakes + c.wakes, 0); /* nobody slept, no syscalls */
	free(m);
}

/* Random batches across the 2^32 wrap of the free-running indices, against a
 * count of what must be in the ring. */
VE_TEST(ring_random_wrap)
{
	uint64_t s = seed_once();
	const uint32_t cap = 16;
	struct ve_ring r;
	void *m = ring_mem(cap);
	VE_CHECK(m && ve_ring_init(&r, m, ve_ring_bytes(cap)) == 0);
	uint32_t start = 0xffffffffu - 200;
	atomic_store(&r.sh->head, start);
	atomic_store(&r.sh->tail, start);
	struct ve_ring_producer p;
	struct ve_ring_consumer c;
	VE_CHECK_EQ(ve_ring_producer_init(&p, &r), 0);
	VE_CHECK_EQ(ve_ring_consumer_init(&c, &r), 0);
	uint32_t next_in = 0, next_out = 0;
	struct ve_rec buf[40];
	for (int it = 0; it < 200000; it++) {
		uint32_t k = ve__rand_below(&s, 40);
		if (ve__rand64(&s) & 1) {
			for (uint32_t i = 0; i < k; i++)
				mk_seq(&buf[i], next_in + i);
			int n = ve_ring_push(&p, buf, k);
			uint32_t inside = next_in - next_out;
			VE_CHECK_EQ(n, VE_MIN(k, cap - inside));
			next_in += (uint32_t)n;
		} else {
			int n = ve_ring_pop(&c, buf, k);
			VE_CHECK(n >= 0 && (uint32_t)n <= k && (uint32_t)n <= next_in - next_out);
			if (k && next_in != next_out)
				VE_CHECK(n > 0);
			for (int i = 0; i < n; i++)
				VE_CHECK_MSG(!bad_seq(&buf[i], next_out + (uint32_t)i), "it %d",
					     it);
			next_out += (uint32_t)n;
		}
	}
	VE_CHECK(p.tail < start); /* the indices did wrap */
	free(m);
}

struct duo {
	struct ve_ring_producer p;
	char pad0[128];
	struct ve_ring_consumer c;
	char pad1[128];
	uint32_t n;
	uint64_t seed;
	_Atomic int fail;
	uint64_t prod_timeouts, cons_timeouts;
	char why[160];
};

static void duo_fail(struct duo *d, const char *why, uint32_t at)
{
	int z = 0;
	if (atomic_compare_exchange_strong(&d->fail, &z, 1))
		snprintf(d->why, sizeof(d->why), "%s at record %u", why, at);
}

static void *duo_producer(void *arg)
{
	struct duo *d = arg;
	uint64_t s = d->seed;
	struct ve_rec buf[64];
	uint32_t seq = 0, timeouts = 0;
	while (seq < d->n && !atomic_load(&d->fail)) {
		uint32_t k = 1 + ve__rand_below(&s, 64);
		if (k > d->n - seq)
			k = d->n - seq;
		for (uint32_t i = 0; i < k; i++)
			mk_seq(&buf[i], seq + i);
		uint32_t done = 0;
		while (done < k && !atomic_load(&d->fail)) {
			int n = ve_ring_push(&d->p, buf + done, k - done);
			if (n < 0) {
				duo_fail(d, "push failed", seq + done);
				return NULL;
			}
			done += (uint32_t)n;
			if (n == 0) {
				int w = ve_ring_wait_space(&d->p, 1, 100000000);
				if (w < 0) {
					duo_fail(d, "wait_space failed", seq + done);
					return NULL;
				}
				if (w == 0 && ++timeouts > 50) {
					duo_fail(d, "producer starved", seq + done);
					return NULL;
				}
				d->prod_timeouts += w == 0;
			}
		}
		seq += k;
	}
	return NULL;
}

static void *duo_consumer(void *arg)
{
	struct duo *d = arg;
	uint64_t s = d->seed ^ 0x5555;
	struct ve_rec buf[64];
	uint32_t seq = 0, timeouts = 0;
	while (seq < d->n && !atomic_load(&d->fail)) {
		int n = ve_ring_pop(&d->c, buf, 1 + ve__rand_below(&s, 64));
		if (n < 0) {
			duo_fail(d, "pop failed", seq);
			return NULL;
		}
		for (int i = 0; i < n; i++, seq++) {
			if (bad_seq(&buf[i], seq)) {
				duo_fail(d, "out of order, lost, duplicated or torn", seq);
				return NULL;
			}
		}
		if (n == 0) {
			int w = ve_ring_wait_spin(&d->c, 5000, 100000000);
			if (w < 0) {
				duo_fail(d, "wait failed", seq);
				return NULL;
			}
			if (w == 0 && ++timeouts > 50) {
				duo_fail(d, "consumer starved", seq);
				return NULL;
			}
			d->cons_timeouts += w == 0;
		}
	}
	/* Nothing beyond the last record. */
	if (!atomic_load(&d->fail) && ve_ring_pop(&d->c, buf, 64) != 0)
		duo_fail(d, "extra records", seq);
	return NULL;
}

VE_TEST(ring_two_threads)
{
	const uint32_t cap = 1024;
	struct ve_ring r;
	void *m = ring_mem(cap);
	VE_CHECK(m && ve_ring_init(&r, m, ve_ring_bytes(cap)) == 0);
	struct duo *d = calloc(1, sizeof(*d));
	VE_CHECK(d);
	d->n = (uint32_t)ve_test_env_long("VE_RING_RECORDS", tsan() ? 200000 : 5000000);
	d->seed = seed_once();
	VE_CHECK_EQ(ve_ring_producer_init(&d->p, &r), 0);
	VE_CHECK_EQ(ve_ring_consumer_init(&d->c, &r), 0);
	uint64_t t0 = ve__now_ns();
	pthread_t tp, tc;
	VE_CHECK_EQ(pthread_create(&tc, NULL, duo_consumer, d), 0);
	VE_CHECK_EQ(pthread_create(&tp, NULL, duo_producer, d), 0);
	pthread_join(tp, NULL);
	pthread_join(tc, NULL);
	double secs = (double)(ve__now_ns() - t0) / 1e9;
	printf("# two threads: %u records in %.2f s (%.1f M/s); consumer slept %llu, producer "
	       "slept %llu, wakes %llu/%llu\n",
	       d->n, secs, d->n / secs / 1e6, (unsigned long long)d->c.sleeps,
	       (unsigned long long)d->p.sleeps, (unsigned long long)d->p.wakes,
	       (unsigned long long)d->c.wakes);
	VE_CHECK_MSG(!atomic_load(&d->fail), "%s", d->why);
	VE_CHECK_EQ(d->p.tail, d->n);
	VE_CHECK_EQ(d->c.head, d->n);
	free(d);
	free(m);
}

/* Two threads, two rings, both sides sleeping on the futex every time: a lost
 * wake-up shows as a wait that times out (2 s) with the peer's record sent. */
struct pingpong {
	struct ve_ring_producer p;
	char pad0[128];
	struct ve_ring_consumer c;
	char pad1[128];
	uint32_t iters;
	uint64_t seed;
	_Atomic int fail;
	uint32_t fail_at;
};

/* Busy-waits 0..4 us at random, so that the peer's push lands anywhere in
 * our announce -> re-check -> FUTEX_WAIT window, including inside it. */
static void jitter(uint64_t *s)
{
	uint64_t end = ve__now_ns() + ve__rand_below(s, 4000);
	while (ve__now_ns() < end)
		;
}

static void *pong(void *arg)
{
	struct pingpong *pp = arg;
	struct ve_rec rec;
	uint64_t s = pp->seed;
	for (uint32_t i = 0; i < pp->iters && !atomic_load(&pp->fail); i++) {
		int n = ve_ring_wait(&pp->c, 2000000000ull);
		if (n <= 0 || ve_ring_pop(&pp->c, &rec, 1) != 1 || bad_seq(&rec, i)) {
			pp->fail_at = i;
			atomic_store(&pp->fail, 1);
			break;
		}
		rec.u.ready.tok = (uint64_t)i + 1;
		jitter(&s);
		if (ve_ring_push(&pp->p, &rec, 1) != 1) {
			atomic_store(&pp->fail, 2);
			break;
		}
	}
	return NULL;
}

VE_TEST(ring_pingpong_wakeups)
{
	struct ve_ring r1, r2;
	void *m1 = ring_mem(4), *m2 = ring_mem(4);
	VE_CHECK(m1 && m2);
	VE_CHECK_EQ(ve_ring_init(&r1, m1, ve_ring_bytes(4)), 0);
	VE_CHECK_EQ(ve_ring_init(&r2, m2, ve_ring_bytes(4)), 0);
	struct pingpong *me = calloc(1, sizeof(*me)), *peer = calloc(1, sizeof(*peer));
	VE_CHECK(me && peer);
	uint32_t iters = tsan() ? 2000 : 10000;
	me->iters = peer->iters = iters;
	uint64_t s = seed_once();
	peer->seed = s ^ 0xabcdef;
	VE_CHECK_EQ(ve_ring_producer_init(&me->p, &r1), 0);
	VE_CHECK_EQ(ve_ring_consumer_init(&peer->c, &r1), 0);
	VE_CHECK_EQ(ve_ring_producer_init(&peer->p, &r2), 0);
	VE_CHECK_EQ(ve_ring_consumer_init(&me->c, &r2), 0);
	pthread_t t;
	VE_CHECK_EQ(pthread_create(&t, NULL, pong, peer), 0);
	uint64_t t0 = ve__now_ns();
	struct ve_rec rec;
	uint32_t i;
	for (i = 0; i < iters && !atomic_load(&peer->fail); i++) {
		mk_seq(&rec, i);
		jitter(&s);
		if (ve_ring_push(&me->p, &rec, 1) != 1)
			break;
		if (ve_ring_wait(&me->c, 2000000000ull) <= 0)
			break;
		if (ve_ring_pop(&me->c, &rec, 1) != 1 || bad_seq(&rec, i))
			break;
	}
	if (i < iters)
		atomic_store(&peer->fail, 3);
	pthread_join(t, NULL);
	double us = (double)(ve__now_ns() - t0) / 1e3 / iters;
	printf("# ping-pong with futex sleeps: %u round trips, %.1f us each; sleeps %llu + %llu, "
	       "wakes %llu + %llu\n",
	       iters, us, (unsigned long long)me->c.sleeps, (unsigned long long)peer->c.sleeps,
	       (unsigned long long)me->p.wakes, (unsigned long long)peer->p.wakes);
	VE_CHECK_MSG(i == iters, "main side stopped at round %u (lost wake-up or bad record)", i);
	VE_CHECK_MSG(!atomic_load(&peer->fail), "peer failed (%d) at round %u",
		     atomic_load(&peer->fail), peer->fail_at);
	/* The protocol must actually have slept and woken, or this tested nothing. */
	VE_CHECK(me->c.sleeps + peer->c.sleeps > 0);
	VE_CHECK(me->p.wakes + peer->p.wakes > 0);
	free(me);
	free(peer);
	free(m1);
	free(m2);
}

struct waiter {
	struct ve_ring_consumer *c;
	struct ve_ring_producer *p;
	int ret;
	uint64_t ns;
};

static void *wait_data(void *arg)
{
	struct waiter *w = arg;
	uint64_t t0 = ve__now_ns();
	w->ret = ve_ring_wait(w->c, 5000000000ull);
	w->ns = ve__now_ns() - t0;
	return NULL;
}

static void *wait_room(void *arg)
{
	struct waiter *w = arg;
	uint64_t t0 = ve__now_ns();
	w->ret = ve_ring_wait_space(w->p, 2, 5000000000ull);
	w->ns = ve__now_ns() - t0;
	return NULL;
}

VE_TEST(ring_wait_timeout_and_wake)
{
	struct ve_ring r;
	void *m = ring_mem(4);
	VE_CHECK(m && ve_ring_init(&r, m, ve_ring_bytes(4)) == 0);
	struct ve_ring_producer p;
	struct ve_ring_consumer c;
	VE_CHECK_EQ(ve_ring_producer_init(&p, &r), 0);
	VE_CHECK_EQ(ve_ring_consumer_init(&c, &r), 0);

	uint64_t t0 = ve__now_ns();
	VE_CHECK_EQ(ve_ring_wait(&c, 3000000), 0);
	uint64_t dt = ve__now_ns() - t0;
	VE_CHECK_MSG(dt >= 3000000, "woke after %llu ns", (unsigned long long)dt);
	VE_CHECK(c.sleeps >= 1);
	VE_CHECK_EQ(atomic_load(&r.sh->cons_wait), 0); /* announcement withdrawn */
	t0 = ve__now_ns();
	VE_CHECK_EQ(ve_ring_wait_spin(&c, 200000, 1000000), 0);
	VE_CHECK(ve__now_ns() - t0 >= 1000000);

	/* A consumer that announced itself but has not reached FUTEX_WAIT yet:
	 * the push must clear the word (so that the FUTEX_WAIT it is about to
	 * make returns at once) and count one wake. */
	struct ve_rec one;
	mk_seq(&one, 0);
	atomic_store(&r.sh->cons_wait, 1);
	VE_CHECK_EQ(ve_ring_push(&p, &one, 1), 1);
	VE_CHECK_EQ(atomic_load(&r.sh->cons_wait), 0);
	VE_CHECK_EQ(p.wakes, 1);
	VE_CHECK_EQ(ve_ring_push(&p, &one, 1), 1); /* nobody waits now: no wake */
	VE_CHECK_EQ(p.wakes, 1);
	/* A producer waiting for room is woken by the pop that reaches the head
	 * it asked for (prod_want), not before. */
	atomic_store(&r.sh->prod_want, c.head + 2);
	atomic_store(&r.sh->prod_wait, 1);
	VE_CHECK_EQ(ve_ring_pop(&c, &one, 1), 1);
	VE_CHECK_EQ(atomic_load(&r.sh->prod_wait), 1);
	VE_CHECK_EQ(c.wakes, 0);
	VE_CHECK_EQ(ve_ring_pop(&c, &one, 1), 1);
	VE_CHECK_EQ(atomic_load(&r.sh->prod_wait), 0);
	VE_CHECK_EQ(c.wakes, 1);
	p.wakes = c.wakes = 0;

	/* A sleeping consumer is woken by a push, long before its timeout. */
	struct waiter w = {.c = &c, .p = &p};
	pthread_t t;
	VE_CHECK_EQ(pthread_create(&t, NULL, wait_data, &w), 0);
	sleep_ns(20000000);
	struct ve_rec rec[4];
	for (uint32_t i = 0; i < 4; i++)
		mk_seq(&rec[i], i);
	VE_CHECK_EQ(ve_ring_push(&p, rec, 1), 1);
	pthread_join(t, NULL);
	VE_CHECK_EQ(w.ret, 1);
	VE_CHECK_MSG(w.ns < 2000000000ull, "woke after %llu ns", (unsigned long long)w.ns);
	VE_CHECK(p.wakes <= 1);

	/* A producer waiting for room is woken by a pop. */
	VE_CHECK_EQ(ve_ring_push(&p, rec + 1, 3), 3);
	VE_CHECK_EQ(ve_ring_room(&p, 1), 0);
	VE_CHECK_EQ(pthread_create(&t, NULL, wait_room, &w), 0);
	sleep_ns(20000000);
	struct ve_rec out[4];
	VE_CHECK_EQ(ve_ring_pop(&c, out, 1), 1);
	/* Room 1 is short of the 2 it waits for: no wake-up for it yet. */
	VE_CHECK_EQ(c.wakes, 0);
	sleep_ns(5000000);
	VE_CHECK_EQ(ve_ring_pop(&c, out + 1, 1), 1); /* room reaches the 2 it waits for */
	pthread_join(t, NULL);
	VE_CHECK_EQ(w.ret, 2);
	VE_CHECK(w.ns < 2000000000ull);
	VE_CHECK(c.wakes <= 1);
	VE_CHECK(c.wakes == 1 || p.sleeps == 0);
	free(m);
}

VE_TEST(ring_corrupt_indices)
{
	const uint32_t cap = 8;
	struct ve_ring r;
	void *m = ring_mem(cap);
	VE_CHECK(m && ve_ring_init(&r, m, ve_ring_bytes(cap)) == 0);
	struct ve_ring_producer p;
	struct ve_ring_consumer c;
	struct ve_rec in[8], out[8];
	for (uint32_t i = 0; i < 8; i++)
		mk_seq(&in[i], i);
	printf("# (the ring errors logged below are expected)\n");

	/* Tail beyond head + capacity. */
	VE_CHECK_EQ(ve_ring_producer_init(&p, &r), 0);
	VE_CHECK_EQ(ve_ring_consumer_init(&c, &r), 0);
	atomic_store(&r.sh->tail, cap + 1);
	VE_CHECK_EQ(ve_ring_pop(&c, out, 8), -EIO);
	VE_CHECK_EQ(ve_ring_pop(&c, out, 8), -EIO); /* sticky */
	VE_CHECK_EQ(ve_ring_wait(&c, 1000000), -EIO);
	VE_CHECK_EQ(ve_ring_wait_spin(&c, 1000, 1000000), -EIO);
	const struct ve_rec *view = NULL;
	VE_CHECK_EQ(ve_ring_peek(&c, &view, 8), -EIO);
	/* ...and the consumer init refuses such a ring outright. */
	VE_CHECK_EQ(ve_ring_consumer_init(&c, &r), -EIO);
	VE_CHECK_EQ(ve_ring_producer_init(&p, &r), -EIO);

	/* Tail moving backwards. */
	VE_CHECK_EQ(ve_ring_init(&r, m, ve_ring_bytes(cap)), 0);
	VE_CHECK_EQ(ve_ring_producer_init(&p, &r), 0);
	VE_CHECK_EQ(ve_ring_consumer_init(&c, &r), 0);
	VE_CHECK_EQ(ve_ring_push(&p, in, 4), 4);
	VE_CHECK_EQ(ve_ring_pop(&c, out, 8), 4);
	atomic_store(&r.sh->tail, 2);
	VE_CHECK_EQ(ve_ring_pop(&c, out, 8), -EIO);

	/* Head beyond the tail. */
	VE_CHECK_EQ(ve_ring_init(&r, m, ve_ring_bytes(cap)), 0);
	VE_CHECK_EQ(ve_ring_producer_init(&p, &r), 0);
	VE_CHECK_EQ(ve_ring_push(&p, in, 8), 8);
	atomic_store(&r.sh->head, 8 + 5);
	VE_CHECK_EQ(ve_ring_push(&p, in, 1), -EIO);
	VE_CHECK_EQ(ve_ring_push(&p, in, 1), -EIO);
	VE_CHECK_EQ(ve_ring_room(&p, 0), -EIO);
	VE_CHECK_EQ(ve_ring_wait_space(&p, 1, 1000000), -EIO);
	struct ve_rec *slot = NULL;
	VE_CHECK_EQ(ve_ring_reserve(&p, &slot, 1), -EIO);

	/* Head moving backwards. */
	VE_CHECK_EQ(ve_ring_init(&r, m, ve_ring_bytes(cap)), 0);
	VE_CHECK_EQ(ve_ring_producer_init(&p, &r), 0);
	VE_CHECK_EQ(ve_ring_consumer_init(&c, &r), 0);
	VE_CHECK_EQ(ve_ring_push(&p, in, 8), 8);
	VE_CHECK_EQ(ve_ring_pop(&c, out, 4), 4);
	VE_CHECK_EQ(ve_ring_push(&p, in, 4), 4); /* refreshes head = 4 */
	atomic_store(&r.sh->head, 1);
	VE_CHECK_EQ(ve_ring_push(&p, in, 1), -EIO);

	/* A healthy ring next to it is unaffected: errors are per handle. */
	VE_CHECK_EQ(ve_ring_init(&r, m, ve_ring_bytes(cap)), 0);
	VE_CHECK_EQ(ve_ring_producer_init(&p, &r), 0);
	VE_CHECK_EQ(ve_ring_consumer_init(&c, &r), 0);
	VE_CHECK_EQ(ve_ring_push(&p, in, 8), 8);
	VE_CHECK_EQ(ve_ring_pop(&c, out, 8), 8);
	free(m);
}

/* ------------------------------------------------------- two processes */

struct xstats {
	int32_t fail;	/* 0 or the record index where it failed + 1 */
	uint32_t count; /* records produced or consumed */
	uint64_t sleeps, wakes, timeouts;
};

/* Produces n records; slow: a short pause every 16 so the consumer sleeps. */
static void x_produce(struct ve_ring *r, uint32_t n, int slow, struct xstats *st)
{
	struct ve_ring_producer p;
	if (ve_ring_producer_init(&p, r)) {
		st->fail = 1;
		return;
	}
	struct ve_rec buf[16];
	uint32_t seq = 0;
	while (seq < n) {
		uint32_t k = VE_MIN(16u, n - seq);
		for (uint32_t i = 0; i < k; i++)
			mk_seq(&buf[i], seq + i);
		for (uint32_t done = 0; done < k;) {
			int got = ve_ring_push(&p, buf + done, k - done);
			if (got < 0) {
				st->fail = (int32_t)(seq + done + 1);
				return;
			}
			done += (uint32_t)got;
			if (got == 0 && ve_ring_wait_space(&p, 1, 2000000000ull) <= 0) {
				st->timeouts++;
				st->fail = (int32_t)(seq + done + 1);
				return;
			}
		}
		seq += k;
		if (slow)
			sleep_ns(100000);
	}
	st->count = seq;
	st->sleeps = p.sleeps;
	st->wakes = p.wakes;
}

/* Consumes n records, sleeping on the futex (no spinning) whenever empty. */
static void x_consume(struct ve_ring *r, uint32_t n, struct xstats *st)
{
	struct ve_ring_consumer c;
	if (ve_ring_consumer_init(&c, r)) {
		st->fail = 1;
		return;
	}
	struct ve_rec buf[32];
	uint32_t seq = 0;
	while (seq < n) {
		int got = ve_ring_pop(&c, buf, 32);
		if (got < 0) {
			st->fail = (int32_t)(seq + 1);
			return;
		}
		for (int i = 0; i < got; i++, seq++)
			if (bad_seq(&buf[i], seq)) {
				st->fail = (int32_t)(seq + 1);
				return;
			}
		if (got == 0 && ve_ring_wait(&c, 2000000000ull) <= 0) {
			st->timeouts++;
			st->fail = (int32_t)(seq + 1);
			return;
		}
	}
	if (ve_ring_pop(&c, buf, 32) != 0)
		st->fail = (int32_t)(seq + 1);
	st->count = seq;
	st->sleeps = c.sleeps;
	st->wakes = c.wakes;
}

/* The child receives the segment over a Unix socket (SCM_RIGHTS), as a real
 * client would, plays its role, and sends its stats back. */
static void x_run(int child_produces, uint32_t n, int slow, struct xstats *mine,
		  struct xstats *theirs)
{
	int sv[2];
	VE_CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	fflush(NULL);
	pid_t pid = fork();
	VE_CHECK(pid >= 0);
	if (pid == 0) {
		alarm(60); /* never outlive a wedged parent */
		close(sv[0]);
		struct xstats st = {0};
		char tag;
		int fd;
		struct ve_shm shm;
		if (ve_fd_recv(sv[1], &fd, &tag, 1) != 1 || fd < 0 ||
		    ve_shm_attach_fd(fd, &shm) != 0) {
			st.fail = -1;
		} else {
			ve_shm_announce(&shm, VE_SIDE_CLIENT);
			if (child_produces)
				x_produce(&shm.to_coord, n, slow, &st);
			else
				x_consume(&shm.to_client, n, &st);
			ve_shm_set_state(&shm, VE_SIDE_CLIENT, VE_IPC_S_DETACHED);
			ve_shm_fini(&shm);
		}
		ssize_t w = write(sv[1], &st, sizeof(st));
		_exit(w == (ssize_t)sizeof(st) ? 0 : 3);
	}
	close(sv[1]);
	struct ve_shm shm;
	int err = ve_shm_create(256, &shm);
	if (!err)
		err = ve_fd_send(sv[0], shm.fd, "S", 1);
	if (err) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		close(sv[0]);
		VE_CHECK_EQ(err, 0);
	}
	ve_shm_announce(&shm, VE_SIDE_COORD);
	memset(mine, 0, sizeof(*mine));
	if (child_produces)
		x_consume(&shm.to_coord, n, mine);
	else
		x_produce(&shm.to_client, n, slow, mine);
	ssize_t got = read(sv[0], theirs, sizeof(*theirs));
	int status = 0;
	if (got != (ssize_t)sizeof(*theirs))
		kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	VE_CHECK_EQ(ve_shm_peer_state(&shm, VE_SIDE_COORD), VE_IPC_S_DETACHED);
	VE_CHECK(ve_shm_peer_beat(&shm, VE_SIDE_COORD) >= 1);
	VE_CHECK_EQ(shm.hdr->client.pid, pid);
	ve_shm_fini(&shm);
	close(sv[0]);
	VE_CHECK_EQ(got, (ssize_t)sizeof(*theirs));
	VE_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

VE_TEST(ring_two_processes)
{
	uint32_t fast_n = tsan() ? 100000 : 1000000, slow_n = tsan() ? 3000 : 10000;
	struct xstats a, b;
	for (int child_produces = 1; child_produces >= 0; child_produces--) {
		for (int slow = 0; slow <= 1; slow++) {
			uint32_t n = slow ? slow_n : fast_n;
			uint64_t t0 = ve__now_ns();
			x_run(child_produces, n, slow, &a, &b);
			struct xstats *prod = child_produces ? &b : &a;
			struct xstats *cons = child_produces ? &a : &b;
			printf("# %s produces, %s: %u records in %.0f ms; consumer slept %llu, "
			       "producer woke it %llu\n",
			       child_produces ? "child" : "parent", slow ? "slow" : "fast", n,
			       (double)(ve__now_ns() - t0) / 1e6, (unsigned long long)cons->sleeps,
			       (unsigned long long)prod->wakes);
			VE_CHECK_MSG(
			    !prod->fail && !cons->fail,
			    "producer fail %d, consumer fail %d (record+1), timeouts %llu/%llu",
			    prod->fail, cons->fail, (unsigned long long)prod->timeouts,
			    (unsigned long long)cons->timeouts);
			VE_CHECK_EQ(prod->count, n);
			VE_CHECK_EQ(cons->count, n);
			if (slow) {
				/* A pause after every 16 records: the consumer must have
				 * slept, and every sleep needs a wake from the other
				 * process (there were no timeouts). */
				VE_CHECK(cons->sleeps > 0);
				VE_CHECK(prod->wakes > 0);
			}
		}
	}
}

/* ------------------------------------------------------------- records */

static void mk_valid(struct ve_rec *r, uint16_t type)
{
	ve_rec_init(r, type);
	r->seq = 7;
	switch (type) {
	case VE_REC_READY:
		r->u.ready = (struct ve_rec_ready){.tok = 11,
						   .key = 0xabcdef,
						   .ready_ns = 5,
						   .blocks = 264,
						   .threads_per_block = 1024,
						   .min_sms = 8,
						   .stream_idx = 3,
						   .priority = -5,
						   .kind = 1,
						   .op_flags = VE_OPF_MASK};
		break;
	case VE_REC_DONE:
		r->u.done = (struct ve_rec_done){
		    .tok = 11, .t_start_ns = 100, .t_end_ns = 200, .status = 0, .entry = 255};
		break;
	case VE_REC_SUBMIT_FAILED:
		r->u.submit_failed =
		    (struct ve_rec_submit_failed){.tok = 11, .status = -EBUSY, .entry = 0};
		break;
	case VE_REC_HINT:
		r->u.hint = (struct ve_rec_hint){.tok = 0,
						 .key = 1,
						 .deadline_ns = 9,
						 .expect_ready_ns = 8,
						 .blocks = 10,
						 .min_sms = 16,
						 .threads_per_block = 128,
						 .stream_idx = 2,
						 .op_flags = VE_OPF_LATENCY};
		break;
	case VE_REC_BYE:
		break;
	case VE_REC_BIND:
		r->u.bind = (struct ve_rec_bind){
		    .tok = 11, .entry = 17, .lane_stream = 2, .flags = VE_BINDF_SHARE};
		break;
	case VE_REC_GATE:
		r->u.gate = (struct ve_rec_gate){.entry = 3, .state = VE_GATE_OPEN};
		break;
	case VE_REC_RESERVE:
		r->u.reserve = (struct ve_rec_reserve){.entry = 3, .holder = 4};
		break;
	case VE_REC_SHUTDOWN:
		r->u.shutdown.reason = -ESHUTDOWN;
		break;
	}
}

static const uint16_t to_coord_types[] = {VE_REC_READY, VE_REC_DONE, VE_REC_SUBMIT_FAILED,
					  VE_REC_HINT, VE_REC_BYE};
static const uint16_t to_client_types[] = {VE_REC_BIND, VE_REC_GATE, VE_REC_RESERVE,
					   VE_REC_SHUTDOWN};

VE_TEST(proto_valid)
{
	struct ve_rec r;
	for (size_t i = 0; i < VE_ARRAY_SIZE(to_coord_types); i++) {
		mk_valid(&r, to_coord_types[i]);
		VE_CHECK_MSG(ve_proto_check(&r, VE_DIR_TO_COORD) == 0, "%s",
			     ve_proto_type_name(r.type));
		VE_CHECK_EQ(ve_proto_check(&r, VE_DIR_TO_CLIENT), -EINVAL); /* wrong ring */
		VE_CHECK(strcmp(ve_proto_type_name(r.type), "?") != 0);
	}
	for (size_t i = 0; i < VE_ARRAY_SIZE(to_client_types); i++) {
		mk_valid(&r, to_client_types[i]);
		VE_CHECK_MSG(ve_proto_check(&r, VE_DIR_TO_CLIENT) == 0, "%s",
			     ve_proto_type_name(r.type));
		VE_CHECK_EQ(ve_proto_check(&r, VE_DIR_TO_COORD), -EINVAL);
	}
	/* Boundary values that are still valid. */
	mk_valid(&r, VE_REC_DONE);
	r.u.done.entry = VE_PROTO_ENTRY_NONE;
	r.u.done.status = VE_PROTO_STATUS_MIN;
	r.u.done.t_start_ns = r.u.done.t_end_ns;
	VE_CHECK_EQ(ve_proto_check(&r, VE_DIR_TO_COORD), 0);
	mk_valid(&r, VE_REC_READY);
	r.u.ready.kind = VE_PROTO_KIND_MAX - 1;
	r.u.ready.threads_per_block = 1;
	r.u.ready.min_sms = VE_PROTO_MAX_SMS;
	r.u.ready.priority = -VE_PROTO_PRIO_MAX;
	r.u.ready.stream_idx = VE_PROTO_MAX_STREAMS - 1;
	r.u.ready.blocks = UINT64_MAX;
	VE_CHECK_EQ(ve_proto_check(&r, VE_DIR_TO_COORD), 0);
	mk_valid(&r, VE_REC_RESERVE);
	r.u.reserve.holder = -1;
	VE_CHECK_EQ(ve_proto_check(&r, VE_DIR_TO_CLIENT), 0);
	r.u.reserve.holder = VE_PROTO_HOLDER_MIN;
	VE_CHECK_EQ(ve_proto_check(&r, VE_DIR_TO_CLIENT), 0);
	mk_valid(&r, VE_REC_GATE);
	r.u.gate.state = VE_GATE_CLOSED;
	VE_CHECK_EQ(ve_proto_check(&r, VE_DIR_TO_CLIENT), 0);
	VE_CHECK_EQ(ve_proto_check(&r, 2), -EINVAL); /* no such direction */
	VE_CHECK_EQ(ve_proto_check(NULL, VE_DIR_TO_CLIENT), -EINVAL);
	VE_CHECK(strcmp(ve_proto_type_name(0x99), "?") == 0);
}

/* One field of one record type set to a value that makes it malformed. */
struct mutation {
	uint16_t type;
	const char *what;
	size_t off, size;
	int64_t value;
};

#define PO(s, f) (offsetof(struct ve_rec, u) + offsetof(struct s, f))
#define PS(s, f) sizeof(((struct s *)0)->f)
#define MUT(t, s, f, v)                                                                            \
	{                                                                                          \
		t, #s "." #f "=" #v, PO(s, f), PS(s, f), (int64_t)(v)                              \
	}

static const struct mutation mutations[] = {
    MUT(VE_REC_READY, ve_rec_ready, tok, 0),
    MUT(VE_REC_READY, ve_rec_ready, blocks, 0),
    MUT(VE_REC_READY, ve_rec_ready, threads_per_block, 0),
    MUT(VE_REC_READY, ve_rec_ready, threads_per_block, 1025),
    MUT(VE_REC_READY, ve_rec_ready, min_sms, 1025),
    MUT(VE_REC_READY, ve_rec_ready, stream_idx, 65536),
    MUT(VE_REC_READY, ve_rec_ready, stream_idx, 0xffffffff),
    MUT(VE_REC_READY, ve_rec_ready, priority, 256),
    MUT(VE_REC_READY, ve_rec_ready, priority, -256),
    MUT(VE_REC_READY, ve_rec_ready, priority, INT32_MIN),
    MUT(VE_REC_READY, ve_rec_ready, kind, 0),
    MUT(VE_REC_READY, ve_rec_ready, kind, 8),
    MUT(VE_REC_READY, ve_rec_ready, kind, 255),
    MUT(VE_REC_READY, ve_rec_ready, op_flags, 4),
    MUT(VE_REC_READY, ve_rec_ready, op_flags, 0x80),
    MUT(VE_REC_DONE, ve_rec_done, tok, 0),
    MUT(VE_REC_DONE, ve_rec_done, t_end_ns, 99),
    MUT(VE_REC_DONE, ve_rec_done, status, -4096),
    MUT(VE_REC_DONE, ve_rec_done, status, 65536),
    MUT(VE_REC_DONE, ve_rec_done, status, INT32_MIN),
    MUT(VE_REC_DONE, ve_rec_done, entry, 256),
    MUT(VE_REC_DONE, ve_rec_done, entry, 0xfffe),
    MUT(VE_REC_SUBMIT_FAILED, ve_rec_submit_failed, tok, 0),
    MUT(VE_REC_SUBMIT_FAILED, ve_rec_submit_failed, status, 0),
    MUT(VE_REC_SUBMIT_FAILED, ve_rec_submit_failed, status, -5000),
    MUT(VE_REC_SUBMIT_FAILED, ve_rec_submit_failed, entry, 256),
    MUT(VE_REC_SUBMIT_FAILED, ve_rec_submit_failed, entry, 0xffff),
    MUT(VE_REC_HINT, ve_rec_hint, min_sms, 1025),
    MUT(VE_REC_HINT, ve_rec_hint, threads_per_block, 1025),
    MUT(VE_REC_HINT, ve_rec_hint, stream_idx, 65536),
    MUT(VE_REC_HINT, ve_rec_hint, op_flags, 4),
    MUT(VE_REC_BYE, ve_rec_bye, reason, 1),
    MUT(VE_REC_BYE, ve_rec_bye, reason, -4096),
    MUT(VE_REC_BIND, ve_rec_bind, tok, 0),
    MUT(VE_REC_BIND, ve_rec_bind, entry, 256),
    MUT(VE_REC_BIND, ve_rec_bind, entry, 0xffff),
    MUT(VE_REC_BIND, ve_rec_bind, lane_stream, 256),
    MUT(VE_REC_BIND, ve_rec_bind, flags, 2),
    MUT(VE_REC_BIND, ve_rec_bind, flags, 0x80000000u),
    MUT(VE_REC_GATE, ve_rec_gate, entry, 256),
    MUT(VE_REC_GATE, ve_rec_gate, state, 2),
    MUT(VE_REC_GATE, ve_rec_gate, state, 255),
    MUT(VE_REC_RESERVE, ve_rec_reserve, entry, 256),
    MUT(VE_REC_RESERVE, ve_rec_reserve, holder, -3),
    MUT(VE_REC_RESERVE, ve_rec_reserve, holder, INT32_MIN),
    MUT(VE_REC_SHUTDOWN, ve_rec_shutdown, reason, 1),
    MUT(VE_REC_SHUTDOWN, ve_rec_shutdown, reason, -4096),
};

/* Reserved fields per type: every byte of them must be zero. */
struct reserved {
	uint16_t type;
	size_t off, size;
};
#define RSV(t, s, f)                                                                               \
	{                                                                                          \
		t, PO(s, f), PS(s, f)                                                              \
	}
static const struct reserved reserveds[] = {
    RSV(VE_REC_READY, ve_rec_ready, rsvd0),
    RSV(VE_REC_READY, ve_rec_ready, rsvd1),
    RSV(VE_REC_DONE, ve_rec_done, rsvd0),
    RSV(VE_REC_DONE, ve_rec_done, rsvd1),
    RSV(VE_REC_SUBMIT_FAILED, ve_rec_submit_failed, rsvd0),
    RSV(VE_REC_SUBMIT_FAILED, ve_rec_submit_failed, rsvd1),
    RSV(VE_REC_HINT, ve_rec_hint, rsvd0),
    RSV(VE_REC_HINT, ve_rec_hint, rsvd1),
    RSV(VE_REC_BYE, ve_rec_bye, rsvd0),
    RSV(VE_REC_BYE, ve_rec_bye, rsvd1),
    RSV(VE_REC_BIND, ve_rec_bind, rsvd0),
    RSV(VE_REC_GATE, ve_rec_gate, rsvd0),
    RSV(VE_REC_GATE, ve_rec_gate, rsvd1),
    RSV(VE_REC_GATE, ve_rec_gate, rsvd2),
    RSV(VE_REC_RESERVE, ve_rec_reserve, rsvd0),
    RSV(VE_REC_RESERVE, ve_rec_reserve, rsvd1),
    RSV(VE_REC_SHUTDOWN, ve_rec_shutdown, rsvd0),
    RSV(VE_REC_SHUTDOWN, ve_rec_shutdown, rsvd1),
};

static int dir_of(uint16_t type)
{
	return type & 0x80 ? VE_DIR_TO_CLIENT : VE_DIR_TO_COORD;
}

VE_TEST(proto_malformed)
{
	struct ve_rec r;
	/* Header: type and flags. */
	static const uint16_t bad_types[] = {0, 6, 0x7f, 0x80, 0x85, 0x181, 0xffff};
	for (size_t i = 0; i < VE_ARRAY_SIZE(bad_types); i++) {
		mk_valid(&r, VE_REC_READY);
		r.type = bad_types[i];
		VE_CHECK_EQ(ve_proto_check(&r, VE_DIR_TO_COORD), -EINVAL);
		VE_CHECK_EQ(ve_proto_check(&r, VE_DIR_TO_CLIENT), -EINVAL);
	}
	for (int t = 0; t < 9; t++) {
		uint16_t type = t < 5 ? to_coord_types[t] : to_client_types[t - 5];
		for (int bit = 0; bit < 16; bit++) {
			mk_valid(&r, type);
			r.flags = (uint16_t)(1u << bit);
			VE_CHECK_MSG(ve_proto_check(&r, dir_of(type)) == -EINVAL, "%s flags bit %d",
				     ve_proto_type_name(type), bit);
		}
		/* seq is free-running: any value is fine. */
		mk_valid(&r, type);
		r.seq = UINT32_MAX;
		VE_CHECK_EQ(ve_proto_check(&r, dir_of(type)), 0);
	}
	/* Each field out of range. */
	for (size_t i = 0; i < VE_ARRAY_SIZE(mutations); i++) {
		const struct mutation *m = &mutations[i];
		mk_valid(&r, m->type);
		VE_CHECK_EQ(ve_proto_check(&r, dir_of(m->type)), 0);
		memcpy((char *)&r + m->off, &m->value, m->size); /* little-endian: low bytes */
		VE_CHECK_MSG(ve_proto_check(&r, dir_of(m->type)) == -EINVAL, "%s accepted",
			     m->what);
	}
	/* Every byte of every reserved field, each bit. */
	int n_rsv_bytes = 0;
	for (size_t i = 0; i < VE_ARRAY_SIZE(reserveds); i++) {
		const struct reserved *rs = &reserveds[i];
		for (size_t b = 0; b < rs->size; b++) {
			for (int bit = 0; bit < 8; bit++) {
				mk_valid(&r, rs->type);
				((uint8_t *)&r)[rs->off + b] = (uint8_t)(1u << bit);
				VE_CHECK_MSG(ve_proto_check(&r, dir_of(rs->type)) == -EINVAL,
					     "%s reserved byte %zu bit %d accepted",
					     ve_proto_type_name(rs->type), rs->off + b, bit);
			}
			n_rsv_bytes++;
		}
	}
	/* The table covers every byte no field owns (56 payload bytes minus the
	 * named fields): READY 6, DONE 26, SUBMIT_FAILED 42, HINT 3, BYE 52,
	 * BIND 40, GATE 53, RESERVE 50, SHUTDOWN 52. */
	VE_CHECK_EQ(n_rsv_bytes, 6 + 26 + 42 + 3 + 52 + 40 + 53 + 50 + 52);
}

/* Random bytes and random bit flips of valid records: never a crash, and a
 * record accepted in one direction is refused in the other. */
/* The codec both sides use: what an encoder makes always passes the check
 * (fields clamped into range), and the decoder gives back what the record
 * carries, with the receiver's id, clock and class filled in. */
VE_TEST(proto_codec)
{
	struct ve_ready_op op = {.tok = 0x1234,
				 .key = 0xfeed,
				 .ready_ns = 99,
				 .blocks = 528,
				 .deadline_ns = 5000,
				 .threads = 256,
				 .min_sms = 16,
				 .client = 3,
				 .stream = 7,
				 .priority = -2,
				 .kind = 1,
				 .flags = VE_READY_COOPERATIVE};
	struct ve_rec rec[2];
	VE_CHECK_EQ(ve_proto_encode_ready(&op, rec), 2);
	VE_CHECK_EQ(rec[0].type, VE_REC_HINT);
	VE_CHECK_EQ(rec[0].u.hint.deadline_ns, 5000);
	VE_CHECK_EQ(rec[1].type, VE_REC_READY);
	for (int i = 0; i < 2; i++)
		VE_CHECK_EQ(ve_proto_check(&rec[i], VE_DIR_TO_COORD), 0);
	struct ve_ready_op back;
	ve_proto_decode_ready(&rec[1].u.ready, 9, VE_READY_LATENCY, 777, &back);
	VE_CHECK(back.tok == op.tok && back.key == op.key && back.blocks == op.blocks);
	VE_CHECK(back.threads == op.threads && back.min_sms == op.min_sms);
	VE_CHECK(back.stream == op.stream && back.priority == op.priority && back.kind == op.kind);
	VE_CHECK_EQ(back.client, 9);
	VE_CHECK_EQ(back.ready_ns, 777);
	VE_CHECK_EQ(back.flags, VE_READY_COOPERATIVE | VE_READY_LATENCY);
	VE_CHECK_EQ(back.deadline_ns, 0);

	/* Out-of-range fields are clamped, never sent as a malformed record. */
	struct ve_ready_op wild = {.tok = 1, .threads = 5000, .min_sms = 1u << 20,
				   .stream = 1u << 30, .priority = -1000, .kind = 200};
	VE_CHECK_EQ(ve_proto_encode_ready(&wild, rec), 1);
	VE_CHECK_EQ(ve_proto_check(&rec[0], VE_DIR_TO_COORD), 0);
	VE_CHECK_EQ(rec[0].u.ready.blocks, 1);

	ve_proto_encode_done(0x1234, 17, 40, 0, 1000, &rec[0]);
	VE_CHECK_EQ(ve_proto_check(&rec[0], VE_DIR_TO_COORD), 0);
	VE_CHECK_EQ(ve_proto_decode_done(&rec[0].u.done), 40);
	ve_proto_encode_done(0x1234, 17, 5000, 0, 1000, &rec[0]); /* longer than the clock */
	VE_CHECK_EQ(ve_proto_check(&rec[0], VE_DIR_TO_COORD), 0);
	ve_proto_encode_submit_failed(0x1234, 17, 0, &rec[0]);
	VE_CHECK_EQ(rec[0].u.submit_failed.status, -EIO);
	VE_CHECK_EQ(ve_proto_check(&rec[0], VE_DIR_TO_COORD), 0);
	ve_proto_encode_submit_failed(0x1234, 17, 1 << 20, &rec[0]);
	VE_CHECK_EQ(ve_proto_check(&rec[0], VE_DIR_TO_COORD), 0);

	struct ve_hint h = {.client = 1, .min_sms = 2000, .key = 5, .blocks = 64, .threads = 4096,
			    .flags = VE_READY_LATENCY, .expect_ready_ns = 10, .deadline_ns = 20};
	ve_proto_encode_hint(&h, &rec[0]);
	VE_CHECK_EQ(ve_proto_check(&rec[0], VE_DIR_TO_COORD), 0);
	struct ve_hint hb;
	ve_proto_decode_hint(&rec[0].u.hint, 4, &hb);
	VE_CHECK(hb.client == 4 && hb.key == 5 && hb.blocks == 64 && hb.threads == 0);
	VE_CHECK(hb.min_sms == VE_PROTO_MAX_SMS && hb.flags == VE_READY_LATENCY);
	VE_CHECK(hb.expect_ready_ns == 10 && hb.deadline_ns == 20);

	ve_proto_encode_piped(&op, 21, &rec[0]);
	VE_CHECK_EQ(ve_proto_check(&rec[0], VE_DIR_TO_COORD), 0);
	ve_proto_decode_piped(&rec[0].u.piped, 2, 55, &back);
	VE_CHECK(back.tok == op.tok && back.key == op.key && back.stream == op.stream);
	VE_CHECK(back.client == 2 && back.ready_ns == 55 && back.kind == op.kind);

	ve_proto_encode_bind(0x1234, 300, 21, true, 8, &rec[0]);
	VE_CHECK_EQ(ve_proto_check(&rec[0], VE_DIR_TO_CLIENT), 0);
	VE_CHECK_EQ(rec[0].seq, 8);
	uint16_t entry;
	uint32_t flags;
	ve_proto_decode_bind(&rec[0].u.bind, &entry, &flags);
	VE_CHECK_EQ(entry, 21);
	VE_CHECK_EQ(flags, VE_BIND_SHARE);
}

VE_TEST(proto_fuzz)
{
	uint64_t s = seed_once();
	struct ve_rec r;
	long accepted = 0, iters = tsan() ? 200000 : 2000000;
	for (long i = 0; i < iters; i++) {
		if (i & 1) {
			for (int w = 0; w < 8; w++) {
				uint64_t x = ve__rand64(&s);
				memcpy((char *)&r + 8 * w, &x, 8);
			}
			/* Bias towards known types so the payload checks run. */
			uint32_t pick = ve__rand_below(&s, 12);
			if (pick < 9)
				r.type =
				    pick < 5 ? to_coord_types[pick] : to_client_types[pick - 5];
		} else {
			uint32_t pick = ve__rand_below(&s, 9);
			mk_valid(&r, pick < 5 ? to_coord_types[pick] : to_client_types[pick - 5]);
			for (uint32_t k = 1 + ve__rand_below(&s, 3); k; k--)
				((uint8_t *)&r)[ve__rand_below(&s, 64)] ^=
				    (uint8_t)(1u << ve__rand_below(&s, 8));
		}
		int a = ve_proto_check(&r, VE_DIR_TO_COORD);
		int b = ve_proto_check(&r, VE_DIR_TO_CLIENT);
		VE_CHECK((a == 0 || a == -EINVAL) && (b == 0 || b == -EINVAL));
		VE_CHECK(a != 0 || b != 0);
		accepted += (a == 0) + (b == 0);
	}
	printf("# proto fuzz: %ld records, %ld accepted\n", iters, accepted);
	VE_CHECK(accepted > 0);
}

/* ------------------------------------------------------------ segments */

VE_TEST(shm_create_attach)
{
	struct ve_shm a, b;
	VE_CHECK_EQ(ve_shm_create(0, &a), -EINVAL);
	VE_CHECK_EQ(ve_shm_create((size_t)VE_RING_MAX_RECORDS + 1, &a), -EINVAL);
	struct ve_shm_opts bad = {.ring_records = 8, .flags = 0x80, .gid = -1};
	VE_CHECK_EQ(ve_shm_create_ex(&bad, &a), -EINVAL);
	VE_CHECK_EQ(ve_shm_size(100), 0);
	VE_CHECK_EQ(ve_shm_size(128), VE_IPC_HDR_SIZE + 2 * 12288);

	VE_CHECK_EQ(ve_shm_create(100, &a), 0);
	VE_CHECK_EQ(a.ring_records, 128);
	VE_CHECK_EQ(a.size, ve_shm_size(128));
	VE_CHECK_EQ(a.to_coord.cap, 128);
	VE_CHECK_EQ(a.to_client.cap, 128);
	VE_CHECK_EQ(a.hdr->client_id, -1);
	VE_CHECK_EQ(atomic_load(&a.hdr->magic), VE_IPC_MAGIC);
	struct stat st;
	VE_CHECK_EQ(fstat(a.fd, &st), 0);
	VE_CHECK_EQ(st.st_mode & 0777, 0600);
	VE_CHECK_EQ((size_t)st.st_size, a.size);
	int seals = fcntl(a.fd, F_GET_SEALS);
	VE_CHECK(seals >= 0);
	VE_CHECK_EQ(seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL),
		    F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
	VE_CHECK(ftruncate(a.fd, 4096) < 0 && errno == EPERM); /* cannot be shrunk */

	/* A second, independent mapping of the same segment, as another
	 * process would have: records cross from one mapping to the other. */
	int fd2 = dup(a.fd);
	VE_CHECK(fd2 >= 0);
	VE_CHECK_EQ(ve_shm_attach_fd(fd2, &b), 0);
	VE_CHECK(b.base != a.base);
	VE_CHECK_EQ(b.ring_records, 128);
	struct ve_ring_producer p;
	struct ve_ring_consumer c;
	VE_CHECK_EQ(ve_ring_producer_init(&p, &a.to_client), 0);
	VE_CHECK_EQ(ve_ring_consumer_init(&c, &b.to_client), 0);
	struct ve_rec in[4], out[4];
	for (uint32_t i = 0; i < 4; i++)
		mk_seq(&in[i], i);
	VE_CHECK_EQ(ve_ring_push(&p, in, 4), 4);
	VE_CHECK_EQ(ve_ring_pop(&c, out, 4), 4);
	for (uint32_t i = 0; i < 4; i++)
		VE_CHECK(!bad_seq(&out[i], i));
	/* The other ring is independent. */
	VE_CHECK_EQ(ve_ring_consumer_init(&c, &b.to_coord), 0);
	VE_CHECK_EQ(ve_ring_pop(&c, out, 4), 0);

	/* Liveness words. */
	ve_shm_announce(&a, VE_SIDE_COORD);
	ve_shm_announce(&b, VE_SIDE_CLIENT);
	ve_shm_beat(&b, VE_SIDE_CLIENT);
	ve_shm_beat(&b, VE_SIDE_CLIENT);
	VE_CHECK_EQ(ve_shm_peer_beat(&a, VE_SIDE_COORD), 3);
	VE_CHECK_EQ(ve_shm_peer_beat(&b, VE_SIDE_CLIENT), 1);
	VE_CHECK_EQ(ve_shm_peer_state(&a, VE_SIDE_COORD), VE_IPC_S_ATTACHED);
	ve_shm_set_state(&a, VE_SIDE_COORD, VE_IPC_S_DETACHED);
	VE_CHECK_EQ(ve_shm_peer_state(&b, VE_SIDE_CLIENT), VE_IPC_S_DETACHED);
	VE_CHECK_EQ(a.hdr->coord.pid, getpid());
	ve_shm_fini(&b);
	ve_shm_fini(&a);
	VE_CHECK_EQ(a.fd, -1);
	VE_CHECK(a.base == NULL);
	ve_shm_fini(&a); /* idempotent */

	/* Options: client id and group. */
	struct ve_shm_opts o = {.ring_records = 2, .client_id = 42, .gid = (long)getgid()};
	VE_CHECK_EQ(ve_shm_create_ex(&o, &a), 0);
	VE_CHECK_EQ(a.hdr->client_id, 42);
	VE_CHECK_EQ(fstat(a.fd, &st), 0);
	VE_CHECK_EQ(st.st_mode & 0777, 0660);
	VE_CHECK_EQ(st.st_gid, getgid());
	ve_shm_fini(&a);
}

/* Copies a good header into a fresh memfd (sealed like the real one unless
 * told otherwise), lets edit() spoil it, and returns the attach result. */
static int attach_doctored(void (*edit)(struct ve_ipc_hdr *h, void *arg), void *arg, int seal,
			   off_t trunc)
{
	struct ve_shm good;
	if (ve_shm_create(8, &good))
		return -9999;
	size_t size = good.size;
	char *copy = malloc(size);
	if (!copy || pread(good.fd, copy, size, 0) != (ssize_t)size) {
		free(copy);
		ve_shm_fini(&good);
		return -9998;
	}
	ve_shm_fini(&good);
	if (edit)
		edit((struct ve_ipc_hdr *)copy, arg);
	int fd = memfd_create("ve-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	int ok = fd >= 0 && pwrite(fd, copy, size, 0) == (ssize_t)size &&
		 (!trunc || ftruncate(fd, trunc) == 0) &&
		 (!seal || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) == 0);
	free(copy);
	if (!ok) {
		if (fd >= 0)
			close(fd);
		return -9997;
	}
	struct ve_shm s;
	int err = ve_shm_attach_fd(fd, &s);
	if (err == 0)
		ve_shm_fini(&s); /* closes fd */
	else
		close(fd);
	return err;
}

static void ed_magic(struct ve_ipc_hdr *h, void *arg)
{
	atomic_store(&h->magic, *(uint32_t *)arg);
}
static void ed_version(struct ve_ipc_hdr *h, void *arg)
{
	h->version = (uint16_t) * (uint32_t *)arg;
}
static void ed_records(struct ve_ipc_hdr *h, void *arg)
{
	h->ring_records = *(uint32_t *)arg;
}
static void ed_seg_size(struct ve_ipc_hdr *h, void *arg)
{
	h->seg_size += *(uint32_t *)arg;
}
static void ed_off(struct ve_ipc_hdr *h, void *arg)
{
	h->to_client_off += *(uint32_t *)arg;
}
static void ed_rec_size(struct ve_ipc_hdr *h, void *arg)
{
	h->rec_size = (uint16_t) * (uint32_t *)arg;
}
static void ed_flags(struct ve_ipc_hdr *h, void *arg)
{
	h->flags = *(uint32_t *)arg;
}
static void ed_ring_cap(struct ve_ipc_hdr *h, void *arg)
{
	struct ve_ring_shared *rs = (void *)((char *)h + h->to_client_off);
	rs->capacity = *(uint32_t *)arg;
}

VE_TEST(shm_attach_refused)
{
	printf("# (the ipc errors logged below are expected)\n");
	uint32_t v;
	VE_CHECK_EQ(attach_doctored(NULL, NULL, 1, 0), 0); /* the copy itself is fine */
	v = 0x12345678;
	VE_CHECK_EQ(attach_doctored(ed_magic, &v, 1, 0), -EINVAL);
	v = 0;
	VE_CHECK_EQ(attach_doctored(ed_magic, &v, 1, 0), -EAGAIN);
	v = VE_IPC_VERSION + 1;
	VE_CHECK_EQ(attach_doctored(ed_version, &v, 1, 0), -EPROTO);
	v = 0;
	VE_CHECK_EQ(attach_doctored(ed_version, &v, 1, 0), -EPROTO);
	v = 12;
	VE_CHECK_EQ(attach_doctored(ed_records, &v, 1, 0), -EINVAL);
	v = 16; /* a power of two, but not what the file's layout holds */
	VE_CHECK_EQ(attach_doctored(ed_records, &v, 1, 0), -EINVAL);
	v = 4096;
	VE_CHECK_EQ(attach_doctored(ed_seg_size, &v, 1, 0), -EINVAL);
	v = 64;
	VE_CHECK_EQ(attach_doctored(ed_off, &v, 1, 0), -EINVAL);
	v = 32;
	VE_CHECK_EQ(attach_doctored(ed_rec_size, &v, 1, 0), -EINVAL);
	v = 0x100;
	VE_CHECK_EQ(attach_doctored(ed_flags, &v, 1, 0), -EINVAL);
	v = VE_IPC_F_EMBEDDED;
	VE_CHECK_EQ(attach_doctored(ed_flags, &v, 1, 0), 0);
	v = 16; /* the ring header disagrees with the segment header */
	VE_CHECK_EQ(attach_doctored(ed_ring_cap, &v, 1, 0), -EINVAL);
	v = 4;
	VE_CHECK_EQ(attach_doctored(ed_ring_cap, &v, 1, 0), -EINVAL);
	/* Not sealed against shrinking: a peer could make us fault. */
	VE_CHECK_EQ(attach_doctored(NULL, NULL, 0, 0), -EPERM);
	/* Shorter than its header says. */
	VE_CHECK_EQ(attach_doctored(NULL, NULL, 1, 8192), -EINVAL);
	VE_CHECK_EQ(attach_doctored(NULL, NULL, 1, 100), -EINVAL);
	/* Not a file at all. */
	int pfd[2];
	VE_CHECK_EQ(pipe(pfd), 0);
	struct ve_shm s;
	VE_CHECK_EQ(ve_shm_attach_fd(pfd[0], &s), -EINVAL);
	close(pfd[0]);
	close(pfd[1]);
	VE_CHECK_EQ(ve_shm_attach_fd(-1, &s), -EINVAL);
}

VE_TEST(shm_named)
{
	char name[VE_SHM_NAME_MAX];
	snprintf(name, sizeof(name), "/ve-test-ring-%d", (int)getpid());
	struct ve_shm_opts o = {.ring_records = 16, .client_id = 3, .name = name, .gid = -1};
	struct ve_shm a, b;
	int err = ve_shm_create_ex(&o, &a);
	if (err == -ENOSYS || err == -EACCES || err == -ENOENT)
		VE_SKIP("shm_open unavailable here");
	VE_CHECK_EQ(err, 0);
	VE_CHECK(strcmp(a.name, name) == 0);
	struct stat st;
	VE_CHECK_EQ(fstat(a.fd, &st), 0);
	VE_CHECK_EQ(st.st_mode & 0777, 0600);
	VE_CHECK_EQ(ve_shm_create_ex(&o, &b), -EEXIST);
	/* Unsealable, so refused where a memfd is expected (a hostile client
	 * could truncate it under the coordinator). */
	int nfd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
	VE_CHECK(nfd >= 0);
	VE_CHECK_EQ(ve_shm_attach_fd(nfd, &b), -EPERM);
	close(nfd);
	VE_CHECK_EQ(ve_shm_attach_name(name, &b), 0);
	VE_CHECK_EQ(b.hdr->client_id, 3);
	VE_CHECK_EQ(b.ring_records, 16);
	struct ve_ring_producer p;
	struct ve_ring_consumer c;
	struct ve_rec rec;
	mk_seq(&rec, 9);
	VE_CHECK_EQ(ve_ring_producer_init(&p, &b.to_coord), 0);
	VE_CHECK_EQ(ve_ring_consumer_init(&c, &a.to_coord), 0);
	VE_CHECK_EQ(ve_ring_push(&p, &rec, 1), 1);
	memset(&rec, 0, sizeof(rec));
	VE_CHECK_EQ(ve_ring_pop(&c, &rec, 1), 1);
	VE_CHECK(!bad_seq(&rec, 9));
	ve_shm_fini(&b);
	VE_CHECK_EQ(ve_shm_unlink(name), 0);
	VE_CHECK_EQ(ve_shm_unlink(name), -ENOENT);
	VE_CHECK_EQ(ve_shm_attach_name(name, &b), -ENOENT);
	ve_shm_fini(&a); /* the mapping outlives the name */
	VE_CHECK_EQ(ve_shm_attach_name("no-slash", &b), -EINVAL);
	VE_CHECK_EQ(ve_shm_attach_name("/a/b", &b), -EINVAL);
	o.name = "bad";
	VE_CHECK_EQ(ve_shm_create_ex(&o, &a), -EINVAL);
}

/* ------------------------------------------------------------ fd passing */

static int count_fds(void)
{
	int n = 0;
	for (int fd = 0; fd < 1024; fd++)
		n += fcntl(fd, F_GETFD) >= 0;
	return n;
}

VE_TEST(fdpass)
{
	int sv[2];
	VE_CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	int before = count_fds();
	int mfd = memfd_create("ve-fdpass", MFD_CLOEXEC);
	VE_CHECK(mfd >= 0);
	VE_CHECK_EQ(ve_fd_send(sv[0], mfd, "hello", 5), 0);
	char buf[16] = {0};
	int fd = -2;
	VE_CHECK_EQ(ve_fd_recv(sv[1], &fd, buf, sizeof(buf)), 5);
	VE_CHECK(memcmp(buf, "hello", 5) == 0);
	VE_CHECK(fd >= 0 && fd != mfd);
	struct stat s1, s2;
	VE_CHECK(fstat(fd, &s1) == 0 && fstat(mfd, &s2) == 0);
	VE_CHECK(s1.st_ino == s2.st_ino && s1.st_dev == s2.st_dev);
	VE_CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	close(fd);

	/* A message without a descriptor. */
	VE_CHECK_EQ(write(sv[0], "x", 1), 1);
	VE_CHECK_EQ(ve_fd_recv(sv[1], &fd, buf, sizeof(buf)), 1);
	VE_CHECK_EQ(fd, -1);

	/* Two descriptors where one is expected: both closed, refused. */
	int two[2] = {mfd, mfd};
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(two))];
	} ctl;
	memset(&ctl, 0, sizeof(ctl));
	struct iovec iov = {.iov_base = "y", .iov_len = 1};
	struct msghdr m = {.msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = ctl.b,
			   .msg_controllen = sizeof(ctl.b)};
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(two));
	memcpy(CMSG_DATA(c), two, sizeof(two));
	VE_CHECK_EQ(sendmsg(sv[0], &m, 0), 1);
	VE_CHECK_EQ(ve_fd_recv(sv[1], &fd, buf, sizeof(buf)), -EBADMSG);
	VE_CHECK_EQ(fd, -1);
	close(mfd);
	VE_CHECK_EQ(count_fds(), before); /* nothing leaked */

	VE_CHECK_EQ(ve_fd_send(sv[0], -1, "z", 1), -EINVAL);
	VE_CHECK_EQ(ve_fd_send(sv[0], sv[0], "z", 0), -EINVAL);
	/* Peer gone: 0 from recv, -EPIPE (not SIGPIPE) from send. */
	close(sv[0]);
	VE_CHECK_EQ(ve_fd_recv(sv[1], &fd, buf, sizeof(buf)), 0);
	VE_CHECK_EQ(ve_fd_send(sv[1], sv[1], "z", 1), -EPIPE);
	close(sv[1]);
}
