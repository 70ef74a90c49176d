/* SPDX-License-Identifier: MIT */
/*
 * Drives a dispatcher on the sim backend until every client's work is done:
 * a pass while anything moves, else the sim's next event (or 1 us of virtual
 * time when none is pending). Header-only, for the unit tests.
 */
#ifndef VE_TESTS_SIM_DRIVE_H
#define VE_TESTS_SIM_DRIVE_H

#include "backend/sim.h"
#include "core/vctx.h"
#include "dispatch/dispatcher.h"

#include <errno.h>
#include <stdbool.h>

static inline bool sim_drive_all_done(struct ve_vctx *const *v, int n)
{
	for (int c = 0; c < n; c++)
		if (ve_vctx_ctx_query(v[c]) != 0)
			return false;
	return true;
}

static inline void sim_drive_until_done(struct ve_dispatcher *d, struct ve_backend *b,
					struct ve_vctx *const *v, int n)
{
	for (int guard = 0; guard < 1000000; guard++) {
		int moved = ve_dispatcher_poll(d);
		if (ve_dispatcher_quiescent(d) && sim_drive_all_done(v, n))
			return;
		if (moved <= 0 && ve_sim_advance(b, NULL) == -ENODATA)
			ve_sim_advance_to(b, ve_sim_now(b) + 1000);
	}
}

#endif
