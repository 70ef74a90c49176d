/* SPDX-License-Identifier: MIT */
/*
 * Completion tokens (paper section 4.2, docs/semantics.md).
 *
 * A token names one logical operation's completion. Tokens are small integers:
 * a slot index in a fixed table plus the slot's generation, so a handle held by
 * a stream tail, an event generation or a waiter stays valid without reference
 * counts: a slot is recycled only after its operation completed, so a handle
 * whose generation no longer matches its slot is satisfied by construction.
 *
 * Each slot keeps the count of its unsatisfied predecessors and a list of
 * dependents (edges from a preallocated pool). Satisfied predecessors are
 * never linked, so an edge exists only while it can still block. Nothing here
 * allocates after init; exhaustion is reported (-EAGAIN) so callers apply
 * back-pressure instead of losing work.
 *
 * Not thread-safe: the owner (the vctx) serialises access.
 */
#ifndef VE_CORE_TOKEN_H
#define VE_CORE_TOKEN_H

#include <stdbool.h>
#include <stdint.h>

typedef uint64_t ve_tok;
#define VE_TOK_NONE ((ve_tok)0) /* the satisfied token of an empty stream */

/* A token is a slot (24 bits: at most 2^24 ops live) and the slot's
 * generation (40 bits). A slot's generation moves by 2 per op and slots are
 * reused round-robin, so one repeats only after 2^39 ops per slot: a stale
 * token (an old event's, an idle stream's tail) never reads as live again
 * in any run (with 32 bits and reuse of the last freed slot, a job at 100k
 * serial ops/s came back to a live generation after 6 hours). */
#define VE_TOK_SLOT_BITS 24
#define VE_TOK_GEN_MASK	 ((UINT64_C(1) << (64 - VE_TOK_SLOT_BITS)) - 1)

static inline uint32_t ve_tok_slot(ve_tok t)
{
	return (uint32_t)(t & ((UINT64_C(1) << VE_TOK_SLOT_BITS) - 1));
}
static inline uint64_t ve_tok_gen(ve_tok t)
{
	return t >> VE_TOK_SLOT_BITS;
}
static inline ve_tok ve_tok_make(uint32_t slot, uint64_t gen)
{
	return ((gen & VE_TOK_GEN_MASK) << VE_TOK_SLOT_BITS) | slot;
}

#define VE__NIL UINT32_MAX

struct ve__edge {
	uint32_t dep;  /* dependent slot */
	uint32_t next; /* next edge of the same predecessor */
};

struct ve__toktab {
	uint32_t cap;	     /* slots */
	uint32_t edge_cap;   /* edges */
	uint64_t *gen;	     /* per slot generation (VE_TOK_GEN_MASK bits); odd = live, even = free */
	uint32_t *npend;     /* per slot unsatisfied predecessors */
	uint32_t *deps;	     /* per slot head of dependents list */
	uint32_t *free_next; /* free-slot queue links: freed at the tail, reused from the head */
	uint32_t free_head, free_tail;
	uint32_t nfree;
	struct ve__edge *edges;
	uint32_t edge_free;
	uint32_t nedge_free;
};

int ve__toktab_init(struct ve__toktab *t, uint32_t cap, uint32_t edge_cap);
void ve__toktab_fini(struct ve__toktab *t);

/* Live means allocated and not yet completed. */
static inline bool ve__tok_live(const struct ve__toktab *t, ve_tok tok)
{
	uint32_t s = ve_tok_slot(tok);
	/* May run without the owner's lock (a stale token of a recycled slot
	 * then simply reads as not live): the generation is read atomically. */
	return tok != VE_TOK_NONE && s < t->cap &&
	       (__atomic_load_n(&t->gen[s], __ATOMIC_ACQUIRE) & VE_TOK_GEN_MASK) == ve_tok_gen(tok);
}

/* Allocate a slot; -EAGAIN when none is free. */
int ve__tok_alloc(struct ve__toktab *t, ve_tok *out);

/* Record that 'dep' waits for 'pred'. Returns 1 if an edge was added (pred is
 * live), 0 if pred is already satisfied, -EAGAIN if the edge pool is empty. */
int ve__tok_depend(struct ve__toktab *t, ve_tok dep, ve_tok pred);

/* Number of edges that ve__tok_depend could still add. */
static inline uint32_t ve__tok_edges_free(const struct ve__toktab *t)
{
	return t->nedge_free;
}

/* Complete 'tok': free its slot and call visit(arg, dep_slot) for each
 * dependent whose count reached zero. Returns the number of such dependents. */
int ve__tok_complete(struct ve__toktab *t, ve_tok tok, void (*visit)(void *, uint32_t), void *arg);

#endif
