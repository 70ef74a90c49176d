/* SPDX-License-Identifier: MIT */
/*
 * The smallest pool entries a thread-block cluster launch can run on.
 *
 * A cluster's blocks are co-scheduled in one GPC. A leaf holds one TPC (two
 * SMs) of each of its GPCs (docs/architecture.md, "GPU facts"), so a cluster
 * larger than 2 fits only in entries with enough SMs of one GPC at the
 * kernel's occupancy. The driver knows which: its occupancy calculator,
 * asked with a stream of an entry's green context, says how many such
 * clusters that entry holds at once (0: it cannot run the launch at all).
 * Sending every such launch to the whole GPU instead (the earlier rule)
 * made it wait for every other client to drain: a decode server on the
 * H200 launches hundreds of cuBLAS kernels with clusters of 4 and starved
 * beside a training job.
 *
 * The answer per launch configuration (function, cluster and block
 * dimensions, dynamic shared memory) is cached: the first launch of a
 * configuration pays one query per pool entry (59 on an H200, a few
 * microseconds each), later ones a hash lookup under a mutex taken only for
 * cluster launches.
 */
#include "backend/cuda.h"
#include "runtime/runtime.h"
#include "pool/pool.h"
#include "shim/shim.h"
#include "util/util.h"

#include <pthread.h>
#include <string.h>

#define CACHE_SLOTS 1024 /* configurations remembered; a full cache asks again */

struct ckey {
	CUfunction f;
	uint32_t cluster[3], block[3], smem;
};

struct cslot {
	struct ckey k;
	uint32_t min_sms;
	bool used;
};

static struct cslot cache[CACHE_SLOTS];
static uint32_t cache_used;
static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;

static uint64_t key_hash(const struct ckey *k)
{
	uint64_t h = (uint64_t)(uintptr_t)k->f * 0x9e3779b97f4a7c15ull;
	const uint32_t v[7] = {k->cluster[0], k->cluster[1], k->cluster[2], k->block[0],
			       k->block[1],   k->block[2],   k->smem};
	for (int i = 0; i < 7; i++)
		h = (h ^ v[i]) * 0x100000001b3ull;
	return h ^ (h >> 29);
}

/* Asks the driver on one stream of every entry; UINT32_MAX if it cannot
 * answer (the whole GPU then, as before). */
static uint32_t query(const struct ckey *k)
{
	struct ve_shim *S = &ve__shim;
	const struct ve_pool *p = ve_runtime_pool(S->rt);
	if (!ve__real.cuOccupancyMaxActiveClusters || !ve_cuda_backend_is_cuda(S->backend))
		return UINT32_MAX;
	CUlaunchAttribute at;
	memset(&at, 0, sizeof(at));
	at.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
	at.value.clusterDim.x = k->cluster[0];
	at.value.clusterDim.y = k->cluster[1];
	at.value.clusterDim.z = k->cluster[2];
	uint32_t max_fail = 0;
	bool root_fits = false;
	for (uint32_t e = 0; e < p->nentries; e++) {
		CUstream st;
		if (ve_cuda_backend_lane_stream(S->backend, VE_LANE(e, 0), &st))
			return UINT32_MAX;
		CUlaunchConfig cfg;
		memset(&cfg, 0, sizeof(cfg));
		cfg.gridDimX = k->cluster[0]; /* one cluster: the grid does not matter */
		cfg.gridDimY = k->cluster[1];
		cfg.gridDimZ = k->cluster[2];
		cfg.blockDimX = k->block[0];
		cfg.blockDimY = k->block[1];
		cfg.blockDimZ = k->block[2];
		cfg.sharedMemBytes = k->smem;
		cfg.hStream = st;
		cfg.attrs = &at;
		cfg.numAttrs = 1;
		int n = 0;
		CUresult r = ve__real.cuOccupancyMaxActiveClusters(&n, k->f, &cfg);
		if (r != CUDA_SUCCESS) {
			VE_DEBUG("cluster %ux%ux%u: occupancy query on entry %u: %d; whole GPU",
				 k->cluster[0], k->cluster[1], k->cluster[2], e, (int)r);
			return UINT32_MAX;
		}
		if (n <= 0)
			max_fail = VE_MAX(max_fail, p->e[e].sms);
		else if (e == p->root)
			root_fits = true;
	}
	if (!root_fits || max_fail >= p->total_sms)
		return UINT32_MAX;
	/* Entries are chosen by size: every entry of at least this many SMs
	 * fits (leaves of one size differ in their GPCs, so one entry that
	 * fits does not vouch for the others of its size). */
	return max_fail + 1;
}

uint32_t ve__cluster_min_sms(CUfunction f, const uint32_t cluster[3], const uint32_t block[3],
			     uint32_t smem)
{
	struct ckey k;
	memset(&k, 0, sizeof(k)); /* padding: keys compare with memcmp */
	k.f = f;
	for (int i = 0; i < 3; i++) {
		k.cluster[i] = cluster[i] ? cluster[i] : 1;
		k.block[i] = block[i] ? block[i] : 1;
	}
	k.smem = smem;
	uint64_t h = key_hash(&k);
	pthread_mutex_lock(&cache_mu);
	for (uint32_t i = 0; i < CACHE_SLOTS; i++) {
		struct cslot *c = &cache[(h + i) % CACHE_SLOTS];
		if (!c->used)
			break;
		if (memcmp(&c->k, &k, sizeof(k)) == 0) {
			uint32_t m = c->min_sms;
			pthread_mutex_unlock(&cache_mu);
			return m;
		}
	}
	pthread_mutex_unlock(&cache_mu);
	uint32_t m = query(&k);
	pthread_mutex_lock(&cache_mu);
	if (cache_used < CACHE_SLOTS * 3 / 4) {
		for (uint32_t i = 0; i < CACHE_SLOTS; i++) {
			struct cslot *c = &cache[(h + i) % CACHE_SLOTS];
			if (c->used && memcmp(&c->k, &k, sizeof(k)) == 0)
				break; /* another thread asked too */
			if (!c->used) {
				c->k = k;
				c->min_sms = m;
				c->used = true;
				cache_used++;
				break;
			}
		}
	}
	pthread_mutex_unlock(&cache_mu);
	return m;
}
