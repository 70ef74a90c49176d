/* SPDX-License-Identifier: MIT */
/*
 * An external policy, built from include/ alone (the Makefile compiles it
 * with -Iinclude and nothing else) and loaded with VE_POLICY=path.so: what a
 * user's policy looks like. First fit: the oldest ready op, on the smallest
 * eligible entry. test_policy_ext runs it on the simulator and reads its
 * counters.
 */
#include "ve/ve_policy.h"

#include <stddef.h>

/* Read by the test through dlsym. */
unsigned long ext_policy_picks, ext_policy_selects, ext_policy_bound;

static int32_t pick(void *priv, const struct ve_policy_view *v)
{
	(void)priv;
	int32_t best = -1;
	for (uint32_t c = 0; c < v->nclients; c++) {
		uint32_t h = v->clients[c].head;
		if (h == VE_READY_NIL)
			continue;
		if (best < 0 || v->ops[h].ready_ns < v->ops[best].ready_ns)
			best = (int32_t)h;
	}
	ext_policy_picks++;
	return best;
}

static int32_t select_entry(void *priv, const struct ve_policy_view *v, uint32_t op,
			    const uint16_t *eligible, uint32_t n, uint32_t *flags)
{
	(void)priv;
	(void)v;
	(void)op;
	*flags = 0;
	ext_policy_selects++;
	return n ? eligible[0] : -1; /* smallest first */
}

static void notify(void *priv, const struct ve_policy_view *v, const struct ve_policy_event *ev)
{
	(void)priv;
	(void)v;
	if (ev->kind == VE_PEV_BOUND)
		ext_policy_bound++;
}

static const struct ve_policy_ops ops = {
	.abi_version = VE_POLICY_ABI_VERSION,
	.name = "ext_first_fit",
	.summary = "oldest ready op on the smallest eligible entry (external example)",
	.pick = pick,
	.select = select_entry,
	.notify = notify,
};

const struct ve_policy_ops *ve_policy_entry(void);

const struct ve_policy_ops *ve_policy_entry(void)
{
	return &ops;
}
