/* SPDX-License-Identifier: MIT */
/* ved, the Vitamin-E daemon: configuration shared by its files (docs/daemon.md). */
#ifndef VE_DAEMON_VED_H
#define VE_DAEMON_VED_H

#include "ipc/ctl.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <sys/types.h>

#define VED_DEFAULT_CONFIG "/etc/vitamin-e/ved.conf"

struct ved_config {
	char policy[256];
	int device;
	uint32_t leaf_sms[VE_CTL_MAX_LEAVES];
	uint32_t nleaves; /* 0: learned from the first client */
	uint32_t pool_entries;
	bool pool_entries_set; /* configured (else the first client's bound) */
	uint32_t max_clients;
	uint32_t client_ops;
	uint32_t ring_records;
	int log_level;
	char socket[108]; /* "" = the default path for the device */
	char group[64];	  /* "" = none */
	gid_t gid;	  /* resolved group, when group[0] */
	char profile[512];
	uint32_t spin_us;
	uint32_t heartbeat_ms;
	uint32_t stale_ms;
	uint32_t tick_us;
	bool per_op;
	bool share_contended; /* sharers keep the contended submit-ahead */
	uint32_t stats_interval_s;
	uint32_t trace_events;
	bool check;
	char metrics_listen[80];    /* "" = no metrics endpoint (docs/operations.md) */
	uint32_t hello_timeout_ms;  /* an unregistered connection silent this long is closed */
	uint32_t max_conns_per_uid; /* connections one uid may hold open (0: max_clients + 8) */
	uint32_t watchdog_ms;	    /* bind deadline of the coordinator (0 = off) */
	char config_path[512];	    /* where the file came from, "" if none */
};

/* Defaults, then the file (--config PATH, or VED_DEFAULT_CONFIG if it exists),
 * then VE_VED_<KEY> environment variables, then the command-line overrides
 * already in *over (socket, device: set when over_* is true). Every value is
 * validated; a bad one is reported naming its key and where it came from, and
 * the function returns -EINVAL. */
struct ved_overrides {
	const char *config; /* --config */
	const char *socket; /* --socket */
	int device;	    /* --device, when device_set */
	bool device_set;
};
int ved_config_load(struct ved_config *c, const struct ved_overrides *o);
/* "15x8,12" -> leaves; 0 or -EINVAL. */
int ved_parse_leaves(const char *s, uint32_t *leaf_sms, uint32_t *nleaves);
/* The leaf list as "15x8,12". */
void ved_format_leaves(const uint32_t *leaf_sms, uint32_t n, char *buf, size_t len);
void ved_config_usage(FILE *f);

#endif
