/* SPDX-License-Identifier: MIT */
/*
 * One device's runtime stack, built in one call from the configuration:
 *
 *   vctx(s) -> dispatcher -> link -> coordinator (embedded, owned by the link)
 *                                 -> ved          (the ved client, src/ved/client.h)
 *              dispatcher -> backend lanes (the caller's backend: CUDA or sim)
 *              dispatcher -> trace (optional)
 *
 * The shim, ve-sim and the tests all get their stack here, so the one choice
 * of placement (pass-through, embedded coordinator, or ved) is made in one
 * place (ve_runtime_choose) and logged in one place (ve_runtime_create).
 * Everything measured or decided by the coordinator (profiles, binding
 * counts) is read through the link, from the coordinator that decides: the
 * embedded one, or ved's. Nothing here reaches into a coordinator; the
 * accessors that do (ve_runtime_coord) exist for inspection by tests and for
 * ve-sim's offline profiles, and say so.
 *
 * One runtime per device: a process using several GPUs builds one per
 * device (docs/architecture.md, "Several GPUs"). The runtime does not own
 * the backend (the caller made it for the device and destroys it after the
 * runtime) nor the vctxs it attaches.
 */
#ifndef VE_RUNTIME_H
#define VE_RUNTIME_H

#include "backend/backend.h"
#include "coord/coord.h"
#include "core/vctx.h"
#include "dispatch/dispatcher.h"
#include "dispatch/link.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum ve_runtime_mode {
	VE_RUNTIME_PASSTHROUGH = 0, /* nothing virtualized: no stack is built */
	VE_RUNTIME_EMBEDDED = 1,    /* a coordinator in this process */
	VE_RUNTIME_VED = 2,	    /* the ved daemon of the device decides */
};

struct ve_runtime_config {
	/* Placement (docs/daemon.md, "Choosing ved"). */
	bool disabled;	    /* VE_DISABLE=1: pass-through */
	const char *daemon; /* VE_DAEMON: NULL or "" = ved if its socket for 'device'
			     * exists, else embedded; "0" = embedded; "1" = ved at the
			     * default path; "/path" = ved at that socket. With "1" or a
			     * path an absent ved means safe mode until it answers; ved
			     * found by itself but unusable means embedded. */
	int device;

	/* The coordinator. The leaf list and SM count are the backend's. Under
	 * ved these are still validated (a bad VE_POLICY is refused in every
	 * placement); the policy is then ved's. */
	const char *policy;	  /* default "tput" */
	const char *profile_path; /* profiles to load (embedded, and safe mode under ved) */
	uint32_t pool_entries;	  /* pool bound, 0 = full hierarchy */
	uint32_t max_clients;	  /* vctxs attached at once (embedded; default 1) */
	uint64_t seed;		  /* chaos and tie breaks */
	bool log_decisions;
	bool per_op;	  /* VE_BIND=op: bind op by op (the paper's strict mode), no grants */
	uint64_t tick_ns; /* VE_TICK_US: grant ticks of the embedded coordinator (0: 200 us) */
	/* VE_WATCHDOG_MS: an op ready (or waiting for a grant) this long is bound
	 * to the whole GPU, the safe fallback (0 = off); also the dispatcher's. */
	uint64_t watchdog_ns;
	/* VE_STRICT=1: a ved that is unusable or absent at start is an error
	 * (ve_runtime_create fails) instead of a fallback to the embedded
	 * coordinator or to safe mode. */
	bool strict;

	/* As a client of ved. */
	const char *name;     /* shown by ve-ctl; NULL: the program's name */
	uint32_t class_flags; /* VE_READY_LATENCY: a latency-class process */
	uint32_t max_ops;     /* ops at ved at once (the link's table; default 16384) */
	uint64_t ved_spin_ns; /* tuning of the ved link (struct ve_remote_config); */
	uint32_t ved_heartbeat_timeout_ms; /* all 0: the defaults */
	uint32_t ved_reconnect_ms;

	/* The dispatcher: everything but backend and link, which are the
	 * runtime's (lanes, window, host_inline, observers, ...). */
	struct ve_dispatcher_config dispatch;
	bool trace; /* keep a Chrome trace of every op (ve_runtime_trace_write) */
};

struct ve_runtime;

/* The placement cfg asks for, without side effects or logging. For ved,
 * path (len bytes) gets the socket and *start_safe whether an absent ved
 * means safe mode (else embedded); *why (may be NULL) says why embedded. */
enum ve_runtime_mode ve_runtime_choose(const struct ve_runtime_config *cfg, char *path,
				       size_t len, bool *start_safe, const char **why);

/* Builds the stack on backend b (pool entries and lanes are created now, never
 * on the dispatch path) and logs the placement. -ECANCELED if cfg chooses
 * pass-through (nothing to build); other errors with err filled in: the
 * coordinator's message for a bad configuration (policy, profile, pool
 * bound), or one starting with VE_RUNTIME_POOL_ERR when the backend could
 * not create the pool's entries and lanes. */
#define VE_RUNTIME_POOL_ERR "cannot pre-create the pool"
int ve_runtime_create(const struct ve_runtime_config *cfg, struct ve_backend *b,
		      struct ve_runtime **out, char *err, size_t errlen);
/* Stops the dispatcher thread if running, frees the dispatcher, the link (an
 * embedded coordinator, or the ved client: BYE) and the trace. Not b. */
void ve_runtime_destroy(struct ve_runtime *rt);

/* Attaches v as client 'client' (flags: VE_READY_LATENCY) and wires its
 * ready notifications to the dispatcher. */
int ve_runtime_attach(struct ve_runtime *rt, struct ve_vctx *v, uint32_t client, uint32_t flags);
int ve_runtime_detach(struct ve_runtime *rt, uint32_t client);
/* The dispatcher thread (else the owner drives ve_dispatcher_poll). */
int ve_runtime_start(struct ve_runtime *rt);
void ve_runtime_stop(struct ve_runtime *rt);

enum ve_runtime_mode ve_runtime_mode(const struct ve_runtime *rt);
struct ve_dispatcher *ve_runtime_dispatcher(struct ve_runtime *rt);
const struct ve_link *ve_runtime_link(const struct ve_runtime *rt);
/* The pool's shape: identical in every process (and in ved). */
const struct ve_pool *ve_runtime_pool(const struct ve_runtime *rt);

/* Saves the profiles of the coordinator that decides (VE_PROFILE_OUT): the
 * embedded one's, or ved's (fetched from ved), or the safe-mode one's. */
int ve_runtime_profile_save(struct ve_runtime *rt, const char *path);

struct ve_runtime_stats {
	struct ve_dispatcher_stats dispatch;
	struct ve_link_info link; /* where, policy, bindings, decision time */
};
/* With the dispatcher stopped, or from its thread. */
void ve_runtime_stats(struct ve_runtime *rt, struct ve_runtime_stats *st);

/* The trace (NULL without cfg.trace). */
struct ve_trace *ve_runtime_trace(struct ve_runtime *rt);
int ve_runtime_trace_write(struct ve_runtime *rt, const char *path);

/* Inspection only (tests, ve-sim's offline profiles): the embedded
 * coordinator, NULL under ved; the ved client, NULL when embedded. */
struct ve_coord *ve_runtime_coord(struct ve_runtime *rt);
struct ve_remote *ve_runtime_remote(struct ve_runtime *rt);

#endif
