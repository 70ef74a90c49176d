/* SPDX-License-Identifier: MIT */
/*
 * A policy that never lets anything run: pick() offers the oldest op and
 * select() defers it, forever; built with -DWITH_GRANT it also has a grant()
 * that grants nothing (grant mode). What a buggy or hostile policy does; the
 * bind deadline (VE_WATCHDOG_MS) must still run every op
 * (tests/fault/test_fault_watchdog.c).
 */
#include "ve/ve_policy.h"

#include <stddef.h>

static int32_t pick(void *priv, const struct ve_policy_view *v)
{
	(void)priv;
	for (uint32_t c = 0; c < v->nclients; c++)
		if (v->clients[c].head != VE_READY_NIL)
			return (int32_t)v->clients[c].head;
	return -1;
}

static int32_t select_entry(void *priv, const struct ve_policy_view *v, uint32_t op,
			    const uint16_t *eligible, uint32_t n, uint32_t *flags)
{
	(void)priv;
	(void)v;
	(void)op;
	(void)eligible;
	(void)n;
	*flags = 0;
	return -1;
}

#ifdef WITH_GRANT
static int grant(void *priv, const struct ve_policy_view *v, const struct ve_client_demand *demand,
		 struct ve_grant_plan *plan)
{
	(void)priv;
	(void)demand;
	for (uint32_t c = 0; c < v->nclients && c < VE_POLICY_MAX_CLIENTS; c++)
		plan->entry[c] = VE_POOL_NONE;
	return 0;
}
#endif

static const struct ve_policy_ops ops = {
	.abi_version = VE_POLICY_ABI_VERSION,
	.name = "defer_forever",
	.summary = "defers every op (a test of the bind deadline)",
	.pick = pick,
	.select = select_entry,
#ifdef WITH_GRANT
	.grant = grant,
#endif
};

const struct ve_policy_ops *ve_policy_entry(void);

const struct ve_policy_ops *ve_policy_entry(void)
{
	return &ops;
}
