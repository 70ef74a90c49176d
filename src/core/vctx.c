/* SPDX-License-Identifier: MIT */
/*
 * Virtual context: streams, events, default-stream rules and the ready list,
 * over the token table. See vctx.h for the contract and docs/semantics.md for
 * the CUDA rules each piece implements.
 */
#include "core/vctx.h"
#include "util/futex.h"
#include "util/util.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define INLINE_PAYLOAD 256u
#define DUMP_PREDS     4u

#define VE__WAIT_LOG 65536u /* waits kept for a trace (cfg.stamp_calls) */

/* OP_SELF: kept by the thread that recorded it, which runs it itself
 * (ve_vctx_submit_self); never offered to the dispatcher. */
enum op_state { OP_FREE = 0, OP_PENDING, OP_READY, OP_POPPED, OP_DISPATCHED, OP_SELF };
enum stream_kind { SK_LEGACY = 0, SK_PER_THREAD, SK_BLOCKING, SK_NON_BLOCKING };
enum obj_state { OBJ_FREE = 0, OBJ_LIVE, OBJ_ZOMBIE };

struct op {
	uint8_t state;
	uint8_t cls;
	uint16_t npreds_dump;
	uint32_t stream;
	uint32_t next_ready;
	uint32_t lane;
	uint32_t big; /* index of big payload chunk, VE__NIL if inline */
	uint32_t npreds_total;
	uint32_t next_pipe;	/* pipeline-candidate list link */
	uint8_t in_pipe;
	uint8_t ext_hold;	/* extern-wait marker whose artificial predecessor is unsatisfied */
	uint64_t seq;
	uint64_t t_call;	/* when the application recorded it (cfg.stamp_calls), else 0 */
	ve_tok behind;		/* the one in-flight predecessor it may follow */
	ve_tok preds[DUMP_PREDS];
	struct ve_desc desc;
};

struct stream {
	uint32_t gen; /* odd while live */
	uint8_t state;
	uint8_t kind;
	uint8_t in_dirty;
	unsigned flags;
	int priority;
	ve_tok tail;
	uint64_t thread_key;
	uint32_t free_next;
};

struct event {
	uint32_t gen;
	uint8_t state;
	unsigned flags;
	uint32_t free_next;
	uint64_t generation; /* vctx-wide unique; 0 = never recorded */
	ve_tok tok;	     /* current generation's completion */
	uint64_t t_ns;	     /* completion timestamp of the current generation */
	uint8_t t_valid;
};

/* A completion watcher (ve_vctx_on_complete). Records are preallocated per
 * vctx; an armed one hangs off its token's slot until that op completes,
 * then it moves to the vctx's fired list and from there, under the lock, to
 * the completing thread's queue, which runs it after the lock is dropped.
 * cb == NULL: the record releases an extern-wait marker (dst, marker) of
 * another vctx (ve_vctx_stream_wait_event_extern). */
struct watcher {
	void (*cb)(void *arg);
	void *arg;
	struct ve_vctx *dst;
	ve_tok marker;
	struct ve_vctx *owner;
	struct watcher *tl_next; /* the running thread's queue */
	uint32_t next;		 /* per-slot list, fired list or free list */
};

struct ve_vctx {
	pthread_mutex_t lock;
	pthread_cond_t done_cv;	 /* token completions, for waiters */
	pthread_cond_t space_cv; /* slots/edges/payloads freed, for back-pressured submitters */
	uint32_t nwaiters;
	uint32_t nspace_waiters;
	/* Lock-free views for the dispatcher and spinning waiters: threads
	 * waiting on a token (the dispatcher then reports deferred completions
	 * at once), and a count bumped by every completion batch. */
	_Atomic uint32_t a_waiters;
	_Atomic uint32_t a_waits; /* waits begun, ever (ve_vctx_waits) */
	_Atomic uint32_t a_done_seq;
	/* The pipelined op the dispatcher has claimed (DISPATCHED) and is still
	 * handing to the driver, VE_TOK_NONE when none: ve_vctx_submit_self
	 * must not put work behind it on its lane before it is there. */
	_Atomic ve_tok a_sending;
	/* cfg.stamp_calls: when each wait for a live op began and ended (ns
	 * pairs, under the lock; full: later waits are not kept). */
	uint64_t *wlog;
	uint32_t nwlog;

	struct ve_vctx_config cfg;
	struct ve__toktab tt;
	struct op *ops;
	uint8_t *inline_payload; /* max_ops * INLINE_PAYLOAD */
	uint8_t *big_payload;	 /* big_payloads * VE_DESC_MAX_PAYLOAD, touched lazily */
	uint32_t *big_free;	 /* stack */
	uint32_t nbig_free;

	struct stream *streams;
	uint32_t stream_free;
	uint32_t nstreams_live;
	uint32_t stream_top; /* 1 + the highest stream slot ever taken: scans stop there */
	uint32_t *dirty; /* blocking streams with work since the last legacy op */
	uint32_t ndirty;
	uint32_t *ptds_map; /* open addressing: thread_key -> stream idx (VE__NIL empty) */
	uint32_t ptds_cap;

	struct event *events;
	uint32_t event_free;
	uint32_t nevents_live;
	uint64_t next_generation;
	ve_tok ctx_barrier; /* ve_vctx_ctx_wait_event: where streams created later start */

	/* The counts are atomic (changed under the lock) so that the
	 * dispatcher's passes, many a microsecond while it spins, find the
	 * lists empty without taking the lock: a pass that took it each time
	 * made the application thread's submit and its return from a wait
	 * queue behind the lock, a sleep on it now and then. */
	uint32_t ready_head, ready_tail;
	_Atomic uint32_t nready;
	uint32_t pipe_head, pipe_tail; /* pipeline candidates (docs/architecture.md, "Dispatch") */
	_Atomic uint32_t npipe;
	uint64_t next_seq;
	int error;
	/* First refused op's status not yet reported: set under the lock, taken
	 * without it (ve_vctx_take_refused, after every sync call). */
	_Atomic int refused;

	uint64_t n_submitted, n_completed, n_inline;
	uint32_t live_ops;
	_Atomic uint32_t a_live; /* live_ops, readable without the lock (ve_vctx_live_ops) */
	bool closed;		 /* ve_vctx_close: nothing completes any more, waits end */

	/* scratch for the inline-completion worklist (never allocated on the fast path) */
	uint32_t *work;

	/* completion watchers: per-slot FIFO lists, a fired list, a free stack */
	struct watcher *wat;
	uint32_t *wat_head, *wat_tail; /* per token slot, VE__NIL when none */
	uint32_t wat_free, nwat_free;
	uint32_t fired_head, fired_tail;
	uint32_t nholds; /* extern-wait markers still held */
};

/* ------------------------------------------------------------------ handles */

static inline uint64_t handle_make(uint32_t idx, uint32_t gen)
{
	return ((uint64_t)gen << 32) | idx;
}

static struct stream *stream_get(struct ve_vctx *v, ve_stream h, uint32_t *idx)
{
	if (h == VE_STREAM_LEGACY) {
		*idx = 0;
		return &v->streams[0];
	}
	uint32_t i = (uint32_t)h, g = (uint32_t)(h >> 32);
	if (i == 0 || i >= v->cfg.max_streams)
		return NULL;
	struct stream *s = &v->streams[i];
	if (s->state != OBJ_LIVE || s->gen != g)
		return NULL;
	*idx = i;
	return s;
}

static struct event *event_get(struct ve_vctx *v, ve_event h)
{
	uint32_t i = (uint32_t)h, g = (uint32_t)(h >> 32);
	if (i >= v->cfg.max_events || g == 0)
		return NULL;
	struct event *e = &v->events[i];
	if (e->state != OBJ_LIVE || e->gen != g)
		return NULL;
	return e;
}

static inline bool is_blocking(const struct stream *s)
{
	return s->kind == SK_BLOCKING || s->kind == SK_PER_THREAD;
}

/* ------------------------------------------------------------------ create */

int ve_vctx_create(const struct ve_vctx_config *cfg_in, struct ve_vctx **out)
{
	struct ve_vctx_config cfg = cfg_in ? *cfg_in : (struct ve_vctx_config){0};
	if (!out)
		return -EINVAL;
	if (!cfg.max_ops)
		cfg.max_ops = 16384;
	if (!cfg.max_edges)
		cfg.max_edges = 4 * cfg.max_ops;
	/* Natively only memory limits them: room for what real programs keep
	 * alive (a timing loop holds thousands of events); the shim treats
	 * events beyond this as the driver's own. */
	if (!cfg.max_streams)
		cfg.max_streams = 4096;
	if (!cfg.max_events)
		cfg.max_events = 16384;
	if (!cfg.big_payloads)
		cfg.big_payloads = 256;
	if (!cfg.max_watchers)
		cfg.max_watchers = 1024;
	if (cfg.max_ops < 2 || cfg.max_ops > (1u << 24) || cfg.max_streams < 2 ||
	    cfg.max_streams > (1u << 20) || cfg.max_events > (1u << 24) ||
	    cfg.max_watchers > (1u << 24))
		return -EINVAL;

	struct ve_vctx *v = calloc(1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	v->cfg = cfg;
	int rc = ve__toktab_init(&v->tt, cfg.max_ops, cfg.max_edges);
	if (rc)
		goto fail;
	rc = -ENOMEM;
	v->ops = calloc(cfg.max_ops, sizeof(*v->ops));
	v->inline_payload = malloc((size_t)cfg.max_ops * INLINE_PAYLOAD);
	v->big_payload = malloc((size_t)cfg.big_payloads * VE_DESC_MAX_PAYLOAD);
	v->big_free = calloc(cfg.big_payloads, sizeof(*v->big_free));
	v->streams = calloc(cfg.max_streams, sizeof(*v->streams));
	v->dirty = calloc(cfg.max_streams, sizeof(*v->dirty));
	v->ptds_cap = 1;
	while (v->ptds_cap < 2 * cfg.max_streams)
		v->ptds_cap <<= 1;
	v->ptds_map = malloc(v->ptds_cap * sizeof(*v->ptds_map));
	v->events = calloc(cfg.max_events ? cfg.max_events : 1, sizeof(*v->events));
	v->work = calloc(cfg.max_ops, sizeof(*v->work));
	v->wat = calloc(cfg.max_watchers, sizeof(*v->wat));
	v->wat_head = malloc(cfg.max_ops * sizeof(*v->wat_head));
	v->wat_tail = malloc(cfg.max_ops * sizeof(*v->wat_tail));
	if (!v->ops || !v->inline_payload || !v->big_payload || !v->big_free || !v->streams ||
	    !v->dirty || !v->ptds_map || !v->events || !v->work || !v->wat || !v->wat_head ||
	    !v->wat_tail)
		goto fail;
	memset(v->wat_head, 0xff, cfg.max_ops * sizeof(*v->wat_head));
	memset(v->wat_tail, 0xff, cfg.max_ops * sizeof(*v->wat_tail));
	v->wat_free = VE__NIL;
	for (uint32_t i = cfg.max_watchers; i-- > 0;) {
		v->wat[i].owner = v;
		v->wat[i].next = v->wat_free;
		v->wat_free = i;
	}
	v->nwat_free = cfg.max_watchers;
	v->fired_head = v->fired_tail = VE__NIL;
	memset(v->ptds_map, 0xff, v->ptds_cap * sizeof(*v->ptds_map));
	for (uint32_t i = 0; i < cfg.big_payloads; i++)
		v->big_free[i] = cfg.big_payloads - 1 - i;
	v->nbig_free = cfg.big_payloads;

	/* Stream 0 is the legacy default stream; it is never destroyed. */
	v->streams[0] = (struct stream){.gen = 1, .state = OBJ_LIVE, .kind = SK_LEGACY};
	v->stream_free = VE__NIL;
	for (uint32_t i = cfg.max_streams; i-- > 1;) {
		v->streams[i].free_next = v->stream_free;
		v->stream_free = i;
	}
	v->nstreams_live = 1;
	v->stream_top = 1;
	v->event_free = VE__NIL;
	for (uint32_t i = cfg.max_events; i-- > 0;) {
		v->events[i].free_next = v->event_free;
		v->event_free = i;
	}
	v->next_generation = 1;
	if (cfg.stamp_calls && !(v->wlog = malloc(2 * VE__WAIT_LOG * sizeof(*v->wlog))))
		goto fail;
	v->ready_head = v->ready_tail = VE__NIL;
	v->pipe_head = v->pipe_tail = VE__NIL;
	/* Adaptive: the application thread records ops while the dispatcher
	 * pops, claims and completes them, each holding the lock for well
	 * under a microsecond; a short spin beats a futex sleep and wake-up,
	 * which would add microseconds to every launch. */
	pthread_mutexattr_t ma;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ADAPTIVE_NP);
	int mrc = pthread_mutex_init(&v->lock, &ma);
	pthread_mutexattr_destroy(&ma);
	if (mrc || pthread_cond_init(&v->done_cv, NULL) ||
	    pthread_cond_init(&v->space_cv, NULL))
		goto fail;
	*out = v;
	return 0;
fail:
	ve_vctx_destroy(v);
	return rc ? rc : -ENOMEM;
}

void ve_vctx_set_notify(struct ve_vctx *v, void (*fn)(void *), void *arg)
{
	pthread_mutex_lock(&v->lock);
	v->cfg.notify_ready = fn;
	v->cfg.notify_arg = arg;
	pthread_mutex_unlock(&v->lock);
}

void ve_vctx_destroy(struct ve_vctx *v)
{
	if (!v)
		return;
	pthread_mutex_destroy(&v->lock);
	pthread_cond_destroy(&v->done_cv);
	pthread_cond_destroy(&v->space_cv);
	ve__toktab_fini(&v->tt);
	free(v->ops);
	free(v->wlog);
	free(v->inline_payload);
	free(v->big_payload);
	free(v->big_free);
	free(v->streams);
	free(v->dirty);
	free(v->ptds_map);
	free(v->events);
	free(v->work);
	free(v->wat);
	free(v->wat_head);
	free(v->wat_tail);
	free(v);
}

/* ------------------------------------------------------------------ streams */

/* Reclaims destroyed streams whose last op completed. Off the fast path:
 * only called when the free list is empty. */
static void reclaim_zombie_streams(struct ve_vctx *v)
{
	/* A destroyed stream whose work completed leaves the legacy set first:
	 * its done tail adds no edge to a legacy op, and without this a program
	 * that never uses the legacy stream could never reuse a destroyed
	 * stream's slot (found by test_vctx x_destroyed_streams_are_reclaimed). */
	uint32_t k = 0;
	for (uint32_t i = 0; i < v->ndirty; i++) {
		struct stream *s = &v->streams[v->dirty[i]];
		if (s->state == OBJ_ZOMBIE && !ve__tok_live(&v->tt, s->tail))
			s->in_dirty = 0;
		else
			v->dirty[k++] = v->dirty[i];
	}
	v->ndirty = k;
	for (uint32_t i = 1; i < v->stream_top; i++) {
		struct stream *s = &v->streams[i];
		if (s->state == OBJ_ZOMBIE && !s->in_dirty && !ve__tok_live(&v->tt, s->tail)) {
			s->state = OBJ_FREE;
			s->free_next = v->stream_free;
			v->stream_free = i;
		}
	}
}

static int stream_alloc(struct ve_vctx *v, uint8_t kind, unsigned flags, int prio, uint32_t *idx)
{
	if (v->stream_free == VE__NIL)
		reclaim_zombie_streams(v);
	uint32_t i = v->stream_free;
	if (i == VE__NIL)
		return -EAGAIN;
	struct stream *s = &v->streams[i];
	v->stream_free = s->free_next;
	uint32_t gen = (s->gen | 1u) + 2u; /* stays odd, never reuses the previous handle */
	*s = (struct stream){.gen = gen, .state = OBJ_LIVE, .kind = kind, .flags = flags,
			     .priority = prio};
	/* After a context-wide wait, streams created later start behind it too. */
	if (ve__tok_live(&v->tt, v->ctx_barrier))
		s->tail = v->ctx_barrier;
	v->nstreams_live++;
	if (i >= v->stream_top)
		v->stream_top = i + 1;
	*idx = i;
	return 0;
}

int ve_vctx_stream_create(struct ve_vctx *v, unsigned flags, int priority, ve_stream *out)
{
	if (!v || !out || (flags & ~VE_STREAM_NON_BLOCKING))
		return -EINVAL;
	pthread_mutex_lock(&v->lock);
	uint32_t idx;
	int rc = stream_alloc(v, (flags & VE_STREAM_NON_BLOCKING) ? SK_NON_BLOCKING : SK_BLOCKING,
			      flags, priority, &idx);
	if (rc == 0)
		*out = handle_make(idx, v->streams[idx].gen);
	pthread_mutex_unlock(&v->lock);
	return rc;
}

int ve_vctx_stream_destroy(struct ve_vctx *v, ve_stream h)
{
	if (!v)
		return -EINVAL;
	if (h == VE_STREAM_LEGACY)
		return -EINVAL;
	pthread_mutex_lock(&v->lock);
	uint32_t idx;
	struct stream *s = stream_get(v, h, &idx);
	int rc = -ENOENT;
	if (s && s->kind == SK_PER_THREAD) {
		rc = -EINVAL;
	} else if (s) {
		/* Its pending work keeps counting for the legacy stream (it stays in
		 * the dirty set) and for context sync (zombie tails are scanned). */
		s->state = OBJ_ZOMBIE;
		v->nstreams_live--;
		rc = 0;
	}
	pthread_mutex_unlock(&v->lock);
	return rc;
}

static uint32_t ptds_hash(struct ve_vctx *v, uint64_t key)
{
	return (uint32_t)ve__mix64(key) & (v->ptds_cap - 1);
}

int ve_vctx_stream_per_thread(struct ve_vctx *v, uint64_t key, ve_stream *out)
{
	if (!v || !out)
		return -EINVAL;
	pthread_mutex_lock(&v->lock);
	int rc = 0;
	uint32_t h = ptds_hash(v, key), idx;
	for (;;) {
		idx = v->ptds_map[h];
		if (idx == VE__NIL)
			break;
		if (v->streams[idx].thread_key == key)
			goto found;
		h = (h + 1) & (v->ptds_cap - 1);
	}
	rc = stream_alloc(v, SK_PER_THREAD, 0, 0, &idx);
	if (rc)
		goto out;
	v->streams[idx].thread_key = key;
	v->ptds_map[h] = idx;
found:
	*out = handle_make(idx, v->streams[idx].gen);
out:
	pthread_mutex_unlock(&v->lock);
	return rc;
}

int ve_vctx_stream_per_thread_release(struct ve_vctx *v, uint64_t key)
{
	if (!v)
		return -EINVAL;
	pthread_mutex_lock(&v->lock);
	uint32_t mask = v->ptds_cap - 1, h = ptds_hash(v, key), idx;
	for (;;) {
		idx = v->ptds_map[h];
		if (idx == VE__NIL || v->streams[idx].thread_key == key)
			break;
		h = (h + 1) & mask;
	}
	int rc = -ENOENT;
	if (idx != VE__NIL) {
		/* Backward-shift deletion: every other thread's entry stays
		 * reachable from its home slot, with no tombstones to pile up. */
		uint32_t hole = h;
		for (uint32_t j = (h + 1) & mask; v->ptds_map[j] != VE__NIL; j = (j + 1) & mask) {
			uint32_t home = ptds_hash(v, v->streams[v->ptds_map[j]].thread_key);
			if (((j - home) & mask) >= ((j - hole) & mask)) {
				v->ptds_map[hole] = v->ptds_map[j];
				hole = j;
			}
		}
		v->ptds_map[hole] = VE__NIL;
		/* As a destroyed stream: its pending work still completes and
		 * counts for the legacy stream and context sync. */
		v->streams[idx].state = OBJ_ZOMBIE;
		v->streams[idx].thread_key = 0;
		v->nstreams_live--;
		rc = 0;
	}
	pthread_mutex_unlock(&v->lock);
	return rc;
}

int ve_vctx_stream_flags(struct ve_vctx *v, ve_stream h, unsigned *flags)
{
	pthread_mutex_lock(&v->lock);
	uint32_t idx;
	struct stream *s = stream_get(v, h, &idx);
	if (s)
		*flags = s->flags;
	pthread_mutex_unlock(&v->lock);
	return s ? 0 : -ENOENT;
}

int ve_vctx_stream_priority(struct ve_vctx *v, ve_stream h, int *prio)
{
	pthread_mutex_lock(&v->lock);
	uint32_t idx;
	struct stream *s = stream_get(v, h, &idx);
	if (s)
		*prio = s->priority;
	pthread_mutex_unlock(&v->lock);
	return s ? 0 : -ENOENT;
}

int ve_vctx_stream_index(struct ve_vctx *v, ve_stream h, uint32_t *out)
{
	pthread_mutex_lock(&v->lock);
	uint32_t idx = 0;
	struct stream *s = stream_get(v, h, &idx);
	if (s)
		*out = idx;
	pthread_mutex_unlock(&v->lock);
	return s ? 0 : -ENOENT;
}

/* ------------------------------------------------------------------ ops */

static inline struct op *op_of(struct ve_vctx *v, ve_tok t)
{
	return &v->ops[ve_tok_slot(t)];
}

static void ready_push_tail(struct ve_vctx *v, uint32_t slot)
{
	struct op *o = &v->ops[slot];
	o->state = OP_READY;
	o->next_ready = VE__NIL;
	if (v->ready_tail == VE__NIL)
		v->ready_head = slot;
	else
		v->ops[v->ready_tail].next_ready = slot;
	v->ready_tail = slot;
	v->nready++;
}

/* Pipelining (docs/architecture.md, "Dispatch"): an op whose only unsatisfied predecessor
 * is already on a backend lane may be submitted right behind it on that
 * lane; FIFO lane order then gives the edge. Candidates are only offered:
 * the dispatcher claims one with ve_vctx_pipeline_claim, re-checked under
 * the lock, or leaves it to become ready the normal way. */
static bool pipe_push(struct ve_vctx *v, uint32_t slot, ve_tok behind)
{
	struct op *o = &v->ops[slot];
	o->behind = behind;
	if (o->in_pipe)
		return false;
	o->in_pipe = 1;
	o->next_pipe = VE__NIL;
	if (v->pipe_tail == VE__NIL)
		v->pipe_head = slot;
	else
		v->ops[v->pipe_tail].next_pipe = slot;
	v->pipe_tail = slot;
	return v->npipe++ == 0;
}

static inline bool may_follow(const struct op *o)
{
	return o->cls == VE_CLASS_COMPUTE || o->cls == VE_CLASS_COPY;
}

/* Marks a handed-out op as on 'lane' and offers its single-waiter dependents.
 * An inline op (an untimed event record, a stream-wait marker) waiting only
 * for it completes exactly when it does, so it counts as on the same lane
 * too and its own dependents are offered behind it: without that, every
 * cudaEventRecord in a stream would make the next kernel wait for the whole
 * stream to drain. The walk uses v->work (free outside complete_locked). */
static bool mark_dispatched_locked(struct ve_vctx *v, uint32_t slot, uint32_t lane)
{
	bool woke = false;
	uint32_t n = 0;
	v->work[n++] = slot;
	while (n) {
		uint32_t cur = v->work[--n];
		struct op *o = &v->ops[cur];
		o->state = OP_DISPATCHED;
		o->lane = lane;
		ve_tok me = ve_tok_make(cur, v->tt.gen[cur]);
		for (uint32_t e = v->tt.deps[cur]; e != VE__NIL; e = v->tt.edges[e].next) {
			uint32_t d = v->tt.edges[e].dep;
			struct op *od = &v->ops[d];
			if (v->tt.npend[d] != 1 || od->state != OP_PENDING)
				continue;
			if (may_follow(od))
				woke |= pipe_push(v, d, me);
			else if (od->cls == VE_CLASS_INLINE && !od->ext_hold)
				v->work[n++] = d;
		}
	}
	return woke;
}

/* Undoes what mark_dispatched_locked did for the inline ops behind 'slot'
 * (its submission failed): they wait for it again; their dependents' offers
 * are invalid from now on (pipe_valid finds the predecessor not on a lane). */
static void undispatch_inline_locked(struct ve_vctx *v, uint32_t slot)
{
	uint32_t n = 0;
	v->work[n++] = slot;
	while (n) {
		uint32_t cur = v->work[--n];
		for (uint32_t e = v->tt.deps[cur]; e != VE__NIL; e = v->tt.edges[e].next) {
			uint32_t d = v->tt.edges[e].dep;
			struct op *od = &v->ops[d];
			if (od->cls == VE_CLASS_INLINE && od->state == OP_DISPATCHED &&
			    v->tt.npend[d] == 1) {
				od->state = OP_PENDING;
				od->lane = VE__NIL;
				v->work[n++] = d;
			}
		}
	}
}

static void release_payload(struct ve_vctx *v, struct op *o)
{
	if (o->big != VE__NIL) {
		v->big_free[v->nbig_free++] = o->big;
		o->big = VE__NIL;
	}
}

struct cascade {
	struct ve_vctx *v;
	uint32_t n;
};

static void push_work(void *arg, uint32_t dep)
{
	struct cascade *c = arg;
	c->v->work[c->n++] = dep;
}

static bool complete_locked(struct ve_vctx *v, ve_tok tok, uint64_t t_ns);

/* The op in 'slot' completes: its watchers (in arming order) join the fired
 * list, run by whoever drops the lock next (unlock_notify). */
static void fire_watchers(struct ve_vctx *v, uint32_t slot)
{
	if (v->fired_tail == VE__NIL)
		v->fired_head = v->wat_head[slot];
	else
		v->wat[v->fired_tail].next = v->wat_head[slot];
	v->fired_tail = v->wat_tail[slot];
	v->wat_head[slot] = v->wat_tail[slot] = VE__NIL;
}

/* An op with no unsatisfied predecessors: inline ops complete now, others
 * become ready. Returns true if the ready list went from empty to non-empty. */
static bool became_ready(struct ve_vctx *v, uint32_t slot)
{
	struct op *o = &v->ops[slot];
	if (o->cls == VE_CLASS_INLINE) {
		v->n_inline++;
		return complete_locked(v, ve_tok_make(slot, v->tt.gen[slot]), 0);
	}
	bool was_empty = v->nready == 0;
	ready_push_tail(v, slot);
	return was_empty;
}

static void event_stamp(struct ve_vctx *v, const struct op *o, uint64_t t_ns)
{
	const struct ve_event_desc *ed = &o->desc.u.ev;
	if (ed->event_idx >= v->cfg.max_events)
		return;
	struct event *e = &v->events[ed->event_idx];
	if (e->generation == ed->generation) {
		e->t_ns = t_ns;
		e->t_valid = 1;
	}
}

static bool complete_locked(struct ve_vctx *v, ve_tok tok, uint64_t t_ns)
{
	struct cascade c = {.v = v, .n = 0};
	bool woke = false;
	uint32_t slot = ve_tok_slot(tok);
	for (;;) {
		struct op *o = &v->ops[slot];
		if (o->desc.kind == VE_OP_EVENT_RECORD)
			event_stamp(v, o, t_ns);
		if (v->wat_head[slot] != VE__NIL)
			fire_watchers(v, slot);
		release_payload(v, o);
		o->state = OP_FREE;
		v->live_ops--;
		atomic_store_explicit(&v->a_live, v->live_ops, memory_order_relaxed);
		v->n_completed++;
		ve__tok_complete(&v->tt, tok, push_work, &c);
		/* Handle newly ready dependents; inline ones loop here instead of
		 * recursing, so a long chain of markers cannot overflow the stack. */
		bool again = false;
		while (c.n) {
			uint32_t d = v->work[--c.n];
			struct op *od = &v->ops[d];
			if (od->cls == VE_CLASS_INLINE) {
				v->n_inline++;
				/* Complete d next; its own dependents are appended to work. */
				slot = d;
				tok = ve_tok_make(d, v->tt.gen[d]);
				t_ns = 0;
				again = true;
				break;
			}
			if (od->state == OP_DISPATCHED || od->state == OP_SELF)
				continue; /* pipelined, or its recorder runs it */
			if (v->nready == 0)
				woke = true;
			ready_push_tail(v, d);
		}
		if (!again)
			break;
	}
	atomic_fetch_add_explicit(&v->a_done_seq, 1, memory_order_release);
	if (v->nwaiters)
		pthread_cond_broadcast(&v->done_cv);
	if (v->nspace_waiters)
		pthread_cond_broadcast(&v->space_cv);
	return woke;
}

static int alloc_payload(struct ve_vctx *v, uint32_t slot, uint32_t len, uint8_t **dst)
{
	struct op *o = &v->ops[slot];
	o->big = VE__NIL;
	if (len <= INLINE_PAYLOAD) {
		*dst = v->inline_payload + (size_t)slot * INLINE_PAYLOAD;
		return 0;
	}
	if (!v->nbig_free)
		return -EAGAIN;
	o->big = v->big_free[--v->nbig_free];
	*dst = v->big_payload + (size_t)o->big * VE_DESC_MAX_PAYLOAD;
	return 0;
}

static void add_pred(struct ve_vctx *v, ve_tok tok, ve_tok pred)
{
	struct op *o = op_of(v, tok);
	/* Capacity was checked by the caller, so this cannot fail. */
	if (ve__tok_depend(&v->tt, tok, pred) == 1) {
		if (o->npreds_dump < DUMP_PREDS)
			o->preds[o->npreds_dump++] = pred;
		o->npreds_total++;
	}
}

/* Upper bound of edges an op on stream s can need. */
static uint32_t edges_needed(struct ve_vctx *v, const struct stream *s, uint32_t nextra)
{
	uint32_t n = 1 + nextra;
	if (s->kind == SK_LEGACY)
		n += v->ndirty;
	else if (is_blocking(s))
		n += 1;
	return n;
}

/* What ve_vctx_submit_self asks of record_locked: keep the op when it can
 * run behind its one live predecessor's lane (or has none). */
struct self_claim {
	bool claimed;
	uint32_t lane;
	ve_tok after;
};

static bool self_claim_locked(struct ve_vctx *v, uint32_t slot, struct self_claim *sc)
{
	struct op *o = &v->ops[slot];
	if (v->tt.npend[slot] == 0) {
		*sc = (struct self_claim){.claimed = true, .lane = VE__NIL, .after = VE_TOK_NONE};
	} else if (v->tt.npend[slot] == 1) {
		/* On its lane already: DISPATCHED and, if the dispatcher claimed it
		 * as a pipelined op, handed to the driver (a_sending). An inline
		 * op (an event record) is on no lane of its own. */
		ve_tok p = o->preds[0];
		struct op *po = op_of(v, p);
		if (po->state != OP_DISPATCHED || !may_follow(po) ||
		    atomic_load_explicit(&v->a_sending, memory_order_acquire) == p)
			return false;
		*sc = (struct self_claim){.claimed = true, .lane = po->lane, .after = p};
	} else {
		return false;
	}
	o->state = OP_SELF;
	return true;
}

/* Records one op on stream sidx. Called with the lock held and capacity
 * checked. With sc, the op may stay the caller's (self_claim_locked). */
static ve_tok record_locked(struct ve_vctx *v, uint32_t sidx, const struct ve_desc *d,
			    const uint8_t *payload_src, const ve_tok *extra, uint32_t nextra,
			    bool hold, struct self_claim *sc, bool *woke)
{
	ve_tok tok;
	ve__tok_alloc(&v->tt, &tok); /* capacity checked */
	uint32_t slot = ve_tok_slot(tok);
	struct op *o = &v->ops[slot];
	struct stream *s = &v->streams[sidx];
	o->state = OP_PENDING;
	o->npreds_dump = 0;
	o->npreds_total = 0;
	o->stream = sidx;
	o->lane = VE__NIL;
	o->ext_hold = 0;
	o->seq = v->next_seq++;
	o->t_call = v->cfg.stamp_calls ? ve__now_ns() : 0;
	o->desc = *d;
	uint8_t *dst = NULL;
	alloc_payload(v, slot, d->payload_len, &dst); /* capacity checked */
	if (d->payload_len)
		memcpy(dst, payload_src, d->payload_len);
	o->desc.payload = d->payload_len ? dst : NULL;
	o->cls = (uint8_t)ve_desc_class(&o->desc);
	v->live_ops++;
	atomic_store_explicit(&v->a_live, v->live_ops, memory_order_relaxed);
	v->n_submitted++;

	/* E_stream: the stream's own tail. */
	add_pred(v, tok, s->tail);
	/* E_default (legacy stream rules). */
	if (s->kind == SK_LEGACY) {
		for (uint32_t i = 0; i < v->ndirty; i++) {
			struct stream *b = &v->streams[v->dirty[i]];
			add_pred(v, tok, b->tail);
			b->in_dirty = 0;
		}
		v->ndirty = 0;
	} else if (is_blocking(s)) {
		add_pred(v, tok, v->streams[0].tail);
		if (!s->in_dirty) {
			s->in_dirty = 1;
			v->dirty[v->ndirty++] = sidx;
		}
	}
	/* E_event and pass-through barriers. */
	for (uint32_t i = 0; i < nextra; i++)
		add_pred(v, tok, extra[i]);
	/* E_extern: a predecessor outside this vctx, counted without an edge;
	 * only ve_vctx_extern_done() satisfies it. */
	if (hold) {
		v->tt.npend[slot]++;
		o->ext_hold = 1;
		v->nholds++;
	}
	s->tail = tok;
	o->in_pipe = 0;
	if (sc && !hold && self_claim_locked(v, slot, sc))
		return tok;
	if (v->tt.npend[slot] == 0) {
		*woke |= became_ready(v, slot);
	} else if (v->tt.npend[slot] == 1 && !hold) {
		/* npend == 1: preds[0] is the one live predecessor. */
		struct op *p = op_of(v, o->preds[0]);
		if (p->state == OP_DISPATCHED) {
			if (may_follow(o))
				*woke |= pipe_push(v, slot, o->preds[0]);
			else if (o->cls == VE_CLASS_INLINE)
				*woke |= mark_dispatched_locked(v, slot, p->lane);
		}
	}
	return tok;
}

/* Waits until an op with 'payload_len' bytes and its edges fits on stream s. */
static int wait_capacity(struct ve_vctx *v, uint32_t payload_len, const struct stream *s,
			 uint32_t nextra, unsigned flags)
{
	for (;;) {
		/* Recomputed after every sleep: blocking streams that got work
		 * meanwhile add edges to a legacy op, and record_locked() cannot
		 * fail an edge, it would drop it (found by test_vctx
		 * back_pressure_edges_recomputed_after_sleep). */
		uint32_t edges = edges_needed(v, s, nextra);
		bool ok = v->tt.nfree > 0 && v->tt.nedge_free >= edges &&
			  (payload_len <= INLINE_PAYLOAD || v->nbig_free > 0);
		if (ok)
			return 0;
		if (edges > v->tt.edge_cap)
			return -E2BIG;
		if (flags & VE_SUBMIT_NONBLOCK)
			return -EAGAIN;
		v->nspace_waiters++;
		pthread_cond_wait(&v->space_cv, &v->lock);
		v->nspace_waiters--;
	}
}

static void notify(struct ve_vctx *v, bool woke)
{
	if (woke && v->cfg.notify_ready)
		v->cfg.notify_ready(v->cfg.notify_arg);
}

/* ------------------------------------------------------------------ watchers */

/* Watchers this thread took off fired lists, run once it holds no vctx lock.
 * A callback that completes ops itself (ve_vctx_extern_done on another vctx,
 * whose watchers may release this one, and so on) appends to this queue
 * instead of recursing, so a long ping-pong of cross-vctx waits completing at
 * once runs in a loop, like the inline-marker cascade of complete_locked. */
static _Thread_local struct watcher *tl_head, *tl_tail;
static _Thread_local bool tl_running;

static void take_fired_locked(struct ve_vctx *v)
{
	for (uint32_t i = v->fired_head; i != VE__NIL; i = v->wat[i].next) {
		struct watcher *w = &v->wat[i];
		w->tl_next = NULL;
		if (tl_tail)
			tl_tail->tl_next = w;
		else
			tl_head = w;
		tl_tail = w;
	}
	v->fired_head = v->fired_tail = VE__NIL;
}

/* Gives a chain of run watchers (linked through 'next') back to their owner. */
static void watchers_release(struct ve_vctx *v, uint32_t head, uint32_t tail, uint32_t n)
{
	if (!v || head == VE__NIL)
		return;
	pthread_mutex_lock(&v->lock);
	v->wat[tail].next = v->wat_free;
	v->wat_free = head;
	v->nwat_free += n;
	pthread_mutex_unlock(&v->lock);
}

static void run_watchers(void)
{
	if (tl_running)
		return; /* an outer frame of this thread drains the queue */
	tl_running = true;
	struct ve_vctx *owner = NULL;
	uint32_t head = VE__NIL, tail = VE__NIL, n = 0;
	while (tl_head) {
		struct watcher *w = tl_head;
		tl_head = w->tl_next;
		if (!tl_head)
			tl_tail = NULL;
		/* The record is this thread's alone until released: it left the
		 * fired list under its owner's lock (take_fired_locked). */
		if (w->cb) {
			w->cb(w->arg);
		} else {
			int rc = ve_vctx_extern_done(w->dst, w->marker);
			if (rc)
				VE_ERR("vctx: releasing a cross-context wait failed (%d)", rc);
		}
		if (w->owner != owner) {
			watchers_release(owner, head, tail, n);
			owner = w->owner;
			head = tail = VE__NIL;
			n = 0;
		}
		uint32_t idx = (uint32_t)(w - owner->wat);
		w->next = head;
		head = idx;
		if (tail == VE__NIL)
			tail = idx;
		n++;
	}
	watchers_release(owner, head, tail, n);
	tl_running = false;
}

/* Drops the lock, then wakes the dispatcher and runs the watchers that
 * completions made under the lock fired: outside every vctx lock, so a
 * callback may call into any vctx, this one included. */
static void unlock_notify(struct ve_vctx *v, bool woke)
{
	bool fired = v->fired_head != VE__NIL;
	if (fired)
		take_fired_locked(v);
	pthread_mutex_unlock(&v->lock);
	notify(v, woke);
	if (fired)
		run_watchers();
}

static int watcher_take_locked(struct ve_vctx *v, uint32_t *idx)
{
	uint32_t i = v->wat_free;
	if (i == VE__NIL)
		return -EAGAIN;
	v->wat_free = v->wat[i].next;
	v->nwat_free--;
	*idx = i;
	return 0;
}

static void watcher_put_locked(struct ve_vctx *v, uint32_t i)
{
	v->wat[i].next = v->wat_free;
	v->wat_free = i;
	v->nwat_free++;
}

/* Appends watcher i to live token t's list (FIFO: callbacks run in arming order). */
static void watcher_arm_locked(struct ve_vctx *v, ve_tok t, uint32_t i)
{
	uint32_t slot = ve_tok_slot(t);
	v->wat[i].next = VE__NIL;
	if (v->wat_tail[slot] == VE__NIL)
		v->wat_head[slot] = i;
	else
		v->wat[v->wat_tail[slot]].next = i;
	v->wat_tail[slot] = i;
}

static int submit_any(struct ve_vctx *v, ve_stream h, const struct ve_desc *din, unsigned flags,
		      const ve_tok *extra, uint32_t nextra, struct self_claim *sc, ve_tok *out)
{
	if (!v || !din || (nextra && !extra))
		return -EINVAL;
	struct ve_desc d = *din;
	int rc = ve_desc_finalize(&d);
	if (rc)
		return rc;
	if (d.kind == VE_OP_EVENT_RECORD || d.kind == VE_OP_EVENT_WAIT)
		return -EINVAL; /* only through the event calls */
	bool woke = false;
	pthread_mutex_lock(&v->lock);
	uint32_t sidx;
	struct stream *s = stream_get(v, h, &sidx);
	if (!s) {
		rc = -ENOENT;
		goto out;
	}
	rc = wait_capacity(v, d.payload_len, s, nextra, flags);
	if (rc)
		goto out;
	/* The stream may have been destroyed while we waited for space. */
	s = stream_get(v, h, &sidx);
	if (!s) {
		rc = -ENOENT;
		goto out;
	}
	ve_tok tok = record_locked(v, sidx, &d, din->payload, extra, nextra, false, sc, &woke);
	if (out)
		*out = tok;
out:
	unlock_notify(v, woke);
	return rc;
}

int ve_vctx_submit_ex(struct ve_vctx *v, ve_stream h, const struct ve_desc *din, unsigned flags,
		      const ve_tok *extra, uint32_t nextra, ve_tok *out)
{
	return submit_any(v, h, din, flags, extra, nextra, NULL, out);
}

int ve_vctx_submit_self(struct ve_vctx *v, ve_stream h, const struct ve_desc *d, ve_tok *out,
			uint32_t *lane, ve_tok *after)
{
	if (!out || !lane || !after)
		return -EINVAL;
	/* The stream's last op on its way to a lane (ready, popped, or handed
	 * to the driver right now): give the dispatcher the moment it needs,
	 * up to the spin a wait would take anyway, so the op can follow it. */
	uint64_t t0 = 0;
	for (uint32_t k = 0;; k++) {
		uint32_t sidx;
		pthread_mutex_lock(&v->lock);
		struct stream *s = stream_get(v, h, &sidx);
		ve_tok t = s ? s->tail : VE_TOK_NONE;
		const struct op *o = ve__tok_live(&v->tt, t) ? op_of(v, t) : NULL;
		bool coming = o && (o->state == OP_READY || o->state == OP_POPPED ||
				    (o->state == OP_DISPATCHED &&
				     atomic_load_explicit(&v->a_sending, memory_order_acquire) == t));
		pthread_mutex_unlock(&v->lock);
		if (!coming)
			break;
		if (!t0)
			t0 = ve__now_ns();
		else if ((k & 15) == 0 && ve__now_ns() - t0 >= v->cfg.sync_spin_ns)
			break;
		for (int i = 0; i < 16; i++) /* off the lock the dispatcher needs */
			ve__cpu_relax();
	}
	struct self_claim sc = {.claimed = false};
	int rc = submit_any(v, h, d, 0, NULL, 0, &sc, out);
	if (rc)
		return rc;
	if (!sc.claimed)
		return 1;
	*lane = sc.lane == VE__NIL ? VE_VCTX_NO_LANE : sc.lane;
	*after = sc.after;
	return 0;
}

int ve_vctx_self_done(struct ve_vctx *v, ve_tok t)
{
	bool woke = false;
	int rc = -ENOENT;
	pthread_mutex_lock(&v->lock);
	if (ve__tok_live(&v->tt, t)) {
		struct op *o = op_of(v, t);
		uint32_t slot = ve_tok_slot(t);
		/* Its predecessor done first: completing it earlier would leave
		 * an edge into a recycled slot (and a query of the predecessor's
		 * stream busy after this op, which follows it, returned). */
		if (o->state != OP_SELF)
			rc = -EINVAL;
		else if (v->tt.npend[slot])
			rc = -EBUSY;
		else {
			woke = complete_locked(v, t, 0);
			rc = 0;
		}
	}
	unlock_notify(v, woke);
	return rc;
}

int ve_vctx_submit(struct ve_vctx *v, ve_stream s, const struct ve_desc *d, unsigned flags,
		   ve_tok *out)
{
	return ve_vctx_submit_ex(v, s, d, flags, NULL, 0, out);
}

/* ------------------------------------------------------------------ events */

int ve_vctx_event_create(struct ve_vctx *v, unsigned flags, ve_event *out)
{
	if (!v || !out ||
	    (flags & ~(VE_EVENT_BLOCKING_SYNC | VE_EVENT_DISABLE_TIMING | VE_EVENT_INTERPROCESS)))
		return -EINVAL;
	/* CUDA requires DISABLE_TIMING with INTERPROCESS. */
	if ((flags & VE_EVENT_INTERPROCESS) && !(flags & VE_EVENT_DISABLE_TIMING))
		return -EINVAL;
	pthread_mutex_lock(&v->lock);
	uint32_t i = v->event_free;
	int rc = 0;
	if (i == VE__NIL) {
		rc = -EAGAIN;
	} else {
		struct event *e = &v->events[i];
		v->event_free = e->free_next;
		uint32_t gen = (e->gen | 1u) + 2u;
		*e = (struct event){.gen = gen, .state = OBJ_LIVE, .flags = flags};
		v->nevents_live++;
		*out = handle_make(i, gen);
	}
	pthread_mutex_unlock(&v->lock);
	return rc;
}

int ve_vctx_event_destroy(struct ve_vctx *v, ve_event h)
{
	pthread_mutex_lock(&v->lock);
	struct event *e = event_get(v, h);
	if (e) {
		/* Waits already issued hold the generation's token, not the event,
		 * so freeing the slot now cannot lose an edge. A pending timed
		 * record stamps nothing: its generation no longer matches. */
		e->state = OBJ_FREE;
		e->generation = 0;
		e->free_next = v->event_free;
		v->event_free = (uint32_t)h;
		v->nevents_live--;
	}
	pthread_mutex_unlock(&v->lock);
	return e ? 0 : -ENOENT;
}

/* A new generation of e, recorded on stream sidx after its tail and 'extra'
 * (capacity checked by the caller). */
static void record_event_locked(struct ve_vctx *v, struct event *e, ve_event eh, uint32_t sidx,
				uint64_t app_event, const ve_tok *extra, uint32_t nextra,
				bool *woke)
{
	struct ve_desc d = {.kind = VE_OP_EVENT_RECORD};
	if (!(e->flags & VE_EVENT_DISABLE_TIMING))
		d.flags |= VE_DESC_TIMED;
	uint64_t gen = v->next_generation++;
	d.u.ev.event_idx = (uint32_t)eh;
	d.u.ev.generation = gen;
	d.u.ev.app_event = app_event;
	d.key = ve_desc_key(&d);
	/* Set the generation before recording: an op that is ready at once
	 * completes inside record_locked and must find its generation current. */
	e->generation = gen;
	e->t_valid = 0;
	e->tok = record_locked(v, sidx, &d, NULL, extra, nextra, false, NULL, woke);
}

int ve_vctx_event_record(struct ve_vctx *v, ve_event eh, ve_stream sh, uint64_t app_event)
{
	if (!v)
		return -EINVAL;
	bool woke = false;
	int rc;
	pthread_mutex_lock(&v->lock);
	struct event *e = event_get(v, eh);
	uint32_t sidx;
	struct stream *s = stream_get(v, sh, &sidx);
	if (!e || !s) {
		rc = -ENOENT;
		goto out;
	}
	rc = wait_capacity(v, 0, s, 0, 0);
	if (rc)
		goto out;
	e = event_get(v, eh);
	s = stream_get(v, sh, &sidx);
	if (!e || !s) {
		rc = -ENOENT;
		goto out;
	}
	record_event_locked(v, e, eh, sidx, app_event, NULL, 0, &woke);
out:
	unlock_notify(v, woke);
	return rc;
}

/* A marker on stream sidx that waits for generation 'generation' of eh,
 * whose completion is gtok (capacity checked by the caller). */
static void record_wait_locked(struct ve_vctx *v, uint32_t sidx, ve_event eh, uint64_t generation,
			       ve_tok gtok, bool *woke)
{
	struct ve_desc d = {.kind = VE_OP_EVENT_WAIT};
	d.u.ev.event_idx = (uint32_t)eh;
	d.u.ev.generation = generation;
	d.key = ve_desc_key(&d);
	record_locked(v, sidx, &d, NULL, &gtok, 1, false, NULL, woke);
}

/* Room for every stream's tail, called under the lock: the caller's stack
 * buffer while the streams ever created fit it (a context sync allocates
 * nothing then), else one from the heap that holds max_streams. Called again
 * after the lock was let go (streams may have been created meanwhile); NULL
 * when the heap has none. */
#define TAILS_ON_STACK 128
static ve_tok *tails_room(struct ve_vctx *v, ve_tok *cur, ve_tok *small)
{
	if (cur != small || v->stream_top <= TAILS_ON_STACK)
		return cur;
	return malloc(v->cfg.max_streams * sizeof(*small));
}

/* Tails of every stream but 'skip' with work pending, into out (max
 * entries). Slots are taken lowest first (the free list starts in order), so
 * a process with a few streams scans a few slots, not max_streams. */
static uint32_t live_tails(struct ve_vctx *v, uint32_t skip, ve_tok *out, uint32_t max)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < v->stream_top && n < max; i++) {
		struct stream *s = &v->streams[i];
		if (i != skip && s->state != OBJ_FREE && ve__tok_live(&v->tt, s->tail))
			out[n++] = s->tail;
	}
	return n;
}

int ve_vctx_event_record_after_all(struct ve_vctx *v, ve_event eh, ve_stream sh,
				   uint64_t app_event)
{
	if (!v)
		return -EINVAL;
	ve_tok small[TAILS_ON_STACK], *tails = small;
	bool woke = false;
	int rc;
	pthread_mutex_lock(&v->lock);
	for (;;) {
		if (!(tails = tails_room(v, tails, small))) {
			rc = -ENOMEM;
			break;
		}
		uint32_t sidx = 0;
		struct stream *s = stream_get(v, sh, &sidx);
		if (!event_get(v, eh) || !s) {
			rc = -ENOENT;
			break;
		}
		uint32_t n = live_tails(v, sidx, tails, v->cfg.max_streams);
		rc = wait_capacity(v, 0, s, n, 0);
		if (rc)
			break;
		/* wait_capacity may have slept: take the tails again; fewer or as
		 * many fit the room it found. */
		struct event *e = event_get(v, eh);
		s = stream_get(v, sh, &sidx);
		if (!e || !s) {
			rc = -ENOENT;
			break;
		}
		if (!(tails = tails_room(v, tails, small))) {
			rc = -ENOMEM;
			break;
		}
		uint32_t m = live_tails(v, sidx, tails, v->cfg.max_streams);
		if (m > n)
			continue;
		record_event_locked(v, e, eh, sidx, app_event, tails, m, &woke);
		break;
	}
	unlock_notify(v, woke);
	if (tails != small)
		free(tails); /* free(NULL) after -ENOMEM */
	return rc;
}

int ve_vctx_ctx_wait_event(struct ve_vctx *v, ve_event eh)
{
	if (!v)
		return -EINVAL;
	bool woke = false;
	int rc = 0;
	pthread_mutex_lock(&v->lock);
	struct event *e = event_get(v, eh);
	if (!e) {
		rc = -ENOENT;
		goto out;
	}
	ve_tok gtok = e->tok;
	uint64_t generation = e->generation;
	if (!ve__tok_live(&v->tt, gtok))
		goto out; /* nothing to wait for */
	v->ctx_barrier = gtok;
	for (uint32_t i = 0; i < v->stream_top && rc == 0; i++) {
		if (v->streams[i].state != OBJ_LIVE)
			continue;
		rc = wait_capacity(v, 0, &v->streams[i], 1, 0);
		if (rc || v->streams[i].state != OBJ_LIVE || !ve__tok_live(&v->tt, gtok))
			continue;
		record_wait_locked(v, i, eh, generation, gtok, &woke);
	}
out:
	unlock_notify(v, woke);
	return rc;
}

int ve_vctx_stream_wait_event(struct ve_vctx *v, ve_stream sh, ve_event eh)
{
	if (!v)
		return -EINVAL;
	bool woke = false;
	int rc = 0;
	pthread_mutex_lock(&v->lock);
	struct event *e = event_get(v, eh);
	uint32_t sidx;
	struct stream *s = stream_get(v, sh, &sidx);
	if (!e || !s) {
		rc = -ENOENT;
		goto out;
	}
	/* A never-recorded or completed generation adds no edge: a marker would
	 * depend only on what the next op depends on anyway. Not so on the
	 * legacy stream: there the wait is itself an action ("Stream
	 * synchronization behavior" names cudaStreamWaitEvent()) that joins all
	 * blocking streams, so its marker is recorded regardless (found by
	 * test_vctx_prop, seed 0x2eeda6710c49b174; docs/semantics.md E4). */
	if (!ve__tok_live(&v->tt, e->tok) && s->kind != SK_LEGACY)
		goto out;
	ve_tok gtok = e->tok;
	rc = wait_capacity(v, 0, s, 1, 0);
	if (rc)
		goto out;
	s = stream_get(v, sh, &sidx);
	if (!s) {
		rc = -ENOENT;
		goto out;
	}
	record_wait_locked(v, sidx, eh, e->generation, gtok, &woke);
out:
	unlock_notify(v, woke);
	return rc;
}

int ve_vctx_event_query(struct ve_vctx *v, ve_event eh)
{
	pthread_mutex_lock(&v->lock);
	struct event *e = event_get(v, eh);
	int rc = !e ? -ENOENT : ve__tok_live(&v->tt, e->tok) ? -EBUSY : 0;
	if (rc == 0 && v->error)
		rc = -EIO;
	pthread_mutex_unlock(&v->lock);
	return rc;
}

int ve_vctx_event_generation(struct ve_vctx *v, ve_event eh, uint64_t *gen, ve_tok *tok)
{
	pthread_mutex_lock(&v->lock);
	struct event *e = event_get(v, eh);
	if (e) {
		if (gen)
			*gen = e->generation;
		if (tok)
			*tok = e->tok;
	}
	pthread_mutex_unlock(&v->lock);
	return e ? 0 : -ENOENT;
}

bool ve_vctx_event_record_current(struct ve_vctx *v, uint32_t event_idx, uint64_t generation)
{
	if (!v || event_idx >= v->cfg.max_events)
		return false;
	pthread_mutex_lock(&v->lock);
	bool cur = v->events[event_idx].state == OBJ_LIVE &&
		   v->events[event_idx].generation == generation;
	pthread_mutex_unlock(&v->lock);
	return cur;
}

/* ------------------------------------------------------------------ cross-vctx waits */

/* A wait marker on stream sh: an inline op with the stream's predecessors
 * (S1, and D1/D2 when sh is the legacy stream), exactly as a local event wait
 * records one; 'hold' adds the external predecessor. */
static int wait_marker(struct ve_vctx *v, ve_stream sh, bool hold, ve_tok *out)
{
	bool woke = false;
	int rc;
	pthread_mutex_lock(&v->lock);
	uint32_t sidx;
	struct stream *s = stream_get(v, sh, &sidx);
	if (!s) {
		rc = -ENOENT;
		goto out;
	}
	rc = wait_capacity(v, 0, s, 0, 0);
	if (rc)
		goto out;
	s = stream_get(v, sh, &sidx);
	if (!s) {
		rc = -ENOENT;
		goto out;
	}
	struct ve_desc d = {.kind = VE_OP_EVENT_WAIT};
	d.u.ev.event_idx = UINT32_MAX; /* no local event: never stamped */
	d.key = ve_desc_key(&d);
	ve_tok t = record_locked(v, sidx, &d, NULL, NULL, 0, hold, NULL, &woke);
	if (out)
		*out = t;
out:
	unlock_notify(v, woke);
	return rc;
}

int ve_vctx_stream_wait_extern(struct ve_vctx *v, ve_stream s, ve_tok *marker)
{
	if (!v || !marker)
		return -EINVAL;
	return wait_marker(v, s, true, marker);
}

int ve_vctx_extern_done(struct ve_vctx *v, ve_tok marker)
{
	if (!v)
		return -EINVAL;
	bool woke = false;
	int rc = -ENOENT;
	pthread_mutex_lock(&v->lock);
	if (ve__tok_live(&v->tt, marker)) {
		uint32_t slot = ve_tok_slot(marker);
		struct op *o = &v->ops[slot];
		if (!o->ext_hold) {
			rc = -EINVAL; /* not an extern marker, or released already */
		} else {
			o->ext_hold = 0;
			v->nholds--;
			if (--v->tt.npend[slot] == 0)
				woke = became_ready(v, slot); /* inline: completes now */
			rc = 0;
		}
	}
	unlock_notify(v, woke);
	return rc;
}

int ve_vctx_on_complete(struct ve_vctx *v, ve_tok t, void (*cb)(void *arg), void *arg)
{
	if (!v || !cb)
		return -EINVAL;
	pthread_mutex_lock(&v->lock);
	if (!ve__tok_live(&v->tt, t)) {
		pthread_mutex_unlock(&v->lock);
		cb(arg);
		return 0;
	}
	uint32_t i;
	int rc = watcher_take_locked(v, &i);
	if (rc == 0) {
		v->wat[i].cb = cb;
		v->wat[i].arg = arg;
		watcher_arm_locked(v, t, i);
	}
	pthread_mutex_unlock(&v->lock);
	return rc;
}

int ve_vctx_stream_wait_event_extern(struct ve_vctx *dst, ve_stream sh, struct ve_vctx *src,
				     ve_event eh)
{
	if (!dst || !src)
		return -EINVAL;
	if (dst == src)
		return ve_vctx_stream_wait_event(dst, sh, eh);
	/* The generation current now (E2, E3); the watcher is taken before
	 * anything is recorded so that running out of watchers records nothing. */
	pthread_mutex_lock(&src->lock);
	struct event *e = event_get(src, eh);
	if (!e) {
		pthread_mutex_unlock(&src->lock);
		return -ENOENT;
	}
	ve_tok gtok = e->tok;
	bool pending = ve__tok_live(&src->tt, gtok);
	uint32_t wi = VE__NIL;
	int rc = pending ? watcher_take_locked(src, &wi) : 0;
	pthread_mutex_unlock(&src->lock);
	if (rc)
		return rc;
	if (!pending) {
		/* E4: no event edge, but on the legacy stream the wait is still a
		 * legacy action (D1, D2), exactly as ve_vctx_stream_wait_event. */
		if (sh == VE_STREAM_LEGACY)
			return wait_marker(dst, sh, false, NULL);
		pthread_mutex_lock(&dst->lock);
		uint32_t sidx;
		rc = stream_get(dst, sh, &sidx) ? 0 : -ENOENT;
		pthread_mutex_unlock(&dst->lock);
		return rc;
	}
	ve_tok marker;
	rc = wait_marker(dst, sh, true, &marker);
	pthread_mutex_lock(&src->lock);
	if (rc) {
		watcher_put_locked(src, wi);
		pthread_mutex_unlock(&src->lock);
		return rc;
	}
	/* The generation may have completed since it was read: then nothing
	 * will fire, release the marker here. */
	bool armed = ve__tok_live(&src->tt, gtok);
	struct watcher *w = &src->wat[wi];
	w->cb = NULL;
	w->arg = NULL;
	w->dst = dst;
	w->marker = marker;
	if (armed)
		watcher_arm_locked(src, gtok, wi);
	else
		watcher_put_locked(src, wi);
	pthread_mutex_unlock(&src->lock);
	return armed ? 0 : ve_vctx_extern_done(dst, marker);
}

/* ------------------------------------------------------------------ waits */

static int wait_tok_locked(struct ve_vctx *v, ve_tok t, uint64_t timeout_ns, bool timed)
{
	if (!ve__tok_live(&v->tt, t))
		return v->error ? -EIO : 0;
	if (timed && timeout_ns == 0)
		return -EBUSY;
	struct timespec dl;
	if (timed) {
		clock_gettime(CLOCK_MONOTONIC, &dl);
		uint64_t ns = (uint64_t)dl.tv_nsec + timeout_ns;
		dl.tv_sec += (time_t)(ns / 1000000000ull);
		dl.tv_nsec = (long)(ns % 1000000000ull);
	}
	int rc = 0;
	uint64_t t_begin = v->wlog ? ve__now_ns() : 0;
	v->nwaiters++;
	/* Tell the dispatcher someone waits: it reports deferred completions
	 * now instead of at its next batch (notify only bumps atomics). */
	atomic_fetch_add_explicit(&v->a_waiters, 1, memory_order_seq_cst);
	atomic_fetch_add_explicit(&v->a_waits, 1, memory_order_relaxed);
	if (v->cfg.notify_ready)
		v->cfg.notify_ready(v->cfg.notify_arg);
	/* Spin first, as the CUDA driver does by default while it waits for the
	 * GPU with cores to spare: a condition-variable wake-up costs tens of
	 * microseconds, a decode step's worth of latency per token. */
	if (v->cfg.sync_spin_ns && !(timed && timeout_ns < v->cfg.sync_spin_ns)) {
		uint64_t t0 = ve__now_ns();
		uint32_t k = 0;
		while (ve__tok_live(&v->tt, t)) {
			uint32_t seen = atomic_load_explicit(&v->a_done_seq, memory_order_acquire);
			pthread_mutex_unlock(&v->lock);
			while (atomic_load_explicit(&v->a_done_seq, memory_order_acquire) == seen &&
			       ((++k & 63) || ve__now_ns() - t0 < v->cfg.sync_spin_ns))
				ve__cpu_relax();
			pthread_mutex_lock(&v->lock);
			if (ve__now_ns() - t0 >= v->cfg.sync_spin_ns)
				break;
		}
	}
	while (ve__tok_live(&v->tt, t) && !v->closed) {
		if (timed) {
			/* done_cv uses CLOCK_REALTIME by default; convert. */
			struct timespec now_m, now_r, abs_r;
			clock_gettime(CLOCK_MONOTONIC, &now_m);
			clock_gettime(CLOCK_REALTIME, &now_r);
			int64_t left = (int64_t)(dl.tv_sec - now_m.tv_sec) * 1000000000ll +
				       (dl.tv_nsec - now_m.tv_nsec);
			if (left <= 0) {
				rc = -ETIMEDOUT;
				break;
			}
			uint64_t ns = (uint64_t)now_r.tv_nsec + (uint64_t)left;
			abs_r.tv_sec = now_r.tv_sec + (time_t)(ns / 1000000000ull);
			abs_r.tv_nsec = (long)(ns % 1000000000ull);
			pthread_cond_timedwait(&v->done_cv, &v->lock, &abs_r);
		} else {
			pthread_cond_wait(&v->done_cv, &v->lock);
		}
	}
	v->nwaiters--;
	atomic_fetch_sub_explicit(&v->a_waiters, 1, memory_order_relaxed);
	if (v->wlog && v->nwlog < VE__WAIT_LOG) {
		v->wlog[2 * v->nwlog] = t_begin;
		v->wlog[2 * v->nwlog + 1] = ve__now_ns();
		v->nwlog++;
	}
	if (rc == 0 && v->error)
		rc = -EIO;
	return rc;
}

bool ve_vctx_has_waiters(struct ve_vctx *v)
{
	return atomic_load_explicit(&v->a_waiters, memory_order_seq_cst) != 0;
}

uint64_t ve_vctx_call_ns(struct ve_vctx *v, ve_tok t)
{
	/* Written before the op was published under the lock, read by the
	 * thread that popped or claimed it under the lock since. */
	return v->ops[ve_tok_slot(t)].t_call;
}

uint32_t ve_vctx_wait_log(struct ve_vctx *v, const uint64_t **pairs)
{
	pthread_mutex_lock(&v->lock);
	uint32_t n = v->nwlog;
	pthread_mutex_unlock(&v->lock);
	*pairs = v->wlog;
	return n;
}

uint32_t ve_vctx_waits(struct ve_vctx *v)
{
	return atomic_load_explicit(&v->a_waits, memory_order_relaxed);
}

bool ve_vctx_tok_done(struct ve_vctx *v, ve_tok t)
{
	pthread_mutex_lock(&v->lock);
	bool done = !ve__tok_live(&v->tt, t);
	pthread_mutex_unlock(&v->lock);
	return done;
}

int ve_vctx_tok_wait(struct ve_vctx *v, ve_tok t)
{
	pthread_mutex_lock(&v->lock);
	int rc = wait_tok_locked(v, t, 0, false);
	pthread_mutex_unlock(&v->lock);
	return rc;
}

int ve_vctx_tok_wait_timeout(struct ve_vctx *v, ve_tok t, uint64_t timeout_ns)
{
	pthread_mutex_lock(&v->lock);
	int rc = wait_tok_locked(v, t, timeout_ns, true);
	pthread_mutex_unlock(&v->lock);
	return rc;
}

/* The legacy stream's sync and query behave as an empty op issued on it: its
 * own tail and every blocking stream's tail (docs/semantics.md, rule D3). */
static bool legacy_pending(struct ve_vctx *v, ve_tok *which)
{
	if (ve__tok_live(&v->tt, v->streams[0].tail)) {
		*which = v->streams[0].tail;
		return true;
	}
	for (uint32_t i = 0; i < v->ndirty; i++) {
		ve_tok t = v->streams[v->dirty[i]].tail;
		if (ve__tok_live(&v->tt, t)) {
			*which = t;
			return true;
		}
	}
	return false;
}

/* A blocking stream's work includes the legacy stream's last op: after a
 * legacy action "all blocking streams wait on the legacy stream" ("Stream
 * synchronization behavior"), so that wait is part of the stream's contents
 * for sync and query even with no later op on it (found by test_vctx_prop,
 * seed 0x1b163c3c169d8d17; docs/semantics.md Y1). */
static bool blocking_done(struct ve_vctx *v, const struct stream *s)
{
	return !ve__tok_live(&v->tt, s->tail) &&
	       !(is_blocking(s) && ve__tok_live(&v->tt, v->streams[0].tail));
}

int ve_vctx_stream_query(struct ve_vctx *v, ve_stream h)
{
	pthread_mutex_lock(&v->lock);
	uint32_t idx;
	struct stream *s = stream_get(v, h, &idx);
	int rc = 0;
	ve_tok t;
	if (!s)
		rc = -ENOENT;
	else if (s->kind == SK_LEGACY ? legacy_pending(v, &t) : !blocking_done(v, s))
		rc = -EBUSY;
	else if (v->error)
		rc = -EIO;
	pthread_mutex_unlock(&v->lock);
	return rc;
}

int ve_vctx_stream_sync(struct ve_vctx *v, ve_stream h)
{
	pthread_mutex_lock(&v->lock);
	uint32_t idx;
	struct stream *s = stream_get(v, h, &idx);
	int rc = 0;
	if (!s) {
		rc = -ENOENT;
	} else if (s->kind == SK_LEGACY) {
		/* Snapshot first: work issued after this call began must not
		 * extend the wait (the dirty set changes while we sleep). */
		uint32_t n = 0;
		ve_tok small[TAILS_ON_STACK];
		/* The legacy stream's tail and one per dirty (blocking, so
		 * never slot 0) stream: at most stream_top, what it holds. */
		ve_tok *snap = tails_room(v, small, small);
		if (!snap) {
			rc = -ENOMEM;
		} else {
			snap[n++] = v->streams[0].tail;
			for (uint32_t i = 0; i < v->ndirty; i++)
				snap[n++] = v->streams[v->dirty[i]].tail;
			for (uint32_t k = 0; k < n && rc == 0; k++)
				rc = wait_tok_locked(v, snap[k], 0, false);
			if (snap != small)
				free(snap);
		}
	} else {
		/* Both tokens as of the call (see blocking_done). */
		ve_tok lt = is_blocking(s) ? v->streams[0].tail : VE_TOK_NONE;
		rc = wait_tok_locked(v, s->tail, 0, false);
		if (rc == 0)
			rc = wait_tok_locked(v, lt, 0, false);
	}
	pthread_mutex_unlock(&v->lock);
	return rc;
}

int ve_vctx_ctx_sync(struct ve_vctx *v)
{
	ve_tok small[TAILS_ON_STACK];
	pthread_mutex_lock(&v->lock);
	uint32_t n = 0;
	ve_tok *snap = tails_room(v, small, small);
	int rc = 0;
	if (!snap) {
		rc = -ENOMEM;
		goto out;
	}
	n = live_tails(v, UINT32_MAX, snap, v->cfg.max_streams);
	for (uint32_t i = 0; i < n && rc == 0; i++)
		rc = wait_tok_locked(v, snap[i], 0, false);
	if (rc == 0 && v->error)
		rc = -EIO;
out:
	pthread_mutex_unlock(&v->lock);
	if (snap != small)
		free(snap);
	return rc;
}

int ve_vctx_ctx_query(struct ve_vctx *v)
{
	pthread_mutex_lock(&v->lock);
	int rc = v->live_ops ? -EBUSY : v->error ? -EIO : 0;
	pthread_mutex_unlock(&v->lock);
	return rc;
}

int ve_vctx_stream_tail(struct ve_vctx *v, ve_stream h, ve_tok *out)
{
	pthread_mutex_lock(&v->lock);
	uint32_t idx;
	struct stream *s = stream_get(v, h, &idx);
	if (s)
		*out = s->tail;
	pthread_mutex_unlock(&v->lock);
	return s ? 0 : -ENOENT;
}

int ve_vctx_event_sync(struct ve_vctx *v, ve_event eh)
{
	pthread_mutex_lock(&v->lock);
	struct event *e = event_get(v, eh);
	int rc = e ? wait_tok_locked(v, e->tok, 0, false) : -ENOENT;
	pthread_mutex_unlock(&v->lock);
	return rc;
}

int ve_vctx_event_elapsed(struct ve_vctx *v, ve_event a, ve_event b, float *ms)
{
	if (!ms)
		return -EINVAL;
	pthread_mutex_lock(&v->lock);
	struct event *ea = event_get(v, a), *eb = event_get(v, b);
	int rc = 0;
	if (!ea || !eb)
		rc = -ENOENT;
	else if ((ea->flags | eb->flags) & VE_EVENT_DISABLE_TIMING)
		rc = -EINVAL;
	else if (!ea->generation || !eb->generation)
		rc = -ENODATA;
	else if (ve__tok_live(&v->tt, ea->tok) || ve__tok_live(&v->tt, eb->tok))
		rc = -EBUSY;
	else if (!ea->t_valid || !eb->t_valid)
		rc = -ENODATA;
	else
		*ms = (float)((double)((int64_t)(eb->t_ns - ea->t_ns)) / 1e6);
	pthread_mutex_unlock(&v->lock);
	return rc;
}

/* ------------------------------------------------------------------ dispatcher side */

int ve_vctx_pop_ready(struct ve_vctx *v, struct ve_ready_info *out, int max)
{
	int n = 0;
	/* Pairs with the release of the push under the lock; one missed
	 * here is found at the next pass (the push notifies after it). */
	if (!atomic_load_explicit(&v->nready, memory_order_acquire))
		return 0;
	pthread_mutex_lock(&v->lock);
	while (n < max && v->ready_head != VE__NIL) {
		uint32_t s = v->ready_head;
		struct op *o = &v->ops[s];
		v->ready_head = o->next_ready;
		if (v->ready_head == VE__NIL)
			v->ready_tail = VE__NIL;
		v->nready--;
		o->state = OP_POPPED;
		out[n++] = (struct ve_ready_info){
			.tok = ve_tok_make(s, v->tt.gen[s]),
			.stream_idx = o->stream,
			.priority = v->streams[o->stream].priority,
			.cls = o->cls,
			.kind = o->desc.kind,
			.seq = o->seq,
		};
	}
	pthread_mutex_unlock(&v->lock);
	return n;
}

const struct ve_desc *ve_vctx_desc(struct ve_vctx *v, ve_tok t)
{
	/* Lock-free read: a live op's descriptor is immutable and its slot is
	 * only recycled by ve_vctx_complete(), which the caller alone issues. */
	if (!ve__tok_live(&v->tt, t))
		return NULL;
	return &op_of(v, t)->desc;
}

int ve_vctx_dispatched(struct ve_vctx *v, ve_tok t, uint32_t lane)
{
	pthread_mutex_lock(&v->lock);
	int rc = -ENOENT;
	bool woke = false;
	if (ve__tok_live(&v->tt, t)) {
		struct op *o = op_of(v, t);
		if (o->state == OP_POPPED) {
			woke = mark_dispatched_locked(v, ve_tok_slot(t), lane);
			rc = 0;
		} else {
			rc = -EINVAL;
		}
	}
	unlock_notify(v, woke);
	return rc;
}

/* Still a valid candidate: pending on exactly one predecessor, which is on a lane. */
static bool pipe_valid(struct ve_vctx *v, uint32_t slot)
{
	struct op *o = &v->ops[slot];
	if (o->state != OP_PENDING || v->tt.npend[slot] != 1 || !ve__tok_live(&v->tt, o->behind))
		return false;
	return op_of(v, o->behind)->state == OP_DISPATCHED;
}

int ve_vctx_pop_pipeline(struct ve_vctx *v, struct ve_pipe_info *out, int max)
{
	int n = 0;
	if (!atomic_load_explicit(&v->npipe, memory_order_acquire))
		return 0; /* as ve_vctx_pop_ready */
	pthread_mutex_lock(&v->lock);
	while (n < max && v->pipe_head != VE__NIL) {
		uint32_t s = v->pipe_head;
		struct op *o = &v->ops[s];
		v->pipe_head = o->next_pipe;
		if (v->pipe_head == VE__NIL)
			v->pipe_tail = VE__NIL;
		v->npipe--;
		o->in_pipe = 0;
		if (!pipe_valid(v, s))
			continue; /* its predecessor finished first: it became ready instead */
		struct op *b = op_of(v, o->behind);
		out[n++] = (struct ve_pipe_info){
			.tok = ve_tok_make(s, v->tt.gen[s]),
			.behind = o->behind,
			.lane = b->lane,
			.stream_idx = o->stream,
			.priority = v->streams[o->stream].priority,
			.cls = o->cls,
			.kind = o->desc.kind,
			.seq = o->seq,
		};
	}
	pthread_mutex_unlock(&v->lock);
	return n;
}

int ve_vctx_pipeline_claim(struct ve_vctx *v, ve_tok t, ve_tok behind)
{
	pthread_mutex_lock(&v->lock);
	int rc = -EAGAIN;
	bool woke = false;
	if (ve__tok_live(&v->tt, t) && pipe_valid(v, ve_tok_slot(t)) &&
	    op_of(v, t)->behind == behind) {
		woke = mark_dispatched_locked(v, ve_tok_slot(t), op_of(v, behind)->lane);
		/* On its lane only once the driver has it (ve_vctx_pipeline_sent). */
		atomic_store_explicit(&v->a_sending, t, memory_order_relaxed);
		rc = 0;
	}
	unlock_notify(v, woke);
	return rc;
}

void ve_vctx_pipeline_sent(struct ve_vctx *v, ve_tok t)
{
	/* Release: a thread that reads the cleared value sees the driver's
	 * submission of t done (ve_vctx_submit_self queues behind it). */
	ve_tok expect = t;
	atomic_compare_exchange_strong_explicit(&v->a_sending, &expect, VE_TOK_NONE,
						memory_order_release, memory_order_relaxed);
}

int ve_vctx_pipeline_unclaim(struct ve_vctx *v, ve_tok t)
{
	bool woke = false;
	pthread_mutex_lock(&v->lock);
	int rc = -ENOENT;
	if (ve__tok_live(&v->tt, t)) {
		uint32_t s = ve_tok_slot(t);
		struct op *o = &v->ops[s];
		rc = -EINVAL;
		if (o->state == OP_DISPATCHED) {
			undispatch_inline_locked(v, s);
			o->lane = VE__NIL;
			/* Under the lock, after the state: never on a lane. */
			ve_vctx_pipeline_sent(v, t);
			rc = 0;
			if (v->tt.npend[s] == 0) {
				/* Its predecessor completed meanwhile: it is ready now. */
				woke = v->nready == 0;
				ready_push_tail(v, s);
			} else {
				o->state = OP_PENDING;
			}
		}
	}
	unlock_notify(v, woke);
	return rc;
}

int ve_vctx_requeue(struct ve_vctx *v, ve_tok t)
{
	bool woke = false;
	pthread_mutex_lock(&v->lock);
	int rc = -ENOENT;
	if (ve__tok_live(&v->tt, t)) {
		uint32_t s = ve_tok_slot(t);
		struct op *o = &v->ops[s];
		if (o->state == OP_POPPED || o->state == OP_DISPATCHED) {
			/* Front of the list: it was ready before anything now queued. */
			woke = v->nready == 0;
			o->state = OP_READY;
			o->lane = VE__NIL;
			o->next_ready = v->ready_head;
			v->ready_head = s;
			if (v->ready_tail == VE__NIL)
				v->ready_tail = s;
			v->nready++;
			rc = 0;
		} else {
			rc = -EINVAL;
		}
	}
	unlock_notify(v, woke);
	return rc;
}

/* A failed op: a refused one is kept to be reported once, anything else
 * breaks the context for good (the first error stays). */
static void note_status(struct ve_vctx *v, int status)
{
	if (!status)
		return;
	if (status > 0 && (status & VE_STATUS_REFUSED)) {
		int none = 0;
		atomic_compare_exchange_strong(&v->refused, &none, status & ~VE_STATUS_REFUSED);
	} else if (!v->error) {
		v->error = status;
	}
}

int ve_vctx_complete(struct ve_vctx *v, ve_tok t, int status, uint64_t t_ns)
{
	bool woke = false;
	int rc = 0;
	pthread_mutex_lock(&v->lock);
	if (!ve__tok_live(&v->tt, t)) {
		rc = -ENOENT;
	} else {
		struct op *o = op_of(v, t);
		if (o->state != OP_DISPATCHED && o->state != OP_POPPED) {
			rc = -EINVAL; /* not handed out: completing it would break H */
		} else {
			note_status(v, status);
			woke = complete_locked(v, t, t_ns);
		}
	}
	unlock_notify(v, woke);
	return rc;
}

int ve_vctx_complete_many(struct ve_vctx *v, const ve_tok *t, const int *status,
			  const uint64_t *t_ns, uint32_t n)
{
	bool woke = false;
	int bad = 0;
	pthread_mutex_lock(&v->lock);
	for (uint32_t i = 0; i < n; i++) {
		if (!ve__tok_live(&v->tt, t[i])) {
			bad++;
			continue;
		}
		struct op *o = op_of(v, t[i]);
		if (o->state != OP_DISPATCHED && o->state != OP_POPPED) {
			bad++;
			continue;
		}
		note_status(v, status[i]);
		woke |= complete_locked(v, t[i], t_ns[i]);
	}
	unlock_notify(v, woke);
	return bad ? -EINVAL : 0;
}

int ve_vctx_error(struct ve_vctx *v)
{
	pthread_mutex_lock(&v->lock);
	int e = v->error;
	pthread_mutex_unlock(&v->lock);
	return e;
}

uint32_t ve_vctx_live_ops(struct ve_vctx *v)
{
	return atomic_load_explicit(&v->a_live, memory_order_relaxed);
}

void ve_vctx_close(struct ve_vctx *v, int status)
{
	pthread_mutex_lock(&v->lock);
	v->closed = true;
	if (!v->error)
		v->error = status;
	pthread_cond_broadcast(&v->done_cv);
	pthread_mutex_unlock(&v->lock);
}

int ve_vctx_take_refused(struct ve_vctx *v)
{
	if (!atomic_load_explicit(&v->refused, memory_order_relaxed))
		return 0;
	return atomic_exchange(&v->refused, 0);
}

void ve_vctx_stats(struct ve_vctx *v, struct ve_vctx_stats *st)
{
	pthread_mutex_lock(&v->lock);
	*st = (struct ve_vctx_stats){
		.submitted = v->n_submitted,
		.completed = v->n_completed,
		.inline_completed = v->n_inline,
		.live_ops = v->live_ops,
		.ready_ops = v->nready,
		.free_slots = v->tt.nfree,
		.free_edges = v->tt.nedge_free,
		.streams = v->nstreams_live,
		.events = v->nevents_live,
		.watchers = v->cfg.max_watchers - v->nwat_free,
		.extern_holds = v->nholds,
	};
	pthread_mutex_unlock(&v->lock);
}

/* ------------------------------------------------------------------ dump */

static const char *stream_kind_name(int k)
{
	static const char *n[] = {"legacy", "per-thread", "blocking", "non-blocking"};
	return k >= 0 && k < 4 ? n[k] : "?";
}

static const char *op_state_name(int s)
{
	static const char *n[] = {"free", "pending", "ready", "popped", "dispatched", "self"};
	return s >= 0 && s < (int)VE_ARRAY_SIZE(n) ? n[s] : "?";
}

void ve_vctx_dump(struct ve_vctx *v, FILE *f)
{
	pthread_mutex_lock(&v->lock);
	fprintf(f,
		"vctx client=%u live_ops=%u ready=%u submitted=%llu completed=%llu error=%d "
		"extern_holds=%u watchers=%u\n",
		v->cfg.client_id, v->live_ops, atomic_load(&v->nready), (unsigned long long)v->n_submitted,
		(unsigned long long)v->n_completed, v->error, v->nholds,
		v->cfg.max_watchers - v->nwat_free);
	fprintf(f, "streams:\n");
	for (uint32_t i = 0; i < v->cfg.max_streams; i++) {
		struct stream *s = &v->streams[i];
		if (s->state == OBJ_FREE)
			continue;
		bool live = ve__tok_live(&v->tt, s->tail);
		fprintf(f, "  s%-4u %-12s %s prio=%d tail=%u:%llu (%s)%s\n", i,
			stream_kind_name(s->kind), s->state == OBJ_ZOMBIE ? "destroyed" : "live",
			s->priority, ve_tok_slot(s->tail), (unsigned long long)ve_tok_gen(s->tail),
			live ? "pending" : "done", s->in_dirty ? " [legacy must wait]" : "");
	}
	fprintf(f, "events:\n");
	for (uint32_t i = 0; i < v->cfg.max_events; i++) {
		struct event *e = &v->events[i];
		if (e->state != OBJ_LIVE)
			continue;
		fprintf(f, "  e%-4u flags=%#x generation=%llu tok=%u:%llu (%s)\n", i, e->flags,
			(unsigned long long)e->generation, ve_tok_slot(e->tok),
			(unsigned long long)ve_tok_gen(e->tok),
			!e->generation ? "never recorded"
			: ve__tok_live(&v->tt, e->tok) ? "pending"
						       : "done");
	}
	fprintf(f, "ops (pending, ready or dispatched):\n");
	for (uint32_t i = 1; i < v->cfg.max_ops; i++) {
		struct op *o = &v->ops[i];
		if (o->state == OP_FREE)
			continue;
		fprintf(f, "  op %u:%llu seq=%llu %-12s s%u %-10s waits_on=%u", i,
			(unsigned long long)v->tt.gen[i],
			(unsigned long long)o->seq, ve_op_kind_name(o->desc.kind), o->stream,
			op_state_name(o->state), v->tt.npend[i]);
		for (uint32_t k = 0; k < o->npreds_dump; k++) {
			ve_tok p = o->preds[k];
			if (ve__tok_live(&v->tt, p))
				fprintf(f, " %u:%llu", ve_tok_slot(p), (unsigned long long)ve_tok_gen(p));
		}
		if (o->ext_hold)
			fprintf(f, " [extern: waits for another context]");
		if (o->npreds_total > o->npreds_dump)
			fprintf(f, " (+%u more recorded)", o->npreds_total - o->npreds_dump);
		if (o->lane != VE__NIL && o->state == OP_DISPATCHED)
			fprintf(f, " lane=%u", o->lane);
		fprintf(f, "\n");
	}
	pthread_mutex_unlock(&v->lock);
}
