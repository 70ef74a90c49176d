/* SPDX-License-Identifier: MIT */
#include "core/token.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Freed slots queue up behind the others (FIFO): each slot's generation
 * advances at 1/cap of the op rate, where a stack would reuse one slot for
 * every op of a serial chain. */
static void free_push(struct ve__toktab *t, uint32_t s)
{
	t->free_next[s] = VE__NIL;
	if (t->free_tail == VE__NIL)
		t->free_head = s;
	else
		t->free_next[t->free_tail] = s;
	t->free_tail = s;
	t->nfree++;
}

int ve__toktab_init(struct ve__toktab *t, uint32_t cap, uint32_t edge_cap)
{
	memset(t, 0, sizeof(*t));
	if (cap == 0 || cap > (1u << VE_TOK_SLOT_BITS) || edge_cap == 0 || edge_cap >= VE__NIL)
		return -EINVAL;
	t->cap = cap;
	t->edge_cap = edge_cap;
	t->gen = calloc(cap, sizeof(*t->gen));
	t->npend = calloc(cap, sizeof(*t->npend));
	t->deps = calloc(cap, sizeof(*t->deps));
	t->free_next = calloc(cap, sizeof(*t->free_next));
	t->edges = calloc(edge_cap, sizeof(*t->edges));
	if (!t->gen || !t->npend || !t->deps || !t->free_next || !t->edges) {
		ve__toktab_fini(t);
		return -ENOMEM;
	}
	/* Free slots carry even generations; allocation makes them odd, so a
	 * handle (always odd) never matches a free slot. Slot 0 is never used:
	 * its token would be VE_TOK_NONE's low half only with gen 0, which
	 * cannot happen, but keeping it out makes dumps easier to read. */
	t->free_head = t->free_tail = VE__NIL;
	for (uint32_t i = 1; i < cap; i++)
		free_push(t, i);
	t->edge_free = VE__NIL;
	for (uint32_t i = edge_cap; i-- > 0;) {
		t->edges[i].next = t->edge_free;
		t->edge_free = i;
	}
	t->nedge_free = edge_cap;
	return 0;
}

void ve__toktab_fini(struct ve__toktab *t)
{
	free(t->gen);
	free(t->npend);
	free(t->deps);
	free(t->free_next);
	free(t->edges);
	memset(t, 0, sizeof(*t));
}

int ve__tok_alloc(struct ve__toktab *t, ve_tok *out)
{
	uint32_t s = t->free_head;
	if (s == VE__NIL)
		return -EAGAIN;
	t->free_head = t->free_next[s];
	if (t->free_head == VE__NIL)
		t->free_tail = VE__NIL;
	t->nfree--;
	/* Atomic: ve__tok_live reads it without the lock (ve_vctx_desc). */
	__atomic_store_n(&t->gen[s], t->gen[s] + 1, __ATOMIC_RELEASE); /* even -> odd: live */
	t->npend[s] = 0;
	t->deps[s] = VE__NIL;
	*out = ve_tok_make(s, t->gen[s]);
	return 0;
}

int ve__tok_depend(struct ve__toktab *t, ve_tok dep, ve_tok pred)
{
	if (!ve__tok_live(t, pred))
		return 0;
	uint32_t e = t->edge_free;
	if (e == VE__NIL)
		return -EAGAIN;
	uint32_t ps = ve_tok_slot(pred);
	t->edge_free = t->edges[e].next;
	t->nedge_free--;
	t->edges[e].dep = ve_tok_slot(dep);
	t->edges[e].next = t->deps[ps];
	t->deps[ps] = e;
	t->npend[ve_tok_slot(dep)]++;
	return 1;
}

int ve__tok_complete(struct ve__toktab *t, ve_tok tok, void (*visit)(void *, uint32_t), void *arg)
{
	if (!ve__tok_live(t, tok))
		return -ENOENT;
	uint32_t s = ve_tok_slot(tok);
	int nready = 0;
	uint32_t e = t->deps[s];
	while (e != VE__NIL) {
		uint32_t next = t->edges[e].next;
		uint32_t d = t->edges[e].dep;
		t->edges[e].next = t->edge_free;
		t->edge_free = e;
		t->nedge_free++;
		if (--t->npend[d] == 0) {
			nready++;
			if (visit)
				visit(arg, d);
		}
		e = next;
	}
	t->deps[s] = VE__NIL;
	/* odd -> even: every outstanding handle is now satisfied */
	__atomic_store_n(&t->gen[s], t->gen[s] + 1, __ATOMIC_RELEASE);
	free_push(t, s);
	return nready;
}
