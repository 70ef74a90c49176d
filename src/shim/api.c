/* SPDX-License-Identifier: MIT */
/* The advisory API (include/ve/ve.h), exported by libve.so. */
#include "ve/ve.h"
#include "runtime/runtime.h"
#include "shim/shim.h"
#include "util/util.h"

#include <errno.h>

_Thread_local uint64_t ve__deadline_ns;

/* Step deadlines for an unmodified latency client (VE_TPOT_MS). A decode
 * server's token is a burst of launches (or one graph launch) ended by the
 * host waiting for a result (.item(), a synchronize). So a step opens at
 * the first latency launch after such a wait and closes at the next one,
 * whichever threads launch and wait (a server may launch on one thread and
 * read tokens on another), and every op launched in it is due VE_TPOT_MS
 * after it opened. An op that finishes later makes the client late to the
 * coordinator (VE_DEMAND_LATE), which is what lets tpot grow its grant past
 * the reservation; without a deadline it never does. A launch more than
 * VE_TPOT_MS after the step's last one opens a new step: the host was not
 * working on this one (idle between requests, or it waits by polling,
 * which closes nothing), and a step that never closed must not leave every
 * later op overdue. Only copies to the host and synchronizing calls close a
 * step: a pass-through copy from pageable memory in the middle of a token
 * does not. Idle time between requests is in no step. */
static _Atomic uint64_t step_start_ns; /* 0: no step open */
static _Atomic uint64_t step_last_ns;  /* the open step's latest launch */

uint64_t ve__op_deadline(void)
{
	uint64_t tpot = ve__shim.cfg.tpot_ns;
	if (ve__deadline_ns || !tpot)
		return ve__deadline_ns; /* the app's own advice wins */
	uint64_t now = ve__now_ns();
	uint64_t s = atomic_load_explicit(&step_start_ns, memory_order_relaxed);
	uint64_t last = atomic_load_explicit(&step_last_ns, memory_order_relaxed);
	if (!s || now - VE_MIN(last, now) > tpot) {
		/* Open one; a racing launcher may have opened it first. */
		if (atomic_compare_exchange_strong_explicit(&step_start_ns, &s, now,
							    memory_order_relaxed,
							    memory_order_relaxed))
			s = now;
	}
	atomic_store_explicit(&step_last_ns, now, memory_order_relaxed);
	return s + tpot;
}

void ve__step_end(void)
{
	if (!ve__shim.cfg.tpot_ns)
		return;
	uint64_t s = atomic_exchange_explicit(&step_start_ns, 0, memory_order_relaxed);
	if (!s)
		return;
	uint64_t now = ve__now_ns(), dt = now > s ? now - s : 0;
	atomic_fetch_add_explicit(&ve__shim.steps, 1, memory_order_relaxed);
	if (dt > ve__shim.cfg.tpot_ns)
		atomic_fetch_add_explicit(&ve__shim.steps_late, 1, memory_order_relaxed);
	uint64_t m = atomic_load_explicit(&ve__shim.step_max_ns, memory_order_relaxed);
	while (dt > m && !atomic_compare_exchange_weak_explicit(&ve__shim.step_max_ns, &m, dt,
								memory_order_relaxed,
								memory_order_relaxed))
		;
	atomic_fetch_add_explicit(&ve__shim.step_hist[ve__log8_bucket(dt / 1000, VE_STEP_HIST)], 1,
				  memory_order_relaxed);
}

static uint64_t step_bucket_mid_ns(uint32_t b)
{
	uint64_t lo, width;
	ve__log8_range(b, &lo, &width);
	return (lo * 2 + width) * 500; /* (lo + width / 2) us in ns */
}

uint64_t ve__step_quantile_ns(double q)
{
	uint64_t n = 0;
	for (uint32_t b = 0; b < VE_STEP_HIST; b++)
		n += atomic_load_explicit(&ve__shim.step_hist[b], memory_order_relaxed);
	if (!n)
		return 0;
	/* The smallest bucket with at least ceil(q n) steps at or below it. */
	uint64_t want = (uint64_t)(q * (double)n + 0.999999), seen = 0;
	if (want < 1)
		want = 1;
	for (uint32_t b = 0; b < VE_STEP_HIST; b++) {
		seen += atomic_load_explicit(&ve__shim.step_hist[b], memory_order_relaxed);
		if (seen >= want)
			return step_bucket_mid_ns(b);
	}
	return step_bucket_mid_ns(VE_STEP_HIST - 1);
}

int ve_active(void)
{
	return ve__shim_active() ? 1 : 0;
}

int ve_advise_deadline(uint64_t ns)
{
	if (!ve__shim_active())
		return -ENODEV;
	ve__deadline_ns = ns ? ve__now_ns() + ns : 0;
	return 0;
}

int ve_advise_step(uint64_t budget_ns)
{
	if (!ve__shim_active())
		return -ENODEV;
	if (!ve__shim.cfg.latency)
		return -EPERM; /* only latency-class clients may claim deadlines */
	uint64_t now = ve__now_ns();
	ve__deadline_ns = budget_ns ? now + budget_ns : 0;
	struct ve_hint h = {.client = 0,
			    .flags = VE_READY_LATENCY,
			    .expect_ready_ns = now,
			    .deadline_ns = ve__deadline_ns};
	return ve_dispatcher_hint(ve_runtime_dispatcher(ve__shim.rt), &h);
}
