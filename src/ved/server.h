/* SPDX-License-Identifier: MIT */
/*
 * The coordinator serving clients of other processes over records: what ved
 * runs (src/ved/ved.c) between its rings and the SAME struct ve_coord the
 * embedded placement uses. No sockets, no rings of its own (ve_serve_flush
 * takes the client's producer handle), so tests and the fuzz target drive it
 * with records directly.
 *
 * Per client it keeps every live op (ready at the coordinator, or bound and
 * not yet done) in a table by token, so that
 *  - a DONE or SUBMIT_FAILED, which carries only the token, is applied with
 *    the entry and profile key it was bound with (ve_coord_done and
 *    ve_coord_submit_failed need them);
 *  - a client that dies has every op it still had bound completed in the
 *    coordinator, then is removed: its leases are reclaimed, nothing leaks;
 *  - bindings wait in a bounded per-client queue while the client's ring is
 *    full: never dropped, never sent twice.
 *
 * Every record is checked with ve_proto_check and then against this state
 * (sequence number, token known and in the right state, entry as bound,
 * per-client op limit). Anything wrong is a protocol violation: apply returns
 * -EPROTO, ve_serve_error() says why, and the caller disconnects the client
 * (ve_serve_client_remove). Coordinator state is never touched by a refused
 * record. Not thread-safe: one owner, like the coordinator.
 */
#ifndef VE_VED_SERVER_H
#define VE_VED_SERVER_H

#include "coord/coord.h"
#include "ipc/ctl.h"
#include "ipc/proto.h"
#include "ipc/ring.h"

#include <stdbool.h>
#include <stdint.h>

struct ve_serve_config {
	struct ve_coord_config coord; /* ready_cap is derived: max_clients x client_ops */
	uint32_t client_ops;	      /* live ops per client (ready + bound); default 4096 */
	uint32_t trace_events;	      /* recent events kept for ve_serve_trace (0: none) */
	bool check;		      /* ve_serve_check after every schedule and removal */
	bool check_abort;	      /* ... and abort() on a violation (ved's VE_VED_CHECK=1) */
};

struct ve_serve_client_info {
	bool active;
	uint32_t flags; /* VE_READY_LATENCY for a latency-class client */
	int32_t pid;
	char name[VE_CTL_NAME_MAX];
	uint64_t joined_ns;
	uint32_t nready, nbound, nqueued;
	uint64_t bindings, completions, failed, records_in, records_out;
	uint64_t late; /* ops finished after their deadline (grant mode, as reported) */
};

struct ve_serve_stats {
	uint64_t records_in, records_out, protocol_errors, reclaimed_ops, joined, left;
	uint64_t schedules, bindings, check_runs;
	uint64_t piped; /* ops counted from PIPED records (pipelined behind a binding) */
};

struct ve_serve;

int ve_serve_create(const struct ve_serve_config *cfg, struct ve_serve **out, char *err,
		    size_t errlen);
void ve_serve_destroy(struct ve_serve *s);
struct ve_coord *ve_serve_coord(struct ve_serve *s);
const struct ve_pool *ve_serve_pool(const struct ve_serve *s);
uint32_t ve_serve_client_ops(const struct ve_serve *s);

/* A new client (flags: VE_READY_LATENCY). -ENOSPC when max_clients are in. */
int ve_serve_client_add(struct ve_serve *s, uint32_t flags, int32_t pid, const char *name,
			uint32_t *id);
/* The client is gone (BYE, hang-up, violation): every op it still had bound
 * is completed in the coordinator, then it is removed. Returns those ops. */
uint32_t ve_serve_client_remove(struct ve_serve *s, uint32_t id);
bool ve_serve_client_active(const struct ve_serve *s, uint32_t id);

/* Applies one record of client 'id' (a private copy: the caller copied it
 * out of shared memory). 0, 1 for BYE (the caller removes the client),
 * -EPROTO for a violation (nothing changed; disconnect), -ENOENT (no such client). */
int ve_serve_apply(struct ve_serve *s, uint32_t id, const struct ve_rec *r);
const char *ve_serve_error(const struct ve_serve *s);

/* Something changed since the last schedule (ops ready, done, failed, a hint,
 * a client left). */
bool ve_serve_dirty(const struct ve_serve *s);
/* Policy rounds until no more bindings; bindings go to their clients' queues.
 * Returns the bindings made. */
int ve_serve_schedule(struct ve_serve *s);

/* Moves queued BIND records of client id into its ring; returns how many, or
 * -EIO if the ring is corrupt. What does not fit stays queued, in order. */
int ve_serve_flush(struct ve_serve *s, uint32_t id, struct ve_ring_producer *p);
/* The same without a ring (tests, fuzzing): copies up to max records out. */
int ve_serve_take(struct ve_serve *s, uint32_t id, struct ve_rec *out, int max);
uint32_t ve_serve_queued(const struct ve_serve *s, uint32_t id);

/* Invariants: non-idle entries pairwise disjoint (a shared lease is one
 * entry), the pool's busy mask their union, each entry's outstanding count
 * equal to the ops bound to it in the client tables, every lease holder,
 * sharer and reservation an active client, per-client counts equal to the
 * coordinator's. 0, or -EFAULT with the first violation in why. */
int ve_serve_check(struct ve_serve *s, char *why, size_t len);

void ve_serve_client_info(const struct ve_serve *s, uint32_t id, struct ve_serve_client_info *out);
void ve_serve_stats(const struct ve_serve *s, struct ve_serve_stats *st);
/* Copies the most recent trace events, oldest first; returns how many. */
uint32_t ve_serve_trace(const struct ve_serve *s, struct ve_ctl_tev *out, uint32_t max);
/* Adds an event of ved's own to that ring (grant, lease and reservation spans:
 * src/ved/metrics.c); nothing if trace_events is 0. */
void ve_serve_trace_add(struct ve_serve *s, const struct ve_ctl_tev *ev);

/* Wait for a binding (ready at ved -> bound) of a client's ops: all of them
 * (count, sum) and the percentiles of the most recent ones. */
struct ve_serve_waits {
	uint64_t count, sum_ns;
	uint64_t p50_ns, p99_ns;
};
void ve_serve_client_waits(const struct ve_serve *s, uint32_t id, struct ve_serve_waits *out);
/* Grant mode: the client binds its own ops, so ved learns of them from its
 * report: cumulative binds, completions and late ops (finished after their
 * deadline), and (wait_ns != 0) one wait of the client for a grant it asked
 * for, as ved measured it. */
void ve_serve_grant_activity(struct ve_serve *s, uint32_t id, uint64_t binds, uint64_t done,
			     uint64_t late, uint64_t wait_ns);

#endif
