/* SPDX-License-Identifier: MIT */
/*
 * Helpers for policies in grant mode (ve_policy.h, "Grant mode"): which
 * clients are active, how many SMs each could use, and the client-level
 * form of the paper's Algorithm 1 that turns those wants into disjoint pool
 * entries.
 */
#ifndef VE_POLICY_GRANT_H
#define VE_POLICY_GRANT_H

#include "ve/ve_policy.h"

#include <stdbool.h>
#include <stdint.h>

/* Strict supersets of every entry, smallest first (built once per pool). */
struct ve_grant_tables {
	uint32_t nentries;
	uint32_t *sup_off, *sup_n;
	uint16_t *sup;
};

int ve__grant_tables_init(struct ve_grant_tables *t, const struct ve_pool *p);
void ve__grant_tables_fini(struct ve_grant_tables *t);

/* A client is active while it has work ready or in flight, and for idle_ns
 * after (so the gaps of a training step or between decode tokens do not
 * give its SMs away and back every step). */
bool ve__grant_active(const struct ve_client_demand *d, uint64_t now, uint64_t idle_ns);

/* SMs the client should get: what its kernels could use, at least what its
 * widest waiting op needs and one leaf. */
uint32_t ve__grant_want(const struct ve_pool *p, const struct ve_client_demand *d);

/* Algorithm 1 over clients: every listed client first gets the smallest
 * free entry with at least min_sms[i] SMs (the one that leaves the largest
 * free subtree, so clients spread apart), then entries grow, one strict
 * superset at a time, by the largest gain of utility per SM added, where a
 * client's utility of m SMs is weight[i] * sqrt(min(m, want) / want)
 * (weight NULL: 1 for all); ties go to the smallest step, then to the
 * client with the smallest share of its want. Leaves outside avail stay
 * unused. out[i] is clients[i]'s entry, or VE_POOL_NONE where nothing fits. */
void ve__grant_plan(const struct ve_grant_tables *t, const struct ve_pool *p, uint64_t avail,
		    const uint32_t *clients, uint32_t n, const uint32_t *want, const uint32_t *min_sms,
		    const double *weight, uint16_t *out);

/* Sum of the clients' weighted utilities (above) under an assignment. */
double ve__grant_utility(const struct ve_pool *p, uint32_t n, const uint32_t *want,
			 const double *weight, const uint16_t *entries);

/* The entry with exactly these SMs that contains all leaves of 'inside' and
 * none of 'outside' (VE_POOL_NONE if the pool has none). */
uint16_t ve__grant_find(const struct ve_pool *p, uint32_t sms, uint64_t inside, uint64_t outside);

#endif
