/* SPDX-License-Identifier: MIT */
/*
 * sweep: the offline profiler's policy (tools/ve-profile). It runs one op at
 * a time (so every measurement is exclusive) and binds successive launches
 * of the same configuration (profile key) to successive distinct entry
 * sizes, so a program that repeats its kernels measures each of them at
 * every pool size; the coordinator folds each completion into the profile
 * (docs/profiles.md) and VE_PROFILE_OUT saves it. Slow by design; results
 * stay bitwise identical like under any policy. Knob: sweep:reps=N samples
 * per size before moving on (default 1).
 */
#include "policy/policies.h"
#include "util/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define SWEEP_KEYS 8192u /* power of two */

struct sweep {
	uint32_t reps;
	uint32_t nsizes;
	uint32_t sizes[VE_POOL_MAX_ENTRIES];
	uint64_t keys[SWEEP_KEYS];
	uint32_t count[SWEEP_KEYS];
};

static int sweep_kv(const char *k, const char *v, void *arg)
{
	struct sweep *s = arg;
	uint64_t n;
	if (strcmp(k, "reps") != 0 || ve__parse_u64(v, &n) || n == 0 || n > 1000)
		return -EINVAL;
	s->reps = (uint32_t)n;
	return 0;
}

static int sweep_init(const char *args, const struct ve_policy_view *v, void **priv)
{
	struct sweep *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->reps = 1;
	int rc = ve__policy_parse_args(args, sweep_kv, s);
	if (rc) {
		free(s);
		return rc;
	}
	const struct ve_pool *p = v->pool;
	for (uint32_t i = 0; i < p->nentries; i++) {
		uint32_t m = p->e[p->by_size[i]].sms;
		if (!s->nsizes || s->sizes[s->nsizes - 1] != m)
			s->sizes[s->nsizes++] = m;
	}
	*priv = s;
	return 0;
}

static void sweep_fini(void *priv)
{
	free(priv);
}

static uint32_t *counter(struct sweep *s, uint64_t key)
{
	uint32_t h = (uint32_t)ve__mix64(key) & (SWEEP_KEYS - 1);
	for (uint32_t i = 0; i < SWEEP_KEYS; i++, h = (h + 1) & (SWEEP_KEYS - 1)) {
		if (s->keys[h] == key)
			return &s->count[h];
		if (!s->keys[h]) {
			s->keys[h] = key;
			return &s->count[h];
		}
	}
	return NULL; /* table full: such keys just use the smallest size */
}

static int32_t sweep_pick(void *priv, const struct ve_policy_view *v)
{
	/* One at a time: nothing may share the GPU with a measured op. */
	if (v->pool->busy)
		return -1;
	return ve__policy_oldest(v);
}

static int32_t sweep_select(void *priv, const struct ve_policy_view *v, uint32_t op,
			    const uint16_t *eligible, uint32_t n, uint32_t *flags)
{
	struct sweep *s = priv;
	uint32_t *c = counter(s, v->ops[op].key);
	uint32_t want = c ? s->sizes[(*c / s->reps) % s->nsizes] : 0;
	if (c)
		(*c)++;
	/* The first eligible entry of that size; eligible[] is smallest first,
	 * so a size the launch cannot use (cooperative minimum) moves up. */
	for (uint32_t i = 0; i < n; i++)
		if (v->pool->e[eligible[i]].sms >= want)
			return eligible[i];
	return n ? eligible[n - 1] : -1;
}

const struct ve_policy_ops ve_policy_sweep = {
	.abi_version = VE_POLICY_ABI_VERSION,
	.name = "sweep",
	.summary = "offline profiling: one op at a time, each launch configuration swept over "
		   "every entry size (ve-profile)",
	.init = sweep_init,
	.fini = sweep_fini,
	.pick = sweep_pick,
	.select = sweep_select,
};
