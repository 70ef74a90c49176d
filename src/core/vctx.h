/* SPDX-License-Identifier: MIT */
/*
 * The virtual context (vctx): everything the application can see of one
 * CUDA context, kept independent of physical contexts (paper section 4.2,
 * docs/semantics.md for every rule and its source).
 *
 *  - streams are token chains: a new op depends on the stream's tail and
 *    becomes the tail; an empty stream's tail is satisfied;
 *  - the legacy default stream (handle VE_STREAM_LEGACY): its ops depend on the
 *    tails of all blocking streams, and later ops on blocking streams depend
 *    on it; VE_STREAM_NON_BLOCKING streams are exempt; per-thread default
 *    streams are ordinary blocking streams, one per thread;
 *  - events are generations: a record creates a marker op (a new generation)
 *    at the stream's completion point; a wait captures the generation current
 *    when it is issued, so re-recording never retargets an earlier wait;
 *  - sync and query read the same token state, for a stream (its tail), an
 *    event (its generation) or the whole context (every tail);
 *  - waits across contexts (one vctx per client and device; cuStreamWaitEvent
 *    "may be from a different context or device"): a marker on the waiting
 *    stream with one external predecessor, released by a completion watcher
 *    on the other vctx (see "cross-vctx waits" below).
 *
 * Thread-safety: every call may be made from any thread. One mutex guards the
 * vctx; waits sleep on a condition variable that completions broadcast only
 * when someone is waiting.
 *
 * Dispatcher side: ready ops are popped with ve_vctx_pop_ready(), their
 * descriptors read with ve_vctx_desc(), and their fate reported with
 * ve_vctx_dispatched()/ve_vctx_requeue()/ve_vctx_complete().
 *
 * Errors are negative errno values:
 *   -ENOENT  unknown or destroyed stream/event handle, unknown token
 *   -EINVAL  malformed argument (bad flags, bad descriptor, wrong kind)
 *   -E2BIG   descriptor beyond VE_DESC_MAX_* limits
 *   -EAGAIN  no free token, edge or payload storage right now (VE_SUBMIT_NONBLOCK);
 *            nothing was recorded, retry after completions
 *   -EBUSY   query: the work is not complete yet (CUDA_ERROR_NOT_READY)
 *   -ENODATA event elapsed time: an event was never recorded
 *   -EIO     sticky device error reported by a completion (see ve_vctx_error)
 *   -ETIMEDOUT a timed wait ran out
 */
#ifndef VE_CORE_VCTX_H
#define VE_CORE_VCTX_H

#include "core/desc.h"
#include "core/token.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef uint64_t ve_stream;
typedef uint64_t ve_event;

#define VE_STREAM_LEGACY ((ve_stream)0) /* the legacy default (NULL) stream */

/* Stream creation flags (same meaning as CU_STREAM_*). */
#define VE_STREAM_DEFAULT      0x0u /* blocking: synchronises with the legacy stream */
#define VE_STREAM_NON_BLOCKING 0x1u /* exempt from legacy-stream synchronisation */

/* Event flags (same meaning as CU_EVENT_*). */
#define VE_EVENT_DEFAULT	0x0u
#define VE_EVENT_BLOCKING_SYNC	0x1u
#define VE_EVENT_DISABLE_TIMING 0x2u
#define VE_EVENT_INTERPROCESS	0x4u

/* Submission flags. */
#define VE_SUBMIT_NONBLOCK 0x1u /* return -EAGAIN instead of waiting for free tokens */

struct ve_vctx;

struct ve_vctx_config {
	uint32_t client_id;   /* coordinator's name for this client (in ready records) */
	uint32_t max_ops;     /* token slots: ops recorded and not yet complete (default 16384) */
	uint32_t max_edges;   /* dependency edges (default 4 * max_ops) */
	uint32_t max_streams; /* logical streams incl. per-thread defaults (default 4096) */
	uint32_t max_events;  /* events (default 16384) */
	uint32_t big_payloads; /* descriptors with payload > inline size (default 256) */
	/* Called (outside the vctx lock) when the ready list goes from empty to
	 * non-empty, so a sleeping dispatcher can be woken. May be NULL. */
	void (*notify_ready)(void *arg);
	void *notify_arg;
	uint32_t max_watchers; /* completion watchers, ve_vctx_on_complete (default 1024) */
	/* A thread waiting for a token spins this long before it sleeps on a
	 * condition variable (0 = sleep at once). */
	uint64_t sync_spin_ns;
	/* Stamp every op with the time it was recorded (ve_vctx_call_ns), for
	 * traces: a clock read per op. */
	bool stamp_calls;
};

int ve_vctx_create(const struct ve_vctx_config *cfg, struct ve_vctx **out);
/* Sets (or replaces) the ready notification after creation. */
void ve_vctx_set_notify(struct ve_vctx *v, void (*fn)(void *), void *arg);
/* Destroys the vctx; pending operations are dropped (call ctx_sync first). */
void ve_vctx_destroy(struct ve_vctx *v);

/* ---- streams ---- */
int ve_vctx_stream_create(struct ve_vctx *v, unsigned flags, int priority, ve_stream *out);
/* Returns at once; pending work still completes and still counts for the
 * legacy stream and context sync (cuStreamDestroy semantics). */
int ve_vctx_stream_destroy(struct ve_vctx *v, ve_stream s);
/* The per-thread default stream of thread 'thread_key' (created on first use). */
int ve_vctx_stream_per_thread(struct ve_vctx *v, uint64_t thread_key, ve_stream *out);
/* The thread of thread_key has exited: its per-thread stream is released as a
 * destroyed stream is (its pending work still completes and counts), so a
 * program that starts threads all run long does not run out of streams.
 * -ENOENT if the thread had none. */
int ve_vctx_stream_per_thread_release(struct ve_vctx *v, uint64_t thread_key);
int ve_vctx_stream_flags(struct ve_vctx *v, ve_stream s, unsigned *flags);
int ve_vctx_stream_priority(struct ve_vctx *v, ve_stream s, int *priority);
/* 0 when all work issued to s so far completed, -EBUSY otherwise. */
int ve_vctx_stream_query(struct ve_vctx *v, ve_stream s);
int ve_vctx_stream_sync(struct ve_vctx *v, ve_stream s);
int ve_vctx_stream_wait_event(struct ve_vctx *v, ve_stream s, ve_event e);
/* The stream's tail token right now (for pass-through barriers). */
int ve_vctx_stream_tail(struct ve_vctx *v, ve_stream s, ve_tok *out);
/* Index of a stream's slot (stable for its lifetime; policies see it). */
int ve_vctx_stream_index(struct ve_vctx *v, ve_stream s, uint32_t *idx);

/* ---- events ---- */
int ve_vctx_event_create(struct ve_vctx *v, unsigned flags, ve_event *out);
/* Pending generations still complete and waits on them still hold. */
int ve_vctx_event_destroy(struct ve_vctx *v, ve_event e);
/* app_event is passed to the backend in the record marker (0 if none). */
int ve_vctx_event_record(struct ve_vctx *v, ve_event e, ve_stream s, uint64_t app_event);
/* As ve_vctx_event_record, and after the work pending on every other stream
 * too (a context-wide record, cuCtxRecordEvent). */
int ve_vctx_event_record_after_all(struct ve_vctx *v, ve_event e, ve_stream s,
				   uint64_t app_event);
/* A context-wide wait (cuCtxWaitEvent): every stream's later work, and every
 * stream created later, waits for the event's current generation. */
int ve_vctx_ctx_wait_event(struct ve_vctx *v, ve_event e);
/* 0 if never recorded or its current generation completed, -EBUSY otherwise. */
int ve_vctx_event_query(struct ve_vctx *v, ve_event e);
int ve_vctx_event_sync(struct ve_vctx *v, ve_event e);
/* Milliseconds between the completion timestamps of two events' current
 * generations. -ENODATA if either was never recorded, -EBUSY if either is not
 * complete, -EINVAL if either has timing disabled. */
int ve_vctx_event_elapsed(struct ve_vctx *v, ve_event start, ve_event end, float *ms);
int ve_vctx_event_generation(struct ve_vctx *v, ve_event e, uint64_t *gen, ve_tok *tok);
/* Whether 'generation' (a record op's) is still the current record of event
 * slot event_idx: false once the event was recorded again or destroyed. */
bool ve_vctx_event_record_current(struct ve_vctx *v, uint32_t event_idx, uint64_t generation);

/* ---- operations ---- */
/* Record one op on stream s with its stream/default-stream predecessors
 * (plus 'extra' predecessors, e.g. a pass-through barrier's token). The
 * descriptor and payload are copied; the caller's memory may be reused at once. */
int ve_vctx_submit(struct ve_vctx *v, ve_stream s, const struct ve_desc *d, unsigned flags,
		   ve_tok *out);
int ve_vctx_submit_ex(struct ve_vctx *v, ve_stream s, const struct ve_desc *d, unsigned flags,
		      const ve_tok *extra, uint32_t nextra, ve_tok *out);

/* An op the calling thread runs itself: a read-back it would wait for at
 * once anyway (the shim's copies into pageable memory), which the driver
 * then orders behind the stream's work on the GPU with no hand-over to the
 * dispatcher and back. Records d like ve_vctx_submit. When the op has no
 * live predecessor, or exactly one that is a kernel or a copy already in
 * the driver's hands on a lane, the op stays the caller's (returns 0):
 * *lane is that lane (VE_VCTX_NO_LANE: none, any stream will do) and *after
 * that predecessor (VE_TOK_NONE: none). The caller enqueues the op on the
 * lane's stream, waits for 'after' (ve_vctx_tok_wait), then calls
 * ve_vctx_self_done. Otherwise returns 1: the op was queued as
 * ve_vctx_submit queues it; wait for *out as usual. */
#define VE_VCTX_NO_LANE UINT32_MAX
int ve_vctx_submit_self(struct ve_vctx *v, ve_stream s, const struct ve_desc *d, ve_tok *out,
			uint32_t *lane, ve_tok *after);
/* Completes an op kept by ve_vctx_submit_self: -EBUSY while its predecessor
 * is live, -EINVAL if t is not such an op. */
int ve_vctx_self_done(struct ve_vctx *v, ve_tok t);

/* ---- cross-vctx waits (several devices, docs/architecture.md "Several GPUs") ----
 *
 * cuStreamWaitEvent may name an event of another context (CUDA Driver API,
 * cuStreamWaitEvent: "hEvent may be from a different context or device than
 * hStream"). Each vctx orders only its own ops, so such a wait is split in
 * three pieces that any runtime holding several vctxs can put together:
 *
 *   ve_vctx_event_generation(A, E, NULL, &tok);           the generation now (E2, E3)
 *   ve_vctx_stream_wait_extern(B, s, &marker);            a held marker on s
 *   ve_vctx_on_complete(A, tok, cb, ...);                 cb: ve_vctx_extern_done(B, marker)
 *
 * ve_vctx_stream_wait_event_extern() does all three (and gets the corner
 * cases right); use it unless you need the pieces.
 */

/* Records on s an inline marker op with the predecessors a local event wait
 * gets (s's tail; on the legacy stream every blocking stream's tail, D1/D2)
 * plus one artificial unsatisfied predecessor that only ve_vctx_extern_done()
 * satisfies. Later work on s (and, if s is the legacy stream, on every
 * blocking stream) waits for the marker. Waits for free tokens like
 * ve_vctx_stream_wait_event. *marker: the marker's token. */
int ve_vctx_stream_wait_extern(struct ve_vctx *v, ve_stream s, ve_tok *marker);
/* Satisfies the artificial predecessor of 'marker' (exactly once): the marker
 * completes once its other predecessors have. -ENOENT if marker is not a live
 * op, -EINVAL if it is not a held extern marker (or was released already). */
int ve_vctx_extern_done(struct ve_vctx *v, ve_tok marker);
/* Calls cb(arg) exactly once when token t of v completes: at once, from the
 * caller, if t is already complete (or VE_TOK_NONE, or an old token whose slot
 * was recycled); otherwise from the thread that completes t, after v's lock
 * is released (so cb may call into any vctx, v included), before that call
 * returns. Callbacks that complete further tokens do not nest: their
 * watchers run from the same loop. A device error (status != 0) completes t
 * too and still calls cb: the error stays sticky in v only, like CUDA's
 * per-context errors. Watcher records are preallocated (cfg.max_watchers):
 * -EAGAIN when all are armed (back-pressure: nothing was armed, retry after
 * completions). Armed watchers of a destroyed vctx are dropped uncalled. */
int ve_vctx_on_complete(struct ve_vctx *v, ve_tok t, void (*cb)(void *arg), void *arg);
/* cuStreamWaitEvent(s of dst, e of src): later work on s waits for e's
 * generation current at the call (E2, E3; later records of e in src do not
 * retarget it). A never-recorded or completed generation adds no edge (E4),
 * but on dst's legacy stream the wait is still a legacy action (a marker
 * joining dst's blocking streams, D1/D2), as in ve_vctx_stream_wait_event.
 * dst == src is a local wait. -ENOENT for an unknown s or e, -EAGAIN when src
 * has no free watcher (nothing recorded; retry), otherwise as
 * ve_vctx_stream_wait_event. Both vctxs must stay alive until the wait is
 * released: synchronise dst (which implies the generation completed) before
 * destroying either. */
int ve_vctx_stream_wait_event_extern(struct ve_vctx *dst, ve_stream s, struct ve_vctx *src,
				     ve_event e);

/* ---- tokens and whole-context sync ---- */
bool ve_vctx_tok_done(struct ve_vctx *v, ve_tok t);
int ve_vctx_tok_wait(struct ve_vctx *v, ve_tok t);
/* timeout_ns == 0: poll. */
int ve_vctx_tok_wait_timeout(struct ve_vctx *v, ve_tok t, uint64_t timeout_ns);
/* Waits for every stream's tail as of the call (cuCtxSynchronize). */
int ve_vctx_ctx_sync(struct ve_vctx *v);
int ve_vctx_ctx_query(struct ve_vctx *v);

/* ---- dispatcher side ---- */
struct ve_ready_info {
	ve_tok tok;
	uint32_t stream_idx;
	int32_t priority;
	uint8_t cls;  /* enum ve_op_class */
	uint8_t kind; /* enum ve_op_kind */
	uint64_t seq; /* issue order within this vctx */
};
/* Pops up to max ready ops in the order they became ready. */
int ve_vctx_pop_ready(struct ve_vctx *v, struct ve_ready_info *out, int max);
/* Descriptor of a live op; valid until ve_vctx_complete() for it. */
const struct ve_desc *ve_vctx_desc(struct ve_vctx *v, ve_tok t);
/* The op was handed to a backend lane (kept for dumps and pipelining). */
int ve_vctx_dispatched(struct ve_vctx *v, ve_tok t, uint32_t lane);
/* Pipelining candidates: ops whose only unsatisfied predecessor is on a lane
 * (docs/architecture.md, "Dispatch"). Popping only offers them; claim re-checks and, on
 * success, marks the op dispatched on the predecessor's lane (submit it there
 * next); unclaim undoes a claim whose submission failed. */
struct ve_pipe_info {
	ve_tok tok;
	ve_tok behind; /* the predecessor it would follow */
	uint32_t lane; /* that predecessor's lane */
	uint32_t stream_idx;
	int32_t priority;
	uint8_t cls, kind;
	uint64_t seq;
};
int ve_vctx_pop_pipeline(struct ve_vctx *v, struct ve_pipe_info *out, int max);
int ve_vctx_pipeline_claim(struct ve_vctx *v, ve_tok t, ve_tok behind);
int ve_vctx_pipeline_unclaim(struct ve_vctx *v, ve_tok t);
/* A claimed pipelined op is in the driver's hands (its submission
 * returned): from now on ve_vctx_submit_self may queue behind it. */
void ve_vctx_pipeline_sent(struct ve_vctx *v, ve_tok t);

/* A popped op could not be dispatched: back to the front of the ready list. */
int ve_vctx_requeue(struct ve_vctx *v, ve_tok t);
/* The op finished. status != 0 is a device error: it becomes sticky (see
 * ve_vctx_error) and waits return -EIO, unless VE_STATUS_REFUSED is set in
 * it: the op never ran because its submission was refused for a reason of
 * its own (a bad argument the call could not check), the context is fine,
 * and the error is reported once (ve_vctx_take_refused). t_ns: completion
 * timestamp (event timing). */
/* (VE_STATUS_REFUSED: core/desc.h) */
int ve_vctx_complete(struct ve_vctx *v, ve_tok t, int status, uint64_t t_ns);
/* ve_vctx_complete of n ops under one lock (the dispatcher reports a lane's
 * completions in batches); -EINVAL if any was not handed out or not live
 * (the others are completed). */
int ve_vctx_complete_many(struct ve_vctx *v, const ve_tok *t, const int *status,
			  const uint64_t *t_ns, uint32_t n);
/* Sticky error status of the context (0 if none). */
int ve_vctx_error(struct ve_vctx *v);
/* Ops recorded and not yet complete, read without the lock (a thread that
 * must not block on it: the exit path, a signal handler). */
uint32_t ve_vctx_live_ops(struct ve_vctx *v);
/* Nothing will complete any more (the process exits, its dispatcher has
 * stopped): every wait, now and later, returns -EIO with 'status' as the
 * context's error (CUDA_ERROR_DEINITIALIZED, as the driver answers while
 * it is torn down) instead of blocking forever. */
void ve_vctx_close(struct ve_vctx *v, int status);
/* The first refused op's status not yet reported (VE_STATUS_REFUSED
 * cleared), and forgets it: 0 if none. Natively the call that enqueued the
 * op would have failed and nothing later would report it; here the call
 * returned success, so the next synchronizing call reports it, once. */
int ve_vctx_take_refused(struct ve_vctx *v);
/* Some thread waits for a token of v right now (lock-free): the dispatcher
 * then reports deferred completions at once. */
bool ve_vctx_has_waiters(struct ve_vctx *v);
/* How many waits for tokens of v have begun, ever (lock-free, wraps): a
 * change says a new wait began. */
uint32_t ve_vctx_waits(struct ve_vctx *v);
/* With cfg.stamp_calls: the waits for live ops so far, as (began, ended)
 * ns pairs in *pairs (the first 65536; valid until ve_vctx_destroy), for a
 * trace. Returns how many; 0 without stamps. */
uint32_t ve_vctx_wait_log(struct ve_vctx *v, const uint64_t **pairs);
/* When token t (recorded, not yet complete) was recorded, with
 * cfg.stamp_calls; 0 without. */
uint64_t ve_vctx_call_ns(struct ve_vctx *v, ve_tok t);

struct ve_vctx_stats {
	uint64_t submitted, completed, inline_completed;
	uint32_t live_ops, ready_ops, free_slots, free_edges, streams, events;
	uint32_t watchers;     /* completion watchers armed or running */
	uint32_t extern_holds; /* extern-wait markers not yet released */
};
void ve_vctx_stats(struct ve_vctx *v, struct ve_vctx_stats *st);

/* Human-readable dump of streams, events and every pending op with its
 * unsatisfied predecessors: the graph a 3 a.m. ordering bug needs. */
void ve_vctx_dump(struct ve_vctx *v, FILE *f);

#endif
