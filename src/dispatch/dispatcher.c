/* SPDX-License-Identifier: MIT */
#include "dispatch/dispatcher.h"
#include "dispatch/link.h"
#include "dispatch/trace.h"
#include "util/futex.h"
#include "util/util.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#define BATCH	      64
/* Every coordinator call goes through the link (embedded or daemon). */
#define L_CALL(d, op, ...) ((d)->link.ops->op((d)->link.impl, ##__VA_ARGS__))
#define SPIN_PASSES   2000	/* idle passes spent spinning while work is in flight */
#define INFLIGHT_WAIT 50000ull	/* then sleep this long between polls (ns) */
#define IDLE_WAIT     200000000ull /* idle sleep bound; a notify wakes it earlier */

struct inflight {
	uint64_t tok;
	uint64_t key;
	uint32_t client;
	uint32_t lane;
	uint32_t stream;
	uint32_t next_free;
	uint16_t entry;
	uint8_t cls;
	uint8_t kind;
	uint8_t in_use;
	uint8_t piped;
};

#define PIPE_STREAMS 1024 /* window counters per client (stream index modulo) */

struct client_slot {
	struct ve_vctx *v;
	uint32_t flags;
	bool active;
};

struct host_job {
	struct ve_vctx *v;
	ve_tok tok;
	void (*fn)(void *);
	void *arg;
	uint32_t style;
	uint64_t stream;
};

/* style 0: fn(arg) (cuLaunchHostFunc); style 1: a stream callback,
 * fn(stream, status, arg) (cuStreamAddCallback), status = the context's
 * sticky error so far, as the driver would pass it. */
static void run_host(void (*fn)(void *), void *arg, uint32_t style, uint64_t stream,
		     struct ve_vctx *v)
{
	if (style == 1) {
		void (*cb)(void *, int, void *);
		*(void **)&cb = *(void **)&fn;
		cb((void *)(uintptr_t)stream, ve_vctx_error(v), arg);
	} else {
		fn(arg);
	}
}

struct ve_dispatcher {
	struct ve_dispatcher_config cfg;
	struct ve_backend *b;
	struct ve_link link;
	const struct ve_pool *pool;
	struct client_slot cl[VE_COORD_MAX_CLIENTS];

	struct inflight *inf;
	uint32_t inf_free, ninflight;

	struct ve_ready_info rinfo[BATCH];
	struct ve_pipe_info pinfo[BATCH];
	uint16_t (*pipe_count)[PIPE_STREAMS]; /* [client][stream % PIPE_STREAMS] */
	uint16_t (*pipe_run)[PIPE_STREAMS];   /* pipelined ops since the last policy binding */
	struct ve_binding bind[BATCH];
	struct ve_completion comp[BATCH];

	/* thread */
	pthread_t thr;
	bool started;
	_Atomic int running;
	_Atomic uint32_t wake_word; /* bumped by notify; the thread sleeps on it */
	_Atomic uint32_t sleeping;

	/* host executor */
	pthread_t host_thr;
	bool host_started;
	pthread_mutex_t host_lock;
	pthread_cond_t host_cv;
	struct host_job *hq;
	uint32_t hq_cap, hq_head, hq_n;
	_Atomic uint32_t host_busy;
	bool host_stop;

	/* hints from other threads, applied by the dispatcher thread */
	pthread_mutex_t hint_lock;
	struct ve_hint hints[64];
	uint32_t nhints;
	_Atomic uint32_t hints_pending;

	struct ve_dispatcher_stats st;
};

/* ------------------------------------------------------------------ host executor */

static void *host_main(void *arg)
{
	struct ve_dispatcher *d = arg;
	pthread_mutex_lock(&d->host_lock);
	for (;;) {
		while (!d->hq_n && !d->host_stop)
			pthread_cond_wait(&d->host_cv, &d->host_lock);
		if (!d->hq_n && d->host_stop)
			break;
		struct host_job j = d->hq[d->hq_head];
		d->hq_head = (d->hq_head + 1) % d->hq_cap;
		d->hq_n--;
		pthread_mutex_unlock(&d->host_lock);
		/* Runs after every predecessor completed and before any dependent
		 * starts: its completion below is what releases them. */
		run_host(j.fn, j.arg, j.style, j.stream, j.v);
		ve_vctx_complete(j.v, j.tok, 0, ve__now_ns());
		atomic_fetch_sub_explicit(&d->host_busy, 1, memory_order_release);
		pthread_mutex_lock(&d->host_lock);
	}
	pthread_mutex_unlock(&d->host_lock);
	return NULL;
}

static int host_submit(struct ve_dispatcher *d, struct ve_vctx *v, ve_tok tok,
		       const struct ve_desc *desc)
{
	d->st.host_fns++;
	if (d->cfg.host_inline) {
		run_host(desc->u.host.fn, desc->u.host.arg, desc->u.host.style,
			 desc->u.host.stream_handle, v);
		ve_vctx_complete(v, tok, 0, d->b->ops->now(d->b));
		return 0;
	}
	pthread_mutex_lock(&d->host_lock);
	if (d->hq_n == d->hq_cap) {
		pthread_mutex_unlock(&d->host_lock);
		return -EAGAIN;
	}
	d->hq[(d->hq_head + d->hq_n) % d->hq_cap] =
		(struct host_job){.v = v,
				  .tok = tok,
				  .fn = desc->u.host.fn,
				  .arg = desc->u.host.arg,
				  .style = desc->u.host.style,
				  .stream = desc->u.host.stream_handle};
	d->hq_n++;
	atomic_fetch_add_explicit(&d->host_busy, 1, memory_order_relaxed);
	pthread_cond_signal(&d->host_cv);
	pthread_mutex_unlock(&d->host_lock);
	return 0;
}

/* ------------------------------------------------------------------ create */

int ve_dispatcher_create(const struct ve_dispatcher_config *cfg, struct ve_dispatcher **out)
{
	if (!cfg || !cfg->backend || !cfg->link || !cfg->link->ops || !out)
		return -EINVAL;
	struct ve_dispatcher *d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->cfg = *cfg;
	if (!d->cfg.lanes_per_entry)
		d->cfg.lanes_per_entry = 4;
	if (!d->cfg.copy_lanes)
		d->cfg.copy_lanes = 4;
	if (!d->cfg.max_inflight)
		d->cfg.max_inflight = 16384;
	if (d->cfg.lanes_per_entry > 256 || d->cfg.copy_lanes > 256)
		goto einval;
	d->b = cfg->backend;
	d->link = *cfg->link;
	d->pool = d->link.pool;
	d->inf = calloc(d->cfg.max_inflight, sizeof(*d->inf));
	d->hq_cap = 4096;
	d->hq = calloc(d->hq_cap, sizeof(*d->hq));
	d->pipe_count = calloc(VE_COORD_MAX_CLIENTS, sizeof(*d->pipe_count));
	d->pipe_run = calloc(VE_COORD_MAX_CLIENTS, sizeof(*d->pipe_run));
	if (!d->inf || !d->hq || !d->pipe_count || !d->pipe_run)
		goto enomem;
	d->inf_free = UINT32_MAX;
	for (uint32_t i = d->cfg.max_inflight; i-- > 0;) {
		d->inf[i].next_free = d->inf_free;
		d->inf_free = i;
	}
	pthread_mutex_init(&d->host_lock, NULL);
	pthread_cond_init(&d->host_cv, NULL);
	pthread_mutex_init(&d->hint_lock, NULL);
	int rc;
	/* Pre-create every pool entry: creation never happens on the dispatch path. */
	for (uint32_t e = 0; e < d->pool->nentries; e++) {
		rc = d->b->ops->entry_create(d->b, e, d->pool->e[e].leaves, d->cfg.lanes_per_entry);
		if (rc) {
			VE_ERR("dispatcher: backend %s could not create pool entry %u (%u SMs): %d",
			       d->b->ops->name, e, d->pool->e[e].sms, rc);
			ve_dispatcher_destroy(d);
			return rc;
		}
	}
	rc = d->b->ops->copy_lanes_create(d->b, d->cfg.copy_lanes);
	if (rc) {
		ve_dispatcher_destroy(d);
		return rc;
	}
	if (!d->cfg.host_inline) {
		if (pthread_create(&d->host_thr, NULL, host_main, d)) {
			ve_dispatcher_destroy(d);
			return -EAGAIN;
		}
		d->host_started = true;
	}
	*out = d;
	return 0;
einval:
	free(d);
	return -EINVAL;
enomem:
	free(d->inf);
	free(d->hq);
	free(d->pipe_count);
	free(d->pipe_run);
	free(d);
	return -ENOMEM;
}

void ve_dispatcher_destroy(struct ve_dispatcher *d)
{
	if (!d)
		return;
	ve_dispatcher_stop(d);
	if (d->host_started) {
		pthread_mutex_lock(&d->host_lock);
		d->host_stop = true;
		pthread_cond_broadcast(&d->host_cv);
		pthread_mutex_unlock(&d->host_lock);
		pthread_join(d->host_thr, NULL);
	}
	pthread_mutex_destroy(&d->host_lock);
	pthread_cond_destroy(&d->host_cv);
	pthread_mutex_destroy(&d->hint_lock);
	free(d->inf);
	free(d->hq);
	free(d->pipe_count);
	free(d->pipe_run);
	free(d);
}

int ve_dispatcher_attach(struct ve_dispatcher *d, struct ve_vctx *v, uint32_t client,
			 uint32_t flags)
{
	if (client >= VE_COORD_MAX_CLIENTS || !v)
		return -EINVAL;
	if (d->cl[client].active)
		return -EEXIST;
	int rc = L_CALL(d, client_add, client, flags);
	if (rc)
		return rc;
	d->cl[client] = (struct client_slot){.v = v, .flags = flags, .active = true};
	ve_dispatcher_notify(d);
	return 0;
}

int ve_dispatcher_detach(struct ve_dispatcher *d, uint32_t client)
{
	if (client >= VE_COORD_MAX_CLIENTS || !d->cl[client].active)
		return -ENOENT;
	d->cl[client].active = false;
	return L_CALL(d, client_remove, client);
}

void ve_dispatcher_notify(void *arg)
{
	struct ve_dispatcher *d = arg;
	/* Pairs with the acquire load of wake_word in the thread's sleep path:
	 * work published before this notify is visible once it wakes. */
	atomic_fetch_add_explicit(&d->wake_word, 1, memory_order_release);
	if (atomic_load_explicit(&d->sleeping, memory_order_seq_cst))
		ve__futex_wake(&d->wake_word, 1, 1);
}

/* ------------------------------------------------------------------ passes */

static int inflight_alloc(struct ve_dispatcher *d, uint32_t *idx)
{
	uint32_t i = d->inf_free;
	if (i == UINT32_MAX)
		return -EAGAIN;
	d->inf_free = d->inf[i].next_free;
	d->inf[i].in_use = 1;
	d->ninflight++;
	*idx = i;
	return 0;
}

static void inflight_free(struct ve_dispatcher *d, uint32_t i)
{
	d->inf[i].in_use = 0;
	d->inf[i].next_free = d->inf_free;
	d->inf_free = i;
	d->ninflight--;
}

/* Submits an op on a lane; returns 0 or the backend's error (op untouched). */
static int submit_on(struct ve_dispatcher *d, uint32_t client, struct ve_vctx *v, ve_tok tok,
		     const struct ve_desc *desc, uint32_t lane, uint16_t entry, uint8_t cls,
		     uint32_t stream, bool piped)
{
	uint32_t i;
	int rc = inflight_alloc(d, &i);
	if (rc)
		return rc;
	struct inflight *f = &d->inf[i];
	f->tok = tok;
	f->key = desc->key;
	f->client = client;
	f->lane = lane;
	f->stream = stream;
	f->entry = entry;
	f->cls = cls;
	f->kind = desc->kind;
	f->piped = piped;
	rc = d->b->ops->submit(d->b, lane, desc, i);
	if (rc) {
		inflight_free(d, i);
		d->st.submit_failures++;
		return rc;
	}
	if (piped)
		d->pipe_count[client][stream % PIPE_STREAMS]++;
	else
		ve_vctx_dispatched(v, tok, lane);
	d->st.submitted++;
	if (d->cfg.on_submit)
		d->cfg.on_submit(d->cfg.observer_arg, client, tok, lane, desc);
	return 0;
}

static void ready_op_from(struct ve_ready_op *o, const struct ve_ready_info *ri,
			  const struct ve_desc *desc, uint32_t client, uint32_t cflags,
			  uint64_t now)
{
	memset(o, 0, sizeof(*o));
	o->tok = ri->tok;
	o->key = desc->key;
	o->ready_ns = now;
	o->client = client;
	o->stream = ri->stream_idx;
	o->priority = ri->priority;
	o->kind = desc->kind;
	if (desc->kind == VE_OP_KERNEL) {
		o->blocks = ve_desc_blocks(desc);
		o->threads = ve_desc_threads(desc);
		o->min_sms = desc->u.k.min_sms;
		o->blocks_per_sm = desc->u.k.blocks_per_sm;
	}
	if ((cflags & VE_READY_LATENCY) || (desc->flags & VE_DESC_LATENCY))
		o->flags |= VE_READY_LATENCY;
	if (desc->flags & VE_DESC_COOPERATIVE)
		o->flags |= VE_READY_COOPERATIVE;
	o->deadline_ns = desc->deadline_ns;
}

static int drain_client(struct ve_dispatcher *d, uint32_t c, uint64_t now)
{
	struct client_slot *cs = &d->cl[c];
	int moved = 0;
	for (;;) {
		int n = ve_vctx_pop_ready(cs->v, d->rinfo, BATCH);
		if (n <= 0)
			break;
		for (int k = 0; k < n; k++) {
			struct ve_ready_info *ri = &d->rinfo[k];
			const struct ve_desc *desc = ve_vctx_desc(cs->v, ri->tok);
			int rc = 0;
			if (!desc)
				continue;
			d->st.popped++;
			switch (ri->cls) {
			case VE_CLASS_COMPUTE: {
				struct ve_ready_op o;
				ready_op_from(&o, ri, desc, c, cs->flags, now);
				rc = L_CALL(d, ready, &o);
				break;
			}
			case VE_CLASS_COPY:
				rc = submit_on(d, c, cs->v, ri->tok, desc,
					       VE_LANE(VE_LANE_COPY_ENTRY,
						       ri->stream_idx % d->cfg.copy_lanes),
					       VE_LANE_COPY_ENTRY, VE_CLASS_COPY, ri->stream_idx, false);
				if (!rc)
					d->st.copies++;
				break;
			case VE_CLASS_HOST:
				rc = host_submit(d, cs->v, ri->tok, desc);
				break;
			default:
				rc = -EINVAL; /* inline ops never leave the vctx */
				break;
			}
			if (rc) {
				/* Back-pressure: give back this op and the rest of the
				 * batch, newest first, so the ready order is kept. */
				for (int j = n - 1; j >= k; j--)
					ve_vctx_requeue(cs->v, d->rinfo[j].tok);
				return moved;
			}
			moved++;
		}
		if (n < BATCH)
			break;
	}
	return moved;
}

static void handle_completion(struct ve_dispatcher *d, const struct ve_completion *cp)
{
	if (cp->cookie >= d->cfg.max_inflight || !d->inf[cp->cookie].in_use) {
		VE_ERR("dispatcher: completion for unknown cookie %llu ignored",
		       (unsigned long long)cp->cookie);
		return;
	}
	struct inflight f = d->inf[cp->cookie];
	inflight_free(d, (uint32_t)cp->cookie);
	if (f.piped && d->pipe_count[f.client][f.stream % PIPE_STREAMS])
		d->pipe_count[f.client][f.stream % PIPE_STREAMS]--;
	struct client_slot *cs = &d->cl[f.client];
	if (d->cfg.trace) {
		struct ve_trace_event ev = {
			.t_start_ns = cp->t_start_ns,
			.t_end_ns = cp->t_end_ns,
			.key = f.key,
			.lane = f.lane,
			.client = f.client,
			.stream = f.stream,
			.sms = f.entry < d->pool->nentries ? d->pool->e[f.entry].sms : 0,
			.entry = f.entry,
			.kind = f.kind,
			.status_bad = cp->status != 0,
		};
		ve_trace_add(d->cfg.trace, &ev);
	}
	if (f.cls == VE_CLASS_COMPUTE)
		L_CALL(d, done, f.client, f.entry, f.key,
			      cp->t_end_ns > cp->t_start_ns ? cp->t_end_ns - cp->t_start_ns : 0);
	if (d->cfg.on_complete)
		d->cfg.on_complete(d->cfg.observer_arg, f.client, f.tok, f.lane, cp->status);
	/* Completing the token last: a waiter released by it sees the entry
	 * already accounted for. A client detached meanwhile still owns its vctx. */
	ve_vctx_complete(cs->v, f.tok, cp->status, cp->t_end_ns);
	d->st.completed++;
}

static int submit_bindings(struct ve_dispatcher *d, int nb)
{
	int moved = 0;
	for (int i = 0; i < nb; i++) {
		struct ve_binding *bd = &d->bind[i];
		struct client_slot *cs = &d->cl[bd->op.client];
		const struct ve_desc *desc = cs->active ? ve_vctx_desc(cs->v, bd->op.tok) : NULL;
		int rc = -ENOENT;
		uint32_t lane = VE_LANE(bd->entry, bd->op.stream % d->cfg.lanes_per_entry);
		if (desc)
			rc = submit_on(d, bd->op.client, cs->v, bd->op.tok, desc, lane, bd->entry,
				       VE_CLASS_COMPUTE, bd->op.stream, false);
		if (rc) {
			L_CALL(d, submit_failed, bd, rc);
			continue;
		}
		if (d->cfg.on_bind)
			d->cfg.on_bind(d->cfg.observer_arg, bd, lane);
		d->st.bound++;
		d->pipe_run[bd->op.client][bd->op.stream % PIPE_STREAMS] = 0;
		moved++;
	}
	return moved;
}

static int drain_hints(struct ve_dispatcher *d);

/* Bounded pipelining: submit candidates right behind their in-flight
 * predecessor on its lane, at most 'window' per logical stream, compute ops
 * only onto a pool entry's lanes and only while the coordinator says nobody
 * else waits. A candidate not taken becomes ready the normal way. */
static int drain_pipeline(struct ve_dispatcher *d, uint32_t c)
{
	struct client_slot *cs = &d->cl[c];
	int moved = 0;
	int n = ve_vctx_pop_pipeline(cs->v, d->pinfo, BATCH);
	for (int k = 0; k < n; k++) {
		struct ve_pipe_info *pi = &d->pinfo[k];
		uint32_t entry = VE_LANE_ENTRY(pi->lane);
		bool compute = pi->cls == VE_CLASS_COMPUTE;
		if (d->pipe_count[c][pi->stream_idx % PIPE_STREAMS] >= d->cfg.window)
			continue;
		if (compute && entry == VE_LANE_COPY_ENTRY)
			continue; /* a kernel never runs on a copy lane (all SMs) */
		const struct ve_desc *desc = ve_vctx_desc(cs->v, pi->tok);
		if (!desc)
			continue;
		if (compute && desc->u.k.min_sms > d->pool->e[entry].sms)
			continue;
		uint16_t *run = &d->pipe_run[c][pi->stream_idx % PIPE_STREAMS];
		if (compute) {
			struct ve_ready_op o;
			struct ve_ready_info ri = {.tok = pi->tok, .stream_idx = pi->stream_idx,
						   .priority = pi->priority};
			ready_op_from(&o, &ri, desc, c, cs->flags, 0);
			/* Others active: after 'budget' pipelined ops the stream's next op
			 * goes through the policy again, so allocations follow demand. */
			int pr = L_CALL(d, pipeline, c, (uint16_t)entry, &o,
					*run < d->cfg.pipe_budget);
			if (pr < 0)
				continue;
		}
		if (ve_vctx_pipeline_claim(cs->v, pi->tok, pi->behind)) {
			if (compute)
				L_CALL(d, pipeline_cancel, c, (uint16_t)entry, pi->tok);
			continue;
		}
		int rc = submit_on(d, c, cs->v, pi->tok, desc, pi->lane, (uint16_t)entry,
				   compute ? VE_CLASS_COMPUTE : VE_CLASS_COPY, pi->stream_idx, true);
		if (rc) {
			ve_vctx_pipeline_unclaim(cs->v, pi->tok);
			if (compute)
				L_CALL(d, pipeline_cancel, c, (uint16_t)entry, pi->tok);
			continue;
		}
		if (compute && *run < UINT16_MAX)
			(*run)++;
		d->st.pipelined++;
		moved++;
	}
	return moved;
}

int ve_dispatcher_poll(struct ve_dispatcher *d)
{
	int moved = 0;
	d->st.passes++;
	uint64_t now = d->b->ops->now(d->b);
	L_CALL(d, set_now, now);
	for (;;) {
		int n = d->b->ops->poll(d->b, d->comp, BATCH);
		for (int i = 0; i < n; i++)
			handle_completion(d, &d->comp[i]);
		moved += n > 0 ? n : 0;
		if (n < BATCH)
			break;
	}
	for (uint32_t c = 0; c < VE_COORD_MAX_CLIENTS; c++)
		if (d->cl[c].active)
			moved += drain_client(d, c, now);
	moved += drain_hints(d);
	if (d->cfg.window)
		for (uint32_t c = 0; c < VE_COORD_MAX_CLIENTS; c++)
			if (d->cl[c].active)
				moved += drain_pipeline(d, c);
	for (;;) {
		int nb = L_CALL(d, schedule, d->bind, BATCH);
		if (nb <= 0)
			break;
		moved += submit_bindings(d, nb);
		if (nb < BATCH)
			break;
	}
	return moved;
}

bool ve_dispatcher_quiescent(struct ve_dispatcher *d)
{
	if (d->ninflight || atomic_load(&d->host_busy))
		return false;
	if (L_CALL(d, pending))
		return false;
	for (uint32_t c = 0; c < VE_COORD_MAX_CLIENTS; c++) {
		if (!d->cl[c].active)
			continue;
		struct ve_vctx_stats st;
		ve_vctx_stats(d->cl[c].v, &st);
		if (st.ready_ops)
			return false;
	}
	return true;
}

uint32_t ve_dispatcher_inflight(struct ve_dispatcher *d)
{
	return d->ninflight;
}

/* ------------------------------------------------------------------ thread */

static void *dispatcher_main(void *arg)
{
	struct ve_dispatcher *d = arg;
	uint32_t idle = 0;
	/* Short sleeps between polls must stay short: the default 50 us timer
	 * slack turns a 20 us sleep into ~70 us of completion latency. */
	prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
	while (atomic_load_explicit(&d->running, memory_order_acquire)) {
		uint32_t seen = atomic_load_explicit(&d->wake_word, memory_order_acquire);
		if (ve_dispatcher_poll(d) > 0) {
			idle = 0;
			continue;
		}
		if (d->ninflight || atomic_load(&d->host_busy) || L_CALL(d, pending)) {
			/* Work on the GPU, or bindings due from the coordinator (ved):
			 * spin a while, then poll at a bounded interval so a long kernel
			 * does not cost a whole core. */
			if (++idle < SPIN_PASSES) {
				ve__cpu_relax();
			} else {
				d->b->ops->wait(d->b, INFLIGHT_WAIT);
			}
			continue;
		}
		/* Idle: sleep until a vctx says it has ready work. The re-check of
		 * wake_word after announcing we sleep closes the lost-wake-up race
		 * with ve_dispatcher_notify (which reads 'sleeping' after bumping). */
		atomic_store_explicit(&d->sleeping, 1, memory_order_seq_cst);
		if (atomic_load_explicit(&d->wake_word, memory_order_seq_cst) == seen) {
			d->st.sleeps++;
			ve__futex_wait(&d->wake_word, seen, IDLE_WAIT, 1);
			d->st.wakeups++;
		}
		atomic_store_explicit(&d->sleeping, 0, memory_order_relaxed);
		idle = 0;
	}
	return NULL;
}

int ve_dispatcher_start(struct ve_dispatcher *d)
{
	if (d->started)
		return -EALREADY;
	atomic_store(&d->running, 1);
	if (pthread_create(&d->thr, NULL, dispatcher_main, d)) {
		atomic_store(&d->running, 0);
		return -EAGAIN;
	}
	d->started = true;
	return 0;
}

void ve_dispatcher_stop(struct ve_dispatcher *d)
{
	if (!d->started)
		return;
	atomic_store_explicit(&d->running, 0, memory_order_release);
	ve_dispatcher_notify(d);
	pthread_join(d->thr, NULL);
	d->started = false;
}

int ve_dispatcher_hint(struct ve_dispatcher *d, const struct ve_hint *h)
{
	/* The coordinator belongs to the dispatcher thread: queue it. */
	pthread_mutex_lock(&d->hint_lock);
	int rc = -EAGAIN; /* a full queue drops the hint: it is only advice */
	if (d->nhints < VE_ARRAY_SIZE(d->hints)) {
		d->hints[d->nhints++] = *h;
		atomic_store_explicit(&d->hints_pending, 1, memory_order_release);
		rc = 0;
	}
	pthread_mutex_unlock(&d->hint_lock);
	if (rc == 0)
		ve_dispatcher_notify(d);
	return rc;
}

static int drain_hints(struct ve_dispatcher *d)
{
	if (!atomic_load_explicit(&d->hints_pending, memory_order_acquire))
		return 0;
	struct ve_hint local[VE_ARRAY_SIZE(d->hints)];
	pthread_mutex_lock(&d->hint_lock);
	uint32_t n = d->nhints;
	memcpy(local, d->hints, n * sizeof(local[0]));
	d->nhints = 0;
	atomic_store_explicit(&d->hints_pending, 0, memory_order_relaxed);
	pthread_mutex_unlock(&d->hint_lock);
	for (uint32_t i = 0; i < n; i++)
		L_CALL(d, hint, &local[i]);
	return (int)n;
}

void ve_dispatcher_stats(struct ve_dispatcher *d, struct ve_dispatcher_stats *st)
{
	*st = d->st;
	st->inflight = d->ninflight;
}
