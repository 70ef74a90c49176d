/* SPDX-License-Identifier: MIT */
#include "coord/readyq.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int ve_readyq_init(struct ve_readyq *q, uint32_t cap, uint32_t max_clients)
{
	memset(q, 0, sizeof(*q));
	if (!cap || cap >= VE_READY_NIL || !max_clients)
		return -EINVAL;
	q->cap = cap;
	q->nclients = max_clients;
	q->ops = calloc(cap, sizeof(*q->ops));
	q->clients = calloc(max_clients, sizeof(*q->clients));
	q->tail = calloc(max_clients, sizeof(*q->tail));
	if (!q->ops || !q->clients || !q->tail) {
		ve_readyq_fini(q);
		return -ENOMEM;
	}
	for (uint32_t c = 0; c < max_clients; c++) {
		q->clients[c].head = VE_READY_NIL;
		q->tail[c] = VE_READY_NIL;
	}
	q->free_head = VE_READY_NIL;
	for (uint32_t i = cap; i-- > 0;) {
		q->ops[i].next = q->free_head;
		q->free_head = i;
	}
	return 0;
}

void ve_readyq_fini(struct ve_readyq *q)
{
	free(q->ops);
	free(q->clients);
	free(q->tail);
	memset(q, 0, sizeof(*q));
}

static int take_slot(struct ve_readyq *q, const struct ve_ready_op *op)
{
	if (op->client >= q->nclients)
		return -EINVAL;
	uint32_t s = q->free_head;
	if (s == VE_READY_NIL)
		return -EAGAIN;
	q->free_head = q->ops[s].next;
	q->ops[s] = *op;
	q->ops[s].in_use = 1;
	q->nready++;
	q->clients[op->client].nready++;
	return (int)s;
}

static void link_after(struct ve_readyq *q, uint32_t c, uint32_t prev, uint32_t s)
{
	struct ve_ready_op *o = &q->ops[s];
	o->prev = prev;
	if (prev == VE_READY_NIL) {
		o->next = q->clients[c].head;
		q->clients[c].head = s;
	} else {
		o->next = q->ops[prev].next;
		q->ops[prev].next = s;
	}
	if (o->next == VE_READY_NIL)
		q->tail[c] = s;
	else
		q->ops[o->next].prev = s;
}

int ve_readyq_push(struct ve_readyq *q, const struct ve_ready_op *op)
{
	int s = take_slot(q, op);
	if (s < 0)
		return s;
	link_after(q, op->client, q->tail[op->client], (uint32_t)s);
	return s;
}

int ve_readyq_push_aged(struct ve_readyq *q, const struct ve_ready_op *op)
{
	int s = take_slot(q, op);
	if (s < 0)
		return s;
	uint32_t c = op->client, prev = q->tail[c];
	/* Walk back from the newest: a requeued op is usually among the oldest,
	 * but ties keep FIFO order (strictly older goes first). */
	while (prev != VE_READY_NIL && q->ops[prev].ready_ns > op->ready_ns)
		prev = q->ops[prev].prev;
	link_after(q, c, prev, (uint32_t)s);
	return s;
}

int ve_readyq_remove(struct ve_readyq *q, uint32_t s)
{
	if (s >= q->cap || !q->ops[s].in_use)
		return -ENOENT;
	struct ve_ready_op *o = &q->ops[s];
	uint32_t c = o->client;
	if (o->prev == VE_READY_NIL)
		q->clients[c].head = o->next;
	else
		q->ops[o->prev].next = o->next;
	if (o->next == VE_READY_NIL)
		q->tail[c] = o->prev;
	else
		q->ops[o->next].prev = o->prev;
	o->in_use = 0;
	o->next = q->free_head;
	q->free_head = s;
	q->nready--;
	q->clients[c].nready--;
	return 0;
}

uint32_t ve_readyq_drop_client(struct ve_readyq *q, uint32_t c)
{
	uint32_t n = 0;
	if (c >= q->nclients)
		return 0;
	while (q->clients[c].head != VE_READY_NIL) {
		ve_readyq_remove(q, q->clients[c].head);
		n++;
	}
	return n;
}
