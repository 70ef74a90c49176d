/* SPDX-License-Identifier: MIT */
/*
 * Small helpers of src/util that others build on:
 *   log8_buckets   every value falls in the bucket whose range holds it; the
 *                  buckets are contiguous and ordered, each spans at most 1/8
 *                  of its lower bound (from 8 on), and values past the last
 *                  bucket land in it (the step-time percentiles of the shim's
 *                  exit summary rest on this)
 */
#include "../harness.h"

#include "util/util.h"

VE_TEST(log8_buckets)
{
	/* Contiguous, ordered ranges; each within 1/8 of its lower bound. */
	uint64_t next = 0;
	for (uint32_t b = 0; b < 8 * 40; b++) {
		uint64_t lo, w;
		ve__log8_range(b, &lo, &w);
		VE_CHECK_MSG(lo == next, "bucket %u starts at %llu, not %llu", b,
			     (unsigned long long)lo, (unsigned long long)next);
		VE_CHECK(w >= 1);
		if (lo >= 8)
			VE_CHECK_MSG(w * 8 <= lo, "bucket %u: width %llu of %llu", b,
				     (unsigned long long)w, (unsigned long long)lo);
		next = lo + w;
	}
	/* Every value in the bucket whose range holds it: all below 2^16, then
	 * each bucket's edges and random values up to 2^40. */
	for (uint64_t v = 0; v < (1u << 16); v++) {
		uint32_t b = ve__log8_bucket(v, 1000);
		uint64_t lo, w;
		ve__log8_range(b, &lo, &w);
		VE_CHECK_MSG(v >= lo && v < lo + w, "%llu in bucket %u [%llu, +%llu)",
			     (unsigned long long)v, b, (unsigned long long)lo, (unsigned long long)w);
	}
	uint64_t seed = ve_test_seed(0x10a8);
	for (int i = 0; i < 200000; i++) {
		uint64_t v = ve__rand64(&seed) >> (24 + ve__rand_below(&seed, 40));
		uint32_t b = ve__log8_bucket(v, 1000);
		uint64_t lo, w;
		ve__log8_range(b, &lo, &w);
		VE_CHECK_MSG(v >= lo && v < lo + w, "%llu in bucket %u", (unsigned long long)v, b);
		VE_CHECK(b == 0 || ve__log8_bucket(lo - 1, 1000) == b - 1);
	}
	/* Clamped to the last bucket. */
	VE_CHECK_EQ(ve__log8_bucket(UINT64_MAX, 100), 99);
	VE_CHECK_EQ(ve__log8_bucket((1ull << 37) - 1, 8 * 35), 8 * 35 - 1); /* the shim's range */
	VE_CHECK_EQ(ve__log8_bucket(1ull << 40, 8 * 35), 8 * 35 - 1);
	VE_CHECK_EQ(ve__log8_bucket(8, 1000), 8);
	VE_CHECK_EQ(ve__log8_bucket(17, 1000), 16);
}
