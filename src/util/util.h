/* SPDX-License-Identifier: MIT */
/* Small helpers shared by every module: clocks, hashing, logging, bits. */
#ifndef VE_UTIL_H
#define VE_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#define VE_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define VE_MIN(a, b)     ((a) < (b) ? (a) : (b))
#define VE_MAX(a, b)     ((a) > (b) ? (a) : (b))
#define VE_LIKELY(x)     __builtin_expect(!!(x), 1)
#define VE_UNLIKELY(x)   __builtin_expect(!!(x), 0)
#define VE_CACHELINE     64

static inline uint64_t ve__now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* 64-bit finaliser (murmur3 fmix64): cheap, good avalanche for hash-table keys. */
static inline uint64_t ve__mix64(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	k *= 0xc4ceb9fe1a85ec53ull;
	k ^= k >> 33;
	return k;
}

static inline uint64_t ve__hash_combine(uint64_t h, uint64_t v)
{
	return ve__mix64(h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2)));
}

static inline int ve__popcount64(uint64_t x)
{
	return __builtin_popcountll(x);
}

/* Logging: level from VE_LOG_LEVEL (error, warn, info, debug, trace; default warn).
 * Every line is prefixed "vitamin-e[pid]: " and goes to stderr (or VE_LOG_FILE). */
enum ve_log_level { VE_LOG_ERROR = 0, VE_LOG_WARN, VE_LOG_INFO, VE_LOG_DEBUG, VE_LOG_TRACE };
extern int ve__log_level;
void ve__log_init(void);
void ve__log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int ve__log_parse_level(const char *s);
#define VE_LOG(lvl, ...)                                                                           \
	do {                                                                                       \
		if (VE_UNLIKELY((lvl) <= ve__log_level))                                           \
			ve__log((lvl), __VA_ARGS__);                                               \
	} while (0)
#define VE_ERR(...)   VE_LOG(VE_LOG_ERROR, __VA_ARGS__)
#define VE_WARN(...)  VE_LOG(VE_LOG_WARN, __VA_ARGS__)
#define VE_INFO(...)  VE_LOG(VE_LOG_INFO, __VA_ARGS__)
#define VE_DEBUG(...) VE_LOG(VE_LOG_DEBUG, __VA_ARGS__)
#define VE_TRACE(...) VE_LOG(VE_LOG_TRACE, __VA_ARGS__)

/* Deterministic PRNG (splitmix64) for the sim, chaos policy and tests. */
static inline uint64_t ve__rand64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline uint32_t ve__rand_below(uint64_t *s, uint32_t n)
{
	return n ? (uint32_t)(((ve__rand64(s) >> 32) * (uint64_t)n) >> 32) : 0;
}

/* Log-linear histogram buckets of a value v (any unit): one bucket each for
 * 0..7, then 8 per octave, named by the three bits after the leading one,
 * so a bucket spans at most 1/8 of its lower bound; values past nb - 1
 * land in the last bucket. No floating point: usable at every event. */
static inline uint32_t ve__log8_bucket(uint64_t v, uint32_t nb)
{
	uint32_t b;
	if (v < 8) {
		b = (uint32_t)v;
	} else {
		uint32_t oct = 63u - (uint32_t)__builtin_clzll(v); /* >= 3: [8, 16) is 8..15 */
		b = (oct - 2) * 8 + (uint32_t)((v >> (oct - 3)) & 7);
	}
	return b < nb ? b : nb - 1;
}

/* A bucket's range [lo, lo + width), in the value's unit. */
static inline void ve__log8_range(uint32_t b, uint64_t *lo, uint64_t *width)
{
	if (b < 8) {
		*lo = b;
		*width = 1;
		return;
	}
	uint32_t oct = b / 8 + 2, sub = b % 8;
	*lo = (uint64_t)(8 + sub) << (oct - 3);
	*width = 1ull << (oct - 3);
}

/* Text helpers for config parsing: strict integer/double parse (whole string). */
int ve__parse_u64(const char *s, uint64_t *out);
int ve__parse_double(const char *s, double *out);

/* 0 if 'path' can be opened for writing (created if missing, then removed
 * again), else -errno: outputs written at exit are checked at start. */
int ve__path_writable(const char *path);

/* Edit distance of two names, ignoring case (misspelt variables and keys). */
size_t ve__edit_distance(const char *a, const char *b);
/* The entry of list[n] nearest to name, if at most max_dist edits away. */
const char *ve__closest(const char *name, const char *const *list, size_t n, size_t max_dist);

#endif
