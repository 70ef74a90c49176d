/* SPDX-License-Identifier: MIT */
/*
 * ved's metrics (docs/operations.md, "Metrics"): what the HTTP endpoint
 * (src/ved/http.c) and `ve-ctl metrics` print, in the Prometheus text
 * exposition format, and ved's own spans in its trace (grants, leases,
 * reservations: what `ve-ctl trace` shows per client and per pool entry).
 *
 * ved's loop calls ved_metrics_observe() on every pass. It costs a compare
 * unless the pool changed state (then one pass over the entries) or 100 us
 * went by (then one pass over the clients: grants, arrivals, departures).
 * Between two observations nothing it counts changed, so integrating the
 * SMs each client could use over time is exact to within one pass.
 *
 * Single owner (ved's loop), like the coordinator it reads.
 */
#ifndef VE_VED_METRICS_H
#define VE_VED_METRICS_H

#include "coord/coord.h"
#include "ipc/ctl.h"
#include "ved/server.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* What only ved's loop knows about a client (its connection). */
struct ved_metrics_client {
	uint32_t id;
	int32_t pid; /* SO_PEERCRED */
	uint32_t uid;
	uint32_t fallbacks; /* safe-mode fallbacks the process reported at HELLO */
	double ops_per_s;
};

/* ... and about itself. */
struct ved_metrics_daemon {
	int device;
	uint32_t max_clients;
	bool draining;
	uint32_t mps; /* enum ve_mps_state */
	uint64_t start_unix_ns;
	uint64_t sleeps, wakeups, refused, refused_draining;
	uint64_t reloads, reload_failures;
	double records_per_s;
	uint32_t nclients;
	struct ved_metrics_client cl[VE_COORD_MAX_CLIENTS];
};

struct ved_metrics;

int ved_metrics_create(struct ved_metrics **out);
void ved_metrics_destroy(struct ved_metrics *m);

/* One pass of ved's loop (srv may be NULL before the first client). */
void ved_metrics_observe(struct ved_metrics *m, struct ve_serve *srv, uint64_t now);

/* The client's grant (grant mode; VE_POOL_NONE if none) and the SMs it may
 * use now: those of its grant and of every entry it holds a lease on. */
void ved_metrics_client_sms(const struct ved_metrics *m, uint32_t id, uint16_t *grant,
			    uint32_t *sms);

/* Spans still going on (grants, leases, reservations) as trace events ending
 * now, flagged VE_TEV_F_OPEN; returns how many of max were written. */
uint32_t ved_metrics_open_spans(const struct ved_metrics *m, const struct ve_serve *srv,
				struct ve_ctl_tev *out, uint32_t max, uint64_t now);

/* The Prometheus text (format 0.0.4) of everything; observes first. 0 or -EIO. */
int ved_metrics_render(struct ved_metrics *m, struct ve_serve *srv,
		       const struct ved_metrics_daemon *dm, FILE *f);

#endif
