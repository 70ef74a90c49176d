/* SPDX-License-Identifier: MIT */
/*
 * Hierarchical physical-context pool: construction, lease state machine,
 * pending reservations. See pool.h for the contract and docs/architecture.md
 * ("Pool") for the rules in prose.
 *
 * Everything here is plain data so the pool can live in shared memory and is
 * bit-identical in every process built from the same leaf list and bound.
 * The transition functions are on the dispatch path: no allocation, no
 * syscalls, and conflict tests are single mask operations. The only loops
 * run over the set bits of (leaves & claimed), i.e. over the few pending
 * reservations that overlap the entry at hand.
 */
#include "pool/pool.h"

#include "util/util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* Tree over the leaves, only used while building (at most 2 * 64 - 1 nodes). */
#define TREE_MAX (2 * VE_POOL_MAX_LEAVES - 1)

struct tnode {
	uint8_t lo, hi; /* leaf range [lo, hi) */
	uint8_t depth;
	int16_t parent;
	int16_t child[2];
};

struct tree {
	struct tnode n[TREE_MAX];
	int count;
	int leaf_node[VE_POOL_MAX_LEAVES]; /* leaf i -> tree node */
};

static uint64_t range_mask(uint32_t lo, uint32_t hi)
{
	uint64_t upto_hi = hi >= 64 ? ~0ull : (1ull << hi) - 1;
	uint64_t upto_lo = (1ull << lo) - 1; /* lo < 64 always */
	return upto_hi & ~upto_lo;
}

/* Balanced split at the middle; with an odd count the right half is the
 * larger one (7 leaves: [0,3) and [3,7)). */
static int tree_build(struct tree *t, uint32_t lo, uint32_t hi, uint8_t depth, int parent)
{
	int me = t->count++;
	struct tnode *n = &t->n[me];

	n->lo = (uint8_t)lo;
	n->hi = (uint8_t)hi;
	n->depth = depth;
	n->parent = (int16_t)parent;
	n->child[0] = n->child[1] = -1;
	if (hi - lo == 1) {
		t->leaf_node[lo] = me;
		return me;
	}
	uint32_t mid = lo + (hi - lo) / 2;
	int l = tree_build(t, lo, mid, depth + 1, me);
	int r = tree_build(t, mid, hi, depth + 1, me);
	n->child[0] = (int16_t)l;
	n->child[1] = (int16_t)r;
	return me;
}

static uint64_t tnode_mask(const struct tree *t, int i)
{
	return range_mask(t->n[i].lo, t->n[i].hi);
}

static unsigned find_slot(uint64_t leaves)
{
	return (unsigned)(ve__mix64(leaves) & (VE_POOL_FIND_SLOTS - 1));
}

uint16_t ve_pool_find(const struct ve_pool *p, uint64_t leaves)
{
	if (leaves == 0)
		return VE_POOL_NONE;
	/* At most 256 entries in 512 slots: a probe always meets an empty slot. */
	for (unsigned s = find_slot(leaves);; s = (s + 1) & (VE_POOL_FIND_SLOTS - 1)) {
		uint16_t idx = p->find_tab[s];
		if (idx == VE_POOL_NONE)
			return VE_POOL_NONE;
		if (p->e[idx].leaves == leaves)
			return idx;
	}
}

static void find_insert(struct ve_pool *p, uint16_t idx)
{
	unsigned s = find_slot(p->e[idx].leaves);
	while (p->find_tab[s] != VE_POOL_NONE)
		s = (s + 1) & (VE_POOL_FIND_SLOTS - 1);
	p->find_tab[s] = idx;
}

/* Candidate entries in keep order (the bound rule, pool.h). */
struct cand {
	int node;	   /* tree node */
	uint8_t remainder; /* 1: the remainder of 'node', else 'node' itself */
};

/* Insertion sort of tree node ids; 'deep_first' orders by depth descending,
 * else ascending; ties by leaf position (left to right). */
static void sort_nodes(const struct tree *t, int *ids, int n, int deep_first)
{
	for (int i = 1; i < n; i++) {
		int v = ids[i], j = i;
		while (j > 0) {
			const struct tnode *a = &t->n[ids[j - 1]], *b = &t->n[v];
			int before = a->depth != b->depth
					 ? (deep_first ? b->depth > a->depth : b->depth < a->depth)
					 : b->lo < a->lo;
			if (!before)
				break;
			ids[j] = ids[j - 1];
			j--;
		}
		ids[j] = v;
	}
}

static int build_candidates(const struct tree *t, uint32_t nleaves, struct cand *out)
{
	int internal[TREE_MAX], ninternal = 0, n = 0;

	out[n++] = (struct cand){0, 0}; /* root */
	for (uint32_t i = 0; i < nleaves; i++)
		out[n++] = (struct cand){t->leaf_node[i], 0};
	for (int i = 1; i < t->count; i++)
		if (t->n[i].child[0] >= 0)
			internal[ninternal++] = i;
	sort_nodes(t, internal, ninternal, 0);
	for (int i = 0; i < ninternal; i++)
		out[n++] = (struct cand){internal[i], 0};
	for (uint32_t i = 0; i < nleaves; i++)
		if (t->leaf_node[i] != 0)
			out[n++] = (struct cand){t->leaf_node[i], 1};
	sort_nodes(t, internal, ninternal, 1);
	for (int i = 0; i < ninternal; i++)
		out[n++] = (struct cand){internal[i], 1};
	return n;
}

static uint8_t tnode_kind(const struct tree *t, int i)
{
	if (i == 0)
		return VE_ENTRY_ROOT;
	return t->n[i].child[0] < 0 ? VE_ENTRY_LEAF : VE_ENTRY_NODE;
}

static uint32_t mask_sms(const struct ve_pool *p, uint64_t leaves)
{
	uint32_t sms = 0;
	for (uint64_t m = leaves; m; m &= m - 1)
		sms += p->leaf_sms[__builtin_ctzll(m)];
	return sms;
}

int ve_pool_init(struct ve_pool *p, const uint32_t *leaf_sms, uint32_t nleaves,
		 uint32_t max_entries)
{
	struct tree t;
	struct cand cands[2 * TREE_MAX];
	uint16_t tent[TREE_MAX];	     /* tree node -> entry, NONE if dropped */
	int16_t rem_of[VE_POOL_MAX_ENTRIES]; /* remainder entry -> tree node, else -1 */

	memset(p, 0, sizeof(*p));
	if (!leaf_sms || nleaves == 0 || nleaves > VE_POOL_MAX_LEAVES)
		return -EINVAL;
	for (uint32_t i = 0; i < nleaves; i++)
		if (leaf_sms[i] == 0)
			return -EINVAL;
	uint32_t need = nleaves == 1 ? 1 : nleaves + 1; /* root and every leaf */
	uint32_t cap = max_entries == 0 || max_entries > VE_POOL_MAX_ENTRIES ? VE_POOL_MAX_ENTRIES
									     : max_entries;
	if (cap < need)
		return -EINVAL;

	p->magic = VE_POOL_MAGIC;
	p->version = VE_POOL_VERSION;
	p->nleaves = nleaves;
	for (uint32_t i = 0; i < nleaves; i++) {
		p->leaf_sms[i] = leaf_sms[i];
		p->total_sms += leaf_sms[i];
	}
	p->all_leaves = range_mask(0, nleaves);
	memset(p->find_tab, 0xff, sizeof(p->find_tab));
	memset(p->claim_by, 0xff, sizeof(p->claim_by));
	for (uint32_t i = 0; i < VE_POOL_MAX_LEAVES; i++)
		p->leaf_entry[i] = VE_POOL_NONE;

	t.count = 0;
	tree_build(&t, 0, nleaves, 0, -1);
	int ncand = build_candidates(&t, nleaves, cands);

	for (int c = 0; c < ncand && p->nentries < cap; c++) {
		uint64_t m = tnode_mask(&t, cands[c].node);
		if (cands[c].remainder)
			m = p->all_leaves & ~m;
		/* An empty remainder (the root's) or one equal to an existing
		 * entry (the sibling of a root child) would be a second green
		 * context over the same SMs: no new alternative, 6 MiB wasted. */
		if (m == 0 || ve_pool_find(p, m) != VE_POOL_NONE)
			continue;
		uint16_t idx = (uint16_t)p->nentries++;
		struct ve_pool_entry *e = &p->e[idx];
		e->leaves = m;
		e->sms = mask_sms(p, m);
		e->holder = VE_HOLDER_NONE;
		e->reserve_for = VE_HOLDER_NONE;
		e->state = VE_ENTRY_IDLE;
		e->kind = cands[c].remainder ? VE_ENTRY_REMAINDER : tnode_kind(&t, cands[c].node);
		e->level = t.n[cands[c].node].depth;
		e->parent = e->child[0] = e->child[1] = VE_POOL_NONE;
		e->remainder = e->complement = VE_POOL_NONE;
		rem_of[idx] = cands[c].remainder ? (int16_t)cands[c].node : -1;
		find_insert(p, idx);
	}

	/* Tree nodes precede every remainder in keep order and no remainder
	 * equals a tree node (skipped above), so find() on a node's range names
	 * the node's own entry. */
	for (int i = 0; i < t.count; i++)
		tent[i] = ve_pool_find(p, tnode_mask(&t, i));
	for (int i = 0; i < t.count; i++) {
		if (tent[i] == VE_POOL_NONE)
			continue;
		struct ve_pool_entry *e = &p->e[tent[i]];
		int a = t.n[i].parent;
		while (a >= 0 && tent[a] == VE_POOL_NONE)
			a = t.n[a].parent;
		e->parent = a >= 0 ? tent[a] : VE_POOL_NONE;
		for (int k = 0; k < 2; k++)
			if (t.n[i].child[k] >= 0)
				e->child[k] = tent[t.n[i].child[k]];
		if (i != 0)
			e->remainder = ve_pool_find(p, p->all_leaves & ~e->leaves);
	}
	for (uint32_t i = 0; i < p->nentries; i++)
		if (rem_of[i] >= 0)
			p->e[i].complement = tent[rem_of[i]];
	for (uint32_t i = 0; i < nleaves; i++)
		p->leaf_entry[i] = tent[t.leaf_node[i]];
	p->root = tent[0];

	for (uint32_t i = 0; i < p->nentries; i++) {
		uint32_t j = i;
		while (j > 0 && p->e[p->by_size[j - 1]].sms > p->e[i].sms) {
			p->by_size[j] = p->by_size[j - 1];
			j--;
		}
		p->by_size[j] = (uint16_t)i;
	}

	uint64_t h = ve__mix64(((uint64_t)VE_POOL_MAGIC << 32) | VE_POOL_VERSION);
	h = ve__hash_combine(h, nleaves);
	for (uint32_t i = 0; i < nleaves; i++)
		h = ve__hash_combine(h, leaf_sms[i]);
	h = ve__hash_combine(h, p->nentries);
	for (uint32_t i = 0; i < p->nentries; i++)
		h = ve__hash_combine(h, p->e[i].leaves);
	p->fingerprint = h;
	return 0;
}

void ve_pool_fini(struct ve_pool *p)
{
	memset(p, 0, sizeof(*p));
}

/* ---- state machine ---- */

/* busy is the OR of the leaves of non-IDLE entries. Those never overlap
 * (every way out of IDLE requires leaves & busy == 0, a shared lease is one
 * entry), so entering/leaving IDLE sets/clears exactly this entry's bits. */
static void set_state(struct ve_pool *p, uint16_t idx, uint8_t st)
{
	struct ve_pool_entry *e = &p->e[idx];

	if (e->state == VE_ENTRY_IDLE)
		p->busy |= e->leaves;
	else if (st == VE_ENTRY_IDLE)
		p->busy &= ~e->leaves;
	e->state = st;
	p->transitions++;
}

/* Pending reservations never overlap each other (reserve refuses claimed
 * leaves), so claim_by maps each claimed leaf to exactly one entry. */
static void claim(struct ve_pool *p, uint16_t idx, int32_t client)
{
	struct ve_pool_entry *e = &p->e[idx];

	e->reserve_for = client;
	p->claimed |= e->leaves;
	for (uint64_t m = e->leaves; m; m &= m - 1)
		p->claim_by[__builtin_ctzll(m)] = idx;
}

static void unclaim(struct ve_pool *p, uint16_t idx)
{
	struct ve_pool_entry *e = &p->e[idx];

	p->claimed &= ~e->leaves;
	for (uint64_t m = e->leaves; m; m &= m - 1)
		p->claim_by[__builtin_ctzll(m)] = VE_POOL_NONE;
}

static bool claimed_by_other(const struct ve_pool *p, uint64_t leaves, int32_t client)
{
	for (uint64_t m = leaves & p->claimed; m;) {
		uint16_t q = p->claim_by[__builtin_ctzll(m)];
		if (p->e[q].reserve_for != client)
			return true;
		m &= ~p->e[q].leaves;
	}
	return false;
}

/* Leaves 'freed' just left busy: a pending reservation over them whose last
 * conflict this was becomes RESERVED now. An IDLE pending entry always
 * overlaps busy (it is promoted the moment it stops), so only pending entries
 * over the freed leaves can change. */
static void promote_pending(struct ve_pool *p, uint64_t freed)
{
	for (uint64_t m = freed & p->claimed; m;) {
		uint16_t q = p->claim_by[__builtin_ctzll(m)];
		struct ve_pool_entry *e = &p->e[q];
		m &= ~e->leaves;
		if (e->state == VE_ENTRY_IDLE && !(e->leaves & p->busy)) {
			unclaim(p, q);
			set_state(p, q, VE_ENTRY_RESERVED);
		}
	}
}

static void clear_holders(struct ve_pool *p, uint16_t idx)
{
	p->e[idx].holder = VE_HOLDER_NONE;
	p->nsharers[idx] = 0;
}

/* DRAINING at outstanding == 0: the lease ends. */
static void release(struct ve_pool *p, uint16_t idx)
{
	struct ve_pool_entry *e = &p->e[idx];

	clear_holders(p, idx);
	if (e->reserve_for != VE_HOLDER_NONE) {
		/* Its leaves stay busy (now by the reservation): nothing freed. */
		unclaim(p, idx);
		set_state(p, idx, VE_ENTRY_RESERVED);
	} else {
		set_state(p, idx, VE_ENTRY_IDLE);
		promote_pending(p, e->leaves);
	}
}

static bool is_sharer(const struct ve_pool *p, uint16_t idx, int32_t client)
{
	for (unsigned i = 0; i < p->nsharers[idx]; i++)
		if (p->sharers[idx][i] == client)
			return true;
	return false;
}

static bool valid(const struct ve_pool *p, uint16_t idx)
{
	return idx < p->nentries;
}

/* What ve_pool_lease would return, without doing it (shared by can_admit). */
static int lease_check(const struct ve_pool *p, uint16_t idx, int32_t client, bool share)
{
	if (!valid(p, idx) || client < 0)
		return -EINVAL;
	const struct ve_pool_entry *e = &p->e[idx];
	switch (e->state) {
	case VE_ENTRY_IDLE:
		/* A pending entry always has busy leaves; the explicit test keeps
		 * a lease from ever overtaking its own pending reservation. */
		if ((e->leaves & p->busy) || e->reserve_for != VE_HOLDER_NONE ||
		    claimed_by_other(p, e->leaves, client))
			return -EBUSY;
		return 0;
	case VE_ENTRY_LEASED:
		if (is_sharer(p, idx, client))
			return 0;
		/* Joining extends the lease: not over another client's claim. */
		if (!share || p->nsharers[idx] >= VE_POOL_MAX_SHARERS ||
		    claimed_by_other(p, e->leaves, client))
			return -EBUSY;
		return 0;
	case VE_ENTRY_RESERVED:
		return e->reserve_for == client ? 0 : -EBUSY;
	default:
		return -EPERM;
	}
}

bool ve_pool_can_admit(const struct ve_pool *p, uint16_t idx, int32_t client, bool share)
{
	return lease_check(p, idx, client, share) == 0;
}

int ve_pool_lease(struct ve_pool *p, uint16_t idx, int32_t client, bool share)
{
	int rc = lease_check(p, idx, client, share);
	if (rc)
		return rc;
	struct ve_pool_entry *e = &p->e[idx];
	if (e->state == VE_ENTRY_LEASED) {
		if (!is_sharer(p, idx, client)) {
			p->sharers[idx][p->nsharers[idx]++] = client;
			e->holder = VE_HOLDER_SHARED;
		}
		return 0;
	}
	/* IDLE or RESERVED for this client: the reservation is used up. */
	e->reserve_for = VE_HOLDER_NONE;
	e->holder = client;
	e->gate_open = 1;
	p->sharers[idx][0] = client;
	p->nsharers[idx] = 1;
	set_state(p, idx, VE_ENTRY_LEASED);
	return 0;
}

int ve_pool_close_gate(struct ve_pool *p, uint16_t idx)
{
	if (!valid(p, idx))
		return -EINVAL;
	struct ve_pool_entry *e = &p->e[idx];
	if (e->state != VE_ENTRY_LEASED)
		return -EPERM;
	e->gate_open = 0;
	set_state(p, idx, VE_ENTRY_DRAINING);
	if (e->outstanding == 0)
		release(p, idx);
	return 0;
}

int ve_pool_reserve(struct ve_pool *p, uint16_t idx, int32_t client)
{
	if (!valid(p, idx) || client < 0)
		return -EINVAL;
	struct ve_pool_entry *e = &p->e[idx];
	if (e->state != VE_ENTRY_IDLE && e->state != VE_ENTRY_DRAINING)
		return -EPERM;
	if (e->leaves & p->claimed)
		return -EBUSY;
	if (e->state == VE_ENTRY_DRAINING || (e->leaves & p->busy)) {
		claim(p, idx, client);
		return VE_POOL_PENDING;
	}
	e->reserve_for = client;
	set_state(p, idx, VE_ENTRY_RESERVED);
	return 0;
}

int ve_pool_unreserve(struct ve_pool *p, uint16_t idx)
{
	if (!valid(p, idx))
		return -EINVAL;
	struct ve_pool_entry *e = &p->e[idx];
	if (e->reserve_for == VE_HOLDER_NONE)
		return -EPERM;
	if (e->state == VE_ENTRY_RESERVED) {
		e->reserve_for = VE_HOLDER_NONE;
		set_state(p, idx, VE_ENTRY_IDLE);
		promote_pending(p, e->leaves);
	} else {
		/* Cancelling a pending reservation frees no busy leaves, so
		 * nothing else can be promoted by it. */
		unclaim(p, idx);
		e->reserve_for = VE_HOLDER_NONE;
	}
	return 0;
}

int ve_pool_op_join(struct ve_pool *p, uint16_t idx, int32_t client)
{
	if (idx >= p->nentries || client < 0)
		return -EINVAL;
	struct ve_pool_entry *e = &p->e[idx];
	if (e->state != VE_ENTRY_LEASED && e->state != VE_ENTRY_DRAINING)
		return -EPERM;
	if (!e->outstanding || (e->holder != client && e->holder != VE_HOLDER_SHARED))
		return -EPERM;
	e->outstanding++;
	return 0;
}

int ve_pool_op_start(struct ve_pool *p, uint16_t idx)
{
	if (!valid(p, idx))
		return -EINVAL;
	struct ve_pool_entry *e = &p->e[idx];
	if (e->state != VE_ENTRY_LEASED || !e->gate_open)
		return -EPERM;
	if (e->outstanding == UINT32_MAX)
		return -EOVERFLOW;
	e->outstanding++;
	return 0;
}

int ve_pool_op_done(struct ve_pool *p, uint16_t idx)
{
	if (!valid(p, idx))
		return -EINVAL;
	struct ve_pool_entry *e = &p->e[idx];
	/* Only LEASED and DRAINING entries ever have outstanding work. */
	if (e->outstanding == 0)
		return -EPERM;
	if (--e->outstanding == 0 && e->state == VE_ENTRY_DRAINING) {
		release(p, idx);
		return 1;
	}
	return 0;
}

bool ve_pool_holds(const struct ve_pool *p, uint16_t idx, int32_t client)
{
	return valid(p, idx) && p->e[idx].state == VE_ENTRY_LEASED && p->e[idx].gate_open &&
	       is_sharer(p, idx, client);
}

void ve_pool_release_client(struct ve_pool *p, int32_t client)
{
	if (client < 0)
		return;
	/* Drop the client's pending claims first, so that releasing its own
	 * leases below cannot promote them. */
	for (uint16_t i = 0; i < p->nentries; i++)
		if (ve_pool_pending(p, i) && p->e[i].reserve_for == client)
			ve_pool_unreserve(p, i);
	for (uint16_t i = 0; i < p->nentries; i++) {
		struct ve_pool_entry *e = &p->e[i];
		if (e->state == VE_ENTRY_RESERVED && e->reserve_for == client) {
			ve_pool_unreserve(p, i);
		} else if (e->state == VE_ENTRY_LEASED && is_sharer(p, i, client)) {
			if (p->nsharers[i] == 1) {
				ve_pool_close_gate(p, i);
				continue;
			}
			/* Other sharers keep the lease; the order of the rest does
			 * not matter. */
			unsigned n = p->nsharers[i];
			for (unsigned k = 0; k < n; k++) {
				if (p->sharers[i][k] == client) {
					p->sharers[i][k] = p->sharers[i][n - 1];
					break;
				}
			}
			p->nsharers[i] = (uint8_t)(n - 1);
			if (n - 1 == 1)
				e->holder = p->sharers[i][0];
		}
		/* DRAINING entries keep draining: their completions still come. */
	}
}

/* ---- introspection ---- */

const char *ve_entry_state_name(int state)
{
	switch (state) {
	case VE_ENTRY_IDLE:
		return "idle";
	case VE_ENTRY_LEASED:
		return "leased";
	case VE_ENTRY_DRAINING:
		return "draining";
	case VE_ENTRY_RESERVED:
		return "reserved";
	default:
		return "?";
	}
}

const char *ve_entry_kind_name(int kind)
{
	switch (kind) {
	case VE_ENTRY_LEAF:
		return "leaf";
	case VE_ENTRY_NODE:
		return "node";
	case VE_ENTRY_ROOT:
		return "root";
	case VE_ENTRY_REMAINDER:
		return "remainder";
	default:
		return "?";
	}
}

void ve_pool_dump(const struct ve_pool *p, void *file)
{
	FILE *f = file;

	fprintf(f,
		"pool: %u leaves, %u SMs, %u entries, busy %#" PRIx64 ", claimed %#" PRIx64
		", fingerprint %016" PRIx64 "\n",
		p->nleaves, p->total_sms, p->nentries, p->busy, p->claimed, p->fingerprint);
	for (uint32_t i = 0; i < p->nentries; i++) {
		const struct ve_pool_entry *e = &p->e[i];
		fprintf(f,
			"%3u %-9s L%u %3u SMs leaves %016" PRIx64 " %-8s%s holder %d reserve %d"
			" outstanding %u\n",
			i, ve_entry_kind_name(e->kind), e->level, e->sms, e->leaves,
			ve_entry_state_name(e->state),
			ve_pool_pending(p, (uint16_t)i) ? "+pend" : "", e->holder, e->reserve_for,
			e->outstanding);
	}
}
