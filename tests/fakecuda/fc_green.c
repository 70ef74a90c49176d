/* SPDX-License-Identifier: MIT */
/*
 * fakecuda green contexts: SM resources, splits, descriptors, green contexts
 * and their streams.
 *
 * SM topology. With 132 SMs the fake reproduces what the H200 reports
 * (docs/architecture.md, "GPU facts the code relies on"): leaves of 8 SMs are TPC pairs
 * spread over four GPCs, leaf 0 = {0,1,16,17,32,33,48,49}, ..., leaf 8 =
 * {64,65,78,79,92,93,106,107}, ..., remainder 120..131. Other SM counts use
 * SM ids in order. A split takes consecutive runs of the input's SMs in this
 * "physical" order, so leaf SM ids are deliberately not contiguous.
 *
 * Split rule, fitted to what the H200 (132 SMs) returns for every minCount
 * (tests/fakecuda/probe/driver_probe.c): groups of k SMs, k = minCount rounded
 * up to the co-scheduling alignment of 8 (at least 8, at most all SMs), and
 * floor(n / k) groups, except that groups of the minimum size 8 come one
 * fewer when the input claims alignment 8 but 8 does not divide n (only the
 * whole device does): 15 x 8 + 12, 8 x 16 + 4, 5 x 24 + 12, 4 x 32 + 4,
 * 3 x 40 + 12, 2 x 48 + 36, 2 x 64 + 4, 1 x 72 + 60, 1 x 132. Resources of
 * green contexts report alignment 8 when 8 divides their SM count, else 2
 * (and then split plainly: 20 SMs give 2 x 8 + 4).
 * With CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING the granularity is 2
 * (a TPC) and the rule is plain floor(n / k) (66 x 2, 16 x 8 + 4, ...).
 * Split outputs report minSmPartitionSize = smCoscheduledAlignment = 0 and
 * an empty remainder is CU_DEV_RESOURCE_TYPE_INVALID, as on the H200.
 *
 * cuDevResourceGenerateDesc is stricter than the H200 driver, which accepted
 * groups of two different splits, the same group twice and a whole-device
 * resource plus a group: the fake refuses those with
 * CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION, as the documentation says, since
 * such descriptors give overlapping SM sets.
 *
 * The SM set of a resource lives in CUdevResource._internal_padding, which
 * the header reserves for the driver.
 */
#include "fc_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FC_DEF(sym, decl, call)                                                                    \
	CUresult CUDAAPI sym decl                                                                  \
	{                                                                                          \
		FC_ENTER();                                                                        \
		return call;                                                                       \
	}

#define RES_MAGIC      0x46435352u /* "FCSR" */
#define RES_WHOLE      1	   /* from a device, context or green context: splittable */
#define RES_SPLIT      2	   /* output of a split */
#define SM_GRANULARITY 8
#define SM_MIN_PART    8

struct res_priv {
	uint32_t magic;
	int32_t dev;
	uint32_t kind;
	uint32_t pad;
	uint64_t split_id;
	struct fc_smset sms;
};
_Static_assert(sizeof(struct res_priv) <= sizeof(((CUdevResource *)0)->_internal_padding),
	       "SM set must fit the driver-private bytes");

static pthread_mutex_t green_mu = PTHREAD_MUTEX_INITIALIZER;
static struct fc_green **greens; /* every green context, freed at exit */
static size_t ngreens, greens_cap;

void fakecuda__device_topology(struct fc_device *d)
{
	uint32_t n = 0;
	if (d->nsm == 132) {
		for (uint32_t k = 0; k < 8; k++)
			for (uint32_t j = 0; j < 4; j++) {
				d->phys_order[n++] = 2 * k + 16 * j;
				d->phys_order[n++] = 2 * k + 16 * j + 1;
			}
		for (uint32_t k = 0; k < 7; k++)
			for (uint32_t j = 0; j < 4; j++) {
				d->phys_order[n++] = 64 + 2 * k + 14 * j;
				d->phys_order[n++] = 64 + 2 * k + 14 * j + 1;
			}
		for (uint32_t i = 120; i < 132; i++)
			d->phys_order[n++] = i;
	} else {
		for (; n < d->nsm; n++)
			d->phys_order[n] = n;
	}
}

/* GPC of an SM id, in the topology above: on 132 SMs, ids 0..63 form four
 * GPCs of 16, ids 64..119 four of 14, and 120..131 one of 12 (so a leaf
 * holds one TPC of each of four GPCs, a pair of leaves two: clusters of 4
 * blocks at one block per SM fit in a pair, not in a leaf). Other SM counts:
 * GPCs of 16 consecutive ids. */
uint32_t fakecuda__gpc_of(const struct fc_device *d, uint32_t sm)
{
	if (d->nsm == 132) {
		if (sm < 64)
			return sm / 16;
		if (sm < 120)
			return 4 + (sm - 64) / 14;
		return 8;
	}
	return sm / 16;
}

static void res_fill(CUdevResource *r, int dev, uint32_t kind, uint64_t split,
		     const struct fc_smset *sms, unsigned minpart, unsigned align)
{
	memset(r, 0, sizeof(*r));
	r->type = CU_DEV_RESOURCE_TYPE_SM;
	r->sm.smCount = fc_smset_count(sms);
	r->sm.minSmPartitionSize = minpart;
	r->sm.smCoscheduledAlignment = align;
	struct res_priv p = {RES_MAGIC, dev, kind, 0, split, *sms};
	memcpy(r->_internal_padding, &p, sizeof(p));
}

static int res_priv(const CUdevResource *r, struct res_priv *p)
{
	if (!r || r->type != CU_DEV_RESOURCE_TYPE_SM)
		return -1;
	memcpy(p, r->_internal_padding, sizeof(*p));
	return p->magic == RES_MAGIC && p->dev >= 0 && p->dev < g_fc.ndev ? 0 : -1;
}

/* SMs 0 .. n-1. */
static void sm_prefix(struct fc_smset *s, uint32_t n)
{
	memset(s, 0, sizeof(*s));
	for (uint32_t i = 0; i < n; i++)
		fc_smset_set(s, i);
}

static void whole_device(const struct fc_device *d, struct fc_smset *s)
{
	sm_prefix(s, d->nsm);
}

/* @green: the resource of a green context, whose alignment the H200 reports
 * as 2 when its SM count is not a multiple of 8 (124 SMs: 2/2; 8 SMs: 8/8). */
static CUresult get_resource(CUdevResource *res, CUdevResourceType type, int dev,
			     const struct fc_smset *sms, int green)
{
	if (!res)
		return CUDA_ERROR_INVALID_VALUE;
	if (type != CU_DEV_RESOURCE_TYPE_SM)
		return CUDA_ERROR_INVALID_RESOURCE_TYPE;
	unsigned a = green && fc_smset_count(sms) % SM_GRANULARITY ? 2 : SM_GRANULARITY;
	res_fill(res, dev, RES_WHOLE, 0, sms, a == 2 ? 2 : SM_MIN_PART, a);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetDevResource(CUdevice device, CUdevResource *resource,
					CUdevResourceType type)
{
	FC_ENTER();
	struct fc_device *d;
	CUresult r = fakecuda__device_get(device, &d);
	if (r)
		return r;
	struct fc_smset s;
	whole_device(d, &s);
	return get_resource(resource, type, device, &s, 0);
}

CUresult CUDAAPI cuCtxGetDevResource(CUcontext hCtx, CUdevResource *resource,
				     CUdevResourceType type)
{
	FC_ENTER();
	if (!fakecuda__registry_is(hCtx, FC_T_CTX))
		return CUDA_ERROR_INVALID_CONTEXT;
	struct fc_ctx *c = (struct fc_ctx *)hCtx;
	struct fc_smset s;
	if (c->green) {
		s = c->green->sms;
	} else {
		/* An MPS client with an active-thread percentage sees fewer SMs
		 * in its context than the device has (only the report changes). */
		uint32_t n = c->dev->nsm;
		if (g_fc.ctx_sms > 0 && (uint32_t)g_fc.ctx_sms < n)
			n = (uint32_t)g_fc.ctx_sms;
		sm_prefix(&s, n);
	}
	return get_resource(resource, type, c->dev->ordinal, &s, c->green != NULL);
}

static CUresult green_check(CUgreenCtx h, struct fc_green **out)
{
	if (!fakecuda__registry_is(h, FC_T_GREEN))
		return CUDA_ERROR_INVALID_CONTEXT;
	struct fc_green *g = (struct fc_green *)h;
	if (__atomic_load_n(&g->destroyed, __ATOMIC_ACQUIRE))
		return CUDA_ERROR_CONTEXT_IS_DESTROYED;
	*out = g;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGreenCtxGetDevResource(CUgreenCtx hCtx, CUdevResource *resource,
					  CUdevResourceType type)
{
	FC_ENTER();
	struct fc_green *g;
	CUresult r = green_check(hCtx, &g);
	if (r)
		return r;
	return get_resource(resource, type, g->dev->ordinal, &g->sms, 1);
}

CUresult CUDAAPI cuDevSmResourceSplitByCount(CUdevResource *result, unsigned int *nbGroups,
					     const CUdevResource *input, CUdevResource *remaining,
					     unsigned int useFlags, unsigned int minCount)
{
	FC_ENTER();
	struct res_priv in;
	if (!input || input->type != CU_DEV_RESOURCE_TYPE_SM)
		return CUDA_ERROR_INVALID_RESOURCE_TYPE;
	if (!nbGroups || res_priv(input, &in) < 0)
		return CUDA_ERROR_INVALID_VALUE;
	const unsigned ok = CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING |
			    CU_DEV_SM_RESOURCE_SPLIT_MAX_POTENTIAL_CLUSTER_SIZE;
	if (useFlags & ~ok)
		return CUDA_ERROR_INVALID_VALUE;
	/* "the output results cannot be split again without first creating a
	 * descriptor and a green context with that descriptor." */
	if (in.kind != RES_WHOLE)
		return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
	const struct fc_device *d = &g_fc.dev[in.dev];
	uint32_t list[FAKECUDA_MAX_SMS], n = 0;
	for (uint32_t i = 0; i < d->nsm; i++)
		if (fc_smset_has(&in.sms, d->phys_order[i]))
			list[n++] = d->phys_order[i];
	if (minCount > n)
		return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION; /* measured */
	int ignore = (useFlags & CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING) != 0;
	unsigned gran = ignore ? 2 : SM_GRANULARITY, minpart = ignore ? 2 : SM_MIN_PART;
	unsigned k = FC_MAX(minCount, minpart);
	k = FC_MIN((k + gran - 1) / gran * gran, n);
	unsigned groups = k ? n / k : 0;
	if (!ignore && k == SM_MIN_PART && input->sm.smCoscheduledAlignment == SM_GRANULARITY &&
	    groups > 1 && n % k)
		groups--;
	if (!result) {
		*nbGroups = groups;
		return CUDA_SUCCESS;
	}
	if (*nbGroups == 0)
		return CUDA_ERROR_INVALID_VALUE;
	groups = FC_MIN(groups, *nbGroups);
	uint64_t split = fakecuda__new_id();
	for (unsigned gi = 0; gi < groups; gi++) {
		struct fc_smset s = {{0}};
		for (unsigned j = 0; j < k; j++)
			fc_smset_set(&s, list[gi * k + j]);
		res_fill(&result[gi], in.dev, RES_SPLIT, split, &s, 0, 0);
	}
	if (remaining) {
		struct fc_smset s = {{0}};
		for (uint32_t j = groups * k; j < n; j++)
			fc_smset_set(&s, list[j]);
		if (n > groups * k)
			res_fill(remaining, in.dev, RES_SPLIT, split, &s, 0, 0);
		else
			memset(remaining, 0, sizeof(*remaining));
	}
	*nbGroups = groups;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevResourceGenerateDesc(CUdevResourceDesc *phDesc, CUdevResource *resources,
					   unsigned int nbResources)
{
	FC_ENTER();
	if (!phDesc || !resources || !nbResources)
		return CUDA_ERROR_INVALID_VALUE;
	struct fc_desc *dsc = calloc(1, sizeof(*dsc));
	if (!dsc)
		return CUDA_ERROR_OUT_OF_MEMORY;
	struct res_priv first;
	CUresult r = CUDA_SUCCESS;
	for (unsigned i = 0; i < nbResources && !r; i++) {
		struct res_priv p;
		if (resources[i].type != CU_DEV_RESOURCE_TYPE_SM) {
			r = CUDA_ERROR_INVALID_RESOURCE_TYPE;
			break;
		}
		if (res_priv(&resources[i], &p) < 0) {
			r = CUDA_ERROR_INVALID_VALUE;
			break;
		}
		if (i == 0)
			first = p;
		/* "they must be outputs (whether result or remaining) from the same
		 * split API instance, otherwise CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION" */
		if (p.dev != first.dev ||
		    (nbResources > 1 && (p.kind != RES_SPLIT || p.split_id != first.split_id))) {
			r = CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
			break;
		}
		for (int w = 0; w < FC_MASK_WORDS; w++) {
			if (dsc->sms.w[w] & p.sms.w[w])
				r = CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
			dsc->sms.w[w] |= p.sms.w[w];
		}
	}
	if (!r && !fc_smset_count(&dsc->sms))
		r = CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
	if (r) {
		free(dsc);
		return r;
	}
	dsc->dev = first.dev;
	fakecuda__registry_add(dsc, FC_T_DESC);
	*phDesc = (CUdevResourceDesc)dsc;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGreenCtxCreate(CUgreenCtx *phCtx, CUdevResourceDesc desc, CUdevice dev,
				  unsigned int flags)
{
	FC_ENTER();
	struct fc_device *d;
	CUresult r = fakecuda__device_get(dev, &d);
	if (r)
		return r;
	/* "CU_GREEN_CTX_DEFAULT_STREAM is required." */
	if (!phCtx || flags != CU_GREEN_CTX_DEFAULT_STREAM ||
	    !fakecuda__registry_is(desc, FC_T_DESC))
		return CUDA_ERROR_INVALID_VALUE;
	/* FAKECUDA_GREEN_CREATE_US: creation takes this long (the H200: ~2 ms
	 * a green context with its streams, ~130 ms for a pool of 59). */
	if (g_fc.green_create_us)
		usleep((useconds_t)g_fc.green_create_us);
	const struct fc_desc *dsc = (const struct fc_desc *)desc;
	if (dsc->dev != dev)
		return CUDA_ERROR_INVALID_VALUE;
	struct fc_green *g = calloc(1, sizeof(*g));
	if (!g)
		return CUDA_ERROR_OUT_OF_MEMORY;
	g->dev = d;
	g->sms = dsc->sms;
	for (uint32_t i = 0; i < FAKECUDA_MAX_SMS; i++)
		if (fc_smset_has(&g->sms, i))
			g->sm_ids[g->nsm++] = i;
	g->id = fakecuda__new_id();
	pthread_mutex_lock(&green_mu);
	if (ngreens == greens_cap) {
		size_t ncap = greens_cap ? 2 * greens_cap : 64;
		struct fc_green **nv = realloc(greens, ncap * sizeof(*nv));
		if (!nv) {
			pthread_mutex_unlock(&green_mu);
			free(g);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		greens = nv;
		greens_cap = ncap;
	}
	greens[ngreens++] = g;
	pthread_mutex_unlock(&green_mu);
	/* "This API will retain the primary context on device dev, which will is
	 * released when the green context is destroyed." */
	pthread_mutex_lock(&g_fc.mu);
	g->ctx = fakecuda__ctx_new(d, d->primary_flags, 0);
	if (g->ctx) {
		g->ctx->green = g;
		d->primary_refs++;
	}
	pthread_mutex_unlock(&g_fc.mu);
	if (!g->ctx)
		return CUDA_ERROR_OUT_OF_MEMORY;
	fakecuda__registry_add(g, FC_T_GREEN);
	*phCtx = (CUgreenCtx)g;
	return CUDA_SUCCESS;
}

/*
 * Waits for the green context's work, then detaches its streams: "any
 * subsequent API calls involving these streams (including cuStreamDestroy)
 * will return CUDA_ERROR_CONTEXT_IS_DESTROYED".
 */
CUresult CUDAAPI cuGreenCtxDestroy(CUgreenCtx hCtx)
{
	FC_ENTER();
	struct fc_green *g;
	CUresult r = green_check(hCtx, &g);
	if (r)
		return r;
	/* The handle stays known: a second destroy is CUDA_ERROR_CONTEXT_IS_DESTROYED. */
	__atomic_store_n(&g->destroyed, 1, __ATOMIC_RELEASE);
	fakecuda__ctx_sync(g->ctx);
	fakecuda__registry_del(g->ctx);
	fakecuda__ctx_teardown(g->ctx);
	pthread_mutex_lock(&g_fc.mu);
	if (g->dev->primary_refs > 0)
		g->dev->primary_refs--;
	pthread_mutex_unlock(&g_fc.mu);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxFromGreenCtx(CUcontext *pContext, CUgreenCtx hCtx)
{
	FC_ENTER();
	struct fc_green *g;
	CUresult r = green_check(hCtx, &g);
	if (r)
		return r;
	if (!pContext)
		return CUDA_ERROR_INVALID_VALUE;
	*pContext = (CUcontext)g->ctx;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGreenCtxGetId(CUgreenCtx greenCtx, unsigned long long *greenCtxId)
{
	FC_ENTER();
	struct fc_green *g;
	CUresult r = green_check(greenCtx, &g);
	if (r)
		return r;
	if (!greenCtxId)
		return CUDA_ERROR_INVALID_VALUE;
	*greenCtxId = g->id;
	return CUDA_SUCCESS;
}

FC_HIDDEN CUresult fakecuda__stream_create_in(struct fc_ctx *c, CUstream *ph, unsigned flags,
					      int prio);

CUresult CUDAAPI cuGreenCtxStreamCreate(CUstream *phStream, CUgreenCtx greenCtx, unsigned int flags,
					int priority)
{
	FC_ENTER();
	struct fc_green *g;
	CUresult r = green_check(greenCtx, &g);
	if (r)
		return r;
	/* "CU_STREAM_NON_BLOCKING must be specified." */
	if (!phStream || flags != CU_STREAM_NON_BLOCKING)
		return CUDA_ERROR_INVALID_VALUE;
	return fakecuda__stream_create_in(g->ctx, phStream, flags, priority);
}

FC_HIDDEN CUresult fakecuda__ctx_record_event(struct fc_ctx *c, struct fc_event *e);
FC_HIDDEN CUresult fakecuda__ctx_wait_event(struct fc_ctx *c, struct fc_event *e);

static CUresult green_event(CUgreenCtx h, CUevent he, int wait)
{
	struct fc_green *g;
	CUresult r = green_check(h, &g);
	if (r)
		return r;
	if (!fakecuda__registry_is(he, FC_T_EVENT))
		return CUDA_ERROR_INVALID_HANDLE;
	struct fc_event *e = (struct fc_event *)he;
	if (wait)
		return fakecuda__ctx_wait_event(g->ctx, e);
	/* "hEvent and hCtx must be from the same primary context otherwise
	 * CUDA_ERROR_INVALID_HANDLE is returned." */
	if (e->ctx->dev != g->dev)
		return CUDA_ERROR_INVALID_HANDLE;
	return fakecuda__ctx_record_event(g->ctx, e);
}

FC_DEF(cuGreenCtxRecordEvent, (CUgreenCtx hCtx, CUevent hEvent), green_event(hCtx, hEvent, 0))
FC_DEF(cuGreenCtxWaitEvent, (CUgreenCtx hCtx, CUevent hEvent), green_event(hCtx, hEvent, 1))

/* ---- test API ------------------------------------------------------------------------- */

static int ids_of(const struct fc_smset *s, uint32_t *ids, uint32_t max)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < FAKECUDA_MAX_SMS; i++)
		if (fc_smset_has(s, i)) {
			if (ids && n < max)
				ids[n] = i;
			n++;
		}
	return (int)n;
}

int fakecuda_green_sm_ids(CUgreenCtx h, uint32_t *ids, uint32_t max)
{
	if (!fakecuda__registry_is(h, FC_T_GREEN))
		return -EINVAL;
	return ids_of(&((struct fc_green *)h)->sms, ids, max);
}

int fakecuda_resource_sm_ids(const CUdevResource *r, uint32_t *ids, uint32_t max)
{
	struct res_priv p;
	if (res_priv(r, &p) < 0)
		return -EINVAL;
	return ids_of(&p.sms, ids, max);
}

uint64_t fakecuda_green_launch_count(CUgreenCtx h)
{
	if (!fakecuda__registry_is(h, FC_T_GREEN))
		return 0;
	return atomic_load(&((struct fc_green *)h)->launches);
}

void fakecuda__green_teardown(void)
{
	void **v;
	size_t n = fakecuda__registry_take(FC_T_DESC, &v);
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
	n = fakecuda__registry_take(FC_T_GREEN, &v);
	free(v);
	pthread_mutex_lock(&green_mu);
	for (size_t i = 0; i < ngreens; i++)
		free(greens[i]);
	free(greens);
	greens = NULL;
	ngreens = greens_cap = 0;
	pthread_mutex_unlock(&green_mu);
}
