/* SPDX-License-Identifier: MIT */
/* The advisory API (include/ve/ve.h), exported by libve.so. */
#include "ve/ve.h"
#include "runtime/runtime.h"
#include "shim/shim.h"
#include "util/util.h"

#include <errno.h>

_Thread_local uint64_t ve__deadline_ns;

/* Step deadlines for an unmodified latency client (VE_TPOT_MS). A decode
 * server's token is a burst of launches (or one graph launch) ended by a
 * blocking wait (the host reads the token: .item(), a synchronize). So a
 * step opens at the first launch after a blocking wait of the thread and
 * closes at the next one, and every op launched in it is due VE_TPOT_MS
 * after it opened. An op that finishes later makes the client late to the
 * coordinator (VE_DEMAND_LATE), which is what lets tpot grow its grant past
 * the reservation; without a deadline it never does. Idle time between
 * requests is not in a step: none opens before the next launch. */
static _Thread_local uint64_t step_start_ns;

uint64_t ve__op_deadline(void)
{
	if (ve__deadline_ns || !ve__shim.cfg.tpot_ns)
		return ve__deadline_ns; /* the app's own advice wins */
	if (!step_start_ns)
		step_start_ns = ve__now_ns();
	return step_start_ns + ve__shim.cfg.tpot_ns;
}

void ve__step_end(void)
{
	uint64_t s = step_start_ns;
	if (!s)
		return;
	step_start_ns = 0;
	uint64_t now = ve__now_ns(), dt = now > s ? now - s : 0;
	atomic_fetch_add_explicit(&ve__shim.steps, 1, memory_order_relaxed);
	if (dt > ve__shim.cfg.tpot_ns)
		atomic_fetch_add_explicit(&ve__shim.steps_late, 1, memory_order_relaxed);
	uint64_t m = atomic_load_explicit(&ve__shim.step_max_ns, memory_order_relaxed);
	while (dt > m && !atomic_compare_exchange_weak_explicit(&ve__shim.step_max_ns, &m, dt,
								memory_order_relaxed,
								memory_order_relaxed))
		;
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
