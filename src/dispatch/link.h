/* SPDX-License-Identifier: MIT */
/*
 * The dispatcher's view of its coordinator (DESIGN.md section 2): the same
 * calls whether the coordinator runs embedded in this process (a direct
 * ve_coord) or in the ved daemon (records over the shared-memory rings,
 * src/ipc/). The dispatcher never knows which.
 */
#ifndef VE_DISPATCH_LINK_H
#define VE_DISPATCH_LINK_H

#include "coord/coord.h"

#include <stdbool.h>
#include <stdint.h>

struct ve_link_ops {
	const char *name;
	int (*client_add)(void *impl, uint32_t client, uint32_t flags);
	int (*client_remove)(void *impl, uint32_t client);
	/* An op is ready. -EAGAIN: no room now (back-pressure; retry later). */
	int (*ready)(void *impl, const struct ve_ready_op *op);
	/* Bindings decided for this process, ready to submit. */
	int (*schedule)(void *impl, struct ve_binding *out, int max);
	int (*submit_failed)(void *impl, const struct ve_binding *b, int status);
	int (*done)(void *impl, uint32_t client, uint16_t entry, uint64_t key, uint64_t ns);
	int (*hint)(void *impl, const struct ve_hint *h);
	/* Bounded pipelining admission (see ve_coord_pipeline: 0 alone, 1 with
	 * others active, <0 refused); op is the one to put behind (ved counts
	 * it by token). cancel: it was not submitted after all. */
	int (*pipeline)(void *impl, uint32_t client, uint16_t entry, const struct ve_ready_op *op,
			bool may_contend);
	void (*pipeline_cancel)(void *impl, uint32_t client, uint16_t entry, uint64_t tok);
	/* The clock policies use for ages and deadlines. */
	void (*set_now)(void *impl, uint64_t now_ns);
	/* Ready ops the coordinator still holds for this process. */
	uint32_t (*pending)(void *impl);
};

struct ve_link {
	const struct ve_link_ops *ops;
	void *impl;
	/* The pool's shape (entries, SMs): identical in every process. */
	const struct ve_pool *pool;
};

/* A link to an embedded coordinator (no copies, no threads). */
void ve_link_embedded(struct ve_link *l, struct ve_coord *c);

#endif
