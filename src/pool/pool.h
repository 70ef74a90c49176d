/* SPDX-License-Identifier: MIT */
/*
 * The bounded hierarchical pool of physical contexts (paper section 4.3,
 * docs/architecture.md, "Pool").
 *
 * Leaves are the minimum units of ONE backend split (H200: 15 x 8 SMs + a
 * 12-SM remainder). Internal nodes of a binary tree over the leaves cover the
 * union of their descendants; each non-root node has a remainder entry that
 * spans every other leaf. Every entry is a set of leaves, held as a bitmask,
 * so "do these entries share an SM" is one AND, never a pairwise scan.
 *
 * The pool is plain data (no pointers), identical in every process for the
 * same leaf list and bound, so an entry index names the same SMs everywhere
 * and the struct can live in shared memory (caller-owned: _init/_fini).
 *
 * Entry states and the only transitions allowed (paper Figure 6):
 *   IDLE     -> LEASED     ve_pool_lease      (no conflicting busy entry)
 *   IDLE     -> RESERVED   ve_pool_reserve    (no conflicting busy entry; if
 *                          busy entries conflict it stays IDLE, pending, and
 *                          turns RESERVED when the last of them is released)
 *   LEASED   -> DRAINING   ve_pool_close_gate (then at outstanding == 0:)
 *   DRAINING -> IDLE       last op done, no reservation pending on it
 *   DRAINING -> RESERVED   last op done, a reservation is pending on it
 *                          (ve_pool_reserve on a DRAINING entry pends on it)
 *   RESERVED -> LEASED     ve_pool_lease by the reservation's holder (this
 *                          uses the reservation up: reserve_for is cleared)
 *   RESERVED -> IDLE       ve_pool_unreserve
 * A leased entry admits more ops (outstanding++) while its gate is open. Any
 * other transition is refused with -EPERM and changes nothing. Calls that
 * change no state are allowed where they make sense: leasing an entry one
 * already holds, joining a leased entry with share, cancelling a pending
 * reservation with ve_pool_unreserve (docs/architecture.md, "Pool").
 *
 * Busy leaves (`busy`) are those of every entry that is not IDLE. Non-IDLE
 * entries never overlap (a shared lease is one entry), so `busy` is kept with
 * one OR / AND-NOT per transition. Claimed leaves (`claimed`) are those of
 * pending reservations (asked for while conflicting entries still run): no
 * lease by another client may take them meanwhile, and the entry turns
 * RESERVED as soon as its last conflict is released. The claimant itself may
 * still lease free entries inside its own claim (e.g. a narrower allocation
 * while the wide one drains); its reservation then also waits for those.
 * Pending reservations never overlap each other.
 *
 * Not thread-safe: one owner (the coordinator) mutates the pool; others may
 * read it for statistics only.
 */
#ifndef VE_POOL_H
#define VE_POOL_H

/* The structs and constants: public, since policies read them. */
#include "ve/ve_pool.h"

#include <stdbool.h>
#include <stdint.h>

/* Builds the pool for 'leaf_sms[nleaves]' with at most 'max_entries' entries
 * (0 = the full hierarchy). Entries are kept in this order until the bound is
 * hit: the root, every leaf, internal nodes level by level from the top, then
 * remainders of leaves, then remainders of internal nodes from the deepest
 * level up (see docs/architecture.md, "Pool bound"). Entry indices follow
 * the same order, so they are deterministic for a given input. A remainder
 * equal to an existing entry (a child of the root: its sibling) is not added
 * and takes no room. A bound below nleaves + 1 is refused (-EINVAL): every
 * leaf and the whole GPU must exist (a single leaf is the root: bound >= 1).
 * Bounds above VE_POOL_MAX_ENTRIES are capped. -EINVAL also for nleaves 0 or
 * > 64, or a leaf of 0 SMs. On error *p is zeroed. */
int ve_pool_init(struct ve_pool *p, const uint32_t *leaf_sms, uint32_t nleaves,
		 uint32_t max_entries);
void ve_pool_fini(struct ve_pool *p);

static inline bool ve_pool_conflict(const struct ve_pool *p, uint16_t a, uint16_t b)
{
	return (p->e[a].leaves & p->e[b].leaves) != 0;
}

/* Could 'client' start an op on entry idx right now?  True if the entry is
 * IDLE with none of its leaves busy or claimed by another client, or LEASED
 * to this client with its gate open (or to anyone, if 'share', unless another
 * client claims its leaves or VE_POOL_MAX_SHARERS hold it), or RESERVED for
 * this client. Exactly: ve_pool_lease(p, idx, client, share) would return 0. */
bool ve_pool_can_admit(const struct ve_pool *p, uint16_t idx, int32_t client, bool share);

/* State transitions; all return 0, -EPERM (transition not allowed from the
 * current state), -EBUSY (conflicting busy leaves, leaves claimed by another
 * client, a lease or reservation of another client) or -EINVAL (bad index,
 * negative client). Checks run in that order: -EINVAL, -EPERM, -EBUSY.
 *   lease:      IDLE (free), RESERVED (for client), LEASED (held by client: no
 *               change; else share joins it: holder becomes VE_HOLDER_SHARED).
 *   close_gate: LEASED; at outstanding == 0 it is released at once (two
 *               transitions); read e[idx].state for the outcome.
 *   reserve:    IDLE or DRAINING, leaves not claimed by any pending
 *               reservation (-EBUSY). Returns 0 if now RESERVED, or
 *               VE_POOL_PENDING if it waits for busy entries (IDLE) or for
 *               its own drain (DRAINING).
 *   unreserve:  RESERVED -> IDLE, or cancels a pending reservation (no state
 *               change). Releases may complete other pending reservations. */
int ve_pool_lease(struct ve_pool *p, uint16_t idx, int32_t client, bool share);
int ve_pool_close_gate(struct ve_pool *p, uint16_t idx);
int ve_pool_reserve(struct ve_pool *p, uint16_t idx, int32_t client); /* may leave it pending */
int ve_pool_unreserve(struct ve_pool *p, uint16_t idx);

/* Outstanding work accounting. op_start requires LEASED with an open gate.
 * op_done at zero releases a DRAINING entry (to IDLE or RESERVED) and may
 * complete pending reservations; it returns 1 if it released the entry. */
int ve_pool_op_start(struct ve_pool *p, uint16_t idx);
/* One more op of 'client' behind its work already running on idx (bounded
 * pipelining): allowed while the entry is LEASED or DRAINING, held by the
 * client (or shared), with outstanding work; a closed gate does not stop it,
 * because the op is already on the GPU behind its predecessor. */
int ve_pool_op_join(struct ve_pool *p, uint16_t idx, int32_t client);
int ve_pool_op_done(struct ve_pool *p, uint16_t idx);

/* Releases every lease and reservation held by 'client' (it exited): gates
 * close, pending reservations are dropped; entries with outstanding work drain. */
void ve_pool_release_client(struct ve_pool *p, int32_t client);

/* Entry with exactly these leaves, or VE_POOL_NONE. */
uint16_t ve_pool_find(const struct ve_pool *p, uint64_t leaves);

/* Does 'client' hold the lease of entry idx with its gate open (alone or
 * shared)?  What the submit path validates before submitting. */
bool ve_pool_holds(const struct ve_pool *p, uint16_t idx, int32_t client);

/* Is a reservation pending (asked for, not yet RESERVED) on entry idx? */
static inline bool ve_pool_pending(const struct ve_pool *p, uint16_t idx)
{
	return p->e[idx].reserve_for != VE_HOLDER_NONE && p->e[idx].state != VE_ENTRY_RESERVED;
}

const char *ve_entry_state_name(int state);
const char *ve_entry_kind_name(int kind);
/* One line per entry: index, kind, SMs, leaves, state, holder, outstanding. */
void ve_pool_dump(const struct ve_pool *p, void *file /* FILE* */);

#endif
