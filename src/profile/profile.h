/* SPDX-License-Identifier: MIT */
/*
 * Scaling profiles (paper section 5, docs/profiles.md): T(key, m), the
 * exclusive run time of a recurring launch configuration on m SMs, for every
 * distinct pool entry size.
 *
 * Sources, in order of trust: measured values (offline by ve-profile, or
 * online from completions), then a value at another size scaled by the
 * default model's ratio, then the default model alone:
 *   D(m) = ceil(blocks / (m * bps)) * VE_PROF_WAVE_NS + VE_PROF_LAUNCH_NS,
 *   bps  = blocks_per_sm if known, else clamp(2048 / threads, 1, 32).
 * D says a launch scales until it fits in one wave and not beyond, which
 * keeps unknown small launches on small entries (the safe choice).
 *
 * Online refinement: an exponentially weighted moving average per (key,
 * size) with weight VE_PROF_EWMA (first sample taken as is).
 *
 * File format (plain text, one file per GPU model, see docs/profiles.md):
 *   vitamin-e-profile 1
 *   gpu <sm_count> <name...>
 *   sizes <m1> <m2> ...
 *   k <hex key> <T(m1) ns|-> <T(m2) ns|-> ... [# name]
 * Lookup is a hash probe on the hot path; no allocation after create.
 * Not thread-safe: the coordinator owns it.
 */
#ifndef VE_PROFILE_H
#define VE_PROFILE_H

#include "ve/ve_policy.h"

#include <stdint.h>
#include <stdio.h>

#define VE_PROF_MAX_SIZES 48
#define VE_PROF_WAVE_NS	  10000.0
#define VE_PROF_LAUNCH_NS 5000.0
#define VE_PROF_EWMA	  0.25

struct ve_profile;

/* sizes: the distinct entry sizes (any order; duplicates ignored). key_cap: max keys. */
int ve_profile_create(const uint32_t *sizes, uint32_t nsizes, uint32_t key_cap,
		      uint32_t sm_count, struct ve_profile **out);
void ve_profile_destroy(struct ve_profile *p);

/* Predicted exclusive time (ns) of op on m SMs. */
double ve_profile_predict(const struct ve_profile *p, const struct ve_ready_op *op, uint32_t m);
/* The default model alone. */
double ve_profile_default(const struct ve_ready_op *op, uint32_t m);
/* Sets a measured value (offline profile) or folds a sample into the EWMA. */
int ve_profile_set(struct ve_profile *p, uint64_t key, uint32_t m, double ns);
int ve_profile_observe(struct ve_profile *p, uint64_t key, uint32_t m, double ns);
/* Measured value if any: returns 0 and *ns, or -ENOENT. */
int ve_profile_lookup(const struct ve_profile *p, uint64_t key, uint32_t m, double *ns);

/* Text I/O. load: -EINVAL with a message naming the line for a malformed
 * file, -EPROTO for another version, -EXDEV if the GPU's SM count differs. */
int ve_profile_load(struct ve_profile *p, const char *path, char *err, size_t errlen);
int ve_profile_save(const struct ve_profile *p, const char *path, const char *gpu_name);
/* The same text to an open stream (ved sends it to a client that asked). */
int ve_profile_write(const struct ve_profile *p, FILE *f, const char *gpu_name);
uint32_t ve_profile_nkeys(const struct ve_profile *p);
/* Keys dropped so far to make room for new ones: when the store is full,
 * the half observed longest ago goes (a key is an exact shape, and a
 * long-running job keeps making new ones). */
uint64_t ve_profile_evicted(const struct ve_profile *p);

#endif
