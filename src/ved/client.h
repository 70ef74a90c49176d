/* SPDX-License-Identifier: MIT */
/*
 * A link to the ved daemon (struct ve_link_ops, link.h): what a process uses
 * instead of an embedded coordinator when ved arbitrates the GPU among
 * processes (docs/daemon.md).
 *
 *   ready()          READY record (plus a HINT carrying the op's deadline, if
 *                    it has one) on the segment's client -> ved ring; the op
 *                    is kept in a local table by token. A full ring or a full
 *                    table: -EAGAIN (the dispatcher requeues; nothing dropped).
 *   schedule()       pops BIND records and rebuilds struct ve_binding from the
 *                    table (stream, key, ... are not in the record).
 *   done()           DONE record for an op bound by ved; the dispatcher passes
 *                    (entry, key), which name an op of the table well enough
 *                    (ops with equal entry and key are interchangeable for
 *                    lease accounting).
 *   submit_failed()  SUBMIT_FAILED record; the op waits for a new BIND.
 *   hint()           HINT record (advice: dropped when the ring is full).
 *   pipeline()       PIPED record behind one of our ops ved bound on the
 *                    entry; 1 (the dispatcher's budget applies: only ved
 *                    knows whether this process is alone on the GPU).
 *
 * Safe mode. When ved goes away (control socket EOF, SHUTDOWN record, a
 * heartbeat older than heartbeat_timeout_ms, a corrupt ring or a malformed
 * record from it), the link fails over to a local embedded coordinator with
 * policy 'whole' (every op on the whole GPU, as plain MPS would run it): ops
 * waiting for a BIND go to it, ops already submitted run to completion and
 * their completions are dropped (ved, or its successor, does not know them).
 * A helper thread retries the socket every reconnect_ms; when ved is back the
 * link re-registers and new ops go to ved again, while what the local
 * coordinator still holds finishes locally. Each switch is one log line.
 *
 * Threads: every link call comes from the dispatcher's thread (one owner, as
 * for a coordinator). The helper thread only watches (socket, heartbeat),
 * registers, and wakes a sleeping dispatcher through the notify callback when
 * a BIND arrives while nothing else would wake it.
 */
#ifndef VE_VED_CLIENT_H
#define VE_VED_CLIENT_H

#include "dispatch/link.h"

#include <stdbool.h>
#include <stdint.h>

struct ve_remote_config {
	const char *socket_path; /* NULL: ve_ctl_default_path(device) */
	int device;
	const uint32_t *leaf_sms; /* the pool, as in every process: the backend's split */
	uint32_t nleaves;
	uint32_t max_entries;	       /* pool bound (0 = full hierarchy) */
	uint32_t sm_count;	       /* 0 = sum of the leaves */
	const char *name;	       /* shown by ve-ctl; NULL: the program's name */
	uint32_t class_flags;	       /* VE_READY_LATENCY: a latency-class process */
	uint32_t max_ops;	       /* local op table (default 16384) */
	const char *profile_path;      /* profiles for the safe-mode coordinator */
	uint64_t spin_ns;	       /* schedule() spins this long for an awaited BIND when
					* nothing else is in flight (default 20000, 0: never) */
	uint32_t heartbeat_timeout_ms; /* ved counts as hung after this (default 5000, 0: off) */
	uint32_t reconnect_ms;	       /* safe mode retries this often (default 1000, 0: never) */
	bool start_safe;	       /* ved unreachable at create: start in safe mode and keep
					* trying (else create fails) */
};

enum ve_remote_mode { VE_REMOTE_DAEMON = 1, VE_REMOTE_SAFE = 2 };

struct ve_remote_stats {
	uint64_t ready_sent, binds, dones_sent, failed_sent, hints_sent, eagain;
	uint64_t piped_sent; /* ops pipelined behind a ved binding (PIPED records) */
	uint64_t dones_dropped; /* completions of ops a departed ved had bound */
	uint64_t local_bindings, failovers, reconnects, doorbells, waiter_wakes;
	/* SAMPLE records sent: run times for ved's profiles, without a doorbell */
	uint64_t samples_sent;
	int32_t client_id; /* ved's id for us, -1 in safe mode */
	uint32_t mode;	   /* enum ve_remote_mode */
	char policy[64];   /* ved's policy, or "whole (safe mode)" */
};

struct ve_remote;

/* Registers with ved. -ENOENT / -ECONNREFUSED: no ved there; -EPROTO: ved
 * refused this client (err says why: pool mismatch, limits, permissions),
 * unless start_safe. */
int ve_remote_create(const struct ve_remote_config *cfg, struct ve_remote **out, char *err,
		     size_t errlen);
/* Says BYE (if registered) and stops the helper thread. */
void ve_remote_destroy(struct ve_remote *r);
/* The link to pass in struct ve_dispatcher_config.link. It owns r:
 * ve_link_destroy on it is ve_remote_destroy. Its profile_save fetches ved's
 * profiles over the control socket (PROFILE_REQ), or saves the safe-mode
 * coordinator's while ved is away. */
void ve_remote_link(struct ve_remote *r, struct ve_link *out);
/* How to wake the dispatcher (ve_dispatcher_notify and the dispatcher).
 * Without it (a dispatcher polled by its owner) the helper thread never
 * arms for bindings and schedule() never spins. Set before the dispatcher
 * thread starts. */
void ve_remote_set_notify(struct ve_remote *r, void (*fn)(void *), void *arg);
/* enum ve_remote_mode; any thread. */
int ve_remote_mode(const struct ve_remote *r);
void ve_remote_stats(const struct ve_remote *r, struct ve_remote_stats *st);
/* The safe-mode coordinator (its profiles, its stats). */
struct ve_coord *ve_remote_local(struct ve_remote *r);
const char *ve_remote_path(const struct ve_remote *r);

#endif
