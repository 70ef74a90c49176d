/* SPDX-License-Identifier: MIT */
/* SPSC record ring: setup, validation and the sleeping slow paths (ring.h). */
#include "ipc/ring.h"

#include <errno.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "util/util.h"

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	atomic_signal_fence(memory_order_seq_cst);
#endif
}

int ve_ring_init(struct ve_ring *r, void *mem, size_t bytes)
{
	if (!r || !mem || ((uintptr_t)mem & (VE_CACHELINE - 1)) ||
	    bytes < ve_ring_bytes(VE_RING_MIN_RECORDS))
		return -EINVAL;
	size_t fit = (bytes - VE_RING_HDR_SIZE) / VE_REC_SIZE;
	uint32_t cap = VE_RING_MAX_RECORDS;
	while (cap > fit)
		cap >>= 1;
	struct ve_ring_shared *sh = mem;
	memset(sh, 0, VE_RING_HDR_SIZE);
	sh->capacity = cap;
	sh->rec_size = VE_REC_SIZE;
	sh->hdr_size = VE_RING_HDR_SIZE;
	atomic_init(&sh->tail, 0);
	atomic_init(&sh->head, 0);
	atomic_init(&sh->cons_wait, 0);
	atomic_init(&sh->prod_wait, 0);
	atomic_init(&sh->prod_want, 0);
	/* No ordering needed here: the ring reaches the other side only through
	 * an edge that orders it (thread creation, or the segment magic's
	 * release store in shm.c). */
	sh->magic = VE_RING_MAGIC;
	*r = (struct ve_ring){.sh = sh, .recs = sh->recs, .cap = cap, .mask = cap - 1};
	return 0;
}

int ve_ring_attach(struct ve_ring *r, void *mem, size_t bytes)
{
	if (!r || !mem || ((uintptr_t)mem & (VE_CACHELINE - 1)) || bytes < VE_RING_HDR_SIZE)
		return -EINVAL;
	struct ve_ring_shared *sh = mem;
	/* Read each field once into a local: the peer may change shared memory
	 * while we look, and only the values checked here are used later. */
	uint32_t magic = *(volatile uint32_t *)&sh->magic;
	uint32_t cap = *(volatile uint32_t *)&sh->capacity;
	uint32_t rec = *(volatile uint32_t *)&sh->rec_size;
	uint32_t hdr = *(volatile uint32_t *)&sh->hdr_size;
	if (magic != VE_RING_MAGIC || rec != VE_REC_SIZE || hdr != VE_RING_HDR_SIZE)
		return -EINVAL;
	if (cap < VE_RING_MIN_RECORDS || cap > VE_RING_MAX_RECORDS || (cap & (cap - 1)) ||
	    ve_ring_bytes(cap) > bytes)
		return -EINVAL;
	*r = (struct ve_ring){.sh = sh, .recs = sh->recs, .cap = cap, .mask = cap - 1};
	return 0;
}

void ve_ring_fini(struct ve_ring *r)
{
	if (r)
		*r = (struct ve_ring){0};
}

int ve_ring_producer_init(struct ve_ring_producer *p, const struct ve_ring *r)
{
	if (!p || !r || !r->sh)
		return -EINVAL;
	*p =
	    (struct ve_ring_producer){.sh = r->sh, .recs = r->recs, .cap = r->cap, .mask = r->mask};
	/* Our own index is read from shared memory this once (a producer may
	 * take over a ring with records in it); from now on it is private. */
	p->tail = atomic_load_explicit(&r->sh->tail, memory_order_relaxed);
	/* A2 (pairs with R2 in ve__ring_publish_head). */
	uint32_t h = atomic_load_explicit(&r->sh->head, memory_order_acquire);
	if ((uint32_t)(p->tail - h) > p->cap)
		return ve__ring_corrupt(&p->err, "indices at attach", h, p->tail);
	p->head_cache = h;
	return 0;
}

int ve_ring_consumer_init(struct ve_ring_consumer *c, const struct ve_ring *r)
{
	if (!c || !r || !r->sh)
		return -EINVAL;
	*c =
	    (struct ve_ring_consumer){.sh = r->sh, .recs = r->recs, .cap = r->cap, .mask = r->mask};
	c->head = atomic_load_explicit(&r->sh->head, memory_order_relaxed);
	/* A1 (pairs with R1 in ve__ring_publish_tail). */
	uint32_t t = atomic_load_explicit(&r->sh->tail, memory_order_acquire);
	if ((uint32_t)(t - c->head) > c->cap)
		return ve__ring_corrupt(&c->err, "indices at attach", t, c->head);
	c->tail_cache = t;
	return 0;
}

int ve__ring_corrupt(int *err, const char *what, uint32_t seen, uint32_t own)
{
	if (!*err)
		VE_ERR("ipc ring: %s %u is inconsistent with our index %u; ring disabled", what,
		       seen, own);
	*err = -EIO;
	return -EIO;
}

static long futex(_Atomic uint32_t *word, int op, uint32_t val, const struct timespec *ts)
{
	/* No FUTEX_PRIVATE_FLAG: the word is in a mapping shared between processes. */
	return syscall(SYS_futex, (uint32_t *)word, op, val, ts, NULL, 0);
}

void ve__ring_wake(_Atomic uint32_t *word, uint64_t *count)
{
	/* Clear before waking so that a waiter which announced but has not yet
	 * entered FUTEX_WAIT returns at once (EAGAIN) instead of missing this
	 * wake. Only the one who flips 1 -> 0 issues the syscall. */
	if (atomic_exchange_explicit(word, 0, memory_order_acq_rel) == 1) {
		futex(word, FUTEX_WAKE, 1, NULL);
		(*count)++;
	}
}

void ve__ring_wake_producer(struct ve_ring_consumer *c)
{
	/* prod_want was stored before the S4 our L2 saw, so it is the value of
	 * that wait (or of a newer one: see ring.h for why either is safe). A
	 * hostile value only changes whether we make a syscall. */
	uint32_t want = atomic_load_explicit(&c->sh->prod_want, memory_order_relaxed);
	if ((int32_t)(c->head - want) < 0)
		return; /* not enough room for it yet: a later pop wakes it */
	ve__ring_wake(&c->sh->prod_wait, &c->wakes);
}

/* Sleeps on word while it is 1, at most until deadline (VE_RING_FOREVER: no
 * limit). Errors (EAGAIN, EINTR, ETIMEDOUT) all mean "look again". */
static void sleep_on(_Atomic uint32_t *word, uint64_t deadline)
{
	struct timespec ts, *tsp = NULL;
	if (deadline != VE_RING_FOREVER) {
		uint64_t now = ve__now_ns();
		uint64_t left = deadline > now ? deadline - now : 0;
		if (left == 0)
			return;
		ts.tv_sec = (time_t)(left / 1000000000u);
		ts.tv_nsec = (long)(left % 1000000000u);
		tsp = &ts;
	}
	futex(word, FUTEX_WAIT, 1, tsp);
}

static uint64_t deadline_of(uint64_t timeout_ns)
{
	if (timeout_ns == VE_RING_FOREVER)
		return VE_RING_FOREVER;
	uint64_t now = ve__now_ns();
	return timeout_ns > VE_RING_FOREVER - 1 - now ? VE_RING_FOREVER - 1 : now + timeout_ns;
}

static int expired(uint64_t deadline)
{
	return deadline != VE_RING_FOREVER && ve__now_ns() >= deadline;
}

int ve_ring_wait(struct ve_ring_consumer *c, uint64_t timeout_ns)
{
	int n = ve_ring_avail(c);
	if (n != 0 || timeout_ns == 0)
		return n;
	uint64_t deadline = deadline_of(timeout_ns);
	for (;;) {
		/* S3 (pairs with S1/L1 in ve__ring_publish_tail): announce, then
		 * re-check (L3, a seq_cst load that is also A1). See ring.h. */
		atomic_store_explicit(&c->sh->cons_wait, 1, memory_order_seq_cst);
		n = ve__ring_cons_refresh(c, memory_order_seq_cst);
		if (n == 0) {
			c->sleeps++;
			sleep_on(&c->sh->cons_wait, deadline);
		}
		/* Withdraw the announcement (the producer may have cleared it already;
		 * a wake it still sends costs it a syscall, nothing else). */
		atomic_store_explicit(&c->sh->cons_wait, 0, memory_order_relaxed);
		if (n == 0)
			n = ve__ring_cons_refresh(c, memory_order_acquire);
		if (n != 0 || expired(deadline))
			return n;
	}
}

int ve_ring_wait_space(struct ve_ring_producer *p, uint32_t want, uint64_t timeout_ns)
{
	if (want == 0 || want > p->cap)
		return -EINVAL;
	int room = ve_ring_room(p, want);
	if (room < 0 || (uint32_t)room >= want)
		return room;
	if (timeout_ns == 0)
		return 0;
	uint64_t deadline = deadline_of(timeout_ns);
	for (;;) {
		/* The head at which room reaches want, stored before S4 so that a
		 * consumer whose L2 sees our flag sees it too. */
		atomic_store_explicit(&p->sh->prod_want, p->tail - p->cap + want,
				      memory_order_relaxed);
		/* S4 (pairs with S2/L2 in ve__ring_publish_head), then L4 (also A2). */
		atomic_store_explicit(&p->sh->prod_wait, 1, memory_order_seq_cst);
		room = ve__ring_prod_refresh(p, memory_order_seq_cst);
		if (room >= 0 && (uint32_t)room < want) {
			p->sleeps++;
			sleep_on(&p->sh->prod_wait, deadline);
		}
		atomic_store_explicit(&p->sh->prod_wait, 0, memory_order_relaxed);
		if (room >= 0 && (uint32_t)room < want)
			room = ve__ring_prod_refresh(p, memory_order_acquire);
		if (room < 0 || (uint32_t)room >= want)
			return room;
		if (expired(deadline))
			return 0;
	}
}

int ve_ring_wait_spin(struct ve_ring_consumer *c, uint64_t spin_ns, uint64_t timeout_ns)
{
	int n = ve_ring_avail(c);
	if (n != 0 || timeout_ns == 0)
		return n;
	if (spin_ns > timeout_ns)
		spin_ns = timeout_ns;
	uint64_t start = ve__now_ns();
	for (;;) {
		/* Check the clock every 64 polls: a vDSO call costs about as much as
		 * a poll, and spin_ns is a soft bound. */
		for (int i = 0; i < 64; i++) {
			cpu_relax();
			n = ve__ring_cons_refresh(c, memory_order_acquire);
			if (n != 0)
				return n;
		}
		uint64_t spent = ve__now_ns() - start;
		if (spent >= spin_ns) {
			if (spent >= timeout_ns)
				return 0;
			return ve_ring_wait(c, timeout_ns == VE_RING_FOREVER ? timeout_ns
									     : timeout_ns - spent);
		}
	}
}
