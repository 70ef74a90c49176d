/* SPDX-License-Identifier: MIT */
/* The advisory API (include/ve/ve.h), exported by libve.so. */
#include "ve/ve.h"
#include "runtime/runtime.h"
#include "shim/shim.h"
#include "util/util.h"

#include <errno.h>

_Thread_local uint64_t ve__deadline_ns;

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
