/* SPDX-License-Identifier: MIT */
/*
 * Token -> slot index, for the tables ved and the remote link keep of the ops
 * they have in flight (server.c, client.c). Open addressing with linear probing
 * and backward-shift deletion (no tombstones, so lookups never degrade),
 * sized at init to at least twice the most items ever stored: no allocation
 * after init. Key 0 is the empty marker; tokens are never 0 (docs/ipc.md).
 */
#ifndef VE_VED_TOKTAB_H
#define VE_VED_TOKTAB_H

#include "util/util.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#define VE_TOKTAB_NONE UINT32_MAX

struct ve_toktab {
	uint64_t *keys;
	uint32_t *vals;
	uint32_t mask;
	uint32_t n, max;
};

static inline int ve_toktab_init(struct ve_toktab *t, uint32_t max_items)
{
	uint32_t cap = 16;
	while (cap < 2 * (uint64_t)max_items && cap < (1u << 30))
		cap <<= 1;
	t->keys = calloc(cap, sizeof(*t->keys));
	t->vals = calloc(cap, sizeof(*t->vals));
	if (!t->keys || !t->vals) {
		free(t->keys);
		free(t->vals);
		t->keys = NULL;
		t->vals = NULL;
		return -ENOMEM;
	}
	t->mask = cap - 1;
	t->n = 0;
	t->max = max_items;
	return 0;
}

static inline void ve_toktab_fini(struct ve_toktab *t)
{
	free(t->keys);
	free(t->vals);
	t->keys = NULL;
	t->vals = NULL;
	t->n = 0;
}

static inline uint32_t ve__toktab_home(const struct ve_toktab *t, uint64_t k)
{
	return (uint32_t)ve__mix64(k) & t->mask;
}

static inline uint32_t ve_toktab_get(const struct ve_toktab *t, uint64_t k)
{
	if (!k)
		return VE_TOKTAB_NONE;
	for (uint32_t i = ve__toktab_home(t, k);; i = (i + 1) & t->mask) {
		if (t->keys[i] == k)
			return t->vals[i];
		if (t->keys[i] == 0)
			return VE_TOKTAB_NONE;
	}
}

/* 0, -EEXIST (key present: nothing changed), -ENOSPC (max items), -EINVAL (key 0). */
static inline int ve_toktab_put(struct ve_toktab *t, uint64_t k, uint32_t v)
{
	if (!k)
		return -EINVAL;
	uint32_t i = ve__toktab_home(t, k);
	for (;; i = (i + 1) & t->mask) {
		if (t->keys[i] == k)
			return -EEXIST;
		if (t->keys[i] == 0)
			break;
	}
	if (t->n >= t->max)
		return -ENOSPC;
	t->keys[i] = k;
	t->vals[i] = v;
	t->n++;
	return 0;
}

static inline int ve_toktab_del(struct ve_toktab *t, uint64_t k)
{
	if (!k)
		return -ENOENT;
	uint32_t i = ve__toktab_home(t, k);
	for (;; i = (i + 1) & t->mask) {
		if (t->keys[i] == k)
			break;
		if (t->keys[i] == 0)
			return -ENOENT;
	}
	/* Backward shift: pull later members of the probe run into the hole
	 * when their home position allows it, so no run is ever broken. */
	for (uint32_t j = (i + 1) & t->mask;; j = (j + 1) & t->mask) {
		if (t->keys[j] == 0)
			break;
		uint32_t h = ve__toktab_home(t, t->keys[j]);
		/* j's entry may move to i iff h is not in the cyclic range (i, j]. */
		if (((j - h) & t->mask) >= ((j - i) & t->mask)) {
			t->keys[i] = t->keys[j];
			t->vals[i] = t->vals[j];
			i = j;
		}
	}
	t->keys[i] = 0;
	t->n--;
	return 0;
}

#endif
