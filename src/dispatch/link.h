/* SPDX-License-Identifier: MIT */
/*
 * The dispatcher's view of its coordinator (docs/architecture.md, "Data
 * flow"): the same calls whether the coordinator runs embedded in this
 * process (a direct ve_coord, which the link owns) or in the ved daemon
 * (records over the shared-memory rings, src/ved/client.h). The dispatcher
 * never knows which, and nothing above it needs to: what the coordinator
 * measured (profiles) and decided (stats) is read through the link too, from
 * wherever the deciding coordinator lives.
 */
#ifndef VE_DISPATCH_LINK_H
#define VE_DISPATCH_LINK_H

#include "coord/coord.h"

#include <stdbool.h>
#include <stdint.h>

/* What the deciding coordinator reports for this process. */
struct ve_link_info {
	const char *where;	/* "embedded", "ved" or "ved (safe mode)" */
	char policy[64];	/* the policy that decides */
	uint64_t bindings;	/* compute bindings this process received */
	uint64_t decide_ns;	/* time spent deciding them where this process decides
				 * (embedded, safe mode); ved reports its own (ve-ctl) */
};

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
	/* Grant mode (ve_policy.h "Grant mode"). grant: the entry a client may
	 * bind its own ops to (VE_POOL_NONE: none now), the entry lent to it for
	 * short kernels (ve_grant_plan.lend; VE_POOL_NONE: none) and their
	 * generation; 0,
	 * or -EOPNOTSUPP when the coordinator binds op by op (then the members
	 * above are the way). report: the client's demand and what it still runs
	 * where. tick: once per dispatcher pass, after the reports (the
	 * coordinator decides on its own clock; ved ticks by itself). */
	int (*grant)(void *impl, uint32_t client, uint16_t *entry, uint16_t *lend, uint64_t *gen);
	int (*report)(void *impl, uint32_t client, const struct ve_grant_report *r);
	void (*tick)(void *impl);
	/* Could another client want this one's SMs soon (it then keeps little
	 * work queued ahead)? NULL: always assume so. */
	bool (*contended)(void *impl, uint32_t client);
	/* How many other processes (embedded: clients) share the GPU now,
	 * whatever their grants; NULL: none known (VE_PHASE stays idle). */
	uint32_t (*others)(void *impl, uint32_t client);
	/* A measured run time of an op bound in grant mode (profiles learn
	 * T(key, m) from it); NULL where the coordinator does not learn. */
	void (*observe)(void *impl, uint32_t client, uint16_t entry, uint64_t key, uint64_t ns);
	/* The dispatcher sleeps with nothing in flight (true) or woke (false),
	 * before its next look at the grant: a coordinator in another process
	 * can then take this process's grant without waiting for it to report
	 * the SMs drained (it sleeps, so it has nothing there). NULL: none. */
	void (*idle)(void *impl, bool idle);

	/* Below: not on the dispatch path. Call them from the dispatcher's
	 * thread or with the dispatcher stopped (the owner's calls, like the
	 * ones above). */
	/* How to wake a sleeping dispatcher when a binding arrives on its own
	 * (ved); NULL where bindings only come from calls (embedded). */
	void (*set_notify)(void *impl, void (*fn)(void *), void *arg);
	/* Saves the scaling profiles of the coordinator that decides for this
	 * process, as refined online (docs/profiles.md format). */
	int (*profile_save)(void *impl, const char *path);
	void (*info)(void *impl, struct ve_link_info *out);
	/* Frees what the link owns: the embedded coordinator, or the ved client
	 * (which says BYE). */
	void (*destroy)(void *impl);
};

struct ve_link {
	const struct ve_link_ops *ops;
	void *impl;
	/* The pool's shape (entries, SMs): identical in every process. */
	const struct ve_pool *pool;
};

/* A link to a coordinator of this process, created from cfg and owned by
 * the link (no copies, no threads). */
int ve_link_embedded_create(const struct ve_coord_config *cfg, struct ve_link *out, char *err,
			    size_t errlen);
/* The embedded link's coordinator, for inspection (tests, ve-sim's offline
 * profiles); NULL for any other link. */
struct ve_coord *ve_link_coord(const struct ve_link *l);
/* ops->destroy, and the link is zeroed. */
void ve_link_destroy(struct ve_link *l);
int ve_link_profile_save(const struct ve_link *l, const char *path);
void ve_link_info(const struct ve_link *l, struct ve_link_info *out);

#endif
