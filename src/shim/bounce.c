/* SPDX-License-Identifier: MIT */
/*
 * Pinned bounce buffers for small copies into pageable memory.
 *
 * A copy from the device into pageable memory returns once the data is
 * there ("API synchronization behavior"). As an ordered pass-through it
 * costs two trips to the GPU: wait until the stream's logical work is done
 * (the dispatcher sees its completion), then the driver's own copy on an
 * idle stream, submitted and waited for on the application thread. A
 * decode loop pays both every token (PyTorch's .item() is a
 * cuMemcpyDtoHAsync into a stack variable, then a synchronize). Through a
 * bounce buffer the copy is a logical op like any other: the dispatcher
 * puts it right behind the stream's last kernel on that kernel's lane, the
 * GPU runs the two back to back, and the application thread waits once,
 * then copies the few bytes to their destination. The descriptor of every
 * kernel is unchanged; only where the copy's bytes land first changes.
 *
 * VE_BOUNCE_KB (default 64; 0 = off) is the largest copy bounced and the
 * size of each of VE__BOUNCE_SLOTS buffers, allocated together at the first
 * such copy (pinned, portable). A copy that is larger, or finds every slot
 * taken, or finds no pinned memory, or comes while a stream capture is
 * open (the driver decides what it does to the capture), or reads managed
 * memory (the driver knows which stream that is attached to) goes through
 * the ordered pass-through.
 */
#include "shim/shim.h"
#include "util/util.h"

#include <pthread.h>
#include <stdatomic.h>

static pthread_mutex_t bounce_lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t *bounce_mem;	    /* VE__BOUNCE_SLOTS slots of bounce_size bytes */
static size_t bounce_size;
static _Atomic uint32_t bounce_busy; /* bit i: slot i taken */
static _Atomic int bounce_state;    /* 0 not tried, 1 ready, -1 unavailable */

static int bounce_alloc(void)
{
	pthread_mutex_lock(&bounce_lock);
	int st = atomic_load(&bounce_state);
	if (st == 0) {
		size_t sz = (size_t)ve__shim.cfg.bounce_kb * 1024;
		void *p = NULL;
		CUresult r = CUDA_ERROR_INVALID_VALUE;
		/* In the virtualized context, whatever is current on this
		 * thread (portable: usable from every context). */
		if (sz && ve__real.cuCtxPushCurrent(ve__shim.ctx) == CUDA_SUCCESS) {
			/* Relaxed on this thread: a capture another thread runs
			 * in global mode is neither refused nor invalidated by
			 * this allocation. */
			CUstreamCaptureMode mode;
			bool relaxed = ve__capture_relax(&mode);
			r = ve__real.cuMemHostAlloc(&p, sz * VE__BOUNCE_SLOTS,
						    CU_MEMHOSTALLOC_PORTABLE);
			ve__capture_restore(relaxed, &mode);
			CUcontext popped;
			ve__real.cuCtxPopCurrent(&popped);
		}
		if (r == CUDA_SUCCESS && p) {
			bounce_mem = p;
			bounce_size = sz;
			st = 1;
		} else {
			if (sz)
				VE_WARN("no pinned memory for bounce buffers (CUresult %d): small "
					"copies into pageable memory run as ordered pass-through calls",
					(int)r);
			st = -1;
		}
		atomic_store(&bounce_state, st);
	}
	pthread_mutex_unlock(&bounce_lock);
	return st;
}

bool ve__bounce_fits(size_t n)
{
	return n && n <= (size_t)ve__shim.cfg.bounce_kb * 1024 &&
	       atomic_load_explicit(&bounce_state, memory_order_relaxed) >= 0;
}

void *ve__bounce_get(size_t n, uint32_t *slot)
{
	if (!ve__bounce_fits(n))
		return NULL;
	int st = atomic_load_explicit(&bounce_state, memory_order_acquire);
	if (st == 0)
		st = bounce_alloc();
	if (st != 1)
		return NULL;
	uint32_t busy = atomic_load_explicit(&bounce_busy, memory_order_relaxed);
	for (;;) {
		uint32_t free_bits = ~busy & ((1u << VE__BOUNCE_SLOTS) - 1);
		if (!free_bits) {
			atomic_fetch_add_explicit(&ve__shim.bounce_full, 1, memory_order_relaxed);
			return NULL;
		}
		uint32_t i = (uint32_t)__builtin_ctz(free_bits);
		if (atomic_compare_exchange_weak_explicit(&bounce_busy, &busy, busy | (1u << i),
							  memory_order_acquire,
							  memory_order_relaxed)) {
			*slot = i;
			return bounce_mem + (size_t)i * bounce_size;
		}
	}
}

void ve__bounce_put(uint32_t slot)
{
	atomic_fetch_and_explicit(&bounce_busy, ~(1u << slot), memory_order_release);
}
