/* SPDX-License-Identifier: MIT */
/*
 * fakecuda core: global state, entry accounting, handle registry, errors,
 * devices, contexts (primary and created), and process teardown.
 */
#include "fc_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct fc_global fakecuda__g = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .seed = 1,
};

static _Thread_local struct fc_tls tls;

struct fc_tls *fakecuda__tls(void)
{
	return &tls;
}

uint64_t fakecuda__now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

unsigned long long fakecuda__new_id(void)
{
	return atomic_fetch_add_explicit(&g_fc.next_id, 1, memory_order_relaxed) + 1;
}

/* ---- entry accounting ---------------------------------------------------- */

#define FC_NCOUNTERS 1024
static struct {
	const char *name;
	_Atomic uint64_t n;
} counters[FC_NCOUNTERS];
static _Atomic int ncounters;
static pthread_mutex_t counters_mu = PTHREAD_MUTEX_INITIALIZER;

static int counter_slot(const char *fn)
{
	pthread_mutex_lock(&counters_mu);
	int n = atomic_load_explicit(&ncounters, memory_order_relaxed), i;
	for (i = 0; i < n; i++)
		if (strcmp(counters[i].name, fn) == 0)
			break;
	if (i == n && n < FC_NCOUNTERS) {
		counters[n].name = fn;
		/* Release: pairs with the acquire in fakecuda_call_count(), so a reader that
		 * sees the new count also sees the name. */
		atomic_store_explicit(&ncounters, n + 1, memory_order_release);
	}
	pthread_mutex_unlock(&counters_mu);
	return i < FC_NCOUNTERS ? i : -1;
}

CUresult fakecuda__enter(const char *fn, _Atomic int *slot, int need_init)
{
	int i = atomic_load_explicit(slot, memory_order_relaxed);
	if (i < 0) {
		i = counter_slot(fn);
		atomic_store_explicit(slot, i, memory_order_relaxed);
	}
	if (i >= 0)
		atomic_fetch_add_explicit(&counters[i].n, 1, memory_order_relaxed);
	if (g_fc.trace)
		fprintf(stderr, "fakecuda: %s\n", fn);
	/* cuLaunchHostFunc: "The host function must not make any CUDA API calls.
	 * Attempting to use a CUDA API may result in CUDA_ERROR_NOT_PERMITTED".
	 * Calls that need no initialization (error names, versions) stay allowed. */
	if (tls.in_callback && need_init)
		return CUDA_ERROR_NOT_PERMITTED;
	if (need_init && !__atomic_load_n(&g_fc.initialized, __ATOMIC_ACQUIRE))
		return CUDA_ERROR_NOT_INITIALIZED;
	/* CUDA does not survive fork(): a child's calls fail ("initialization
	 * error"); it has none of the parent's stream workers anyway. */
	if (need_init && atomic_load_explicit(&g_fc.forked, memory_order_relaxed))
		return CUDA_ERROR_NOT_INITIALIZED;
	return CUDA_SUCCESS;
}

static void fc_forked_child(void)
{
	if (__atomic_load_n(&g_fc.initialized, __ATOMIC_ACQUIRE))
		atomic_store(&g_fc.forked, 1);
}

static const char *strip_variant(const char *name, size_t *len)
{
	size_t n = strlen(name);
	if (n > 5 && (strcmp(name + n - 5, "_ptsz") == 0 || strcmp(name + n - 5, "_ptds") == 0))
		n -= 5;
	/* _v<digits> */
	size_t k = n;
	while (k > 0 && name[k - 1] >= '0' && name[k - 1] <= '9')
		k--;
	if (k < n && k >= 2 && name[k - 1] == 'v' && name[k - 2] == '_')
		n = k - 2;
	*len = n;
	return name;
}

uint64_t fakecuda_call_count(const char *symbol)
{
	int n = atomic_load_explicit(&ncounters, memory_order_acquire);
	for (int i = 0; i < n; i++)
		if (strcmp(counters[i].name, symbol) == 0)
			return atomic_load_explicit(&counters[i].n, memory_order_relaxed);
	return 0;
}

uint64_t fakecuda_call_count_base(const char *base)
{
	int n = atomic_load_explicit(&ncounters, memory_order_acquire);
	size_t bl = strlen(base);
	uint64_t sum = 0;
	for (int i = 0; i < n; i++) {
		size_t l;
		const char *s = strip_variant(counters[i].name, &l);
		if (l == bl && memcmp(s, base, bl) == 0)
			sum += atomic_load_explicit(&counters[i].n, memory_order_relaxed);
	}
	return sum;
}

void fakecuda_counters_reset(void)
{
	int n = atomic_load_explicit(&ncounters, memory_order_acquire);
	for (int i = 0; i < n; i++)
		atomic_store_explicit(&counters[i].n, 0, memory_order_relaxed);
	fakecuda__launch_log_reset();
}

void fakecuda_set_jitter(unsigned max_us, uint64_t seed)
{
	atomic_store(&g_fc.jitter_us, max_us);
	atomic_store(&g_fc.seed, seed);
}

int fakecuda_live_workers(void)
{
	return atomic_load(&g_fc.live_workers);
}

/* ---- handle registry ------------------------------------------------------ */
/*
 * Every handle given to the application is registered with its kind, so a
 * stale or wrong handle is refused (CUDA_ERROR_INVALID_HANDLE / _CONTEXT)
 * instead of being dereferenced. Open addressing, linear probing, deletion by
 * backward shift (no tombstones).
 */
struct reg_slot {
	uintptr_t key;
	int type;
};
static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct reg_slot *reg_tab;
static size_t reg_cap, reg_n;

static size_t reg_hash(uintptr_t k, size_t cap)
{
	return (size_t)((k >> 3) * 0x9e3779b97f4a7c15ull) & (cap - 1);
}

static void reg_insert(struct reg_slot *tab, size_t cap, uintptr_t k, int type)
{
	size_t i = reg_hash(k, cap);
	while (tab[i].key && tab[i].key != k)
		i = (i + 1) & (cap - 1);
	tab[i].key = k;
	tab[i].type = type;
}

void fakecuda__registry_add(const void *h, int type)
{
	pthread_mutex_lock(&reg_mu);
	if ((reg_n + 1) * 2 > reg_cap) {
		size_t ncap = reg_cap ? reg_cap * 2 : 256;
		struct reg_slot *nt = calloc(ncap, sizeof(*nt));
		if (!nt)
			abort();
		for (size_t i = 0; i < reg_cap; i++)
			if (reg_tab[i].key)
				reg_insert(nt, ncap, reg_tab[i].key, reg_tab[i].type);
		free(reg_tab);
		reg_tab = nt;
		reg_cap = ncap;
	}
	reg_insert(reg_tab, reg_cap, (uintptr_t)h, type);
	reg_n++;
	pthread_mutex_unlock(&reg_mu);
}

void fakecuda__registry_del(const void *h)
{
	uintptr_t k = (uintptr_t)h;
	pthread_mutex_lock(&reg_mu);
	if (!reg_cap)
		goto out;
	size_t i = reg_hash(k, reg_cap);
	while (reg_tab[i].key && reg_tab[i].key != k)
		i = (i + 1) & (reg_cap - 1);
	if (!reg_tab[i].key)
		goto out;
	reg_tab[i].key = 0;
	reg_n--;
	/* Backward shift: move later members of the probe run into the hole. */
	for (size_t j = (i + 1) & (reg_cap - 1); reg_tab[j].key; j = (j + 1) & (reg_cap - 1)) {
		size_t h0 = reg_hash(reg_tab[j].key, reg_cap);
		/* Move j to i if its home h0 is not cyclically in (i, j]. */
		if ((j > i && (h0 <= i || h0 > j)) || (j < i && (h0 <= i && h0 > j))) {
			reg_tab[i] = reg_tab[j];
			reg_tab[j].key = 0;
			i = j;
		}
	}
out:
	pthread_mutex_unlock(&reg_mu);
}

int fakecuda__registry_is(const void *h, int type)
{
	uintptr_t k = (uintptr_t)h;
	int r = 0;
	if (!k)
		return 0;
	pthread_mutex_lock(&reg_mu);
	if (reg_cap) {
		size_t i = reg_hash(k, reg_cap);
		while (reg_tab[i].key && reg_tab[i].key != k)
			i = (i + 1) & (reg_cap - 1);
		r = reg_tab[i].key == k && reg_tab[i].type == type;
	}
	pthread_mutex_unlock(&reg_mu);
	return r;
}

/* Removes and returns every handle of @type (teardown). *out is malloc'd. */
size_t fakecuda__registry_take(int type, void ***out)
{
	size_t n = 0;
	void **v = NULL;
	pthread_mutex_lock(&reg_mu);
	if (reg_n)
		v = malloc(reg_n * sizeof(*v));
	for (size_t i = 0; v && i < reg_cap; i++)
		if (reg_tab[i].key && reg_tab[i].type == type)
			v[n++] = (void *)reg_tab[i].key;
	pthread_mutex_unlock(&reg_mu);
	for (size_t i = 0; i < n; i++)
		fakecuda__registry_del(v[i]);
	*out = v;
	return n;
}

/* ---- errors --------------------------------------------------------------- */

/* clang-format off */
#define FC_E(x) {x, #x}
static const struct {
	CUresult e;
	const char *name;
} err_names[] = {
	FC_E(CUDA_SUCCESS),
	FC_E(CUDA_ERROR_INVALID_VALUE),
	FC_E(CUDA_ERROR_OUT_OF_MEMORY),
	FC_E(CUDA_ERROR_NOT_INITIALIZED),
	FC_E(CUDA_ERROR_DEINITIALIZED),
	FC_E(CUDA_ERROR_PROFILER_DISABLED),
	FC_E(CUDA_ERROR_PROFILER_NOT_INITIALIZED),
	FC_E(CUDA_ERROR_PROFILER_ALREADY_STARTED),
	FC_E(CUDA_ERROR_PROFILER_ALREADY_STOPPED),
	FC_E(CUDA_ERROR_STUB_LIBRARY),
	FC_E(CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER),
	FC_E(CUDA_ERROR_DEVICE_UNAVAILABLE),
	FC_E(CUDA_ERROR_NO_DEVICE),
	FC_E(CUDA_ERROR_INVALID_DEVICE),
	FC_E(CUDA_ERROR_DEVICE_NOT_LICENSED),
	FC_E(CUDA_ERROR_INVALID_IMAGE),
	FC_E(CUDA_ERROR_INVALID_CONTEXT),
	FC_E(CUDA_ERROR_CONTEXT_ALREADY_CURRENT),
	FC_E(CUDA_ERROR_MAP_FAILED),
	FC_E(CUDA_ERROR_UNMAP_FAILED),
	FC_E(CUDA_ERROR_ARRAY_IS_MAPPED),
	FC_E(CUDA_ERROR_ALREADY_MAPPED),
	FC_E(CUDA_ERROR_NO_BINARY_FOR_GPU),
	FC_E(CUDA_ERROR_ALREADY_ACQUIRED),
	FC_E(CUDA_ERROR_NOT_MAPPED),
	FC_E(CUDA_ERROR_NOT_MAPPED_AS_ARRAY),
	FC_E(CUDA_ERROR_NOT_MAPPED_AS_POINTER),
	FC_E(CUDA_ERROR_ECC_UNCORRECTABLE),
	FC_E(CUDA_ERROR_UNSUPPORTED_LIMIT),
	FC_E(CUDA_ERROR_CONTEXT_ALREADY_IN_USE),
	FC_E(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED),
	FC_E(CUDA_ERROR_INVALID_PTX),
	FC_E(CUDA_ERROR_INVALID_GRAPHICS_CONTEXT),
	FC_E(CUDA_ERROR_NVLINK_UNCORRECTABLE),
	FC_E(CUDA_ERROR_JIT_COMPILER_NOT_FOUND),
	FC_E(CUDA_ERROR_UNSUPPORTED_PTX_VERSION),
	FC_E(CUDA_ERROR_JIT_COMPILATION_DISABLED),
	FC_E(CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY),
	FC_E(CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC),
	FC_E(CUDA_ERROR_CONTAINED),
	FC_E(CUDA_ERROR_INVALID_SOURCE),
	FC_E(CUDA_ERROR_FILE_NOT_FOUND),
	FC_E(CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND),
	FC_E(CUDA_ERROR_SHARED_OBJECT_INIT_FAILED),
	FC_E(CUDA_ERROR_OPERATING_SYSTEM),
	FC_E(CUDA_ERROR_INVALID_HANDLE),
	FC_E(CUDA_ERROR_ILLEGAL_STATE),
	FC_E(CUDA_ERROR_LOSSY_QUERY),
	FC_E(CUDA_ERROR_NOT_FOUND),
	FC_E(CUDA_ERROR_NOT_READY),
	FC_E(CUDA_ERROR_ILLEGAL_ADDRESS),
	FC_E(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES),
	FC_E(CUDA_ERROR_LAUNCH_TIMEOUT),
	FC_E(CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING),
	FC_E(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED),
	FC_E(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED),
	FC_E(CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE),
	FC_E(CUDA_ERROR_CONTEXT_IS_DESTROYED),
	FC_E(CUDA_ERROR_ASSERT),
	FC_E(CUDA_ERROR_TOO_MANY_PEERS),
	FC_E(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED),
	FC_E(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED),
	FC_E(CUDA_ERROR_HARDWARE_STACK_ERROR),
	FC_E(CUDA_ERROR_ILLEGAL_INSTRUCTION),
	FC_E(CUDA_ERROR_MISALIGNED_ADDRESS),
	FC_E(CUDA_ERROR_INVALID_ADDRESS_SPACE),
	FC_E(CUDA_ERROR_INVALID_PC),
	FC_E(CUDA_ERROR_LAUNCH_FAILED),
	FC_E(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE),
	FC_E(CUDA_ERROR_TENSOR_MEMORY_LEAK),
	FC_E(CUDA_ERROR_NOT_PERMITTED),
	FC_E(CUDA_ERROR_NOT_SUPPORTED),
	FC_E(CUDA_ERROR_SYSTEM_NOT_READY),
	FC_E(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH),
	FC_E(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE),
	FC_E(CUDA_ERROR_MPS_CONNECTION_FAILED),
	FC_E(CUDA_ERROR_MPS_RPC_FAILURE),
	FC_E(CUDA_ERROR_MPS_SERVER_NOT_READY),
	FC_E(CUDA_ERROR_MPS_MAX_CLIENTS_REACHED),
	FC_E(CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED),
	FC_E(CUDA_ERROR_MPS_CLIENT_TERMINATED),
	FC_E(CUDA_ERROR_CDP_NOT_SUPPORTED),
	FC_E(CUDA_ERROR_CDP_VERSION_MISMATCH),
	FC_E(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED),
	FC_E(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED),
	FC_E(CUDA_ERROR_STREAM_CAPTURE_MERGE),
	FC_E(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED),
	FC_E(CUDA_ERROR_STREAM_CAPTURE_UNJOINED),
	FC_E(CUDA_ERROR_STREAM_CAPTURE_ISOLATION),
	FC_E(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT),
	FC_E(CUDA_ERROR_CAPTURED_EVENT),
	FC_E(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD),
	FC_E(CUDA_ERROR_TIMEOUT),
	FC_E(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE),
	FC_E(CUDA_ERROR_EXTERNAL_DEVICE),
	FC_E(CUDA_ERROR_INVALID_CLUSTER_SIZE),
	FC_E(CUDA_ERROR_FUNCTION_NOT_LOADED),
	FC_E(CUDA_ERROR_INVALID_RESOURCE_TYPE),
	FC_E(CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION),
	FC_E(CUDA_ERROR_KEY_ROTATION),
	FC_E(CUDA_ERROR_UNKNOWN),
};
/* clang-format on */

/* The driver's own wording for the errors programs commonly print. */
static const struct {
	CUresult e;
	const char *s;
} err_strings[] = {
    {CUDA_SUCCESS, "no error"},
    {CUDA_ERROR_INVALID_VALUE, "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "initialization error"},
    {CUDA_ERROR_DEINITIALIZED, "driver shutting down"},
    {CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal"},
    {CUDA_ERROR_INVALID_IMAGE, "device kernel image is invalid"},
    {CUDA_ERROR_INVALID_CONTEXT, "invalid device context"},
    {CUDA_ERROR_FILE_NOT_FOUND, "file not found"},
    {CUDA_ERROR_INVALID_HANDLE, "invalid resource handle"},
    {CUDA_ERROR_ILLEGAL_STATE, "the operation cannot be performed in the present state"},
    {CUDA_ERROR_NOT_FOUND, "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "device not ready"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered"},
    {CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "too many resources requested for launch"},
    {CUDA_ERROR_LAUNCH_FAILED, "unspecified launch failure"},
    {CUDA_ERROR_CONTEXT_IS_DESTROYED, "context is destroyed"},
    {CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
     "part or all of the requested memory range is already mapped"},
    {CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
     "pointer does not correspond to a registered memory region"},
    {CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, "too many blocks in cooperative launch"},
    {CUDA_ERROR_NOT_PERMITTED, "operation not permitted"},
    {CUDA_ERROR_NOT_SUPPORTED, "operation not supported"},
    {CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "operation not permitted when stream is capturing"},
    {CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
     "operation failed due to a previous error during capture"},
    {CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,
     "operation would make the legacy stream depend on a capturing blocking stream"},
    {CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD,
     "attempt to terminate a thread-local capture sequence from another thread"},
    {CUDA_ERROR_INVALID_CLUSTER_SIZE, "invalid cluster size"},
    {CUDA_ERROR_UNKNOWN, "unknown error"},
};

CUresult CUDAAPI cuGetErrorName(CUresult error, const char **pStr)
{
	FC_ENTER_ANY();
	if (!pStr)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < sizeof(err_names) / sizeof(err_names[0]); i++)
		if (err_names[i].e == error) {
			*pStr = err_names[i].name;
			return CUDA_SUCCESS;
		}
	*pStr = NULL;
	return CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuGetErrorString(CUresult error, const char **pStr)
{
	FC_ENTER_ANY();
	if (!pStr)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < sizeof(err_strings) / sizeof(err_strings[0]); i++)
		if (err_strings[i].e == error) {
			*pStr = err_strings[i].s;
			return CUDA_SUCCESS;
		}
	/* Others: the name itself, which is at least unambiguous. */
	for (size_t i = 0; i < sizeof(err_names) / sizeof(err_names[0]); i++)
		if (err_names[i].e == error) {
			*pStr = err_names[i].name;
			return CUDA_SUCCESS;
		}
	*pStr = NULL;
	return CUDA_ERROR_INVALID_VALUE;
}

/* ---- init and devices ----------------------------------------------------- */

static long env_long(const char *name, long dflt)
{
	const char *s = getenv(name);
	if (!s || !*s)
		return dflt;
	char *end;
	long v = strtol(s, &end, 0);
	return *end ? dflt : v;
}

CUresult CUDAAPI cuInit(unsigned int Flags)
{
	FC_ENTER_ANY();
	if (Flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&g_fc.mu);
	if (!g_fc.initialized) {
		long ndev = env_long("FAKECUDA_DEVICES", 1);
		long nsm = env_long("FAKECUDA_SMS", 132);
		long mem_mb = env_long("FAKECUDA_MEM_MB", 143155);
		if (ndev < 0 || ndev > FC_MAX_DEVICES || nsm < 1 || nsm > FAKECUDA_MAX_SMS ||
		    mem_mb < 1) {
			fprintf(stderr, "fakecuda: bad FAKECUDA_DEVICES/SMS/MEM_MB\n");
			pthread_mutex_unlock(&g_fc.mu);
			return CUDA_ERROR_INVALID_VALUE;
		}
		if (ndev == 0) {
			pthread_mutex_unlock(&g_fc.mu);
			return CUDA_ERROR_NO_DEVICE;
		}
		g_fc.ndev = (int)ndev;
		pthread_atfork(NULL, NULL, fc_forked_child);
		g_fc.trace = env_long("FAKECUDA_TRACE", 0) != 0;
		g_fc.fail_alloc_at = env_long("FAKECUDA_FAIL_ALLOC_AT", 0);
		g_fc.fail_launch_at = env_long("FAKECUDA_FAIL_LAUNCH_AT", 0);
		g_fc.fault_launch_at = env_long("FAKECUDA_FAULT_LAUNCH_AT", 0);
		g_fc.fault_code = (int)env_long("FAKECUDA_FAULT_CODE", CUDA_ERROR_ILLEGAL_ADDRESS);
		g_fc.load_us = env_long("FAKECUDA_LOAD_US", 0);
		g_fc.green_create_us = env_long("FAKECUDA_GREEN_CREATE_US", 0);
		g_fc.ctx_sms = env_long("FAKECUDA_CTX_SMS", 0);
		if (!atomic_load(&g_fc.jitter_us)) {
			atomic_store(&g_fc.jitter_us, (unsigned)env_long("FAKECUDA_JITTER_US", 0));
			atomic_store(&g_fc.seed, (uint64_t)env_long("FAKECUDA_SEED", 1));
		}
		for (int i = 0; i < g_fc.ndev; i++) {
			struct fc_device *d = &g_fc.dev[i];
			d->ordinal = i;
			d->nsm = (uint32_t)nsm;
			d->total_mem = (size_t)mem_mb << 20;
			fakecuda__device_topology(d);
			d->primary = fakecuda__ctx_new(d, 0, 1);
		}
		/* Release: pairs with the acquire in fakecuda__enter(). */
		__atomic_store_n(&g_fc.initialized, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&g_fc.mu);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDriverGetVersion(int *driverVersion)
{
	FC_ENTER_ANY();
	if (!driverVersion)
		return CUDA_ERROR_INVALID_VALUE;
	*driverVersion = FC_DRIVER_VERSION;
	return CUDA_SUCCESS;
}

CUresult fakecuda__device_get(CUdevice d, struct fc_device **out)
{
	if (d < 0 || d >= g_fc.ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	*out = &g_fc.dev[d];
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGet(CUdevice *device, int ordinal)
{
	FC_ENTER();
	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	if (ordinal < 0 || ordinal >= g_fc.ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	*device = ordinal;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetCount(int *count)
{
	FC_ENTER();
	if (!count)
		return CUDA_ERROR_INVALID_VALUE;
	*count = g_fc.ndev;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice dev)
{
	FC_ENTER();
	struct fc_device *d;
	CUresult r = fakecuda__device_get(dev, &d);
	if (r)
		return r;
	if (!name || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	snprintf(name, (size_t)len, "Fake H200");
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
	FC_ENTER();
	struct fc_device *d;
	CUresult r = fakecuda__device_get(dev, &d);
	if (r)
		return r;
	if (!bytes)
		return CUDA_ERROR_INVALID_VALUE;
	*bytes = d->total_mem;
	return CUDA_SUCCESS;
}

static void fill_uuid(CUuuid *u, int dev)
{
	static const char base[16] = "fakecuda-H200-0";
	memcpy(u->bytes, base, 16);
	u->bytes[15] = (char)('0' + dev);
}

CUresult CUDAAPI cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
	FC_ENTER();
	struct fc_device *d;
	CUresult r = fakecuda__device_get(dev, &d);
	if (r)
		return r;
	if (!uuid)
		return CUDA_ERROR_INVALID_VALUE;
	fill_uuid(uuid, dev);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
	FC_ENTER();
	struct fc_device *d;
	CUresult r = fakecuda__device_get(dev, &d);
	if (r)
		return r;
	if (!uuid)
		return CUDA_ERROR_INVALID_VALUE;
	fill_uuid(uuid, dev);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
	FC_ENTER();
	struct fc_device *d;
	CUresult r = fakecuda__device_get(dev, &d);
	if (r)
		return r;
	if (!pciBusId || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	snprintf(pciBusId, (size_t)len, "0000:%02x:00.0", 0x18 + dev);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev)
{
	FC_ENTER();
	struct fc_device *d, *p;
	CUresult r = fakecuda__device_get(dev, &d);
	if (!r)
		r = fakecuda__device_get(peerDev, &p);
	if (r)
		return r;
	if (!canAccessPeer)
		return CUDA_ERROR_INVALID_VALUE;
	*canAccessPeer = dev != peerDev;
	return CUDA_SUCCESS;
}

/*
 * Values the real H200 reports (driver 580, CUDA 13.0; measured with
 * tests/fakecuda/probe/driver_probe.c), except capabilities of features the
 * fake does not implement (managed memory, VMM, memory pools' IPC handle
 * types, RDMA, IPC events, multi-device cooperative launch, ...): those
 * report 0, so a caller does not take a path the fake cannot serve.
 */
static const int h200_attr[CU_DEVICE_ATTRIBUTE_MAX] = {
    [CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK] = 1024,
    [CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X] = 1024,
    [CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y] = 1024,
    [CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z] = 64,
    [CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X] = 2147483647,
    [CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y] = 65535,
    [CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z] = 65535,
    [CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK] = 49152,
    [CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY] = 65536,
    [CU_DEVICE_ATTRIBUTE_WARP_SIZE] = 32,
    [CU_DEVICE_ATTRIBUTE_MAX_PITCH] = 2147483647,
    [CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK] = 65536,
    [CU_DEVICE_ATTRIBUTE_CLOCK_RATE] = 1980000,
    [CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT] = 512,
    [CU_DEVICE_ATTRIBUTE_GPU_OVERLAP] = 1,
    [CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY] = 1,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_WIDTH] = 131072,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_WIDTH] = 131072,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_HEIGHT] = 65536,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH] = 16384,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT] = 16384,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH] = 16384,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_WIDTH] = 32768,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_HEIGHT] = 32768,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_LAYERS] = 2048,
    [CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT] = 512,
    [CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS] = 1,
    [CU_DEVICE_ATTRIBUTE_ECC_ENABLED] = 1,
    [CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID] = 6,
    [CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE] = 3201000,
    [CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH] = 6016,
    [CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE] = 62914560,
    [CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR] = 2048,
    [CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT] = 3,
    [CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING] = 1,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_WIDTH] = 32768,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_LAYERS] = 2048,
    [CU_DEVICE_ATTRIBUTE_CAN_TEX2D_GATHER] = 1,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_GATHER_WIDTH] = 32768,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_GATHER_HEIGHT] = 32768,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH_ALTERNATE] = 8192,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT_ALTERNATE] = 8192,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH_ALTERNATE] = 32768,
    [CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT] = 32,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_WIDTH] = 32768,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_LAYERED_WIDTH] = 32768,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_LAYERED_LAYERS] = 2046,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_WIDTH] = 32768,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_WIDTH] = 131072,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_HEIGHT] = 65536,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_WIDTH] = 16384,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_HEIGHT] = 16384,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_DEPTH] = 16384,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_LAYERED_WIDTH] = 32768,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_LAYERED_LAYERS] = 2048,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_WIDTH] = 32768,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_HEIGHT] = 32768,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_LAYERS] = 2048,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_WIDTH] = 32768,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_LAYERED_WIDTH] = 32768,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_LAYERED_LAYERS] = 2046,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LINEAR_WIDTH] = 268435456,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_WIDTH] = 131072,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_HEIGHT] = 65000,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_PITCH] = 2097120,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_MIPMAPPED_WIDTH] = 32768,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_MIPMAPPED_HEIGHT] = 32768,
    [CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR] = 9,
    [CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR] = 0,
    [CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_MIPMAPPED_WIDTH] = 32768,
    [CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED] = 1,
    [CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED] = 1,
    [CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED] = 1,
    [CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR] = 233472,
    [CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR] = 65536,
    [CU_DEVICE_ATTRIBUTE_SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO] = 2,
    [CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED] = 1,
    /* The fake's device pointer of registered memory is the host pointer. */
    [CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM] = 1,
    [CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH] = 1,
    [CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN] = 232448,
    [CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED] = 1,
    [CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR] = 32,
    [CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE] = 39321600,
    [CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE] = 134217728,
    [CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK] = 1024,
    [CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED] = 1,
    [CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED] = 1,
    [CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH] = 1,
    [CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS] = 1,
    [CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR] = 1,
    [CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT] = 4,
    [CU_DEVICE_ATTRIBUTE_TENSOR_MAP_ACCESS_SUPPORTED] = 1,
    [CU_DEVICE_ATTRIBUTE_UNIFIED_FUNCTION_POINTERS] = 1,
    [CU_DEVICE_ATTRIBUTE_NUMA_ID] = -1,
    [CU_DEVICE_ATTRIBUTE_GPU_PCI_DEVICE_ID] = 0x233510de,
    [CU_DEVICE_ATTRIBUTE_GPU_PCI_SUBSYSTEM_ID] = 415174878,
};

static int attr_value(const struct fc_device *d, CUdevice_attribute a, int *v)
{
	if (a <= 0 || a >= CU_DEVICE_ATTRIBUTE_MAX)
		return -1;
	switch (a) {
	case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
		*v = (int)d->nsm;
		break;
	case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
	case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID:
		*v = d->ordinal;
		break;
	default:
		*v = h200_attr[a];
	}
	return 0;
}

CUresult CUDAAPI cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
	FC_ENTER();
	struct fc_device *d;
	CUresult r = fakecuda__device_get(dev, &d);
	if (r)
		return r;
	if (!pi || attr_value(d, attrib, pi) < 0)
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

/* ---- contexts -------------------------------------------------------------- */

struct fc_ctx *fakecuda__ctx_new(struct fc_device *dev, unsigned flags, int primary)
{
	struct fc_ctx *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->dev = dev;
	c->flags = flags;
	c->is_primary = primary;
	c->id = fakecuda__new_id();
	atomic_init(&c->sticky, atomic_load(&dev->sticky));
	pthread_mutex_init(&c->mu, NULL);
	fakecuda__registry_add(c, FC_T_CTX);
	/* Caller holds g.mu or runs before any other thread can see the ctx. */
	c->next_all = g_fc.ctxs;
	g_fc.ctxs = c;
	return c;
}

void fakecuda__ctx_free(struct fc_ctx *c)
{
	pthread_mutex_destroy(&c->mu);
	free(c);
}

struct fc_ctx *fakecuda__ctx_current(void)
{
	return tls.depth ? tls.stack[tls.depth - 1] : NULL;
}

CUresult fakecuda__ctx_get(struct fc_ctx **out)
{
	struct fc_ctx *c = fakecuda__ctx_current();
	if (!c)
		return CUDA_ERROR_INVALID_CONTEXT;
	/* A context destroyed while current to this thread stays on its stack. */
	if (!fakecuda__registry_is(c, FC_T_CTX))
		return CUDA_ERROR_CONTEXT_IS_DESTROYED;
	*out = c;
	/* After a device fault, calls that need a context report it (measured:
	 * cuMemAlloc, cuStreamCreate, launches, synchronization, ...). */
	return (CUresult)atomic_load(&c->sticky);
}

static CUresult ctx_check(CUcontext h, struct fc_ctx **out)
{
	if (!h)
		return fakecuda__ctx_get(out);
	if (!fakecuda__registry_is(h, FC_T_CTX))
		return CUDA_ERROR_INVALID_CONTEXT;
	*out = (struct fc_ctx *)h;
	return (CUresult)atomic_load(&(*out)->sticky);
}

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	FC_ENTER();
	struct fc_device *d;
	CUresult r = fakecuda__device_get(dev, &d);
	if (r)
		return r;
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&g_fc.mu);
	d->primary_refs++;
	pthread_mutex_unlock(&g_fc.mu);
	*pctx = (CUcontext)d->primary;
	return CUDA_SUCCESS;
}

/*
 * Releasing the last reference or resetting synchronizes the primary context
 * and marks it inactive. Unlike the real driver, its streams, events and
 * memory survive (a later retain finds them again).
 */
static CUresult primary_release(CUdevice dev, int reset)
{
	struct fc_device *d;
	CUresult r = fakecuda__device_get(dev, &d);
	if (r)
		return r;
	pthread_mutex_lock(&g_fc.mu);
	if (!reset && d->primary_refs == 0) {
		pthread_mutex_unlock(&g_fc.mu);
		return CUDA_ERROR_INVALID_CONTEXT;
	}
	int last = reset || --d->primary_refs == 0;
	if (reset)
		d->primary_refs = 0;
	pthread_mutex_unlock(&g_fc.mu);
	if (last)
		fakecuda__ctx_sync(d->primary);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev)
{
	FC_ENTER();
	return primary_release(dev, 0);
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
	FC_ENTER();
	return primary_release(dev, 0);
}

CUresult CUDAAPI cuDevicePrimaryCtxReset(CUdevice dev)
{
	FC_ENTER();
	return primary_release(dev, 1);
}

CUresult CUDAAPI cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
	FC_ENTER();
	return primary_release(dev, 1);
}

static CUresult primary_set_flags(CUdevice dev, unsigned flags, int v1)
{
	struct fc_device *d;
	CUresult r = fakecuda__device_get(dev, &d);
	if (r)
		return r;
	if (flags & ~(unsigned)CU_CTX_FLAGS_MASK)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&g_fc.mu);
	/* The v1 entry point refused to change an active primary context. */
	if (v1 && d->primary_refs) {
		pthread_mutex_unlock(&g_fc.mu);
		return CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE;
	}
	d->primary_flags = flags;
	d->primary->flags = flags;
	pthread_mutex_unlock(&g_fc.mu);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags)
{
	FC_ENTER();
	return primary_set_flags(dev, flags, 1);
}

CUresult CUDAAPI cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{
	FC_ENTER();
	return primary_set_flags(dev, flags, 0);
}

CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
	FC_ENTER();
	struct fc_device *d;
	CUresult r = fakecuda__device_get(dev, &d);
	if (r)
		return r;
	if (!flags || !active)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&g_fc.mu);
	*flags = d->primary_flags;
	*active = d->primary_refs > 0;
	pthread_mutex_unlock(&g_fc.mu);
	return CUDA_SUCCESS;
}

static CUresult ctx_push(struct fc_ctx *c)
{
	if (tls.depth == (int)(sizeof(tls.stack) / sizeof(tls.stack[0])))
		return CUDA_ERROR_OUT_OF_MEMORY;
	tls.stack[tls.depth++] = c;
	return CUDA_SUCCESS;
}

static CUresult ctx_create(CUcontext *pctx, unsigned flags, CUdevice dev)
{
	struct fc_device *d;
	CUresult r = fakecuda__device_get(dev, &d);
	if (r)
		return r;
	if (!pctx || (flags & ~(unsigned)CU_CTX_FLAGS_MASK))
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&g_fc.mu);
	struct fc_ctx *c = fakecuda__ctx_new(d, flags, 0);
	pthread_mutex_unlock(&g_fc.mu);
	if (!c)
		return CUDA_ERROR_OUT_OF_MEMORY;
	r = ctx_push(c);
	if (r)
		return r;
	*pctx = (CUcontext)c;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	FC_ENTER();
	return ctx_create(pctx, flags, dev);
}

CUresult CUDAAPI cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	FC_ENTER();
	return ctx_create(pctx, flags, dev);
}

CUresult CUDAAPI cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
				unsigned int flags, CUdevice dev)
{
	FC_ENTER();
	if (numParams > 0 || paramsArray)
		return CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY;
	return ctx_create(pctx, flags, dev);
}

CUresult CUDAAPI cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams,
				unsigned int flags, CUdevice dev)
{
	FC_ENTER();
	if (ctxCreateParams) {
		if (ctxCreateParams->execAffinityParams && ctxCreateParams->cigParams)
			return CUDA_ERROR_INVALID_VALUE;
		if (ctxCreateParams->numExecAffinityParams > 0)
			return CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY;
		if (ctxCreateParams->cigParams)
			return CUDA_ERROR_NOT_SUPPORTED;
	}
	return ctx_create(pctx, flags, dev);
}

static CUresult ctx_destroy(CUcontext h)
{
	if (!h || !fakecuda__registry_is(h, FC_T_CTX))
		return CUDA_ERROR_INVALID_CONTEXT;
	struct fc_ctx *c = (struct fc_ctx *)h;
	/* Primary contexts go through cuDevicePrimaryCtxRelease/Reset, green ones
	 * through cuGreenCtxDestroy. */
	if (c->is_primary || c->green)
		return CUDA_ERROR_INVALID_CONTEXT;
	fakecuda__ctx_sync(c);
	fakecuda__registry_del(c);
	fakecuda__ctx_teardown(c);
	/* "If the context is current to the calling thread then the context will
	 * also be popped from the current thread's context stack". */
	if (tls.depth && tls.stack[tls.depth - 1] == c)
		tls.depth--;
	/* The struct stays on g.ctxs (freed at exit) so stale handles in other
	 * threads' stacks are never reused addresses. */
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxDestroy(CUcontext ctx)
{
	FC_ENTER();
	return ctx_destroy(ctx);
}

CUresult CUDAAPI cuCtxDestroy_v2(CUcontext ctx)
{
	FC_ENTER();
	return ctx_destroy(ctx);
}

CUresult CUDAAPI cuCtxGetCurrent(CUcontext *pctx)
{
	FC_ENTER();
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	*pctx = (CUcontext)fakecuda__ctx_current();
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx)
{
	FC_ENTER();
	if (!ctx) {
		if (tls.depth)
			tls.depth--;
		return CUDA_SUCCESS;
	}
	if (!fakecuda__registry_is(ctx, FC_T_CTX))
		return CUDA_ERROR_INVALID_CONTEXT;
	if (tls.depth)
		tls.stack[tls.depth - 1] = (struct fc_ctx *)ctx;
	else
		return ctx_push((struct fc_ctx *)ctx);
	return CUDA_SUCCESS;
}

static CUresult ctx_push_api(CUcontext ctx)
{
	if (!ctx || !fakecuda__registry_is(ctx, FC_T_CTX))
		return CUDA_ERROR_INVALID_CONTEXT;
	return ctx_push((struct fc_ctx *)ctx);
}

static CUresult ctx_pop_api(CUcontext *pctx)
{
	if (!tls.depth)
		return CUDA_ERROR_INVALID_CONTEXT;
	struct fc_ctx *c = tls.stack[--tls.depth];
	if (pctx)
		*pctx = (CUcontext)c;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxPushCurrent(CUcontext ctx)
{
	FC_ENTER();
	return ctx_push_api(ctx);
}

CUresult CUDAAPI cuCtxPushCurrent_v2(CUcontext ctx)
{
	FC_ENTER();
	return ctx_push_api(ctx);
}

CUresult CUDAAPI cuCtxPopCurrent(CUcontext *pctx)
{
	FC_ENTER();
	return ctx_pop_api(pctx);
}

CUresult CUDAAPI cuCtxPopCurrent_v2(CUcontext *pctx)
{
	FC_ENTER();
	return ctx_pop_api(pctx);
}

CUresult CUDAAPI cuCtxGetDevice(CUdevice *device)
{
	FC_ENTER();
	struct fc_ctx *c;
	CUresult r = fakecuda__ctx_get(&c);
	if (r)
		return r;
	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	*device = c->dev->ordinal;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx)
{
	FC_ENTER();
	struct fc_ctx *c;
	CUresult r = ctx_check(ctx, &c);
	if (r)
		return r;
	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	*device = c->dev->ordinal;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetFlags(unsigned int *flags)
{
	FC_ENTER();
	struct fc_ctx *c;
	CUresult r = fakecuda__ctx_get(&c);
	if (r)
		return r;
	if (!flags)
		return CUDA_ERROR_INVALID_VALUE;
	*flags = c->flags;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetId(CUcontext ctx, unsigned long long *ctxId)
{
	FC_ENTER();
	struct fc_ctx *c;
	CUresult r = ctx_check(ctx, &c);
	if (r)
		return r;
	if (!ctxId)
		return CUDA_ERROR_INVALID_VALUE;
	*ctxId = c->id;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetApiVersion(CUcontext ctx, unsigned int *version)
{
	FC_ENTER();
	struct fc_ctx *c;
	CUresult r = ctx_check(ctx, &c);
	if (r)
		return r;
	if (!version)
		return CUDA_ERROR_INVALID_VALUE;
	*version = 3020;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxSynchronize(void)
{
	FC_ENTER();
	struct fc_ctx *c;
	CUresult r = fakecuda__ctx_get(&c);
	if (r)
		return r;
	r = fakecuda__capture_unsafe();
	if (r)
		return r;
	return fakecuda__ctx_sync_api(c);
}

CUresult CUDAAPI cuCtxSynchronize_v2(CUcontext ctx)
{
	FC_ENTER();
	struct fc_ctx *c;
	CUresult r = ctx_check(ctx, &c);
	if (r)
		return r;
	r = fakecuda__capture_unsafe();
	if (r)
		return r;
	return fakecuda__ctx_sync_api(c);
}

CUresult CUDAAPI cuCtxGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
	FC_ENTER();
	struct fc_ctx *c;
	CUresult r = fakecuda__ctx_get(&c);
	if (r)
		return r;
	/* H100/H200: 0 (lowest) .. -5 (highest). */
	if (leastPriority)
		*leastPriority = 0;
	if (greatestPriority)
		*greatestPriority = -5;
	return CUDA_SUCCESS;
}

/* ---- teardown --------------------------------------------------------------- */

/*
 * At exit: stop every worker after its current operation (pending work is
 * dropped, as when a real process exits), join them, then free everything
 * still registered so a normal program is leak-free under ASan.
 */
__attribute__((destructor)) static void fc_fini(void)
{
	if (atomic_load(&g_fc.forked))
		return; /* the workers and everything registered are the parent's */
	atomic_store(&g_fc.shutdown, 1);
	fakecuda__streams_shutdown();
	fakecuda__graph_teardown();
	fakecuda__green_teardown();
	fakecuda__module_teardown();
	void **v;
	size_t n = fakecuda__registry_take(FC_T_EVENT, &v);
	for (size_t i = 0; i < n; i++)
		fakecuda__event_free(v[i]);
	free(v);
	fakecuda__mem_teardown();
	n = fakecuda__registry_take(FC_T_CTX, &v);
	free(v);
	pthread_mutex_lock(&g_fc.mu);
	struct fc_ctx *c = g_fc.ctxs;
	g_fc.ctxs = NULL;
	pthread_mutex_unlock(&g_fc.mu);
	while (c) {
		struct fc_ctx *next = c->next_all;
		fakecuda__ctx_free(c);
		c = next;
	}
	pthread_mutex_lock(&reg_mu);
	free(reg_tab);
	reg_tab = NULL;
	reg_cap = reg_n = 0;
	pthread_mutex_unlock(&reg_mu);
}
