/* SPDX-License-Identifier: MIT */
/*
 * Single-producer/single-consumer ring of 64-byte records (struct ve_rec)
 * over caller-owned memory, usable between two processes that map the same
 * memory (docs/ipc.md). Modelled on liburing's SQ/CQ
 * rings and DPDK's rte_ring.
 *
 * Memory: [struct ve_ring_shared: 4 x 128 bytes][capacity x struct ve_rec].
 * The shared part holds only what both sides must see: the geometry (set at
 * init, never trusted afterwards), the producer's tail, the consumer's head,
 * each on its own 128-byte line pair (the adjacent-line prefetcher pulls
 * lines in pairs, so 64 bytes apart would still bounce), and the two futex
 * words. Each side keeps in its private handle (struct ve_ring_producer /
 * struct ve_ring_consumer) its own index, which it never reads back from
 * shared memory, and a cached copy of the peer's, refreshed only when the
 * cache says the ring is full (producer) or empty (consumer). So the fast
 * path touches one shared line, its own, plus the record slots.
 *
 * Indices are free-running uint32_t, masked on access; used = tail - head in
 * unsigned arithmetic, and a well-formed ring always has used <= capacity.
 * An index read from the peer is checked against the private one: a head
 * that moved backwards or past the tail, or a tail more than capacity ahead
 * of the head, means the peer is broken or hostile. The handle then fails
 * with -EIO from then on (sticky, logged once) and never addresses memory
 * with the bad value: every slot address comes from private indices and the
 * private mask.
 *
 * Back-pressure: push copies as many records as fit and returns that count
 * (0 when full). Nothing is dropped or overwritten; the producer retries, or
 * sleeps in ve_ring_wait_space until the consumer frees room.
 *
 * Wake-ups cost a syscall only when the peer sleeps. Lost-wake-up protocol
 * (consumer waiting for data; the producer waiting for room is the mirror):
 *   consumer                          producer
 *   S3 store cons_wait = 1 (seq_cst)   S1 store tail (seq_cst, also release R1)
 *   L3 load tail (seq_cst)             L1 load cons_wait (seq_cst)
 *   if nothing: FUTEX_WAIT(cons_wait,1)  if 1: exchange(cons_wait, 0) == 1 ->
 *                                             FUTEX_WAKE(cons_wait)
 * All four accesses are seq_cst, so in their single total order one store
 * comes first: either the consumer's re-check L3 sees the new tail, or the
 * producer's L1 sees the flag (the store-load case that release/acquire alone
 * does not order: Dekker). The producer clears the word before waking, so a
 * consumer that has announced but not yet entered FUTEX_WAIT finds the word
 * != 1 and the kernel returns at once (EAGAIN) instead of sleeping through a
 * wake that already happened. (seq_cst accesses rather than
 * atomic_thread_fence: ThreadSanitizer reasons about atomic accesses, not fences.)
 * A producer waiting for room also stores prod_want, the head that gives it
 * the room it asked for, before its flag; the consumer skips the wake while
 * its head is short of that. Nothing is lost: a pop that falls short leaves
 * the producer short of room too, and a later pop, at the latest the one
 * that empties the ring (head == tail >= prod_want, as want <= capacity),
 * sees flag and threshold and wakes it.
 * The futex words live in the shared mapping and are used without
 * FUTEX_PRIVATE_FLAG, so the kernel keys them by the backing page and a
 * wake in one process reaches a waiter in another (futex(2)).
 *
 * Thread safety: one producer thread and one consumer thread at a time per
 * ring; the handles are not shared between threads. When both handles are in
 * one process, keep them on different cache lines.
 */
#ifndef VE_IPC_RING_H
#define VE_IPC_RING_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ipc/proto.h"

#define VE_RING_MAGIC	    0x474e4952u /* 'R' 'I' 'N' 'G' */
#define VE_RING_HDR_SIZE    512u
#define VE_RING_MIN_RECORDS 2u
#define VE_RING_MAX_RECORDS (1u << 24)
#define VE_RING_FOREVER	    UINT64_MAX /* timeout: no limit */

/* The part in shared memory. Only ve_ring_init writes the geometry. */
struct ve_ring_shared {
	uint32_t magic;	   /* VE_RING_MAGIC */
	uint32_t capacity; /* records, a power of two */
	uint32_t rec_size; /* VE_REC_SIZE */
	uint32_t hdr_size; /* VE_RING_HDR_SIZE */
	uint8_t pad0[112];
	_Atomic uint32_t tail; /* written by the producer only: records published */
	uint8_t pad1[124];
	_Atomic uint32_t head; /* written by the consumer only: records consumed */
	uint8_t pad2[124];
	_Atomic uint32_t cons_wait; /* futex: 1 while the consumer waits for data */
	_Atomic uint32_t prod_wait; /* futex: 1 while the producer waits for room */
	_Atomic uint32_t prod_want; /* the head that gives the waiting producer its room */
	uint8_t pad3[116];
	struct ve_rec recs[];
};

_Static_assert(offsetof(struct ve_ring_shared, tail) == 128, "tail on its own line pair");
_Static_assert(offsetof(struct ve_ring_shared, head) == 256, "head on its own line pair");
_Static_assert(offsetof(struct ve_ring_shared, cons_wait) == 384, "wake words line pair");
_Static_assert(offsetof(struct ve_ring_shared, prod_wait) == 388, "wake words line pair");
_Static_assert(offsetof(struct ve_ring_shared, prod_want) == 392, "wake words line pair");
_Static_assert(offsetof(struct ve_ring_shared, recs) == VE_RING_HDR_SIZE, "records follow");
_Static_assert(sizeof(struct ve_ring_shared) == VE_RING_HDR_SIZE, "ring header size");

/* Process-local view of a ring: geometry as validated at init/attach. */
struct ve_ring {
	struct ve_ring_shared *sh;
	struct ve_rec *recs;
	uint32_t cap;
	uint32_t mask;
};

struct ve_ring_producer {
	struct ve_ring_shared *sh;
	struct ve_rec *recs;
	uint32_t cap, mask;
	uint32_t tail;	     /* own index: the truth, never re-read from shared memory */
	uint32_t head_cache; /* consumer's head as last read and validated */
	int err;	     /* 0, or -EIO once the peer corrupted the ring (sticky) */
	uint32_t seq;	     /* free for the user: next record sequence number */
	uint64_t wakes;	     /* FUTEX_WAKEs issued to a sleeping consumer */
	uint64_t sleeps;     /* FUTEX_WAITs entered waiting for room */
};

struct ve_ring_consumer {
	struct ve_ring_shared *sh;
	struct ve_rec *recs;
	uint32_t cap, mask;
	uint32_t head;	     /* own index: the truth, never re-read from shared memory */
	uint32_t tail_cache; /* producer's tail as last read and validated */
	int err;	     /* 0, or -EIO once the peer corrupted the ring (sticky) */
	uint32_t seq;	     /* free for the user: next expected sequence number */
	uint64_t wakes;	     /* FUTEX_WAKEs issued to a producer waiting for room */
	uint64_t sleeps;     /* FUTEX_WAITs entered waiting for data */
};

/* Bytes of ring memory for 'records' records (header included). */
static inline size_t ve_ring_bytes(uint32_t records)
{
	return VE_RING_HDR_SIZE + (size_t)records * VE_REC_SIZE;
}

/* Formats mem (64-byte aligned) as an empty ring with the largest power-of-two
 * capacity that fits in bytes (at most VE_RING_MAX_RECORDS). -EINVAL if mem is
 * misaligned or fewer than VE_RING_MIN_RECORDS fit. */
int ve_ring_init(struct ve_ring *r, void *mem, size_t bytes);
/* Views a ring another process formatted; its geometry is checked against
 * bytes and copied into r, and never read again. -EINVAL if malformed. */
int ve_ring_attach(struct ve_ring *r, void *mem, size_t bytes);
void ve_ring_fini(struct ve_ring *r);

/* Attach a handle. The indices found in shared memory are checked (-EIO if
 * tail - head > capacity). */
int ve_ring_producer_init(struct ve_ring_producer *p, const struct ve_ring *r);
int ve_ring_consumer_init(struct ve_ring_consumer *c, const struct ve_ring *r);

/* Waits until at least n records fit (1 <= n <= capacity) or timeout_ns
 * passed (0: poll; VE_RING_FOREVER). Returns the free room (>= n), 0 on
 * timeout, -EINVAL, -EIO. The consumer wakes the producer only once n slots
 * are free (prod_want), so asking for a large n (a quarter of the ring, say)
 * turns one wake-up per pop into one per n records. */
int ve_ring_wait_space(struct ve_ring_producer *p, uint32_t n, uint64_t timeout_ns);
/* Waits until a record is available or timeout_ns passed. Returns the number
 * available, 0 on timeout, -EIO. Spurious wake-ups and signals are absorbed. */
int ve_ring_wait(struct ve_ring_consumer *c, uint64_t timeout_ns);
/* Spins (with a CPU pause) up to spin_ns, then sleeps as ve_ring_wait for
 * the rest of timeout_ns: the spin hides the wake-up cost of short gaps. */
int ve_ring_wait_spin(struct ve_ring_consumer *c, uint64_t spin_ns, uint64_t timeout_ns);

/* ---- slow paths behind the inline fast paths ---- */
int ve__ring_corrupt(int *err, const char *what, uint32_t seen, uint32_t own);
void ve__ring_wake(_Atomic uint32_t *word, uint64_t *count);
void ve__ring_wake_producer(struct ve_ring_consumer *c);

/* Re-reads the consumer's head; returns the free room or -EIO. */
static inline int ve__ring_prod_refresh(struct ve_ring_producer *p, memory_order mo)
{
	/* A2 (pairs with R2 in ve__ring_publish_head): the consumer's reads of the
	 * slots below h happen before our writes that reuse them. */
	uint32_t h = atomic_load_explicit(&p->sh->head, mo);
	/* h must lie in [head_cache, tail]: a head never moves back or passes the tail. */
	if ((uint32_t)(h - p->head_cache) > (uint32_t)(p->tail - p->head_cache))
		return ve__ring_corrupt(&p->err, "consumer head", h, p->tail);
	p->head_cache = h;
	return (int)(p->cap - (p->tail - h));
}

/* Re-reads the producer's tail; returns the records available or -EIO. */
static inline int ve__ring_cons_refresh(struct ve_ring_consumer *c, memory_order mo)
{
	/* A1 (pairs with R1 in ve__ring_publish_tail): the records below t are
	 * written before we read them. */
	uint32_t t = atomic_load_explicit(&c->sh->tail, mo);
	/* t must lie in [tail_cache, head + cap]: a tail never moves back or laps the head. */
	if ((uint32_t)(t - c->tail_cache) > (uint32_t)(c->head + c->cap - c->tail_cache))
		return ve__ring_corrupt(&c->err, "producer tail", t, c->head);
	c->tail_cache = t;
	return (int)(t - c->head);
}

static inline void ve__ring_publish_tail(struct ve_ring_producer *p)
{
	/* R1 (pairs with A1 in ve__ring_cons_refresh): the records are written
	 * before the tail that covers them. seq_cst: S1 of the wake-up protocol,
	 * ordered before the load L1 below (pairs with S3/L3 in ve_ring_wait). */
	atomic_store_explicit(&p->sh->tail, p->tail, memory_order_seq_cst);
	if (__builtin_expect(atomic_load_explicit(&p->sh->cons_wait, memory_order_seq_cst), 0))
		ve__ring_wake(&p->sh->cons_wait, &p->wakes);
}

static inline void ve__ring_publish_head(struct ve_ring_consumer *c)
{
	/* R2 (pairs with A2 in ve__ring_prod_refresh): our reads of the slots are
	 * done before the producer may overwrite them. seq_cst: S2, ordered
	 * before L2 below (pairs with S4/L4 in ve_ring_wait_space). */
	atomic_store_explicit(&c->sh->head, c->head, memory_order_seq_cst);
	if (__builtin_expect(atomic_load_explicit(&c->sh->prod_wait, memory_order_seq_cst), 0))
		ve__ring_wake_producer(c);
}

/* Free room as far as the producer knows without touching shared memory,
 * refreshed if that is less than want. Returns room or -EIO. */
static inline int ve_ring_room(struct ve_ring_producer *p, uint32_t want)
{
	if (__builtin_expect(p->err != 0, 0))
		return p->err;
	uint32_t room = p->cap - (p->tail - p->head_cache);
	if (room >= want)
		return (int)room;
	return ve__ring_prod_refresh(p, memory_order_acquire);
}

/* Records available, refreshed from shared memory only if the cache is empty.
 * Returns the count or -EIO. */
static inline int ve_ring_avail(struct ve_ring_consumer *c)
{
	if (__builtin_expect(c->err != 0, 0))
		return c->err;
	uint32_t avail = c->tail_cache - c->head;
	if (avail)
		return (int)avail;
	return ve__ring_cons_refresh(c, memory_order_acquire);
}

/* Copies up to n records into the ring and publishes them (one index store,
 * one wake-up check for the whole batch). Returns how many were pushed: 0
 * when full, never more than fit, or -EIO. */
static inline int ve_ring_push(struct ve_ring_producer *p, const struct ve_rec *recs, uint32_t n)
{
	int room = ve_ring_room(p, n);
	if (room <= 0)
		return room;
	if (n > (uint32_t)room)
		n = (uint32_t)room;
	if (n == 0)
		return 0;
	uint32_t i = p->tail & p->mask;
	uint32_t first = p->cap - i < n ? p->cap - i : n;
	memcpy(&p->recs[i], recs, (size_t)first * sizeof(*recs));
	if (n > first)
		memcpy(&p->recs[0], recs + first, (size_t)(n - first) * sizeof(*recs));
	p->tail += n;
	ve__ring_publish_tail(p);
	return (int)n;
}

/* Copies up to max records out of the ring and frees their slots. Returns how
 * many: 0 when empty, or -EIO. The copies are private: check them with
 * ve_proto_check before use when the producer is not trusted. */
static inline int ve_ring_pop(struct ve_ring_consumer *c, struct ve_rec *out, uint32_t max)
{
	int avail = ve_ring_avail(c);
	if (avail <= 0)
		return avail;
	uint32_t n = (uint32_t)avail < max ? (uint32_t)avail : max;
	if (n == 0)
		return 0;
	uint32_t i = c->head & c->mask;
	uint32_t first = c->cap - i < n ? c->cap - i : n;
	memcpy(out, &c->recs[i], (size_t)first * sizeof(*out));
	if (n > first)
		memcpy(out + first, &c->recs[0], (size_t)(n - first) * sizeof(*out));
	c->head += n;
	ve__ring_publish_head(c);
	return (int)n;
}

/* Zero-copy producer side: *slots gets the next free slots, contiguous (up to
 * the end of the array); returns how many (<= max), 0 when full, or -EIO.
 * Fill them, then ve_ring_commit(p, k) with k <= that count. */
static inline int ve_ring_reserve(struct ve_ring_producer *p, struct ve_rec **slots, uint32_t max)
{
	int room = ve_ring_room(p, max);
	if (room <= 0)
		return room;
	uint32_t i = p->tail & p->mask;
	uint32_t n = (uint32_t)room < max ? (uint32_t)room : max;
	if (n > p->cap - i)
		n = p->cap - i;
	*slots = &p->recs[i];
	return (int)n;
}

static inline void ve_ring_commit(struct ve_ring_producer *p, uint32_t n)
{
	uint32_t room = p->cap - (p->tail - p->head_cache);
	if (n > room) /* a caller bug must not break the used <= capacity invariant */
		n = room;
	if (n == 0)
		return;
	p->tail += n;
	ve__ring_publish_tail(p);
}

/* Zero-copy consumer side: *recs points at the next available records in
 * shared memory, contiguous; returns how many (<= max), 0, or -EIO. They stay
 * valid until ve_ring_release. The peer can still write them: copy a record
 * before checking it if the producer is not trusted. */
static inline int ve_ring_peek(struct ve_ring_consumer *c, const struct ve_rec **recs, uint32_t max)
{
	int avail = ve_ring_avail(c);
	if (avail <= 0)
		return avail;
	uint32_t i = c->head & c->mask;
	uint32_t n = (uint32_t)avail < max ? (uint32_t)avail : max;
	if (n > c->cap - i)
		n = c->cap - i;
	*recs = &c->recs[i];
	return (int)n;
}

static inline void ve_ring_release(struct ve_ring_consumer *c, uint32_t n)
{
	uint32_t avail = c->tail_cache - c->head;
	if (n > avail)
		n = avail;
	if (n == 0)
		return;
	c->head += n;
	ve__ring_publish_head(c);
}

#endif
