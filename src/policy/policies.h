/* SPDX-License-Identifier: MIT */
/* Built-in policies (docs/policies.md explains each one and its knobs). */
#ifndef VE_POLICY_POLICIES_H
#define VE_POLICY_POLICIES_H

#include "ve/ve_policy.h"

extern const struct ve_policy_ops ve_policy_tput;
extern const struct ve_policy_ops ve_policy_tpot;
extern const struct ve_policy_ops ve_policy_fixed;
extern const struct ve_policy_ops ve_policy_whole;
extern const struct ve_policy_ops ve_policy_chaos;
extern const struct ve_policy_ops ve_policy_sweep;

/* Shared helpers. */
/* Parses "k=v,k=v" argument strings: calls fn(key, value, arg) per pair;
 * returns the first non-zero fn result, or -EINVAL for a malformed string. */
int ve__policy_parse_args(const char *args, int (*fn)(const char *k, const char *v, void *arg),
			  void *arg);
/* Oldest ready op over all clients (by ready_ns), or -1. */
int32_t ve__policy_oldest(const struct ve_policy_view *v);

#endif
