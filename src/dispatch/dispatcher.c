/* SPDX-License-Identifier: MIT */
#include "dispatch/dispatcher.h"
#include "dispatch/link.h"
#include "dispatch/phase.h"
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
#define INFLIGHT_WAIT 50000ull	/* virtual-clock backends: wait() this long between polls */
#define IDLE_WAIT     200000000ull /* idle sleep bound; a notify wakes it earlier */
#define IDLE_FLUSH_PASSES 64	/* idle passes after which deferred completions are reported */
#define DQ_CAP	      1024	/* candidates held back by their lane's bound */
#define AVG_INIT_NS   10000ull	/* a lane's time per op before anything was measured */
#define AVG_MIN_NS    500ull
#define EST_SLOTS     4096	/* kernel run-time estimates (a direct-mapped cache) */
#define NONE32	      UINT32_MAX

struct inflight {
	uint64_t tok;
	uint64_t key;
	uint32_t client;
	uint32_t lane;
	uint32_t stream;
	uint32_t next_free;
	uint32_t lidx; /* lane_st index */
	uint16_t entry;
	uint8_t cls;
	uint8_t kind;
	uint8_t in_use;
	uint8_t piped;
	uint8_t granted; /* bound here to the client's grant: the coordinator counts no op */
	uint8_t solo;	 /* reported by a marker of its own: its time is its own */
	uint64_t pred_ns; /* what it adds to its lane's predicted work (lane_st.pred_ns) */
	uint64_t deadline_ns; /* a latency op's advisory deadline (0: none) */
	uint64_t t_call;      /* when the application recorded it (traces only; 0: unknown) */
};

/* What the dispatcher knows of one backend lane. */
struct lane_st {
	uint32_t id;	   /* VE_LANE value */
	uint32_t inflight; /* ops submitted and not reported complete */
	uint32_t unmarked; /* deferred ops since the lane's last marker */
	uint32_t nsub;	   /* ops submitted so far (profile sampling) */
	uint8_t on_unm;	   /* listed in d->unm */
	uint8_t long_tail; /* its unmarked tail is a long kernel that went to it idle */
	uint32_t ntails;   /* long kernels sent to it idle (every 64th is marked, a sample) */
	uint64_t avg_ns;   /* recent time per op: EWMA over reported completions */
	uint64_t pred_ns;  /* predicted run time of the kernels in flight (lane_admits) */
	uint64_t last_done_ns, last_submit_ns;
	bool measured; /* a completion has timed an op here (avg_ns is no guess) */
	uint64_t busy_ns; /* when it last went from idle to busy (watchdog) */
	uint8_t stuck;	  /* reported stuck; cleared by its next completion */
};

/* Grant mode, per client. */
struct gclient {
	uint16_t entry; /* granted entry (VE_POOL_NONE: none) */
	uint16_t lend;	/* entry lent for short kernels (VE_POOL_NONE: none; lend_admits) */
	uint64_t gen;
	uint32_t want_sms; /* decaying max of what its kernels could use */
	uint64_t want_ns;  /* when want_sms was last raised or halved */
	uint32_t min_sms;  /* widest waiting op its grant cannot run */
	uint64_t deadline_ns;
	uint64_t late_ns; /* when a latency op of it last finished after its deadline */
	uint64_t active_ns; /* last time it had work (seen at a report) */
	uint64_t active_done; /* done at that report */
	uint32_t nwait;	   /* ops in the wait queue */
	uint32_t ncompute; /* compute ops in flight */
	bool contended;	   /* other clients may need SMs back soon (short submit-ahead) */
	bool zombie;	   /* detached with compute ops still running: reports until drained */
	/* Mean run time of its recent compute ops (EWMA over completions, as
	 * the lanes attribute time: a marker's interval spread over the ops it
	 * reports). */
	uint64_t op_ns;
	uint64_t binds, done; /* compute ops bound to its grants, completed */
	uint64_t late;	      /* its ops that finished after their deadline (any binding) */
	uint32_t others;      /* other processes sharing the GPU (link others) */
	uint64_t hold_until;  /* VE_PHASE: bind nothing before this (0: no hold) */
	struct ve__phase phase;
};


/* How long a kernel (profile key) ran the last time it was timed by a
 * marker of its own, and on how many SMs: what submit-ahead predicts it
 * takes (est_predict). One size: a timing on another size replaces it. A
 * client with a lend times a kernel on its grant and on the wider lend in
 * turn, so a kernel that does not speed up with SMs, last timed on the
 * lend, is predicted too long on the grant (the safe side). Keeping both
 * sizes kept the lend's slowest timings (taken while the lender ran beside)
 * and lent a third fewer kernels in ve-sim train-infer (aggregate 1.61 vs
 * 1.78). */
struct op_est {
	uint64_t key;
	uint64_t ns;
	uint32_t sms;
};

/* A ready compute op waiting for a grant that can run it. */
struct wop {
	ve_tok tok;
	uint32_t client;
	uint32_t stream;
	uint64_t since_ns; /* when it started waiting (bind deadline) */
};

struct held {
	struct ve_pipe_info pi;
	uint32_t client;
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
	/* completions of one client waiting to be applied under one vctx lock */
	struct ve_vctx *cb_v;
	uint32_t cb_client, ncb;
	ve_tok cb_tok[BATCH];
	int cb_status[BATCH];
	uint64_t cb_t[BATCH];

	/* lanes: entry e's lane k at e * lanes_per_entry + k, copy lanes after */
	struct lane_st *ls;
	uint32_t nls, copy_base;
	uint32_t *unm; /* lane_st indices with deferred completions */
	uint32_t nunm;
	uint32_t idle_passes;
	bool deferral; /* the backend can defer completion markers */
	bool virt_clock; /* the backend's time moves only with its work (the sim) */
	uint64_t wd_next_ns; /* next look for stuck lanes */

	/* grant mode */
	bool grant_mode;
	struct gclient gc[VE_COORD_MAX_CLIENTS];
	uint32_t *ent_inflight; /* [client * nentries + entry] compute ops in flight */
	struct wop *wq;		/* FIFO ring of ops waiting for a grant */
	uint32_t wq_head, wq_n, wq_cap;
	struct held *dq; /* candidates held back by their lane's bound */
	uint32_t ndq;
	struct op_est *est; /* [EST_SLOTS], by key */

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

	/* host-polled calls (VE_DESC_HOST_POLL) */
	struct polled {
		struct ve_vctx *v;
		ve_tok tok;
	} polled[256];
	uint32_t npolled;

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
	if (desc->kind == VE_OP_CALL) { /* VE_DESC_HOST_POLL: poll_calls() finishes it */
		if (d->npolled == VE_ARRAY_SIZE(d->polled))
			return -EAGAIN;
		d->polled[d->npolled++] = (struct polled){v, tok};
		return 0;
	}
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
	if (!d->cfg.ahead_max)
		d->cfg.ahead_max = 256;
	if (!d->cfg.mark_every)
		d->cfg.mark_every = 16;
	if (!d->cfg.idle_flush_ns)
		d->cfg.idle_flush_ns = 20000;
	if (!d->cfg.poll_ns)
		d->cfg.poll_ns = 20000;
	if (!d->cfg.ahead_alone_ns)
		d->cfg.ahead_alone_ns = 2000000;
	if (!d->cfg.lend_ns)
		d->cfg.lend_ns = 400000;
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
	d->copy_base = d->pool->nentries * d->cfg.lanes_per_entry;
	d->nls = d->copy_base + d->cfg.copy_lanes;
	d->ls = calloc(d->nls, sizeof(*d->ls));
	d->unm = calloc(d->nls, sizeof(*d->unm));
	d->ent_inflight = calloc((size_t)VE_COORD_MAX_CLIENTS * d->pool->nentries,
				 sizeof(*d->ent_inflight));
	d->wq_cap = d->cfg.max_inflight;
	d->wq = calloc(d->wq_cap, sizeof(*d->wq));
	d->dq = calloc(DQ_CAP, sizeof(*d->dq));
	d->est = calloc(EST_SLOTS, sizeof(*d->est));
	if (!d->inf || !d->hq || !d->pipe_count || !d->pipe_run || !d->ls || !d->unm ||
	    !d->ent_inflight || !d->wq || !d->dq || !d->est)
		goto enomem;
	for (uint32_t i = 0; i < d->nls; i++) {
		d->ls[i].id = i < d->copy_base
				      ? VE_LANE(i / d->cfg.lanes_per_entry, i % d->cfg.lanes_per_entry)
				      : VE_LANE(VE_LANE_COPY_ENTRY, i - d->copy_base);
		d->ls[i].avg_ns = AVG_INIT_NS;
	}
	for (uint32_t c = 0; c < VE_COORD_MAX_CLIENTS; c++)
		d->gc[c].entry = d->gc[c].lend = VE_POOL_NONE;
	d->deferral = d->b->ops->version >= 2 && d->b->ops->submit_deferred && d->b->ops->flush;
	d->virt_clock = d->b->ops->version >= 2 && (d->b->ops->caps & VE_BACKEND_CAP_VIRTUAL_CLOCK);
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
	free(d->ls);
	free(d->unm);
	free(d->ent_inflight);
	free(d->wq);
	free(d->dq);
	free(d->est);
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
	free(d->ls);
	free(d->unm);
	free(d->ent_inflight);
	free(d->wq);
	free(d->dq);
	free(d->est);
	free(d);
}

int ve_dispatcher_attach(struct ve_dispatcher *d, struct ve_vctx *v, uint32_t client,
			 uint32_t flags)
{
	if (client >= VE_COORD_MAX_CLIENTS || !v)
		return -EINVAL;
	if (d->cl[client].active)
		return -EEXIST;
	/* The work of the client that left this slot still runs: its reports
	 * must go on covering those leaves, and its completions must not reach
	 * a new vctx (ve_dispatcher_detach). Only while some op of it is in
	 * flight: per-op mode never clears zombie (no grant reports), and a
	 * slot left with nothing running was refused until the next pass. */
	if (d->gc[client].zombie)
		for (uint32_t i = 0; i < d->cfg.max_inflight; i++)
			if (d->inf[i].in_use && d->inf[i].client == client)
				return -EBUSY;
	int rc = L_CALL(d, client_add, client, flags);
	if (rc)
		return rc;
	d->cl[client] = (struct client_slot){.v = v, .flags = flags, .active = true};
	d->gc[client] = (struct gclient){.entry = VE_POOL_NONE, .lend = VE_POOL_NONE};
	/* Two processes' clients both decide when to try a phase: seeds that
	 * differ between them (the pid) and between clients of one. */
	ve__phase_init(&d->gc[client].phase,
		       ((uint64_t)getpid() << 20) ^ ((uint64_t)client << 8) ^ d->b->ops->now(d->b));
	ve_dispatcher_notify(d);
	return 0;
}

int ve_dispatcher_detach(struct ve_dispatcher *d, uint32_t client)
{
	if (client >= VE_COORD_MAX_CLIENTS || !d->cl[client].active)
		return -ENOENT;
	d->cl[client].active = false;
	/* Its waiting ops never run now; it reports until what runs has drained
	 * (at least once: the coordinator holds its leaves until told). */
	d->gc[client].zombie = true;
	return L_CALL(d, client_remove, client);
}

void ve_dispatcher_notify(void *arg)
{
	struct ve_dispatcher *d = arg;
	/* Pairs with the acquire load of wake_word in the thread's sleep path:
	 * work published before this notify is visible once it wakes. Seq_cst
	 * (a Dekker handshake with the sleeper's store of 'sleeping' and its
	 * load of wake_word): either it sees the bump and does not sleep, or
	 * this sees 'sleeping' and wakes it. Release alone allows both loads to
	 * miss (x86's locked add hid that). */
	atomic_fetch_add_explicit(&d->wake_word, 1, memory_order_seq_cst);
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

/* Roughly how many ops a lane holds: its recent time per op into the
 * bound, at least 2, at most ahead_max. Only sets how often completion
 * markers are written (submit_on); what a lane may hold is decided by
 * lane_admits, from each kernel's own predicted time. */
static uint32_t lane_room(const struct ve_dispatcher *d, const struct lane_st *L, bool contended)
{
	/* No completion measured on this lane yet: its time per op is a guess
	 * (AVG_INIT_NS), and a drain would wait for whatever the guess let in
	 * (a server's first kernels kept a shrinking grant for 3.4 s on the
	 * H200). Two until the first completion says how long they take. */
	if (contended && !L->measured)
		return 2;
	uint64_t bound = contended ? d->cfg.ahead_ns : VE_MAX(d->cfg.ahead_alone_ns, d->cfg.ahead_ns);
	uint64_t n = bound / VE_MAX(L->avg_ns, AVG_MIN_NS);
	/* Kernels longer than the whole bound while others may want the SMs:
	 * one at a time, so a drain waits for the running kernel only (a
	 * marker after each, so the next follows within a poll). */
	uint64_t lo = contended && L->avg_ns > d->cfg.ahead_ns ? 1 : 2;
	return (uint32_t)VE_MIN(VE_MAX(n, lo), (uint64_t)d->cfg.ahead_max);
}

static uint64_t ahead_bound(const struct ve_dispatcher *d, bool contended)
{
	return contended ? d->cfg.ahead_ns : VE_MAX(d->cfg.ahead_alone_ns, d->cfg.ahead_ns);
}

static uint32_t est_slot(uint64_t key)
{
	return (uint32_t)(ve__mix64(key) & (EST_SLOTS - 1));
}

/* How long kernel 'key' will take on 'sms' SMs, 0 if unknown. Timed on as
 * many SMs or fewer: no longer than then. Timed on more: at most that much
 * longer than then in proportion (when its blocks filled them all; a
 * kernel that did not fill them is predicted too long, the safe side). */
static uint64_t est_predict(const struct ve_dispatcher *d, uint64_t key, uint32_t sms)
{
	const struct op_est *e = &d->est[est_slot(key)];
	if (e->key != key || !e->ns || !sms)
		return 0;
	return sms >= e->sms ? e->ns : e->ns * e->sms / sms;
}

static void est_learn(struct ve_dispatcher *d, uint64_t key, uint32_t sms, uint64_t ns)
{
	struct op_est *e = &d->est[est_slot(key)];
	if (!ns || !sms)
		return;
	if (e->key != key || e->sms != sms || !e->ns) {
		*e = (struct op_est){.key = key, .ns = ns, .sms = sms};
		return;
	}
	/* Up at once, down slowly: a prediction too short lets too much in. */
	e->ns = ns >= e->ns ? ns : (e->ns * 7 + ns) / 8;
}

/* What a kernel adds to its lane's predicted work: its prediction, or the
 * whole bound while it has none (nothing but lane_admits' minimum joins
 * it then). */
static uint64_t lane_charge(const struct ve_dispatcher *d, uint64_t pred)
{
	return pred ? pred : ahead_bound(d, false);
}

/* Submit-ahead admission (grant mode): a lane holds kernels up to a time,
 * their predicted run times summed, not a count. A count from the lane's
 * average time per op let a training step's GEMMs (ms each) in behind its
 * short elementwise kernels (us each): after 7 us kernels a lane took 21
 * ops, four long ones among them, and a grant taken away waits for all of
 * them (test_dispatch grant_ahead_bound_is_predicted_time_not_count). So
 * while others may want the SMs back (contended) a lane takes a kernel if
 * it is empty, if the predicted work stays within ahead_ns, or if it holds
 * one kernel and the new one is predicted within ahead_ns (one running, one
 * short one queued: the GPU never waits for this thread). A kernel with no
 * prediction runs alone on its lane and is timed there. A drain then waits
 * for the running kernel plus at most ahead_ns of queued work. Alone:
 * ahead_alone_ns of predicted work, at least two kernels. */
static bool lane_admits(const struct ve_dispatcher *d, const struct lane_st *L, uint64_t pred,
			bool contended)
{
	if (!L->inflight)
		return true;
	if (L->inflight >= d->cfg.ahead_max)
		return false;
	if (!contended && L->inflight < 2)
		return true;
	if (!pred)
		return false;
	uint64_t bound = ahead_bound(d, contended);
	return L->pred_ns + pred <= bound || (L->inflight == 1 && pred <= bound);
}

/* A lent entry (ve_grant_plan.lend) takes a kernel predicted to run at most
 * lend_ns there, while its lane holds at most lend_ns of predicted work:
 * taking the lend back then waits for that much at most (plus what a
 * prediction missed). A kernel with no prediction never goes there; it is
 * timed on the client's own grant first. */
static bool lend_admits(const struct ve_dispatcher *d, const struct lane_st *L, uint64_t pred)
{
	if (!pred || pred > d->cfg.lend_ns)
		return false;
	return !L->inflight || (L->inflight < d->cfg.ahead_max && L->pred_ns + pred <= d->cfg.lend_ns);
}

/* Blocks of a launch an SM holds at once: what the launch reported, else a
 * guess from its threads (2048 a SM), 1 to 32. */
static uint32_t resident_blocks(uint32_t bps, uint32_t threads)
{
	if (bps)
		return bps;
	bps = threads ? 2048 / threads : 32;
	return VE_MIN(VE_MAX(bps, 1u), 32u);
}

/* How long a kernel will take on a lent entry, 0 if unknown: as
 * est_predict, but timed on fewer SMs it is scaled by its waves (blocks
 * over the SMs' resident blocks), since a lend is wider than the grant the
 * kernel was timed on and est_predict would keep every kernel off it. A
 * kernel that does not speed up as its waves say (memory-bound) is
 * predicted short once, runs longer than the bound once, and is then timed
 * on the lend (est_learn) and predicted from that. */
static uint64_t lend_predict(const struct ve_dispatcher *d, const struct ve_desc *desc,
			     uint16_t entry)
{
	if (entry >= d->pool->nentries)
		return 0;
	uint32_t sms = d->pool->e[entry].sms;
	const struct op_est *e = &d->est[est_slot(desc->key)];
	if (e->key != desc->key || !e->ns || !sms)
		return 0;
	if (sms <= e->sms)
		return est_predict(d, desc->key, sms);
	uint64_t blocks = ve_desc_blocks(desc),
		 per = resident_blocks(ve_desc_blocks_per_sm(desc), ve_desc_threads(desc));
	uint64_t w_then = (blocks + per * e->sms - 1) / (per * e->sms);
	uint64_t w_now = (blocks + per * sms - 1) / (per * sms);
	if (!w_then)
		return e->ns;
	return e->ns * VE_MAX(w_now, 1ull) / w_then;
}

/* The prediction for a compute op on an entry, 0 if none. */
static uint64_t op_predict(const struct ve_dispatcher *d, const struct ve_desc *desc,
			   uint16_t entry)
{
	return entry < d->pool->nentries ? est_predict(d, desc->key, d->pool->e[entry].sms) : 0;
}

static uint32_t lane_index(const struct ve_dispatcher *d, uint32_t lane)
{
	uint32_t e = VE_LANE_ENTRY(lane), k = VE_LANE_STREAM(lane);
	if (e == VE_LANE_COPY_ENTRY)
		return k < d->cfg.copy_lanes ? d->copy_base + k : NONE32;
	return e < d->pool->nentries && k < d->cfg.lanes_per_entry ? e * d->cfg.lanes_per_entry + k
								    : NONE32;
}

static void unm_add(struct ve_dispatcher *d, uint32_t li)
{
	if (!d->ls[li].on_unm) {
		d->ls[li].on_unm = 1;
		d->unm[d->nunm++] = li;
	}
}

/* A marker now for the lane's deferred ops (they complete with it);
 * -EAGAIN: the backend has no room yet, nothing changed. */
static int flush_lane(struct ve_dispatcher *d, struct lane_st *L)
{
	if (d->b->ops->flush(d->b, L->id) == -EAGAIN)
		return -EAGAIN;
	L->unmarked = 0;
	L->long_tail = 0;
	d->st.flushes++;
	return 0;
}

/* Submits an op on a lane; returns 0 or the backend's error (op untouched).
 * In grant mode the completion marker is deferred on entry lanes (one driver
 * call per op instead of two) and written every mark_every ops; copy lanes
 * mark every op, since work on other lanes usually waits for their copies. */
static int submit_on(struct ve_dispatcher *d, uint32_t client, struct ve_vctx *v, ve_tok tok,
		     const struct ve_desc *desc, uint32_t lane, uint16_t entry, uint8_t cls,
		     uint32_t stream, bool piped, bool granted)
{
	uint32_t i;
	int rc = inflight_alloc(d, &i);
	if (rc)
		return rc;
	uint32_t li = lane_index(d, lane);
	struct lane_st *L = li != NONE32 ? &d->ls[li] : NULL;
	struct inflight *f = &d->inf[i];
	f->tok = tok;
	f->key = desc->key;
	f->client = client;
	f->lane = lane;
	f->lidx = li;
	f->stream = stream;
	f->entry = entry;
	f->cls = cls;
	f->kind = desc->kind;
	f->piped = piped;
	f->granted = granted;
	f->deadline_ns = (desc->flags & VE_DESC_LATENCY) ? desc->deadline_ns : 0;
	f->t_call = d->cfg.trace ? ve_vctx_call_ns(v, tok) : 0;
	/* A marker at least every mark_every ops, and often enough that a lane
	 * holding few ops (long kernels) hears of completions while work is
	 * still queued behind them: a quarter of its room. */
	bool defer = false;
	bool charged = L && cls == VE_CLASS_COMPUTE && entry != VE_LANE_COPY_ENTRY;
	uint64_t pred = !charged ? 0
			: granted && d->grant_mode && entry == d->gc[client].lend
			    ? lend_predict(d, desc, entry)
			    : op_predict(d, desc, entry);
	bool long_tail = false;
	if (L && d->deferral && d->grant_mode && entry != VE_LANE_COPY_ENTRY) {
		/* A kernel behind a long one that went unmarked: that one's
		 * marker first, so its end is heard on its own (lane room) as
		 * every = 1 would have had it. A copy rides on (below). */
		if (L->long_tail && L->unmarked && charged)
			flush_lane(d, L);
		L->long_tail = 0;
		uint32_t every = VE_MIN(d->cfg.mark_every,
					VE_MAX(1u, lane_room(d, L, d->gc[client].contended) / 4));
		defer = L->unmarked + 1 < every;
		/* A kernel predicted to outlast the idle flush twice, on an idle
		 * lane: its marker waits for what its stream puts behind it, a
		 * decode step's read-back, so that one marker after the copy
		 * reports both. Written between the graph and the copy, the
		 * fenced marker held the copy back on the GPU at every token
		 * (event markers, cheaper on the GPU, ran a decode pair 0.25%
		 * faster on an H100). Nothing is heard later for it: the idle
		 * flush, a waiter or a drain write the marker long before the
		 * kernel ends. Not with mark_every 1: every op timed (profiles);
		 * and one in 64 is still marked, a sample of its run time (the
		 * one-in-64 rule below counts every op of the lane, and a loop
		 * of a kernel and a copy can miss the kernel each time). */
		long_tail = d->cfg.long_tail && charged && !L->inflight &&
			    pred >= 2 * d->cfg.idle_flush_ns && d->cfg.mark_every > 1 &&
			    (L->ntails++ % 64) != 0;
		if (long_tail)
			defer = true;
		/* One op in 64 right after a marker gets its own marker too: a
		 * sample of its run time for the profiles (f->solo below). A
		 * kernel with no prediction too: its time is learned from it. */
		if ((L->unmarked == 0 && (L->nsub % 64) == 0) || (charged && !pred))
			defer = false;
	}
	uint64_t t0 = d->b->ops->now(d->b);
	rc = defer ? d->b->ops->submit_deferred(d->b, lane, desc, i)
		   : d->b->ops->submit(d->b, lane, desc, i);
	uint64_t t1 = d->b->ops->now(d->b);
	if (t1 - t0 >= 1000000ull) {
		d->st.slow_submits++;
		d->st.slow_submit_ns += t1 - t0;
	}
	if (t1 - t0 > d->st.submit_ns_max)
		d->st.submit_ns_max = t1 - t0;
	if (rc) {
		inflight_free(d, i);
		d->st.submit_failures++;
		return rc;
	}
	f->solo = !defer && (!L || L->unmarked == 0);
	f->pred_ns = charged ? lane_charge(d, pred) : 0;
	if (L) {
		L->pred_ns += f->pred_ns;
		L->nsub++;
		L->last_submit_ns = t1;
		if (!L->inflight++)
			L->busy_ns = L->last_submit_ns;
		if (defer) {
			L->unmarked++;
			L->long_tail = long_tail;
			d->st.long_tails += long_tail;
			unm_add(d, li);
			d->st.deferred++;
		} else {
			L->unmarked = 0;
			d->st.marks++;
		}
	}
	if (granted) {
		d->st.granted++;
		if (entry == d->gc[client].lend)
			d->st.lend_binds++;
		d->gc[client].binds++;
		d->gc[client].ncompute++;
		d->ent_inflight[client * d->pool->nentries + entry]++;
	}
	/* In the driver's hands now: a ready op becomes DISPATCHED; a
	 * pipelined one, DISPATCHED since its claim, is no longer in flight
	 * to the driver (ve_vctx_submit_self may queue behind it). */
	if (!piped) {
		ve_vctx_dispatched(v, tok, lane);
	} else {
		ve_vctx_pipeline_sent(v, tok);
		if (!d->grant_mode)
			d->pipe_count[client][stream % PIPE_STREAMS]++;
	}
	d->st.submitted++;
	if (d->cfg.on_submit)
		d->cfg.on_submit(d->cfg.observer_arg, client, tok, lane, desc);
	return 0;
}

/* Reports every deferred completion of the lanes that qualify: all of them
 * (a thread waits), those of one entry (its grant ended: the coordinator
 * waits for the drain), or those idle long enough. */
static void flush_lanes(struct ve_dispatcher *d, bool all, uint16_t entry, uint64_t now)
{
	for (uint32_t j = 0; j < d->nunm;) {
		uint32_t li = d->unm[j];
		struct lane_st *L = &d->ls[li];
		/* Idle passes flush only lanes whose work may end soon: a long
		 * kernel's marker waits for its read-back (submit_on) until the
		 * idle flush's time. Not where time stands while nothing runs
		 * (the sim's virtual clock): a kernel shorter than predicted and
		 * done, its completion held for the marker, would wait for a
		 * timer that never fires. */
		bool go = all || (entry != VE_POOL_NONE && VE_LANE_ENTRY(L->id) == entry) ||
			  now - L->last_submit_ns >= d->cfg.idle_flush_ns ||
			  (d->idle_passes >= IDLE_FLUSH_PASSES && (!L->long_tail || d->virt_clock));
		if (L->unmarked && !go) {
			j++;
			continue;
		}
		if (L->unmarked && flush_lane(d, L) == -EAGAIN) {
			j++;
			continue;
		}
		L->on_unm = 0;
		d->unm[j] = d->unm[--d->nunm];
	}
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
	if (ve_desc_class(desc) == VE_CLASS_COMPUTE) { /* a kernel, or a graph launch */
		o->blocks = ve_desc_blocks(desc);
		o->threads = ve_desc_threads(desc);
		o->min_sms = ve_desc_min_sms(desc);
		o->blocks_per_sm = ve_desc_blocks_per_sm(desc);
	}
	if ((cflags & VE_READY_LATENCY) || (desc->flags & VE_DESC_LATENCY))
		o->flags |= VE_READY_LATENCY;
	if (desc->flags & VE_DESC_COOPERATIVE)
		o->flags |= VE_READY_COOPERATIVE;
	o->deadline_ns = desc->deadline_ns;
}

/* ------------------------------------------------------------------ grant mode */

uint32_t ve__launch_sms(uint64_t blocks, uint32_t bps, uint32_t threads, uint32_t total,
			bool spread)
{
	bps = resident_blocks(bps, threads);
	uint64_t need = spread ? blocks : (blocks + bps - 1) / bps;
	return need >= total ? total : (uint32_t)VE_MAX(need, 1u);
}

/* SMs a launch could use at once (ve__launch_sms). */
static uint32_t sm_demand(const struct ve_dispatcher *d, const struct ve_desc *desc)
{
	return ve__launch_sms(ve_desc_blocks(desc), ve_desc_blocks_per_sm(desc),
			      ve_desc_threads(desc), d->pool->e[d->pool->root].sms,
			      d->cfg.want_spread);
}

static void note_demand(struct ve_dispatcher *d, uint32_t c, const struct ve_desc *desc,
			uint64_t now)
{
	struct gclient *g = &d->gc[c];
	uint32_t w = sm_demand(d, desc);
	/* Decaying max: halves every 5 ms without a kernel as wide. */
	while (g->want_sms && now - g->want_ns > 5000000ull) {
		g->want_sms /= 2;
		g->want_ns += 5000000ull;
	}
	if (w >= g->want_sms) {
		g->want_sms = w;
		g->want_ns = now;
	}
}

/* The lane a client's stream uses on an entry. Clients that share an entry
 * (a shared grant) start from different lanes, so their streams do not
 * queue behind each other. */
static uint32_t grant_lane(const struct ve_dispatcher *d, uint32_t c, uint32_t stream,
			   uint16_t entry)
{
	return VE_LANE(entry, (stream + c * 7u) % d->cfg.lanes_per_entry);
}

/* Binds a ready compute op to its client's grant and submits it. 0 when
 * submitted, 1 when it must wait (no grant, or too narrow, or a transient
 * backend refusal). */
static int bind_local(struct ve_dispatcher *d, uint32_t c, ve_tok tok, uint32_t stream,
		      uint64_t now)
{
	struct client_slot *cs = &d->cl[c];
	struct gclient *g = &d->gc[c];
	if (g->hold_until) { /* VE_PHASE moves this step (ready_granted) */
		if (now < g->hold_until)
			return 1;
		g->hold_until = 0;
	}
	const struct ve_desc *desc = ve_vctx_desc(cs->v, tok);
	if (!desc)
		return 0; /* gone (detached vctx): nothing to run */
	uint16_t e = g->entry;
	uint32_t min_sms = ve_desc_min_sms(desc);
	/* A short kernel goes to the lent entry, if any (more SMs, and they are
	 * idle otherwise); the rest to the grant. */
	if (g->lend != VE_POOL_NONE && e != VE_POOL_NONE && d->pool->e[g->lend].sms >= min_sms) {
		uint32_t li = lane_index(d, grant_lane(d, c, stream, g->lend));
		if (li != NONE32 && lend_admits(d, &d->ls[li], lend_predict(d, desc, g->lend)))
			e = g->lend;
	}
	if (e == VE_POOL_NONE || d->pool->e[e].sms < min_sms) {
		if (min_sms > g->min_sms)
			g->min_sms = min_sms;
		if ((desc->flags & VE_DESC_LATENCY) && desc->deadline_ns &&
		    (!g->deadline_ns || desc->deadline_ns < g->deadline_ns))
			g->deadline_ns = desc->deadline_ns;
		return 1;
	}
	int rc = submit_on(d, c, cs->v, tok, desc, grant_lane(d, c, stream, e), e,
			   VE_CLASS_COMPUTE, stream, false, true);
	if (rc)
		return 1;
	note_demand(d, c, desc, now);
	d->st.local_binds++;
	d->st.bound++;
	return 0;
}

static bool wq_push(struct ve_dispatcher *d, uint32_t c, ve_tok tok, uint32_t stream,
		    uint64_t since)
{
	if (d->wq_n == d->wq_cap)
		return false;
	d->wq[(d->wq_head + d->wq_n) % d->wq_cap] = (struct wop){tok, c, stream, since};
	d->wq_n++;
	d->gc[c].nwait++;
	return true;
}

/* The bind deadline in grant mode: an op that waited longer than the
 * watchdog for a grant that can run it goes to the root entry, the safe
 * fallback (as safe mode would run it). Counted as bound to a grant, so its
 * SMs (all of them) are reported busy until it completes. 0 when submitted. */
static int watchdog_fallback(struct ve_dispatcher *d, const struct wop *w, uint64_t now)
{
	if (!d->cfg.watchdog_ns || now - w->since_ns < d->cfg.watchdog_ns)
		return 1;
	struct client_slot *cs = &d->cl[w->client];
	const struct ve_desc *desc = ve_vctx_desc(cs->v, w->tok);
	uint16_t root = d->pool->root;
	if (!desc)
		return 0;
	if (submit_on(d, w->client, cs->v, w->tok, desc, grant_lane(d, w->client, w->stream, root),
		      root, VE_CLASS_COMPUTE, w->stream, false, true))
		return 1;
	d->st.watchdog_binds++;
	d->st.bound++;
	VE_WARN("watchdog: op %llx of client %u waited %.0f ms for a grant (grant %d); submitted "
		"on the whole GPU (entry %u), the safe fallback; %llu so far",
		(unsigned long long)w->tok, w->client, (double)(now - w->since_ns) / 1e6,
		d->gc[w->client].entry == VE_POOL_NONE ? -1 : (int)d->gc[w->client].entry, root,
		(unsigned long long)d->st.watchdog_binds);
	return 0;
}

/* Ops that waited for a grant, oldest first; each is tried once a pass. */
static int drain_waiting(struct ve_dispatcher *d, uint64_t now)
{
	int moved = 0;
	for (uint32_t c = 0; c < VE_COORD_MAX_CLIENTS; c++) {
		d->gc[c].min_sms = 0;
		d->gc[c].deadline_ns = 0;
	}
	for (uint32_t n = d->wq_n; n > 0; n--) {
		struct wop w = d->wq[d->wq_head];
		d->wq_head = (d->wq_head + 1) % d->wq_cap;
		d->wq_n--;
		d->gc[w.client].nwait--;
		if (!d->cl[w.client].active)
			continue;
		if (bind_local(d, w.client, w.tok, w.stream, now) == 0 ||
		    watchdog_fallback(d, &w, now) == 0)
			moved++;
		else
			wq_push(d, w.client, w.tok, w.stream, w.since_ns); /* room: one just left */
	}
	return moved;
}

/* A compute op ready in grant mode: bound here, or queued for a grant. */
static int ready_granted(struct ve_dispatcher *d, uint32_t c, const struct ve_ready_info *ri,
			 uint64_t now)
{
	d->st.popped++;
	struct gclient *g = &d->gc[c];
	/* A step starts: the first op after the client had nothing running
	 * and nothing waiting (VE_PHASE, phase.h; a host gap just ended). */
	if (d->cfg.phase && !g->ncompute && !g->nwait && !g->hold_until) {
		uint64_t h = ve__phase_step(&g->phase, now, g->others > 0);
		if (h) {
			g->hold_until = now + h;
			d->st.phase_holds++;
			d->st.phase_hold_ns += h;
		}
	}
	if (bind_local(d, c, ri->tok, ri->stream_idx, now) == 0)
		return 0;
	if (!wq_push(d, c, ri->tok, ri->stream_idx, now))
		return -EAGAIN;
	if (!g->hold_until)
		d->st.grant_waits++;
	return 0;
}

/* Takes the client's grant from the coordinator. A grant that ended has its
 * lanes' deferred completions reported at once: the coordinator hands its
 * SMs to someone else only once this client reports them drained. */
static void grant_refresh(struct ve_dispatcher *d, uint32_t c, uint64_t now)
{
	uint16_t e, l = VE_POOL_NONE;
	uint64_t gen;
	struct gclient *g = &d->gc[c];
	if (L_CALL(d, grant, c, &e, &l, &gen))
		return;
	g->contended = d->link.ops->contended ? L_CALL(d, contended, c) : true;
	g->others = d->link.ops->others ? L_CALL(d, others, c) : 0;
	if (gen == g->gen)
		return;
	if (g->entry != VE_POOL_NONE && g->entry != e && g->entry != l)
		flush_lanes(d, false, g->entry, now);
	if (g->lend != VE_POOL_NONE && g->lend != l && g->lend != e)
		flush_lanes(d, false, g->lend, now);
	g->entry = e;
	g->lend = l;
	g->gen = gen;
	d->st.grant_changes++;
	if (d->cfg.trace)
		ve_trace_grant(d->cfg.trace, c, e, e < d->pool->nentries ? d->pool->e[e].sms : 0, now);
}

static void grant_report(struct ve_dispatcher *d, uint32_t c, uint64_t now)
{
	struct gclient *g = &d->gc[c];
	const struct ve_pool *p = d->pool;
	if (g->zombie) {
		g->entry = VE_POOL_NONE;
		g->zombie = g->ncompute > 0; /* this report says so when it is the last */
	}
	uint64_t busy = g->entry != VE_POOL_NONE ? p->e[g->entry].leaves : 0;
	if (g->ncompute) {
		const uint32_t *ei = &d->ent_inflight[c * p->nentries];
		for (uint32_t e = 0; e < p->nentries; e++)
			if (ei[e])
				busy |= p->e[e].leaves;
	}
	/* Work now, or work that ended since the last report (it ran until
	 * about now: between two dispatcher passes a kernel is not seen to
	 * end, and a report at its completion would otherwise date the gap
	 * that follows from the pass before it, a whole kernel earlier). */
	if (g->nwait || g->ncompute || g->done != g->active_done) {
		g->active_ns = now;
		g->active_done = g->done;
	}
	struct ve_grant_report r = {
		.demand = {.ready = g->nwait,
			   .inflight = g->ncompute,
			   .want_sms = g->want_sms,
			   .min_sms = g->min_sms,
			   .active_ns = g->active_ns,
			   .deadline_ns = g->deadline_ns,
			   .entry = g->entry,
			   .op_us = (uint16_t)VE_MIN(g->op_ns / 1000, 65535ull)},
		.ack_gen = g->gen,
		.busy_leaves = busy,
		.binds = g->binds,
		.done = g->done,
		.late = g->late,
	};
	if (g->nwait && (g->entry == VE_POOL_NONE || g->min_sms > p->e[g->entry].sms))
		r.demand.flags |= VE_DEMAND_WAITING;
	if (d->cl[c].flags & VE_READY_LATENCY)
		r.demand.flags |= VE_DEMAND_LATENCY;
	if (g->late_ns && now >= g->late_ns && now - g->late_ns < VE_LATE_WINDOW_NS)
		r.demand.flags |= VE_DEMAND_LATE;
	L_CALL(d, report, c, &r);
}

/* ------------------------------------------------------------------ passes */

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
			switch (ri->cls) {
			case VE_CLASS_COMPUTE: {
				if (d->grant_mode) {
					rc = ready_granted(d, c, ri, now);
					break;
				}
				d->st.popped++;
				struct ve_ready_op o;
				ready_op_from(&o, ri, desc, c, cs->flags, now);
				rc = L_CALL(d, ready, &o);
				break;
			}
			case VE_CLASS_COPY:
				/* A ready copy goes to a copy lane, never to a lane other
				 * streams' kernels may hold (a timed event record there
				 * would wait for unrelated work); copies that follow a
				 * kernel of their stream ride behind it (drain_pipeline). */
				d->st.popped++;
				rc = submit_on(d, c, cs->v, ri->tok, desc,
					       VE_LANE(VE_LANE_COPY_ENTRY,
						       ri->stream_idx % d->cfg.copy_lanes),
					       VE_LANE_COPY_ENTRY, VE_CLASS_COPY, ri->stream_idx, false,
					       false);
				if (!rc)
					d->st.copies++;
				break;
			case VE_CLASS_HOST:
				d->st.popped++;
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

static void complete_batch(struct ve_dispatcher *d)
{
	if (d->ncb)
		ve_vctx_complete_many(d->cb_v, d->cb_tok, d->cb_status, d->cb_t, d->ncb);
	d->ncb = 0;
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
	if (f.lidx != NONE32) {
		/* Time per op: the interval since the lane's previous report, or since
		 * this op was submitted if the lane was idle, spread over every op
		 * reported by the same marker (each after the first adds 0). */
		struct lane_st *L = &d->ls[f.lidx];
		L->inflight--;
		L->stuck = 0;
		uint64_t from = VE_MAX(L->last_done_ns, cp->t_submit_ns);
		uint64_t dt = cp->t_end_ns > from ? cp->t_end_ns - from : 0;
		L->pred_ns = L->pred_ns > f.pred_ns ? L->pred_ns - f.pred_ns : 0;
		/* A kernel with a marker of its own right after another marker:
		 * dt is its own time (lane FIFO: it started when the one before
		 * it ended, or when submitted), what lane_admits predicts from. */
		if (f.solo && f.cls == VE_CLASS_COMPUTE && cp->status == 0 &&
		    f.entry < d->pool->nentries)
			est_learn(d, f.key, d->pool->e[f.entry].sms, dt);
		/* The first measurement replaces the guess outright. */
		L->avg_ns = L->measured ? (L->avg_ns * 15 + dt) / 16 : VE_MAX(dt, 1ull);
		L->measured = true;
		if (f.granted)
			d->gc[f.client].op_ns = (d->gc[f.client].op_ns * 63 + dt) / 64;
		if (cp->t_end_ns > L->last_done_ns)
			L->last_done_ns = cp->t_end_ns;
	}
	bool late = f.deadline_ns && cp->t_end_ns > f.deadline_ns;
	d->st.late_ops += late;
	/* Counted for ved's status whatever bound the op (a copy too), as in
	 * the exit summary; only a late kernel of the grant raises the flag. */
	d->gc[f.client].late += late;
	if (f.granted) {
		d->gc[f.client].done++;
		if (late)
			d->gc[f.client].late_ns = VE_MAX(cp->t_end_ns, 1ull);
		uint32_t *ei = &d->ent_inflight[f.client * d->pool->nentries + f.entry];
		/* A profile sample: timed by its own marker, alone on its entry. */
		if (f.solo && *ei == 1 && cp->status == 0 && cp->t_end_ns > cp->t_start_ns &&
		    d->link.ops->observe)
			L_CALL(d, observe, f.client, f.entry, f.key, cp->t_end_ns - cp->t_start_ns);
		d->gc[f.client].ncompute--;
		(*ei)--;
	}
	if (f.piped && d->pipe_count[f.client][f.stream % PIPE_STREAMS])
		d->pipe_count[f.client][f.stream % PIPE_STREAMS]--;
	struct client_slot *cs = &d->cl[f.client];
	if (d->cfg.trace) {
		struct ve_trace_event ev = {
			.t_start_ns = cp->t_start_ns,
			.t_end_ns = cp->t_end_ns,
			.t_submit_ns = cp->t_submit_ns,
			.t_call_ns = f.t_call,
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
	if (f.cls == VE_CLASS_COMPUTE && !f.granted)
		L_CALL(d, done, f.client, f.entry, f.key,
			      cp->t_end_ns > cp->t_start_ns ? cp->t_end_ns - cp->t_start_ns : 0);
	if (d->cfg.on_complete)
		d->cfg.on_complete(d->cfg.observer_arg, f.client, f.tok, f.lane, cp->status);
	/* Completing the token last (a waiter released by it sees the entry
	 * already accounted for), and in a batch per client under one vctx
	 * lock (complete_batch). A client detached meanwhile still owns its vctx. */
	uint32_t k = d->ncb;
	if (k && d->cb_client != f.client)
		complete_batch(d);
	k = d->ncb;
	d->cb_client = f.client;
	d->cb_v = cs->v;
	d->cb_tok[k] = f.tok;
	d->cb_status[k] = cp->status;
	d->cb_t[k] = cp->t_end_ns;
	d->ncb = k + 1;
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
				       VE_CLASS_COMPUTE, bd->op.stream, false, false);
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
static void watchdog_lanes(struct ve_dispatcher *d, uint64_t now);

/* Host-polled calls: each asked once a pass whether it is done. */
static int poll_calls(struct ve_dispatcher *d)
{
	int moved = 0;
	for (uint32_t i = 0; i < d->npolled;) {
		struct polled *p = &d->polled[i];
		const struct ve_desc *desc = ve_vctx_desc(p->v, p->tok);
		int rc = desc ? desc->u.call.fn(0, desc->payload, desc->payload_len) : 0;
		if (rc == -EBUSY) {
			i++;
			continue;
		}
		if (desc)
			ve_vctx_complete(p->v, p->tok, rc, d->b->ops->now(d->b));
		*p = d->polled[--d->npolled];
		moved++;
	}
	return moved;
}

/* How many ops a lane may hold: ahead_ns of its recent time per op, at
 * least 2 (one running, one queued behind it so the GPU never waits for
 * this thread), at most ahead_max. */

/* 0 submitted, 1 hold it back (retry next pass), -1 let it become ready. */
static int try_candidate(struct ve_dispatcher *d, uint32_t c, const struct ve_pipe_info *pi)
{
	struct client_slot *cs = &d->cl[c];
	uint32_t entry = VE_LANE_ENTRY(pi->lane);
	bool compute = pi->cls == VE_CLASS_COMPUTE;
	if (compute && entry == VE_LANE_COPY_ENTRY)
		return -1; /* a kernel never runs on a copy lane (all SMs) */
	const struct ve_desc *desc = ve_vctx_desc(cs->v, pi->tok);
	if (!desc)
		return -1;
	if (compute && ve_desc_min_sms(desc) > d->pool->e[entry].sms)
		return -1;
	uint32_t li = lane_index(d, pi->lane);
	if (d->grant_mode) {
		/* Kernels only on the client's own grant: an entry whose grant
		 * ended takes no new kernel (its SMs are being handed over). A
		 * copy needs no SMs and may still follow its kernel there. */
		if (!d->cfg.ahead_ns || li == NONE32)
			return -1;
		bool lent = entry == d->gc[c].lend && entry != d->gc[c].entry &&
			    d->gc[c].entry != VE_POOL_NONE;
		if (compute && entry != d->gc[c].entry && !lent)
			return -1;
		/* The bound is on kernels (it is what a drain waits for); a copy
		 * rides behind its kernel at once, which also keeps a stream-memory
		 * write from ever landing behind a wait it must release. On a lent
		 * entry only short kernels follow (lend_admits); a longer one
		 * becomes ready once its predecessor is done and binds to the
		 * grant (bind_local). */
		uint64_t pred = !compute ? 0
				: lent	 ? lend_predict(d, desc, (uint16_t)entry)
					 : op_predict(d, desc, (uint16_t)entry);
		if (compute && lent && !lend_admits(d, &d->ls[li], pred)) {
			if (pred && pred <= d->cfg.lend_ns) {
				d->st.ahead_full++;
				return 1; /* short, the lane is full: retry */
			}
			return -1;
		}
		if (compute && !lent && !lane_admits(d, &d->ls[li], pred, d->gc[c].contended)) {
			d->st.ahead_full++;
			return 1;
		}
		if (ve_vctx_pipeline_claim(cs->v, pi->tok, pi->behind))
			return -1;
		int rc = submit_on(d, c, cs->v, pi->tok, desc, pi->lane, (uint16_t)entry,
				   compute ? VE_CLASS_COMPUTE : VE_CLASS_COPY, pi->stream_idx, true,
				   compute);
		if (rc) {
			ve_vctx_pipeline_unclaim(cs->v, pi->tok);
			return -1;
		}
		if (compute)
			note_demand(d, c, desc, d->b->ops->now(d->b));
		d->st.pipelined++;
		return 0;
	}
	if (d->pipe_count[c][pi->stream_idx % PIPE_STREAMS] >= d->cfg.window) {
		d->st.ahead_full++;
		return 1;
	}
	uint16_t *run = &d->pipe_run[c][pi->stream_idx % PIPE_STREAMS];
	if (compute) {
		struct ve_ready_op o;
		struct ve_ready_info ri = {.tok = pi->tok, .stream_idx = pi->stream_idx,
					   .priority = pi->priority};
		ready_op_from(&o, &ri, desc, c, cs->flags, 0);
		/* Others active: after 'budget' pipelined ops the stream's next op
		 * goes through the policy again, so allocations follow demand. */
		int pr = L_CALL(d, pipeline, c, (uint16_t)entry, &o, *run < d->cfg.pipe_budget);
		if (pr < 0)
			return -1;
	}
	if (ve_vctx_pipeline_claim(cs->v, pi->tok, pi->behind)) {
		if (compute)
			L_CALL(d, pipeline_cancel, c, (uint16_t)entry, pi->tok);
		return -1;
	}
	int rc = submit_on(d, c, cs->v, pi->tok, desc, pi->lane, (uint16_t)entry,
			   compute ? VE_CLASS_COMPUTE : VE_CLASS_COPY, pi->stream_idx, true, false);
	if (rc) {
		ve_vctx_pipeline_unclaim(cs->v, pi->tok);
		if (compute)
			L_CALL(d, pipeline_cancel, c, (uint16_t)entry, pi->tok);
		return -1;
	}
	if (compute && *run < UINT16_MAX)
		(*run)++;
	d->st.pipelined++;
	return 0;
}

static void hold_candidate(struct ve_dispatcher *d, uint32_t c, const struct ve_pipe_info *pi)
{
	/* A candidate not held becomes ready when its predecessor completes:
	 * slower, never wrong. */
	if (d->ndq < DQ_CAP)
		d->dq[d->ndq++] = (struct held){.pi = *pi, .client = c};
}

/* Submit-ahead: candidates right behind their in-flight predecessor on its
 * lane (lane FIFO keeps the edge). Candidates a full lane holds back are
 * retried, oldest first, before new ones. */
static int drain_pipeline(struct ve_dispatcher *d)
{
	int moved = 0;
	uint32_t n = d->ndq;
	d->ndq = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct held h = d->dq[i];
		if (!d->cl[h.client].active)
			continue;
		int r = try_candidate(d, h.client, &h.pi);
		if (r == 0)
			moved++;
		else if (r > 0)
			hold_candidate(d, h.client, &h.pi);
	}
	for (uint32_t c = 0; c < VE_COORD_MAX_CLIENTS; c++) {
		if (!d->cl[c].active)
			continue;
		/* A chain offers its next op only once this one is claimed: keep
		 * popping, so a dependent chain moves at driver speed, not one op
		 * per pass. */
		for (int round = 0; round < 16; round++) {
			int k = ve_vctx_pop_pipeline(d->cl[c].v, d->pinfo, BATCH);
			int took = 0;
			for (int j = 0; j < k; j++) {
				int r = try_candidate(d, c, &d->pinfo[j]);
				if (r == 0)
					took++;
				else if (r > 0)
					hold_candidate(d, c, &d->pinfo[j]);
			}
			moved += took;
			if (k < 1 || !took)
				break;
		}
	}
	return moved;
}

/* Whether an application thread of an attached client waits for its work
 * right now; with 'waits', also the sum of the clients' waits begun, ever
 * (ve_vctx_waits: a change says a new wait began). Lock-free. */
static bool clients_waiting(struct ve_dispatcher *d, uint32_t *waits)
{
	bool waiters = false;
	for (uint32_t c = 0; c < VE_COORD_MAX_CLIENTS && (waits || !waiters); c++) {
		if (!d->cl[c].active)
			continue;
		waiters |= ve_vctx_has_waiters(d->cl[c].v);
		if (waits)
			*waits += ve_vctx_waits(d->cl[c].v);
	}
	return waiters;
}

int ve_dispatcher_poll(struct ve_dispatcher *d)
{
	int moved = 0, submitted = 0;
	d->st.passes++;
	uint64_t now = d->b->ops->now(d->b);
	L_CALL(d, set_now, now);
	for (;;) {
		int n = d->b->ops->poll(d->b, d->comp, BATCH);
		for (int i = 0; i < n; i++)
			handle_completion(d, &d->comp[i]);
		complete_batch(d); /* before the next poll: the arrays hold one batch */
		moved += n > 0 ? n : 0;
		if (n < BATCH)
			break;
	}
	/* The mode is the coordinator's (ved may change it, e.g. in safe mode);
	 * with no client attached the last one holds (detached clients drain). */
	bool grant = d->grant_mode, any = false;
	for (uint32_t c = 0; c < VE_COORD_MAX_CLIENTS; c++) {
		if (!d->cl[c].active)
			continue;
		if (!any) {
			uint16_t e, l;
			uint64_t g;
			any = true;
			grant = d->link.ops->grant && L_CALL(d, grant, c, &e, &l, &g) == 0;
		}
		if (grant)
			grant_refresh(d, c, now);
	}
	if (!grant && d->wq_n) {
		/* Back to per-op binding: what waited for a grant goes to the
		 * coordinator (the ops stay popped; ready order per client kept). */
		while (d->wq_n) {
			struct wop w = d->wq[d->wq_head];
			const struct ve_desc *desc =
				d->cl[w.client].active ? ve_vctx_desc(d->cl[w.client].v, w.tok) : NULL;
			if (desc) {
				struct ve_ready_op o;
				struct ve_ready_info ri = {.tok = w.tok, .stream_idx = w.stream};
				ready_op_from(&o, &ri, desc, w.client, d->cl[w.client].flags, now);
				if (L_CALL(d, ready, &o) == -EAGAIN)
					break;
			}
			d->wq_head = (d->wq_head + 1) % d->wq_cap;
			d->wq_n--;
			d->gc[w.client].nwait--;
		}
	}
	d->grant_mode = grant;
	if (grant)
		submitted += drain_waiting(d, now);
	for (uint32_t c = 0; c < VE_COORD_MAX_CLIENTS; c++)
		if (d->cl[c].active)
			submitted += drain_client(d, c, now);
	moved += drain_hints(d);
	if (d->npolled)
		moved += poll_calls(d);
	if (d->cfg.window || (grant && d->cfg.ahead_ns) || d->ndq)
		submitted += drain_pipeline(d);
	/* In grant mode too while the link still holds ops handed to it per op:
	 * ved lost, its waiting ops went to the safe-mode coordinator, which
	 * grants. Nothing but schedule binds them (they stay popped). */
	if (!grant || L_CALL(d, pending)) {
		for (;;) {
			int nb = L_CALL(d, schedule, d->bind, BATCH);
			if (nb <= 0)
				break;
			submitted += submit_bindings(d, nb);
			if (nb < BATCH)
				break;
		}
	}
	moved += submitted;
	if (d->nunm) {
		bool waiters = clients_waiting(d, NULL);
		d->idle_passes = submitted ? 0 : d->idle_passes + 1;
		flush_lanes(d, waiters, VE_POOL_NONE, now);
	}
	if (grant) {
		for (uint32_t c = 0; c < VE_COORD_MAX_CLIENTS; c++)
			if (d->cl[c].active || d->gc[c].zombie)
				grant_report(d, c, now);
		L_CALL(d, tick);
	}
	if (d->cfg.watchdog_ns && d->ninflight)
		watchdog_lanes(d, now);
	return moved;
}

/* A lane with work and no completion for the whole deadline: the device is
 * stuck there, or an op waits for something that never comes. Said once per
 * episode, with the dispatcher's state (what waits, what runs where). */
static void watchdog_lanes(struct ve_dispatcher *d, uint64_t now)
{
	if (now < d->wd_next_ns)
		return;
	d->wd_next_ns = now + d->cfg.watchdog_ns / 4 + 1;
	for (uint32_t i = 0; i < d->nls; i++) {
		struct lane_st *L = &d->ls[i];
		uint64_t since = VE_MAX(L->last_done_ns, L->busy_ns);
		if (!L->inflight || L->stuck || now <= since || now - since < d->cfg.watchdog_ns)
			continue;
		L->stuck = 1;
		d->st.stuck_lanes++;
		char *text = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&text, &len);
		if (f) {
			ve_dispatcher_dump(d, f);
			fclose(f);
		}
		VE_WARN("watchdog: lane %#x has %u ops in flight and no completion for %.0f ms; "
			"%.700s",
			L->id, L->inflight, (double)(now - since) / 1e6, text ? text : "");
		free(text);
	}
}

bool ve_dispatcher_quiescent(struct ve_dispatcher *d)
{
	if (d->ninflight || atomic_load(&d->host_busy) || d->wq_n || d->ndq || d->npolled)
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

uint32_t ve_dispatcher_waiting(struct ve_dispatcher *d)
{
	return d->wq_n;
}

/* ------------------------------------------------------------------ thread */

/* Whether to keep polling without a sleep with work in flight: an
 * application thread waits for it and spins itself (wait_spin_ns, from
 * when its wait began; a wait that began later restarts the clock).
 * Real-clock backends. */
struct wait_spin {
	uint32_t waits; /* sum of the clients' ve_vctx_waits when last seen */
	uint64_t since; /* when that sum last changed */
};

static bool waiter_spin(struct ve_dispatcher *d, struct wait_spin *ws, bool *waiters_seen)
{
	if (d->virt_clock)
		return false;
	uint32_t waits = 0;
	bool waiters = clients_waiting(d, &waits);
	*waiters_seen = waiters;
	if (!waiters || !d->cfg.wait_spin_ns)
		return false;
	uint64_t now = ve__now_ns();
	if (waits != ws->waits || !ws->since) {
		ws->waits = waits;
		ws->since = now;
	}
	return now - ws->since < d->cfg.wait_spin_ns;
}

static void *dispatcher_main(void *arg)
{
	struct ve_dispatcher *d = arg;
	uint32_t idle = 0;
	uint64_t idle_since = 0; /* when nothing was last in flight or ready; 0 = busy */
	struct wait_spin ws = {0, 0};
	/* Short sleeps between polls must stay short: the default 50 us timer
	 * slack turns a 20 us sleep into ~70 us of completion latency. */
	prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
	/* Busy from here on (the link said idle while the pool was created,
	 * ve_runtime_create): stored before this thread first reads its grant. */
	if (d->link.ops->idle)
		L_CALL(d, idle, false);
	while (atomic_load_explicit(&d->running, memory_order_acquire)) {
		uint32_t seen = atomic_load_explicit(&d->wake_word, memory_order_acquire);
		if (ve_dispatcher_poll(d) > 0) {
			idle = 0;
			idle_since = 0;
			continue;
		}
		if (d->ninflight || atomic_load(&d->host_busy) || L_CALL(d, pending) || d->wq_n ||
		    d->ndq || d->npolled) {
			idle_since = 0;
			/* Work on the GPU, bindings due from the coordinator (ved) or
			 * ops waiting for a grant: spin a while, then poll at a bounded
			 * interval so a long kernel does not cost a whole core. The
			 * sleep is on the wake word: new work or a waiting thread cuts
			 * it short. */
			bool waited = false;
			if (++idle < SPIN_PASSES || waiter_spin(d, &ws, &waited)) {
				ve__cpu_relax();
			} else if (d->virt_clock) {
				d->b->ops->wait(d->b, INFLIGHT_WAIT);
			} else {
				d->st.sleeps++;
				d->st.wait_sleeps += waited;
				/* Announced, so that a notify (new work, a thread
				 * that starts waiting) wakes it: the word's
				 * change alone ends only a wait that has not yet
				 * begun, and an op submitted behind a long kernel
				 * waited out the whole interval. */
				atomic_store_explicit(&d->sleeping, 1, memory_order_seq_cst);
				if (atomic_load_explicit(&d->wake_word, memory_order_seq_cst) == seen)
					ve__futex_wait(&d->wake_word, seen, d->cfg.poll_ns, 1);
				atomic_store_explicit(&d->sleeping, 0, memory_order_relaxed);
			}
			continue;
		}
		/* Idle: spin a while first (see idle_spin_ns; the coordinator is
		 * told only when we sleep, so a short host gap keeps the grant). */
		if (d->cfg.idle_spin_ns && !d->virt_clock) {
			uint64_t now = ve__now_ns();
			if (!idle_since)
				idle_since = now;
			if (now - idle_since < d->cfg.idle_spin_ns) {
				ve__cpu_relax();
				continue;
			}
		}
		idle_since = 0;
		/* Idle: sleep until a vctx says it has ready work. The re-check of
		 * wake_word after announcing we sleep closes the lost-wake-up race
		 * with ve_dispatcher_notify (which reads 'sleeping' after bumping). */
		atomic_store_explicit(&d->sleeping, 1, memory_order_seq_cst);
		if (atomic_load_explicit(&d->wake_word, memory_order_seq_cst) == seen) {
			/* Nothing in flight: the coordinator may hand this process's
			 * SMs on without waiting for a report from it (link idle). */
			if (d->link.ops->idle)
				L_CALL(d, idle, true);
			d->st.sleeps++;
			d->st.idle_sleeps++;
			ve__futex_wait(&d->wake_word, seen, IDLE_WAIT, 1);
			d->st.wakeups++;
			if (d->link.ops->idle)
				L_CALL(d, idle, false);
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
	/* Named, so top -H and /proc/PID/task/ show which thread is ours
	 * (and on which CPU it runs beside the application's). */
	pthread_setname_np(d->thr, "ve-dispatch");
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

void ve_dispatcher_dump(struct ve_dispatcher *d, FILE *f)
{
	fprintf(f, "dispatcher: %s mode, %u in flight, %u waiting for a grant, %u held back\n",
		d->grant_mode ? "grant" : "per-op", d->ninflight, d->wq_n, d->ndq);
	for (uint32_t c = 0; c < VE_COORD_MAX_CLIENTS; c++) {
		const struct gclient *g = &d->gc[c];
		if (!d->cl[c].active && !g->zombie)
			continue;
		fprintf(f,
			"  client %u%s: grant %d (gen %llu), %u waiting (widest needs %u SMs), %u "
			"compute in flight, wants %u SMs\n",
			c, g->zombie ? " (detached)" : "",
			g->entry == VE_POOL_NONE ? -1 : (int)g->entry, (unsigned long long)g->gen,
			g->nwait, g->min_sms, g->ncompute, g->want_sms);
	}
	for (uint32_t i = 0; i < d->nls; i++)
		if (d->ls[i].inflight || d->ls[i].unmarked)
			fprintf(f,
				"  lane %#x: %u in flight (%.1f us predicted), %u unmarked, %.1f us "
				"per op\n",
				d->ls[i].id, d->ls[i].inflight, (double)d->ls[i].pred_ns / 1e3,
				d->ls[i].unmarked, (double)d->ls[i].avg_ns / 1e3);
}

void ve_dispatcher_stats(struct ve_dispatcher *d, struct ve_dispatcher_stats *st)
{
	*st = d->st;
	st->inflight = d->ninflight;
	for (uint32_t c = 0; c < VE_COORD_MAX_CLIENTS; c++) {
		st->phase_tries += d->gc[c].phase.tries;
		st->phase_kept += d->gc[c].phase.kept;
	}
}
