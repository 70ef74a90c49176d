/* SPDX-License-Identifier: MIT */
/*
 * The bounded hierarchical pool of physical contexts (paper section 4.3,
 * DESIGN.md section 6).
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
 *   IDLE     -> RESERVED   ve_pool_reserve    (no conflicting busy entry)
 *   LEASED   -> DRAINING   ve_pool_close_gate (then at outstanding == 0:)
 *   DRAINING -> IDLE       last op done, no reservation pending on it
 *   DRAINING -> RESERVED   last op done, a reservation is pending on it
 *   RESERVED -> LEASED     ve_pool_lease by the reservation's holder
 *   RESERVED -> IDLE       ve_pool_unreserve
 * A leased entry admits more ops (outstanding++) while its gate is open. Any
 * other transition is refused with -EPERM and changes nothing.
 *
 * Busy leaves are those of every entry that is not IDLE, plus the leaves
 * claimed by pending reservations (a reservation asked for while conflicting
 * entries still drain: no unrelated lease may take those leaves meanwhile,
 * and the entry turns RESERVED as soon as its last conflict is released).
 */
#ifndef VE_POOL_H
#define VE_POOL_H

#include <stdbool.h>
#include <stdint.h>

#define VE_POOL_MAX_LEAVES  64
#define VE_POOL_MAX_ENTRIES 256
#define VE_POOL_NONE	    0xffffu
#define VE_HOLDER_NONE	    (-1)
#define VE_HOLDER_SHARED    (-2) /* leased to several clients at once (policy-allowed) */

enum ve_entry_state { VE_ENTRY_IDLE = 0, VE_ENTRY_LEASED, VE_ENTRY_DRAINING, VE_ENTRY_RESERVED };
enum ve_entry_kind { VE_ENTRY_LEAF = 0, VE_ENTRY_NODE, VE_ENTRY_ROOT, VE_ENTRY_REMAINDER };

/* One entry. This struct is also what policies read (ve_policy.h). */
struct ve_pool_entry {
	uint64_t leaves;      /* leaf bitmask */
	uint32_t sms;	      /* total SMs */
	uint32_t outstanding; /* ops submitted and not yet complete */
	int32_t holder;	      /* client id, VE_HOLDER_NONE or VE_HOLDER_SHARED */
	int32_t reserve_for;  /* client of a pending or active reservation, or VE_HOLDER_NONE */
	uint8_t state;	      /* enum ve_entry_state */
	uint8_t kind;	      /* enum ve_entry_kind */
	uint8_t level;	      /* 0 = root, increasing towards the leaves */
	uint8_t gate_open;    /* 1 while LEASED */
	uint16_t parent;      /* tree parent (nodes/leaves), VE_POOL_NONE for root/remainders */
	uint16_t child[2];    /* tree children, VE_POOL_NONE for leaves */
	uint16_t remainder;   /* this node's remainder entry, VE_POOL_NONE if not kept */
	uint16_t complement;  /* for a remainder: the node it complements */
	uint16_t pad;
};

struct ve_pool {
	uint32_t magic, version;
	uint32_t nleaves;
	uint32_t total_sms;
	uint32_t leaf_sms[VE_POOL_MAX_LEAVES];
	uint32_t nentries;
	uint16_t root;				 /* entry spanning every leaf */
	uint16_t leaf_entry[VE_POOL_MAX_LEAVES]; /* leaf i -> entry index */
	uint16_t by_size[VE_POOL_MAX_ENTRIES];	 /* entries by ascending sms, then index */
	uint64_t busy;				 /* leaves of non-IDLE entries */
	uint64_t claimed;			 /* leaves of pending reservations */
	uint64_t fingerprint;			 /* hash of the leaf list and every entry's leaves */
	uint64_t transitions;			 /* count of state changes (tests, stats) */
	struct ve_pool_entry e[VE_POOL_MAX_ENTRIES];
};

/* Builds the pool for 'leaf_sms[nleaves]' with at most 'max_entries' entries
 * (0 = the full hierarchy). Entries are kept in this order until the bound is
 * hit: the root, every leaf, internal nodes level by level from the top, then
 * remainders of leaves, then remainders of internal nodes from the deepest
 * level up (see docs/architecture.md, "pool bound"). A bound below
 * nleaves + 1 is refused (-EINVAL): every leaf and the whole GPU must exist.
 * -EINVAL also for nleaves 0 or > 64, or a leaf of 0 SMs. */
int ve_pool_init(struct ve_pool *p, const uint32_t *leaf_sms, uint32_t nleaves,
		 uint32_t max_entries);
void ve_pool_fini(struct ve_pool *p);

static inline bool ve_pool_conflict(const struct ve_pool *p, uint16_t a, uint16_t b)
{
	return (p->e[a].leaves & p->e[b].leaves) != 0;
}

/* Could 'client' start an op on entry idx right now?  True if the entry is
 * IDLE with none of its leaves busy or claimed, or LEASED to this client with
 * its gate open (or to anyone, if 'share'), or RESERVED for this client. */
bool ve_pool_can_admit(const struct ve_pool *p, uint16_t idx, int32_t client, bool share);

/* State transitions; all return 0, -EPERM (transition not allowed from the
 * current state), -EBUSY (conflicting busy leaves) or -EINVAL (bad index). */
int ve_pool_lease(struct ve_pool *p, uint16_t idx, int32_t client, bool share);
int ve_pool_close_gate(struct ve_pool *p, uint16_t idx);
int ve_pool_reserve(struct ve_pool *p, uint16_t idx, int32_t client); /* may leave it pending */
int ve_pool_unreserve(struct ve_pool *p, uint16_t idx);

/* Outstanding work accounting. op_start requires LEASED with an open gate.
 * op_done at zero releases a DRAINING entry (to IDLE or RESERVED) and may
 * complete pending reservations; it returns 1 if it released the entry. */
int ve_pool_op_start(struct ve_pool *p, uint16_t idx);
int ve_pool_op_done(struct ve_pool *p, uint16_t idx);

/* Releases every lease and reservation held by 'client' (it exited): gates
 * close, pending reservations are dropped; entries with outstanding work drain. */
void ve_pool_release_client(struct ve_pool *p, int32_t client);

/* Entry with exactly these leaves, or VE_POOL_NONE. */
uint16_t ve_pool_find(const struct ve_pool *p, uint64_t leaves);

const char *ve_entry_state_name(int state);
/* One line per entry: index, kind, SMs, leaves, state, holder, outstanding. */
void ve_pool_dump(const struct ve_pool *p, void *file /* FILE* */);

#endif
