/* SPDX-License-Identifier: MIT */
/*
 * Pool tests: hierarchy shape and the bound rule (against an independent
 * re-derivation), conflicts (against brute-force SM-set intersection), the
 * transition table (exhaustively), drains, pending reservations, client
 * release, and a seeded random stress test against a brute-force reference
 * model (replay with VE_SEED=<seed>, length with VE_POOL_STEPS=<n>).
 */
#include "../harness.h"
#include "pool/pool.h"
#include "util/util.h"

#include <errno.h>
#include <stdbool.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- leaf lists ---- */

struct leaf_list {
	const char *name;
	uint32_t n;
	uint32_t sms[VE_POOL_MAX_LEAVES];
};

static struct leaf_list lists[7];
static int nlists;

__attribute__((constructor)) static void make_lists(void)
{
	struct leaf_list *l;

	l = &lists[nlists++];
	l->name = "h200 15x8+12";
	l->n = 16;
	for (int i = 0; i < 15; i++)
		l->sms[i] = 8;
	l->sms[15] = 12;

	l = &lists[nlists++];
	l->name = "108 13x8+4";
	l->n = 14;
	for (int i = 0; i < 13; i++)
		l->sms[i] = 8;
	l->sms[13] = 4;

	l = &lists[nlists++];
	l->name = "16x8";
	l->n = 16;
	for (int i = 0; i < 16; i++)
		l->sms[i] = 8;

	l = &lists[nlists++];
	l->name = "1 leaf";
	l->n = 1;
	l->sms[0] = 132;

	l = &lists[nlists++];
	l->name = "2 leaves";
	l->n = 2;
	l->sms[0] = 64;
	l->sms[1] = 68;

	/* Unequal sizes catch an SM sum taken from the wrong leaves. */
	l = &lists[nlists++];
	l->name = "7 leaves";
	l->n = 7;
	static const uint32_t seven[7] = {3, 5, 7, 8, 8, 9, 12};
	memcpy(l->sms, seven, sizeof(seven));

	l = &lists[nlists++];
	l->name = "64 leaves";
	l->n = 64;
	for (int i = 0; i < 64; i++)
		l->sms[i] = 2 + (uint32_t)(i % 5);
}

static const struct leaf_list *h200(void)
{
	return &lists[0];
}

/* ---- explicit SM sets, built from the leaf list alone ---- */

#define MAX_SMS 1024

struct smset {
	uint32_t n;
	uint16_t sm[MAX_SMS]; /* ascending */
};

static struct smset smsets[VE_POOL_MAX_ENTRIES];

/* SMs are numbered leaf after leaf: leaf i owns [prefix(i), prefix(i) + sms[i]). */
static void build_smset(const struct leaf_list *l, uint64_t leaves, struct smset *s)
{
	uint32_t base = 0;
	s->n = 0;
	for (uint32_t i = 0; i < l->n; i++) {
		if ((leaves >> i) & 1)
			for (uint32_t k = 0; k < l->sms[i]; k++)
				s->sm[s->n++] = (uint16_t)(base + k);
		base += l->sms[i];
	}
}

static bool smset_intersect(const struct smset *a, const struct smset *b)
{
	uint32_t i = 0, j = 0;
	while (i < a->n && j < b->n) {
		if (a->sm[i] == b->sm[j])
			return true;
		if (a->sm[i] < b->sm[j])
			i++;
		else
			j++;
	}
	return false;
}

static uint64_t leaf_range(uint32_t lo, uint32_t hi)
{
	uint64_t m = 0;
	for (uint32_t i = lo; i < hi; i++)
		m |= 1ull << i;
	return m;
}

/* ---- independent re-derivation of the documented keep order ---- */

struct xnode {
	uint32_t lo, hi, depth;
};

struct expect {
	uint32_t n;
	uint64_t leaves[VE_POOL_MAX_ENTRIES];
	uint8_t kind[VE_POOL_MAX_ENTRIES];
	uint8_t level[VE_POOL_MAX_ENTRIES];
};

/* Breadth-first over the tree: level order, left to right within a level. */
static int bfs_nodes(uint32_t nleaves, struct xnode *out)
{
	int head = 0, tail = 0;
	out[tail++] = (struct xnode){0, nleaves, 0};
	while (head < tail) {
		struct xnode x = out[head++];
		if (x.hi - x.lo > 1) {
			uint32_t mid = x.lo + (x.hi - x.lo) / 2;
			out[tail++] = (struct xnode){x.lo, mid, x.depth + 1};
			out[tail++] = (struct xnode){mid, x.hi, x.depth + 1};
		}
	}
	return tail;
}

static void expect_add(struct expect *x, uint32_t cap, uint64_t m, uint8_t kind, uint8_t level)
{
	if (m == 0 || x->n >= cap)
		return;
	for (uint32_t i = 0; i < x->n; i++)
		if (x->leaves[i] == m)
			return;
	x->leaves[x->n] = m;
	x->kind[x->n] = kind;
	x->level[x->n] = level;
	x->n++;
}

static void expected_entries(uint32_t nleaves, uint32_t max_entries, struct expect *x)
{
	static struct xnode nodes[2 * VE_POOL_MAX_LEAVES];
	int nn = bfs_nodes(nleaves, nodes);
	uint32_t cap = max_entries == 0 || max_entries > VE_POOL_MAX_ENTRIES ? VE_POOL_MAX_ENTRIES
									     : max_entries;
	uint64_t all = leaf_range(0, nleaves);
	uint32_t maxdepth = 0;

	x->n = 0;
	for (int i = 0; i < nn; i++)
		maxdepth = nodes[i].depth > maxdepth ? nodes[i].depth : maxdepth;
	expect_add(x, cap, all, VE_ENTRY_ROOT, 0);
	for (uint32_t leaf = 0; leaf < nleaves; leaf++)
		for (int i = 0; i < nn; i++)
			if (nodes[i].lo == leaf && nodes[i].hi == leaf + 1)
				expect_add(x, cap, 1ull << leaf, VE_ENTRY_LEAF,
					   (uint8_t)nodes[i].depth);
	for (int i = 1; i < nn; i++)
		if (nodes[i].hi - nodes[i].lo > 1)
			expect_add(x, cap, leaf_range(nodes[i].lo, nodes[i].hi), VE_ENTRY_NODE,
				   (uint8_t)nodes[i].depth);
	for (uint32_t leaf = 0; leaf < nleaves; leaf++)
		for (int i = 1; i < nn; i++)
			if (nodes[i].lo == leaf && nodes[i].hi == leaf + 1)
				expect_add(x, cap, all & ~(1ull << leaf), VE_ENTRY_REMAINDER,
					   (uint8_t)nodes[i].depth);
	for (uint32_t d = maxdepth + 1; d-- > 1;)
		for (int i = 1; i < nn; i++)
			if (nodes[i].depth == d && nodes[i].hi - nodes[i].lo > 1)
				expect_add(x, cap, all & ~leaf_range(nodes[i].lo, nodes[i].hi),
					   VE_ENTRY_REMAINDER, (uint8_t)d);
}

/* ---- structure checks ---- */

static struct ve_pool P, Q; /* too big for comfortable stacks under sanitizers */

static void check_structure(const struct ve_pool *p, const struct leaf_list *l, uint32_t bound)
{
	static struct expect x;
	uint64_t all = leaf_range(0, l->n);
	uint32_t total = 0;

	for (uint32_t i = 0; i < l->n; i++)
		total += l->sms[i];
	VE_CHECK_EQ(p->magic, VE_POOL_MAGIC);
	VE_CHECK_EQ(p->version, VE_POOL_VERSION);
	VE_CHECK_EQ(p->nleaves, l->n);
	VE_CHECK_EQ(p->total_sms, total);
	VE_CHECK(p->busy == 0 && p->claimed == 0);

	expected_entries(l->n, bound, &x);
	VE_CHECK_EQ(p->nentries, x.n);
	for (uint32_t i = 0; i < p->nentries; i++) {
		const struct ve_pool_entry *e = &p->e[i];
		VE_CHECK_MSG(e->leaves == x.leaves[i], "%s entry %u: %#llx vs %#llx", l->name, i,
			     (unsigned long long)e->leaves, (unsigned long long)x.leaves[i]);
		uint8_t kind = x.kind[i];
		if (l->n == 1)
			kind = VE_ENTRY_ROOT;
		VE_CHECK_EQ(e->kind, kind);
		VE_CHECK_EQ(e->level, x.level[i]);
		VE_CHECK_EQ(e->state, VE_ENTRY_IDLE);
		VE_CHECK_EQ(e->holder, VE_HOLDER_NONE);
		VE_CHECK_EQ(e->reserve_for, VE_HOLDER_NONE);
		VE_CHECK(e->outstanding == 0 && e->gate_open == 0);
		VE_CHECK_EQ(ve_pool_find(p, e->leaves), i);
	}

	/* Every entry's SMs: the size of its SM set, from the leaf list. */
	for (uint32_t i = 0; i < p->nentries; i++) {
		build_smset(l, p->e[i].leaves, &smsets[i]);
		VE_CHECK_EQ(p->e[i].sms, smsets[i].n);
	}
	/* Conflict answers vs brute-force SM intersection, every pair. */
	for (uint32_t a = 0; a < p->nentries; a++)
		for (uint32_t b = 0; b < p->nentries; b++)
			VE_CHECK_MSG(ve_pool_conflict(p, (uint16_t)a, (uint16_t)b) ==
					 smset_intersect(&smsets[a], &smsets[b]),
				     "%s: entries %u %u", l->name, a, b);

	VE_CHECK(p->root < p->nentries);
	VE_CHECK(p->e[p->root].leaves == all);
	VE_CHECK_EQ(p->e[p->root].sms, total);
	VE_CHECK_EQ(p->e[p->root].parent, VE_POOL_NONE);
	VE_CHECK_EQ(p->e[p->root].remainder, VE_POOL_NONE);
	for (uint32_t i = 0; i < l->n; i++) {
		uint16_t le = p->leaf_entry[i];
		VE_CHECK(le < p->nentries);
		VE_CHECK(p->e[le].leaves == 1ull << i);
		VE_CHECK_EQ(p->e[le].sms, l->sms[i]);
		VE_CHECK_EQ(p->e[le].child[0], VE_POOL_NONE);
		VE_CHECK_EQ(p->e[le].child[1], VE_POOL_NONE);
	}

	uint32_t full_count = l->n == 1 ? 1 : 4 * l->n - 5;
	bool full = x.n == full_count;
	for (uint32_t i = 0; i < p->nentries; i++) {
		const struct ve_pool_entry *e = &p->e[i];
		if (e->kind == VE_ENTRY_REMAINDER) {
			VE_CHECK(e->complement < p->nentries);
			const struct ve_pool_entry *c = &p->e[e->complement];
			VE_CHECK(c->kind != VE_ENTRY_REMAINDER);
			VE_CHECK(e->leaves == (all & ~c->leaves));
			VE_CHECK_EQ(c->remainder, i);
			VE_CHECK_EQ(e->level, c->level);
			VE_CHECK(e->parent == VE_POOL_NONE && e->remainder == VE_POOL_NONE);
			VE_CHECK(e->child[0] == VE_POOL_NONE && e->child[1] == VE_POOL_NONE);
			continue;
		}
		VE_CHECK_EQ(e->complement, VE_POOL_NONE);
		if (i != p->root) {
			/* Parent strictly covers the entry. */
			VE_CHECK(e->parent < p->nentries);
			const struct ve_pool_entry *par = &p->e[e->parent];
			VE_CHECK((par->leaves & e->leaves) == e->leaves &&
				 par->leaves != e->leaves);
			VE_CHECK(par->level < e->level);
			if (e->remainder != VE_POOL_NONE)
				VE_CHECK(p->e[e->remainder].leaves == (all & ~e->leaves));
			else
				VE_CHECK(!full ||
					 ve_pool_find(p, all & ~e->leaves) == VE_POOL_NONE);
			if (full)
				VE_CHECK(e->remainder != VE_POOL_NONE);
		}
		uint64_t cu = 0;
		for (int k = 0; k < 2; k++) {
			uint16_t c = e->child[k];
			if (c == VE_POOL_NONE)
				continue;
			VE_CHECK(c < p->nentries);
			VE_CHECK_EQ(p->e[c].parent, i);
			VE_CHECK_EQ(p->e[c].level, e->level + 1);
			VE_CHECK((p->e[c].leaves & e->leaves) == p->e[c].leaves);
			VE_CHECK((p->e[c].leaves & cu) == 0);
			cu |= p->e[c].leaves;
		}
		if (full && e->kind != VE_ENTRY_LEAF && !(l->n == 1))
			VE_CHECK(cu == e->leaves);
	}

	/* by_size: a permutation, ascending SMs, ties by index. */
	uint8_t seen[VE_POOL_MAX_ENTRIES] = {0};
	for (uint32_t i = 0; i < p->nentries; i++) {
		uint16_t b = p->by_size[i];
		VE_CHECK(b < p->nentries && !seen[b]);
		seen[b] = 1;
		if (i > 0) {
			uint16_t a = p->by_size[i - 1];
			VE_CHECK(p->e[a].sms < p->e[b].sms ||
				 (p->e[a].sms == p->e[b].sms && a < b));
		}
	}
}

VE_TEST(hierarchy_all_lists)
{
	for (int li = 0; li < nlists; li++) {
		const struct leaf_list *l = &lists[li];
		VE_CHECK_EQ(ve_pool_init(&P, l->sms, l->n, 0), 0);
		check_structure(&P, l, 0);
		/* Full hierarchy: 2n-1 tree nodes + 2n-2 remainders, minus the two
		 * remainders of the root's children (each is the sibling). */
		VE_CHECK_EQ(P.nentries, l->n == 1 ? 1 : 4 * l->n - 5);
		ve_pool_fini(&P);
	}
}

VE_TEST(hierarchy_bounded_all_lists)
{
	for (int li = 0; li < nlists; li++) {
		const struct leaf_list *l = &lists[li];
		uint32_t need = l->n == 1 ? 1 : l->n + 1;
		for (uint32_t b = need; b <= need + 3 * l->n && b <= VE_POOL_MAX_ENTRIES; b++) {
			VE_CHECK_EQ(ve_pool_init(&P, l->sms, l->n, b), 0);
			check_structure(&P, l, b);
		}
		VE_CHECK_EQ(ve_pool_init(&P, l->sms, l->n, need - 1 ? need - 1 : 0),
			    need - 1 ? -EINVAL : 0);
	}
}

VE_TEST(h200_numbers)
{
	const struct leaf_list *l = h200();

	VE_CHECK_EQ(ve_pool_init(&P, l->sms, l->n, 0), 0);
	VE_CHECK_EQ(P.nentries, 59);
	VE_CHECK_EQ(P.total_sms, 132);
	VE_CHECK_EQ(P.root, 0);
	for (uint32_t i = 0; i < 16; i++)
		VE_CHECK_EQ(P.leaf_entry[i], 1 + i);
	/* Level-1 nodes: 64 and 68 SMs, each the other's remainder. */
	VE_CHECK(P.e[17].leaves == 0x00ff && P.e[17].sms == 64);
	VE_CHECK(P.e[18].leaves == 0xff00 && P.e[18].sms == 68);
	VE_CHECK(P.e[17].remainder == 18 && P.e[18].remainder == 17);
	/* Remainder of leaf 0: 124 SMs, the paper's example. */
	VE_CHECK(P.e[31].kind == VE_ENTRY_REMAINDER && P.e[31].sms == 124 &&
		 P.e[31].complement == 1);
	VE_CHECK_EQ(P.e[1].remainder, 31);
	/* Remainder of leaf 15 (12 SMs): 120 SMs. */
	VE_CHECK_EQ(P.e[46].sms, 120);
	/* Deepest internal remainders first: [0,2) -> 116 SMs at index 47. */
	VE_CHECK(P.e[47].leaves == 0xfffc && P.e[47].sms == 116);
	/* Last: remainders of level-2 nodes, [12,16) -> 96 SMs. */
	VE_CHECK(P.e[58].leaves == 0x0fff && P.e[58].sms == 96);
	/* Smallest first: the 8-SM leaves, then the 12-SM leaf. */
	VE_CHECK_EQ(P.by_size[0], 1);
	VE_CHECK_EQ(P.by_size[15], 16);
	VE_CHECK_EQ(P.by_size[58], 0);
	VE_CHECK_EQ(P.e[P.by_size[57]].sms, 124);

	/* Bounds: 17 = root + leaves; 24 adds 7 nodes top-down; 32 adds all 14
	 * nodes and one leaf remainder; 40 adds nine leaf remainders. */
	VE_CHECK_EQ(ve_pool_init(&P, l->sms, l->n, 16), -EINVAL);
	VE_CHECK_EQ(P.magic, 0);
	VE_CHECK_EQ(ve_pool_init(&P, l->sms, l->n, 17), 0);
	VE_CHECK_EQ(P.nentries, 17);
	for (uint32_t i = 1; i < 17; i++) {
		VE_CHECK_EQ(P.e[i].parent, 0); /* nearest kept ancestor */
		VE_CHECK_EQ(P.e[i].remainder, VE_POOL_NONE);
	}
	VE_CHECK(P.e[0].child[0] == VE_POOL_NONE && P.e[0].child[1] == VE_POOL_NONE);

	VE_CHECK_EQ(ve_pool_init(&P, l->sms, l->n, 24), 0);
	VE_CHECK_EQ(P.nentries, 24);
	static const uint64_t n24[7] = {0x00ff, 0xff00, 0x000f, 0x00f0, 0x0f00, 0xf000, 0x0003};
	for (int i = 0; i < 7; i++)
		VE_CHECK(P.e[17 + i].leaves == n24[i] && P.e[17 + i].kind == VE_ENTRY_NODE);
	VE_CHECK_EQ(P.e[1].parent, 23);		     /* leaf 0 under [0,2) */
	VE_CHECK_EQ(P.e[3].parent, 19);		     /* leaf 2: [2,4) dropped, so [0,4) */
	VE_CHECK_EQ(P.e[19].child[0], 23);	     /* [0,4) -> [0,2) kept */
	VE_CHECK_EQ(P.e[19].child[1], VE_POOL_NONE); /* [2,4) dropped */

	VE_CHECK_EQ(ve_pool_init(&P, l->sms, l->n, 32), 0);
	VE_CHECK_EQ(P.nentries, 32);
	VE_CHECK(P.e[31].kind == VE_ENTRY_REMAINDER && P.e[31].leaves == 0xfffe);
	VE_CHECK_EQ(P.e[30].kind, VE_ENTRY_NODE);

	VE_CHECK_EQ(ve_pool_init(&P, l->sms, l->n, 40), 0);
	VE_CHECK_EQ(P.nentries, 40);
	for (uint32_t i = 31; i < 40; i++)
		VE_CHECK(P.e[i].kind == VE_ENTRY_REMAINDER && P.e[i].complement == i - 30);

	VE_CHECK_EQ(ve_pool_init(&P, l->sms, l->n, 1000), 0); /* capped, then full */
	VE_CHECK_EQ(P.nentries, 59);
}

VE_TEST(init_errors)
{
	uint32_t one = 8, zero[3] = {8, 0, 8};
	static uint32_t many[65];
	for (int i = 0; i < 65; i++)
		many[i] = 8;
	VE_CHECK_EQ(ve_pool_init(&P, &one, 0, 0), -EINVAL);
	VE_CHECK_EQ(ve_pool_init(&P, NULL, 1, 0), -EINVAL);
	VE_CHECK_EQ(ve_pool_init(&P, many, 65, 0), -EINVAL);
	VE_CHECK_EQ(ve_pool_init(&P, zero, 3, 0), -EINVAL);
	VE_CHECK_EQ(ve_pool_init(&P, many, 64, 64), -EINVAL);
	VE_CHECK_EQ(ve_pool_init(&P, many, 64, 65), 0);
	VE_CHECK_EQ(P.nentries, 65);
	VE_CHECK_EQ(ve_pool_init(&P, &one, 1, 1), 0);
	VE_CHECK(P.nentries == 1 && P.root == 0 && P.leaf_entry[0] == 0);
	VE_CHECK_EQ(P.e[0].kind, VE_ENTRY_ROOT);
	VE_CHECK_EQ(P.e[0].remainder, VE_POOL_NONE);
}

static uint64_t child_fingerprint(const struct leaf_list *l)
{
	int fd[2];
	uint64_t fp = 0;
	VE_CHECK_EQ(pipe(fd), 0);
	pid_t pid = fork();
	VE_CHECK(pid >= 0);
	if (pid == 0) {
		static struct ve_pool c;
		memset(&c, 0x5a, sizeof(c)); /* garbage must not leak into the result */
		int ok = ve_pool_init(&c, l->sms, l->n, 0) == 0;
		ssize_t w = ok ? write(fd[1], &c.fingerprint, sizeof(c.fingerprint)) : 0;
		_exit(w == (ssize_t)sizeof(c.fingerprint) ? 0 : 1);
	}
	close(fd[1]);
	ssize_t r = read(fd[0], &fp, sizeof(fp));
	close(fd[0]);
	int st = 0;
	waitpid(pid, &st, 0);
	VE_CHECK(r == (ssize_t)sizeof(fp) && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	return fp;
}

VE_TEST(fingerprint_and_determinism)
{
	const struct leaf_list *l = h200();

	memset(&P, 0xa5, sizeof(P));
	memset(&Q, 0x00, sizeof(Q));
	VE_CHECK_EQ(ve_pool_init(&P, l->sms, l->n, 0), 0);
	VE_CHECK_EQ(ve_pool_init(&Q, l->sms, l->n, 0), 0);
	VE_CHECK(P.fingerprint != 0 && P.fingerprint == Q.fingerprint);
	/* The whole struct, not only the fingerprint: it may sit in shared memory. */
	VE_CHECK(memcmp(&P, &Q, sizeof(P)) == 0);
	VE_CHECK(child_fingerprint(l) == P.fingerprint);

	for (int li = 1; li < nlists; li++) {
		VE_CHECK_EQ(ve_pool_init(&Q, lists[li].sms, lists[li].n, 0), 0);
		VE_CHECK(Q.fingerprint != P.fingerprint);
	}
	uint32_t swapped[16];
	memcpy(swapped, l->sms, sizeof(swapped));
	swapped[0] = 12, swapped[15] = 8; /* same multiset, other order */
	VE_CHECK_EQ(ve_pool_init(&Q, swapped, 16, 0), 0);
	VE_CHECK(Q.fingerprint != P.fingerprint);
	VE_CHECK_EQ(ve_pool_init(&Q, l->sms, l->n, 32), 0);
	VE_CHECK(Q.fingerprint != P.fingerprint);

	/* The documented definition, from the independently derived entry list:
	 * mix64(magic << 32 | version), then combine nleaves, every leaf's SMs,
	 * nentries and every entry's leaf mask in index order. */
	static struct expect x;
	for (int li = 0; li < nlists; li++) {
		for (uint32_t b = 0; b <= 40; b += 40) {
			const struct leaf_list *m = &lists[li];
			uint32_t need = m->n == 1 ? 1 : m->n + 1;
			uint32_t bound = b && b < need ? need : b;
			VE_CHECK_EQ(ve_pool_init(&Q, m->sms, m->n, bound), 0);
			expected_entries(m->n, bound, &x);
			uint64_t h = ve__mix64(((uint64_t)VE_POOL_MAGIC << 32) | VE_POOL_VERSION);
			h = ve__hash_combine(h, m->n);
			for (uint32_t i = 0; i < m->n; i++)
				h = ve__hash_combine(h, m->sms[i]);
			h = ve__hash_combine(h, x.n);
			for (uint32_t i = 0; i < x.n; i++)
				h = ve__hash_combine(h, x.leaves[i]);
			VE_CHECK_MSG(Q.fingerprint == h, "%s bound %u", m->name, bound);
		}
	}
}

VE_TEST(find_names_dump)
{
	const struct leaf_list *l = h200();
	VE_CHECK_EQ(ve_pool_init(&P, l->sms, l->n, 0), 0);
	VE_CHECK_EQ(ve_pool_find(&P, 0), VE_POOL_NONE);
	VE_CHECK_EQ(ve_pool_find(&P, 0x5), VE_POOL_NONE);     /* not contiguous */
	VE_CHECK_EQ(ve_pool_find(&P, 0x10000), VE_POOL_NONE); /* no such leaf */
	VE_CHECK_EQ(ve_pool_find(&P, 0xffff), 0);
	VE_CHECK(strcmp(ve_entry_state_name(VE_ENTRY_IDLE), "idle") == 0);
	VE_CHECK(strcmp(ve_entry_state_name(VE_ENTRY_LEASED), "leased") == 0);
	VE_CHECK(strcmp(ve_entry_state_name(VE_ENTRY_DRAINING), "draining") == 0);
	VE_CHECK(strcmp(ve_entry_state_name(VE_ENTRY_RESERVED), "reserved") == 0);
	VE_CHECK(strcmp(ve_entry_state_name(42), "?") == 0);
	VE_CHECK(strcmp(ve_entry_kind_name(VE_ENTRY_REMAINDER), "remainder") == 0);

	VE_CHECK_EQ(ve_pool_lease(&P, 1, 7, false), 0);
	VE_CHECK_EQ(ve_pool_op_start(&P, 1), 0);
	FILE *f = tmpfile();
	VE_CHECK(f != NULL);
	ve_pool_dump(&P, f);
	rewind(f);
	char line[256];
	int nl = 0, leased = 0;
	while (fgets(line, sizeof(line), f)) {
		nl++;
		if (strstr(line, "leased") && strstr(line, "holder 7") &&
		    strstr(line, "outstanding 1"))
			leased++;
	}
	fclose(f);
	VE_CHECK_EQ(nl, 1 + 59);
	VE_CHECK_EQ(leased, 1);
}

/* ---- the transition table, exhaustively ---- */

enum variant { V_IDLE, V_IDLE_PEND, V_LEASED0, V_LEASED1, V_DRAIN, V_DRAIN_PEND, V_RESERVED, NV };
static const char *vname[NV] = {"idle",	       "idle+pending",	   "leased(0)", "leased(1)",
				"draining(1)", "draining+pending", "reserved"};

enum opk {
	O_LEASE_OWN,
	O_LEASE_OWN_SHARE,
	O_LEASE_OTHER,
	O_LEASE_OTHER_SHARE,
	O_CLOSE,
	O_RESERVE_OWN,
	O_RESERVE_OTHER,
	O_UNRESERVE,
	O_OP_START,
	O_OP_DONE,
	NO
};
static const char *oname[NO] = {
    "lease(own)",   "lease(own,share)", "lease(other)", "lease(other,share)", "close_gate",
    "reserve(own)", "reserve(other)",	"unreserve",	"op_start",	      "op_done"};

#define OWN   1
#define OTHER 3
#define THIRD 2

/* Target X = node [2,4) of the H200 pool; its sub-leaf 3 is used to make X
 * pending while it is IDLE. */
static uint16_t X, SUB;

static void make_variant(enum variant v)
{
	VE_CHECK_EQ(ve_pool_init(&P, h200()->sms, 16, 0), 0);
	X = ve_pool_find(&P, 0xc);
	SUB = P.leaf_entry[3];
	VE_CHECK(X != VE_POOL_NONE);
	switch (v) {
	case V_IDLE:
		break;
	case V_IDLE_PEND:
		VE_CHECK_EQ(ve_pool_lease(&P, SUB, THIRD, false), 0);
		VE_CHECK_EQ(ve_pool_reserve(&P, X, OWN), VE_POOL_PENDING);
		break;
	case V_LEASED0:
		VE_CHECK_EQ(ve_pool_lease(&P, X, OWN, false), 0);
		break;
	case V_LEASED1:
	case V_DRAIN:
	case V_DRAIN_PEND:
		VE_CHECK_EQ(ve_pool_lease(&P, X, OWN, false), 0);
		VE_CHECK_EQ(ve_pool_op_start(&P, X), 0);
		if (v != V_LEASED1)
			VE_CHECK_EQ(ve_pool_close_gate(&P, X), 0);
		if (v == V_DRAIN_PEND)
			VE_CHECK_EQ(ve_pool_reserve(&P, X, OWN), VE_POOL_PENDING);
		break;
	case V_RESERVED:
		VE_CHECK_EQ(ve_pool_reserve(&P, X, OWN), 0);
		break;
	default:
		break;
	}
}

static int do_op(enum opk o, uint16_t idx)
{
	switch (o) {
	case O_LEASE_OWN:
		return ve_pool_lease(&P, idx, OWN, false);
	case O_LEASE_OWN_SHARE:
		return ve_pool_lease(&P, idx, OWN, true);
	case O_LEASE_OTHER:
		return ve_pool_lease(&P, idx, OTHER, false);
	case O_LEASE_OTHER_SHARE:
		return ve_pool_lease(&P, idx, OTHER, true);
	case O_CLOSE:
		return ve_pool_close_gate(&P, idx);
	case O_RESERVE_OWN:
		return ve_pool_reserve(&P, idx, OWN);
	case O_RESERVE_OTHER:
		return ve_pool_reserve(&P, idx, OTHER);
	case O_UNRESERVE:
		return ve_pool_unreserve(&P, idx);
	case O_OP_START:
		return ve_pool_op_start(&P, idx);
	case O_OP_DONE:
		return ve_pool_op_done(&P, idx);
	default:
		return -999;
	}
}

/* Expected return code and state after; NOCHG = success without any change. */
#define NOCHG (-1)
struct outcome {
	int rc;
	int state; /* state after on success, NOCHG, or ignored on error */
	int transitions;
};

/* clang-format off */
#define OK(st, n)  {0, VE_ENTRY_##st, n}
#define SAME       {0, NOCHG, 0}
#define PEND(st)   {VE_POOL_PENDING, VE_ENTRY_##st, 0}
#define REL(st, n) {1, VE_ENTRY_##st, n}
#define ERR(e)     {-(e), 0, 0}
/* Columns: lease(own), lease(own,share), lease(other), lease(other,share),
 * close_gate, reserve(own), reserve(other), unreserve, op_start, op_done. */
static const struct outcome table[NV][NO] = {
	[V_IDLE] =       {OK(LEASED, 1), OK(LEASED, 1), OK(LEASED, 1), OK(LEASED, 1),
			  ERR(EPERM), OK(RESERVED, 1), OK(RESERVED, 1),
			  ERR(EPERM), ERR(EPERM), ERR(EPERM)},
	[V_IDLE_PEND] =  {ERR(EBUSY), ERR(EBUSY), ERR(EBUSY), ERR(EBUSY),
			  ERR(EPERM), ERR(EBUSY), ERR(EBUSY),
			  OK(IDLE, 0), ERR(EPERM), ERR(EPERM)},
	[V_LEASED0] =    {SAME, SAME, ERR(EBUSY), OK(LEASED, 0),
			  OK(IDLE, 2), ERR(EPERM), ERR(EPERM),
			  ERR(EPERM), OK(LEASED, 0), ERR(EPERM)},
	[V_LEASED1] =    {SAME, SAME, ERR(EBUSY), OK(LEASED, 0),
			  OK(DRAINING, 1), ERR(EPERM), ERR(EPERM),
			  ERR(EPERM), OK(LEASED, 0), OK(LEASED, 0)},
	[V_DRAIN] =      {ERR(EPERM), ERR(EPERM), ERR(EPERM), ERR(EPERM),
			  ERR(EPERM), PEND(DRAINING), PEND(DRAINING),
			  ERR(EPERM), ERR(EPERM), REL(IDLE, 1)},
	[V_DRAIN_PEND] = {ERR(EPERM), ERR(EPERM), ERR(EPERM), ERR(EPERM),
			  ERR(EPERM), ERR(EBUSY), ERR(EBUSY),
			  OK(DRAINING, 0), ERR(EPERM), REL(RESERVED, 1)},
	[V_RESERVED] =   {OK(LEASED, 1), OK(LEASED, 1), ERR(EBUSY), ERR(EBUSY),
			  ERR(EPERM), ERR(EPERM), ERR(EPERM),
			  OK(IDLE, 1), ERR(EPERM), ERR(EPERM)},
};
/* clang-format on */

VE_TEST(transition_table_exhaustive)
{
	static struct ve_pool snap;
	int checked = 0;

	for (int v = 0; v < NV; v++) {
		for (int o = 0; o < NO; o++) {
			make_variant((enum variant)v);
			memcpy(&snap, &P, sizeof(P));
			int rc = do_op((enum opk)o, X);
			const struct outcome *w = &table[v][o];
			VE_CHECK_MSG(rc == w->rc, "%s / %s: rc %d, want %d", vname[v], oname[o], rc,
				     w->rc);
			if (rc < 0 || w->state == NOCHG) {
				VE_CHECK_MSG(memcmp(&snap, &P, sizeof(P)) == 0,
					     "%s / %s: refused but changed state", vname[v],
					     oname[o]);
			} else {
				VE_CHECK_MSG(P.e[X].state == w->state, "%s / %s: state %s",
					     vname[v], oname[o], ve_entry_state_name(P.e[X].state));
				VE_CHECK_MSG(
				    P.transitions - snap.transitions == (uint64_t)w->transitions,
				    "%s / %s: %llu transitions", vname[v], oname[o],
				    (unsigned long long)(P.transitions - snap.transitions));
			}
			/* Bad index and bad client: -EINVAL, nothing changes. */
			make_variant((enum variant)v);
			memcpy(&snap, &P, sizeof(P));
			VE_CHECK_EQ(do_op((enum opk)o, (uint16_t)P.nentries), -EINVAL);
			VE_CHECK_EQ(do_op((enum opk)o, VE_POOL_NONE), -EINVAL);
			VE_CHECK(memcmp(&snap, &P, sizeof(P)) == 0);
			checked++;
		}
		VE_CHECK_EQ(ve_pool_lease(&P, X, -1, false), -EINVAL);
		VE_CHECK_EQ(ve_pool_reserve(&P, X, VE_HOLDER_SHARED), -EINVAL);
		VE_CHECK(memcmp(&snap, &P, sizeof(P)) == 0);
	}
	VE_CHECK_EQ(checked, NV * NO);
}

/* ---- drains, pending reservations, release ---- */

VE_TEST(drain_releases_at_last_completion)
{
	VE_CHECK_EQ(ve_pool_init(&P, h200()->sms, 16, 0), 0);
	uint16_t a = P.leaf_entry[4], up = P.e[a].parent;
	VE_CHECK_EQ(ve_pool_lease(&P, a, 1, false), 0);
	VE_CHECK(P.busy == 1ull << 4);
	for (int i = 0; i < 3; i++)
		VE_CHECK_EQ(ve_pool_op_start(&P, a), 0);
	VE_CHECK_EQ(ve_pool_lease(&P, up, 2, false), -EBUSY); /* ancestor conflicts */
	VE_CHECK_EQ(ve_pool_close_gate(&P, a), 0);
	VE_CHECK_EQ(P.e[a].state, VE_ENTRY_DRAINING);
	VE_CHECK_EQ(P.e[a].gate_open, 0);
	VE_CHECK_EQ(ve_pool_op_start(&P, a), -EPERM); /* gate closed: no admission */
	VE_CHECK(!ve_pool_holds(&P, a, 1));
	VE_CHECK_EQ(ve_pool_op_done(&P, a), 0);
	VE_CHECK_EQ(ve_pool_op_done(&P, a), 0);
	VE_CHECK_EQ(P.e[a].state, VE_ENTRY_DRAINING); /* not before */
	VE_CHECK(P.busy == 1ull << 4);
	VE_CHECK_EQ(ve_pool_lease(&P, up, 2, false), -EBUSY);
	VE_CHECK_EQ(ve_pool_op_done(&P, a), 1); /* exactly at the last one */
	VE_CHECK_EQ(P.e[a].state, VE_ENTRY_IDLE);
	VE_CHECK_EQ(P.e[a].holder, VE_HOLDER_NONE);
	VE_CHECK(P.busy == 0);
	VE_CHECK_EQ(ve_pool_op_done(&P, a), -EPERM); /* not after */
	VE_CHECK_EQ(ve_pool_lease(&P, up, 2, false), 0);

	/* Closing an idle lease goes straight through: two transitions. */
	uint64_t t = P.transitions;
	VE_CHECK_EQ(ve_pool_close_gate(&P, up), 0);
	VE_CHECK_EQ(P.e[up].state, VE_ENTRY_IDLE);
	VE_CHECK_EQ(P.transitions - t, 2);
}

VE_TEST(pending_reservation_waits_for_last_drain)
{
	VE_CHECK_EQ(ve_pool_init(&P, h200()->sms, 16, 0), 0);
	uint16_t l0 = P.leaf_entry[0], l1 = P.leaf_entry[1], l2 = P.leaf_entry[2];
	uint16_t l5 = P.leaf_entry[5];
	uint16_t w = ve_pool_find(&P, 0xf); /* [0,4), 32 SMs */
	uint16_t rem = P.e[l0].remainder;   /* 124 SMs: overlaps the claim */
	VE_CHECK(w != VE_POOL_NONE && rem != VE_POOL_NONE);

	VE_CHECK_EQ(ve_pool_lease(&P, l0, 10, false), 0);
	VE_CHECK_EQ(ve_pool_lease(&P, l1, 11, false), 0);
	VE_CHECK_EQ(ve_pool_op_start(&P, l0), 0);
	VE_CHECK_EQ(ve_pool_op_start(&P, l0), 0);
	VE_CHECK_EQ(ve_pool_op_start(&P, l1), 0);
	VE_CHECK_EQ(ve_pool_close_gate(&P, l0), 0);
	VE_CHECK_EQ(ve_pool_close_gate(&P, l1), 0);

	VE_CHECK_EQ(ve_pool_reserve(&P, w, 20), VE_POOL_PENDING);
	VE_CHECK_EQ(P.e[w].state, VE_ENTRY_IDLE);
	VE_CHECK(ve_pool_pending(&P, w));
	VE_CHECK_EQ(P.e[w].reserve_for, 20);
	VE_CHECK(P.claimed == 0xf && P.busy == 0x3);
	/* Unrelated leases of claimed leaves are refused meanwhile ... */
	VE_CHECK_EQ(ve_pool_lease(&P, l2, 12, false), -EBUSY);
	VE_CHECK(!ve_pool_can_admit(&P, l2, 12, false));
	VE_CHECK_EQ(ve_pool_lease(&P, rem, 12, false), -EBUSY);
	VE_CHECK_EQ(ve_pool_reserve(&P, l2, 12), -EBUSY);
	VE_CHECK_EQ(ve_pool_reserve(&P, P.e[w].parent, 12), -EBUSY);
	/* ... while leaves outside the claim stay available. */
	VE_CHECK_EQ(ve_pool_lease(&P, l5, 12, false), 0);

	VE_CHECK_EQ(ve_pool_op_done(&P, l0), 0);
	VE_CHECK(ve_pool_pending(&P, w));
	VE_CHECK_EQ(ve_pool_op_done(&P, l0), 1); /* l0 done, l1 still drains */
	VE_CHECK_EQ(P.e[l0].state, VE_ENTRY_IDLE);
	VE_CHECK_EQ(P.e[w].state, VE_ENTRY_IDLE);
	VE_CHECK(ve_pool_pending(&P, w));
	VE_CHECK_EQ(ve_pool_lease(&P, l0, 12, false), -EBUSY); /* freed but claimed */
	uint64_t t = P.transitions;
	VE_CHECK_EQ(ve_pool_op_done(&P, l1), 1); /* the last conflict */
	VE_CHECK_EQ(P.e[w].state, VE_ENTRY_RESERVED);
	VE_CHECK(!ve_pool_pending(&P, w));
	VE_CHECK_EQ(P.transitions - t, 2); /* l1 -> idle, w -> reserved */
	VE_CHECK(P.claimed == 0 && P.busy == (0xfull | (1ull << 5)));
	VE_CHECK(!ve_pool_can_admit(&P, w, 12, true));
	VE_CHECK(ve_pool_can_admit(&P, w, 20, false));
	VE_CHECK_EQ(ve_pool_lease(&P, w, 12, false), -EBUSY);
	VE_CHECK_EQ(ve_pool_lease(&P, w, 20, false), 0);
	VE_CHECK(P.e[w].reserve_for == VE_HOLDER_NONE && P.e[w].holder == 20);

	/* A pending reservation can be cancelled; it leaves no claim behind. */
	VE_CHECK_EQ(ve_pool_reserve(&P, rem, 30), VE_POOL_PENDING);
	VE_CHECK(P.claimed == 0xfffe);
	VE_CHECK_EQ(ve_pool_unreserve(&P, rem), 0);
	VE_CHECK(P.claimed == 0 && !ve_pool_pending(&P, rem));
	VE_CHECK_EQ(ve_pool_unreserve(&P, rem), -EPERM);
}

VE_TEST(pending_on_draining_entry_itself)
{
	VE_CHECK_EQ(ve_pool_init(&P, h200()->sms, 16, 0), 0);
	uint16_t x = ve_pool_find(&P, 0xff00);
	VE_CHECK_EQ(ve_pool_lease(&P, x, 1, false), 0);
	VE_CHECK_EQ(ve_pool_op_start(&P, x), 0);
	VE_CHECK_EQ(ve_pool_op_start(&P, x), 0);
	VE_CHECK_EQ(ve_pool_reserve(&P, x, 2), -EPERM); /* close the gate first */
	VE_CHECK_EQ(ve_pool_close_gate(&P, x), 0);
	VE_CHECK_EQ(ve_pool_reserve(&P, x, 2), VE_POOL_PENDING);
	VE_CHECK(P.claimed == 0xff00 && P.e[x].state == VE_ENTRY_DRAINING);
	VE_CHECK_EQ(ve_pool_op_done(&P, x), 0);
	VE_CHECK_EQ(P.e[x].state, VE_ENTRY_DRAINING);
	VE_CHECK_EQ(ve_pool_op_done(&P, x), 1);
	VE_CHECK_EQ(P.e[x].state, VE_ENTRY_RESERVED);
	VE_CHECK(P.claimed == 0 && P.busy == 0xff00 && P.e[x].reserve_for == 2);
	VE_CHECK_EQ(P.e[x].holder, VE_HOLDER_NONE);
	VE_CHECK_EQ(ve_pool_lease(&P, P.leaf_entry[9], 1, false), -EBUSY);
	VE_CHECK_EQ(ve_pool_lease(&P, x, 2, false), 0);
}

/* Decision: the claimant may lease free entries inside its own claim (a
 * narrower allocation while the wide one drains); its reservation then also
 * waits for those leases. */
VE_TEST(claimant_may_lease_inside_own_claim)
{
	VE_CHECK_EQ(ve_pool_init(&P, h200()->sms, 16, 0), 0);
	uint16_t l0 = P.leaf_entry[0], l3 = P.leaf_entry[3];
	uint16_t w = ve_pool_find(&P, 0xf);
	VE_CHECK_EQ(ve_pool_lease(&P, l0, 10, false), 0);
	VE_CHECK_EQ(ve_pool_op_start(&P, l0), 0);
	VE_CHECK_EQ(ve_pool_close_gate(&P, l0), 0);
	VE_CHECK_EQ(ve_pool_reserve(&P, w, 20), VE_POOL_PENDING);
	VE_CHECK(!ve_pool_can_admit(&P, l3, 10, false));
	VE_CHECK(ve_pool_can_admit(&P, l3, 20, false));
	VE_CHECK_EQ(ve_pool_lease(&P, l3, 20, false), 0);
	VE_CHECK_EQ(ve_pool_op_start(&P, l3), 0);
	VE_CHECK_EQ(ve_pool_lease(&P, l3, 10, true), -EBUSY); /* no joining over a claim */
	VE_CHECK_EQ(ve_pool_op_done(&P, l0), 1);
	VE_CHECK(ve_pool_pending(&P, w)); /* still waits for the claimant's own lease */
	VE_CHECK_EQ(ve_pool_close_gate(&P, l3), 0);
	VE_CHECK(ve_pool_pending(&P, w));
	VE_CHECK_EQ(ve_pool_op_done(&P, l3), 1);
	VE_CHECK_EQ(P.e[w].state, VE_ENTRY_RESERVED);

	/* Unreserving a RESERVED entry completes a pending one it blocked. */
	uint16_t big = P.e[w].parent; /* [0,8) */
	VE_CHECK_EQ(ve_pool_reserve(&P, big, 30), VE_POOL_PENDING);
	VE_CHECK_EQ(ve_pool_unreserve(&P, w), 0);
	VE_CHECK_EQ(P.e[w].state, VE_ENTRY_IDLE);
	VE_CHECK_EQ(P.e[big].state, VE_ENTRY_RESERVED);
	VE_CHECK_EQ(P.e[big].reserve_for, 30);
}

VE_TEST(shared_lease)
{
	VE_CHECK_EQ(ve_pool_init(&P, h200()->sms, 16, 0), 0);
	uint16_t x = P.root;
	VE_CHECK_EQ(ve_pool_lease(&P, x, 1, false), 0);
	VE_CHECK_EQ(ve_pool_lease(&P, x, 2, false), -EBUSY);
	VE_CHECK(!ve_pool_can_admit(&P, x, 2, false));
	VE_CHECK(ve_pool_can_admit(&P, x, 2, true));
	VE_CHECK_EQ(ve_pool_lease(&P, x, 2, true), 0);
	VE_CHECK_EQ(ve_pool_lease(&P, x, 3, true), 0);
	VE_CHECK_EQ(P.e[x].holder, VE_HOLDER_SHARED);
	VE_CHECK(ve_pool_holds(&P, x, 1) && ve_pool_holds(&P, x, 2) && ve_pool_holds(&P, x, 3));
	VE_CHECK(!ve_pool_holds(&P, x, 4));
	VE_CHECK_EQ(ve_pool_lease(&P, P.leaf_entry[0], 4, true), -EBUSY); /* sharing != overlap */
	for (int c = 4; c < 4 + VE_POOL_MAX_SHARERS - 3; c++)
		VE_CHECK_EQ(ve_pool_lease(&P, x, c, true), 0);
	VE_CHECK_EQ(ve_pool_lease(&P, x, 99, true), -EBUSY); /* sharer table full */
	for (int c = 4; c < 4 + VE_POOL_MAX_SHARERS - 3; c++)
		ve_pool_release_client(&P, c);
	VE_CHECK_EQ(ve_pool_op_start(&P, x), 0);
	ve_pool_release_client(&P, 2);
	VE_CHECK(P.e[x].state == VE_ENTRY_LEASED && P.e[x].holder == VE_HOLDER_SHARED);
	VE_CHECK(!ve_pool_holds(&P, x, 2));
	ve_pool_release_client(&P, 1);
	VE_CHECK(P.e[x].state == VE_ENTRY_LEASED && P.e[x].holder == 3);
	ve_pool_release_client(&P, 3);
	VE_CHECK_EQ(P.e[x].state, VE_ENTRY_DRAINING);
	VE_CHECK_EQ(ve_pool_op_done(&P, x), 1);
	VE_CHECK(P.e[x].state == VE_ENTRY_IDLE && P.busy == 0);
}

VE_TEST(release_client)
{
	VE_CHECK_EQ(ve_pool_init(&P, h200()->sms, 16, 0), 0);
	uint16_t a0 = P.leaf_entry[0], a1 = P.leaf_entry[1], a2 = P.leaf_entry[2];
	uint16_t b8 = ve_pool_find(&P, 0xff00), w = ve_pool_find(&P, 0xf0);
	uint16_t r = ve_pool_find(&P, 0x3000);
	/* Client 5: a busy lease, an idle lease, a reservation, a pending one. */
	VE_CHECK_EQ(ve_pool_lease(&P, a0, 5, false), 0);
	VE_CHECK_EQ(ve_pool_op_start(&P, a0), 0);
	VE_CHECK_EQ(ve_pool_lease(&P, a1, 5, false), 0);
	VE_CHECK_EQ(ve_pool_reserve(&P, a2, 5), 0);
	VE_CHECK_EQ(ve_pool_lease(&P, P.leaf_entry[4], 6, false), 0);
	VE_CHECK_EQ(ve_pool_reserve(&P, w, 5), VE_POOL_PENDING);
	/* Client 6: a lease and a pending reservation waiting on client 5. */
	VE_CHECK_EQ(ve_pool_lease(&P, b8, 6, false), 0);
	uint16_t q = ve_pool_find(&P, 0x3);
	VE_CHECK_EQ(ve_pool_reserve(&P, q, 6), VE_POOL_PENDING);
	VE_CHECK_EQ(ve_pool_reserve(&P, r, 5), VE_POOL_PENDING); /* under 6's lease */

	ve_pool_release_client(&P, 5);
	VE_CHECK_EQ(P.e[a0].state, VE_ENTRY_DRAINING); /* work still running */
	VE_CHECK_EQ(P.e[a1].state, VE_ENTRY_IDLE);
	VE_CHECK_EQ(P.e[a2].state, VE_ENTRY_IDLE);
	VE_CHECK(!ve_pool_pending(&P, w) && !ve_pool_pending(&P, r));
	VE_CHECK(P.claimed == 0x3);		     /* only client 6's claim */
	VE_CHECK_EQ(P.e[b8].state, VE_ENTRY_LEASED); /* other clients untouched */
	VE_CHECK(ve_pool_pending(&P, q));
	VE_CHECK_EQ(ve_pool_op_done(&P, a0), 1);
	VE_CHECK_EQ(P.e[q].state, VE_ENTRY_RESERVED);
	VE_CHECK_EQ(P.e[q].reserve_for, 6);
	ve_pool_release_client(&P, 6);
	VE_CHECK(P.busy == 0 && P.claimed == 0);
	for (uint32_t i = 0; i < P.nentries; i++)
		VE_CHECK(P.e[i].state == VE_ENTRY_IDLE && P.e[i].reserve_for == VE_HOLDER_NONE);
	ve_pool_release_client(&P, -1);
	ve_pool_release_client(&P, 77);
}

/* ---- randomized stress against a brute-force reference model ---- */

#define NCLIENTS 4

struct mentry {
	int state;
	int reserve_for;
	uint32_t out;
	int nh;
	int h[VE_POOL_MAX_SHARERS];
};

struct model {
	uint32_t n;
	uint64_t transitions;
	struct mentry e[VE_POOL_MAX_ENTRIES];
	bool conf[VE_POOL_MAX_ENTRIES][VE_POOL_MAX_ENTRIES]; /* from SM sets */
};

static struct model M;

static bool m_pending(int x)
{
	return M.e[x].reserve_for >= 0 && M.e[x].state != VE_ENTRY_RESERVED;
}

static bool m_busy_conflict(int x)
{
	for (uint32_t y = 0; y < M.n; y++)
		if ((int)y != x && M.e[y].state != VE_ENTRY_IDLE && M.conf[x][y])
			return true;
	return false;
}

static bool m_claim_conflict(int x, int except_client)
{
	for (uint32_t y = 0; y < M.n; y++)
		if (m_pending((int)y) && M.conf[x][y] && M.e[y].reserve_for != except_client)
			return true;
	return false;
}

static bool m_holds(int x, int c)
{
	for (int i = 0; i < M.e[x].nh; i++)
		if (M.e[x].h[i] == c)
			return true;
	return false;
}

static void m_set(int x, int st)
{
	M.e[x].state = st;
	M.transitions++;
}

static void m_promote(void)
{
	bool again = true;
	while (again) {
		again = false;
		for (uint32_t y = 0; y < M.n; y++) {
			if (m_pending((int)y) && M.e[y].state == VE_ENTRY_IDLE &&
			    !m_busy_conflict((int)y)) {
				m_set((int)y, VE_ENTRY_RESERVED);
				again = true;
			}
		}
	}
}

static void m_release(int x)
{
	M.e[x].nh = 0;
	if (M.e[x].reserve_for >= 0) {
		m_set(x, VE_ENTRY_RESERVED);
	} else {
		m_set(x, VE_ENTRY_IDLE);
		m_promote();
	}
}

static int m_lease(int x, int c, bool share, bool dry)
{
	if (x < 0 || (uint32_t)x >= M.n || c < 0)
		return -EINVAL;
	struct mentry *e = &M.e[x];
	switch (e->state) {
	case VE_ENTRY_IDLE:
		if (m_busy_conflict(x) || m_claim_conflict(x, c) || m_pending(x))
			return -EBUSY;
		if (!dry) {
			e->nh = 1;
			e->h[0] = c;
			m_set(x, VE_ENTRY_LEASED);
		}
		return 0;
	case VE_ENTRY_LEASED:
		if (m_holds(x, c))
			return 0;
		if (!share || e->nh >= VE_POOL_MAX_SHARERS || m_claim_conflict(x, c))
			return -EBUSY;
		if (!dry)
			e->h[e->nh++] = c;
		return 0;
	case VE_ENTRY_RESERVED:
		if (e->reserve_for != c)
			return -EBUSY;
		if (!dry) {
			e->reserve_for = -1;
			e->nh = 1;
			e->h[0] = c;
			m_set(x, VE_ENTRY_LEASED);
		}
		return 0;
	default:
		return -EPERM;
	}
}

static int m_close(int x)
{
	if (x < 0 || (uint32_t)x >= M.n)
		return -EINVAL;
	if (M.e[x].state != VE_ENTRY_LEASED)
		return -EPERM;
	m_set(x, VE_ENTRY_DRAINING);
	if (M.e[x].out == 0)
		m_release(x);
	return 0;
}

static int m_reserve(int x, int c)
{
	if (x < 0 || (uint32_t)x >= M.n || c < 0)
		return -EINVAL;
	struct mentry *e = &M.e[x];
	if (e->state != VE_ENTRY_IDLE && e->state != VE_ENTRY_DRAINING)
		return -EPERM;
	if (m_claim_conflict(x, -12345))
		return -EBUSY;
	e->reserve_for = c;
	if (e->state == VE_ENTRY_DRAINING || m_busy_conflict(x))
		return VE_POOL_PENDING;
	m_set(x, VE_ENTRY_RESERVED);
	return 0;
}

static int m_unreserve(int x)
{
	if (x < 0 || (uint32_t)x >= M.n)
		return -EINVAL;
	struct mentry *e = &M.e[x];
	if (e->reserve_for < 0)
		return -EPERM;
	e->reserve_for = -1;
	if (e->state == VE_ENTRY_RESERVED) {
		m_set(x, VE_ENTRY_IDLE);
		m_promote();
	}
	return 0;
}

static int m_op_start(int x)
{
	if (x < 0 || (uint32_t)x >= M.n)
		return -EINVAL;
	if (M.e[x].state != VE_ENTRY_LEASED)
		return -EPERM;
	M.e[x].out++;
	return 0;
}

static int m_op_done(int x)
{
	if (x < 0 || (uint32_t)x >= M.n)
		return -EINVAL;
	if (M.e[x].out == 0)
		return -EPERM;
	if (--M.e[x].out == 0 && M.e[x].state == VE_ENTRY_DRAINING) {
		m_release(x);
		return 1;
	}
	return 0;
}

static void m_release_client(int c)
{
	if (c < 0)
		return;
	for (uint32_t x = 0; x < M.n; x++)
		if (m_pending((int)x) && M.e[x].reserve_for == c)
			M.e[x].reserve_for = -1;
	for (uint32_t x = 0; x < M.n; x++) {
		struct mentry *e = &M.e[x];
		if (e->state == VE_ENTRY_RESERVED && e->reserve_for == c) {
			m_unreserve((int)x);
		} else if (e->state == VE_ENTRY_LEASED && m_holds((int)x, c)) {
			if (e->nh == 1) {
				m_close((int)x);
			} else {
				int k = 0;
				for (int i = 0; i < e->nh; i++)
					if (e->h[i] != c)
						e->h[k++] = e->h[i];
				e->nh = k;
			}
		}
	}
}

/* Invariants of the library's state, checked from first principles (SM sets
 * for overlap) and against the model. */
static void check_invariants(const struct ve_pool *p, uint64_t step)
{
	uint64_t busy = 0, claimed = 0;

	for (uint32_t a = 0; a < p->nentries; a++) {
		const struct ve_pool_entry *e = &p->e[a];
		if (e->state != VE_ENTRY_IDLE) {
			busy |= e->leaves;
			for (uint32_t b = a + 1; b < p->nentries; b++)
				VE_CHECK_MSG(p->e[b].state == VE_ENTRY_IDLE ||
						 !smset_intersect(&smsets[a], &smsets[b]),
					     "step %llu: non-idle entries %u and %u share SMs",
					     (unsigned long long)step, a, b);
		}
		if (ve_pool_pending(p, (uint16_t)a)) {
			VE_CHECK_MSG((claimed & e->leaves) == 0, "step %llu: pending overlap %u",
				     (unsigned long long)step, a);
			claimed |= e->leaves;
			for (uint64_t m = e->leaves; m; m &= m - 1)
				VE_CHECK_EQ(p->claim_by[__builtin_ctzll(m)], a);
			if (e->state == VE_ENTRY_IDLE)
				VE_CHECK_MSG(e->leaves & p->busy,
					     "step %llu: %u pending, not blocked",
					     (unsigned long long)step, a);
		}
		VE_CHECK_EQ(e->gate_open, e->state == VE_ENTRY_LEASED);
		if (e->state == VE_ENTRY_IDLE || e->state == VE_ENTRY_RESERVED) {
			VE_CHECK_EQ(e->outstanding, 0);
			VE_CHECK_EQ(e->holder, VE_HOLDER_NONE);
		} else {
			VE_CHECK(e->holder != VE_HOLDER_NONE);
		}
		if (e->state == VE_ENTRY_LEASED)
			VE_CHECK_EQ(e->reserve_for, VE_HOLDER_NONE);
		if (e->state == VE_ENTRY_RESERVED)
			VE_CHECK(e->reserve_for >= 0);

		/* The model. */
		const struct mentry *m = &M.e[a];
		VE_CHECK_MSG(e->state == m->state, "step %llu entry %u: state %s, model %s",
			     (unsigned long long)step, a, ve_entry_state_name(e->state),
			     ve_entry_state_name(m->state));
		VE_CHECK_EQ(e->reserve_for, m->reserve_for);
		VE_CHECK_EQ(e->outstanding, m->out);
		int want = m->nh == 0 ? VE_HOLDER_NONE : m->nh == 1 ? m->h[0] : VE_HOLDER_SHARED;
		VE_CHECK_MSG(e->holder == want, "step %llu entry %u: holder %d, model %d",
			     (unsigned long long)step, a, e->holder, want);
		if (e->state == VE_ENTRY_LEASED || e->state == VE_ENTRY_DRAINING)
			VE_CHECK_EQ(p->nsharers[a], m->nh);
		for (int c = 0; c < NCLIENTS; c++)
			VE_CHECK_EQ(ve_pool_holds(p, (uint16_t)a, c),
				    m->state == VE_ENTRY_LEASED && m_holds((int)a, c));
	}
	VE_CHECK_MSG(busy == p->busy, "step %llu: busy %#llx, want %#llx", (unsigned long long)step,
		     (unsigned long long)p->busy, (unsigned long long)busy);
	VE_CHECK_MSG(claimed == p->claimed, "step %llu: claimed %#llx, want %#llx",
		     (unsigned long long)step, (unsigned long long)p->claimed,
		     (unsigned long long)claimed);
	for (uint32_t i = 0; i < p->nleaves; i++)
		if (!((claimed >> i) & 1))
			VE_CHECK_EQ(p->claim_by[i], VE_POOL_NONE);
	VE_CHECK_EQ(p->transitions, M.transitions);
}

static uint16_t pick_entry(uint64_t *rs, int want_state)
{
	uint16_t cand[VE_POOL_MAX_ENTRIES];
	uint32_t n = 0;
	if (want_state >= 0) {
		for (uint32_t i = 0; i < P.nentries; i++)
			if (P.e[i].state == want_state ||
			    (want_state == 99 && P.e[i].outstanding > 0))
				cand[n++] = (uint16_t)i;
	}
	if (n == 0 || ve_test_rand(rs) % 4 == 0) {
		uint32_t r = (uint32_t)(ve_test_rand(rs) % (P.nentries + 1));
		return r == P.nentries && ve_test_rand(rs) % 8 ? 0 : (uint16_t)r;
	}
	return cand[ve_test_rand(rs) % n];
}

static void stress_one(const struct leaf_list *l, uint64_t seed, long steps)
{
	uint64_t rs = seed;
	long nok = 0, nerr = 0, releases = 0, pendings = 0, promotions = 0;

	VE_CHECK_EQ(ve_pool_init(&P, l->sms, l->n, 0), 0);
	memset(&M, 0, sizeof(M));
	M.n = P.nentries;
	for (uint32_t i = 0; i < P.nentries; i++) {
		build_smset(l, P.e[i].leaves, &smsets[i]);
		M.e[i].reserve_for = -1;
	}
	for (uint32_t a = 0; a < M.n; a++)
		for (uint32_t b = 0; b < M.n; b++)
			M.conf[a][b] = smset_intersect(&smsets[a], &smsets[b]);

	for (long s = 0; s < steps; s++) {
		uint32_t r = (uint32_t)(ve_test_rand(&rs) % 100);
		int c = (int)(ve_test_rand(&rs) % NCLIENTS);
		bool share = ve_test_rand(&rs) % 3 == 0;
		int rc, want;
		uint64_t reserved_before = 0;
		for (uint32_t i = 0; i < P.nentries; i++)
			reserved_before += P.e[i].state == VE_ENTRY_RESERVED;

		/* can_admit must agree with the model's lease verdict anywhere. */
		uint16_t probe = (uint16_t)(ve_test_rand(&rs) % P.nentries);
		int pc = (int)(ve_test_rand(&rs) % NCLIENTS);
		bool ps = ve_test_rand(&rs) & 1;
		VE_CHECK_MSG(ve_pool_can_admit(&P, probe, pc, ps) ==
				 (m_lease(probe, pc, ps, true) == 0),
			     "seed %llu step %ld: can_admit(%u, %d, %d)", (unsigned long long)seed,
			     s, probe, pc, ps);

		uint16_t x;
		if (r < 30) {
			x = pick_entry(&rs,
				       ve_test_rand(&rs) % 2 ? VE_ENTRY_IDLE : VE_ENTRY_RESERVED);
			if (ve_test_rand(&rs) % 50 == 0)
				c = -1;
			rc = ve_pool_lease(&P, x, c, share);
			want = m_lease(x, c, share, false);
		} else if (r < 42) {
			x = pick_entry(&rs, VE_ENTRY_LEASED);
			rc = ve_pool_close_gate(&P, x);
			want = m_close(x);
		} else if (r < 54) {
			x = pick_entry(&rs,
				       ve_test_rand(&rs) % 2 ? VE_ENTRY_IDLE : VE_ENTRY_DRAINING);
			rc = ve_pool_reserve(&P, x, c);
			want = m_reserve(x, c);
			pendings += rc == VE_POOL_PENDING;
		} else if (r < 61) {
			x = pick_entry(&rs, VE_ENTRY_RESERVED);
			rc = ve_pool_unreserve(&P, x);
			want = m_unreserve(x);
		} else if (r < 78) {
			x = pick_entry(&rs, VE_ENTRY_LEASED);
			rc = ve_pool_op_start(&P, x);
			want = m_op_start(x);
		} else if (r < 98) {
			x = pick_entry(&rs, 99);
			rc = ve_pool_op_done(&P, x);
			want = m_op_done(x);
			releases += rc == 1;
		} else {
			x = 0;
			ve_pool_release_client(&P, c);
			m_release_client(c);
			rc = want = 0;
		}
		VE_CHECK_MSG(rc == want,
			     "seed %llu step %ld: op %u on entry %u client %d: rc %d, "
			     "model %d",
			     (unsigned long long)seed, s, r, x, c, rc, want);
		rc < 0 ? nerr++ : nok++;
		uint64_t reserved_after = 0;
		for (uint32_t i = 0; i < P.nentries; i++)
			reserved_after += P.e[i].state == VE_ENTRY_RESERVED;
		if (r >= 78 && r < 98 && reserved_after > reserved_before)
			promotions++;
		check_invariants(&P, (uint64_t)s);
	}
	printf("# stress %-14s seed %llu: %ld steps, %ld ok, %ld refused, %ld drains, %ld pending,"
	       " %ld reservations completed by a drain\n",
	       l->name, (unsigned long long)seed, steps, nok, nerr, releases, pendings, promotions);
	VE_CHECK(nok > steps / 10 && nerr > 0 && releases > 0 && pendings > 0);
}

VE_TEST(stress_random)
{
	uint64_t seed = ve_test_seed(0x5eed2026ull);
	long steps = ve_test_env_long("VE_POOL_STEPS", 20000);
	printf("# stress seed %llu (replay: VE_SEED=%llu)\n", (unsigned long long)seed,
	       (unsigned long long)seed);
	for (int li = 0; li < nlists; li++) {
		const struct leaf_list *l = &lists[li];
		long n = l->n > 16 ? steps / 4 : steps; /* the model is quadratic */
		stress_one(l, seed + (uint64_t)li, n);
	}
}
