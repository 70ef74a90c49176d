/* SPDX-License-Identifier: MIT */
/*
 * The ready queue the policies read: ready operations of every client, one
 * FIFO per client (oldest first), in a fixed slot array so policies index it
 * directly (struct ve_ready_op in ve_policy.h). O(1) push, remove from
 * anywhere, and oldest-per-client; no allocation after init.
 */
#ifndef VE_COORD_READYQ_H
#define VE_COORD_READYQ_H

#include "ve/ve_policy.h"

#include <stdint.h>

struct ve_readyq {
	uint32_t cap;
	uint32_t nclients;
	uint32_t nready;
	uint32_t free_head;
	struct ve_ready_op *ops;
	struct ve_client_view *clients;
	uint32_t *tail; /* per client */
};

int ve_readyq_init(struct ve_readyq *q, uint32_t cap, uint32_t max_clients);
void ve_readyq_fini(struct ve_readyq *q);

/* Appends (newest). Returns the slot, or -EAGAIN when full, -EINVAL for a bad client. */
int ve_readyq_push(struct ve_readyq *q, const struct ve_ready_op *op);
/* Re-inserts at its age position (a failed binding goes back where it was). */
int ve_readyq_push_aged(struct ve_readyq *q, const struct ve_ready_op *op);
int ve_readyq_remove(struct ve_readyq *q, uint32_t slot);
/* Drops every op of a client; returns how many. */
uint32_t ve_readyq_drop_client(struct ve_readyq *q, uint32_t client);

static inline const struct ve_ready_op *ve_readyq_get(const struct ve_readyq *q, uint32_t slot)
{
	return slot < q->cap && q->ops[slot].in_use ? &q->ops[slot] : (const void *)0;
}

#endif
