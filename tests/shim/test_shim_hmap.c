/* SPDX-License-Identifier: MIT */
/*
 * The shim's handle maps (src/shim/hmap.c) against a reference: random
 * inserts, lookups and deletions at the loads the shim reaches (up to 3/4
 * full), long probe chains that wrap around the table's end, and no trace
 * left behind once every key is gone (deletion shifts chains back instead
 * of leaving tombstones that every later miss would scan).
 */
#include "shim/hmap.h"

#include "../harness.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

static struct ve__hmap map = VE__HMAP_INIT;

#define NKEYS (VE__HMAP_CAP * 3 / 4)

struct ref {
	uintptr_t key;
	bool in;
	uint32_t val;
};
static struct ref ref[NKEYS];

static int put(uintptr_t k, uint32_t val)
{
	struct ve__hslot *s = ve__hmap_get_locked(&map, k, true);
	if (!s)
		return -ENOSPC;
	s->v.e.flags = val;
	pthread_mutex_unlock(&map.lock);
	return 0;
}

static int get(uintptr_t k, uint32_t *val)
{
	struct ve__hslot *s = ve__hmap_get_locked(&map, k, false);
	if (!s)
		return -ENOENT;
	*val = s->v.e.flags;
	pthread_mutex_unlock(&map.lock);
	return 0;
}

static uint32_t used_slots(void)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < VE__HMAP_CAP; i++)
		n += map.tab[i].key != 0;
	return n;
}

/* Every key where the reference says, with its value; every other absent. */
static void agree(void)
{
	uint32_t in = 0;
	for (uint32_t i = 0; i < NKEYS; i++) {
		uint32_t v = 0;
		int rc = get(ref[i].key, &v);
		if (ref[i].in) {
			in++;
			VE_CHECK_EQ(rc, 0);
			VE_CHECK_EQ(v, ref[i].val);
		} else {
			VE_CHECK_EQ(rc, -ENOENT);
		}
	}
	VE_CHECK_EQ(used_slots(), in);
}

VE_TEST(random_operations_agree_with_a_reference)
{
	uint64_t s = ve_test_seed(0x4a5b);
	printf("# VE_SEED=%llu\n", (unsigned long long)s);
	for (uint32_t i = 0; i < NKEYS; i++) /* pointer-like keys: 16-byte aligned */
		ref[i].key = (uintptr_t)0x7f0000000000ull + (uintptr_t)(ve_test_rand(&s) & ~0xfull);
	for (int round = 0; round < 40; round++) {
		for (int op = 0; op < 20000; op++) {
			struct ref *r = &ref[ve_test_rand(&s) % NKEYS];
			if (r->in && ve_test_rand(&s) % 2) {
				VE_CHECK_EQ(ve__hmap_del(&map, r->key), 0);
				r->in = false;
			} else {
				r->val = (uint32_t)ve_test_rand(&s);
				VE_CHECK_EQ(put(r->key, r->val), 0);
				r->in = true;
			}
		}
		agree();
	}
	for (uint32_t i = 0; i < NKEYS; i++)
		if (ref[i].in)
			VE_CHECK_EQ(ve__hmap_del(&map, ref[i].key), 0);
	VE_CHECK_EQ(ve__hmap_del(&map, ref[0].key), -ENOENT);
	VE_CHECK_EQ(used_slots(), 0u); /* nothing left: no tombstones */
}

/* Keys that share one home slot near the table's end: their chain wraps to
 * slot 0; deleting from its head, middle and tail keeps the rest findable. */
VE_TEST(chains_wrap_around_the_end)
{
	uintptr_t keys[24];
	int n = 0;
	for (uintptr_t k = 0x1000; n < 24; k += 16)
		if (ve__hmap_home(k) == VE__HMAP_CAP - 3)
			keys[n++] = k;
	for (int i = 0; i < n; i++)
		VE_CHECK_EQ(put(keys[i], (uint32_t)i), 0);
	VE_CHECK(map.tab[0].key != 0); /* the chain wrapped */
	int order[] = {0, 12, 23, 5, 6, 7, 1};
	bool gone[24] = {false};
	for (unsigned d = 0; d < sizeof(order) / sizeof(order[0]); d++) {
		VE_CHECK_EQ(ve__hmap_del(&map, keys[order[d]]), 0);
		gone[order[d]] = true;
		for (int i = 0; i < n; i++) {
			uint32_t v = 99;
			int rc = get(keys[i], &v);
			VE_CHECK_EQ(rc, gone[i] ? -ENOENT : 0);
			if (!gone[i])
				VE_CHECK_EQ(v, (uint32_t)i);
		}
	}
	for (int i = 0; i < n; i++)
		if (!gone[i])
			VE_CHECK_EQ(ve__hmap_del(&map, keys[i]), 0);
	VE_CHECK_EQ(used_slots(), 0u);
}

VE_TEST(full_map_refuses_and_zero_is_no_key)
{
	VE_CHECK_EQ(put(0, 1), -ENOSPC);
	for (uintptr_t k = 1; k <= VE__HMAP_CAP; k++)
		VE_CHECK_EQ(put(k * 16, 0), 0);
	VE_CHECK_EQ(put((VE__HMAP_CAP + 1) * 16, 0), -ENOSPC);
	uint32_t v;
	VE_CHECK_EQ(get((VE__HMAP_CAP + 1) * 16, &v), -ENOENT); /* a miss in a full map ends */
	for (uintptr_t k = 1; k <= VE__HMAP_CAP; k++)
		VE_CHECK_EQ(ve__hmap_del(&map, k * 16), 0);
	VE_CHECK_EQ(used_slots(), 0u);
}
