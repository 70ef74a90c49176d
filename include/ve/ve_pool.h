/* SPDX-License-Identifier: MIT */
/*
 * The pool as policies read it: entries (leaf masks, SMs, state, holder,
 * tree links) and the pool's masks. Plain data with no pointers, laid out
 * once for every process (the struct can live in shared memory) and
 * versioned with the policy ABI (VE_POLICY_ABI_VERSION): a field's offset
 * never changes without a new ABI version. The operations on the pool
 * (lease, reserve, gates) are internal (src/pool/pool.h); a policy only
 * reads this and proposes (ve_policy.h). docs/architecture.md, "Pool",
 * explains the hierarchy, the conflict rule and the states.
 */
#ifndef VE_PUBLIC_POOL_H
#define VE_PUBLIC_POOL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VE_POOL_MAX_LEAVES  64
#define VE_POOL_MAX_ENTRIES 256
#define VE_POOL_NONE	    0xffffu
#define VE_HOLDER_NONE	    (-1)
#define VE_HOLDER_SHARED    (-2)	/* leased to several clients at once (policy-allowed) */
#define VE_POOL_MAX_SHARERS 8		/* clients that may hold one shared lease at once */
#define VE_POOL_FIND_SLOTS  512		/* ve_pool_find hash table (2 x max entries) */
#define VE_POOL_MAGIC	    0x4c4f4f50u /* "POOL" */
#define VE_POOL_VERSION	    1u
#define VE_POOL_PENDING	    1 /* ve_pool_reserve: reservation pending (entry not yet RESERVED) */

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
	uint8_t level;	      /* 0 = root, increasing towards the leaves; a remainder
			       * has the level of the node it complements */
	uint8_t gate_open;    /* 1 while LEASED */
	uint16_t parent;      /* tree parent (nodes/leaves), VE_POOL_NONE for root/remainders;
			       * if the bound dropped the parent, the nearest kept ancestor */
	uint16_t child[2];    /* tree children, VE_POOL_NONE for leaves or a dropped child */
	uint16_t remainder;   /* entry spanning exactly the other leaves (a remainder, or
			       * the sibling node for a child of the root), VE_POOL_NONE if
			       * none is kept; VE_POOL_NONE for the root and remainders */
	uint16_t complement;  /* for a remainder: the node it complements, else VE_POOL_NONE */
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
	uint64_t all_leaves;			 /* mask of every leaf (the root's leaves) */
	uint64_t fingerprint;			 /* hash of the leaf list and every entry's leaves */
	uint64_t transitions;			 /* count of state changes (tests, stats) */
	struct ve_pool_entry e[VE_POOL_MAX_ENTRIES];
	/* Internal bookkeeping, plain data like the rest. */
	uint16_t claim_by[VE_POOL_MAX_LEAVES]; /* leaf -> pending entry claiming it, or NONE */
	uint16_t find_tab[VE_POOL_FIND_SLOTS]; /* leaves hash -> entry (open addressing) */
	uint8_t nsharers[VE_POOL_MAX_ENTRIES]; /* clients holding a LEASED/DRAINING entry */
	int32_t sharers[VE_POOL_MAX_ENTRIES][VE_POOL_MAX_SHARERS];
};

/* The ABI: these layouts are what external policies were compiled against. */
#ifdef __cplusplus
#define VE__POOL_ASSERT static_assert
#else
#define VE__POOL_ASSERT _Static_assert
#endif
VE__POOL_ASSERT(sizeof(struct ve_pool_entry) == 40, "pool entry layout (policy ABI)");
VE__POOL_ASSERT(offsetof(struct ve_pool_entry, state) == 24, "pool entry layout (policy ABI)");
VE__POOL_ASSERT(offsetof(struct ve_pool, e) == 960, "pool layout (policy ABI)");
VE__POOL_ASSERT(offsetof(struct ve_pool, sharers) == 12608, "pool layout (policy ABI)");
VE__POOL_ASSERT(sizeof(struct ve_pool) == 20800, "pool layout (policy ABI)");
#undef VE__POOL_ASSERT

#ifdef __cplusplus
}
#endif
#endif
