/* SPDX-License-Identifier: MIT */
/*
 * fakecuda stream engine: operations, per-stream worker threads, the legacy
 * and per-thread default streams, events, host functions, stream memory
 * operations and synchronization.
 *
 * An operation (struct fc_op) becomes runnable when it reaches the head of
 * its stream's FIFO and all its dependencies (ops of other streams: event
 * waits, legacy-stream barriers) are done. Each stream has its own worker, so
 * independent streams really run concurrently; FAKECUDA_JITTER_US adds a
 * random sleep before each operation so that a missing dependency in a layer
 * above shows up as a wrong result rather than a lucky interleaving.
 *
 * Default-stream rules (CUDA "Stream synchronization behavior"): an op on the
 * legacy stream depends on the tails of all blocking streams of its context,
 * and an op on a blocking stream depends on the legacy stream's tail.
 * CU_STREAM_NON_BLOCKING streams are exempt; the per-thread default stream is
 * an ordinary blocking stream, one per (thread, context).
 */
#include "fc_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static pthread_mutex_t done_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER;

/* Green-context streams outlive cuGreenCtxDestroy (the docs call it a leak);
 * they wait here for exit. */
static pthread_mutex_t detached_mu = PTHREAD_MUTEX_INITIALIZER;
static struct fc_stream *detached;

#define FC_DEF(sym, decl, call)                                                                    \
	CUresult CUDAAPI sym decl                                                                  \
	{                                                                                          \
		FC_ENTER();                                                                        \
		return call;                                                                       \
	}

/* ---- ops ---------------------------------------------------------------------- */

struct fc_op *fakecuda__op_new(void)
{
	struct fc_op *op = calloc(1, sizeof(*op));
	if (op)
		atomic_init(&op->refs, 1);
	return op;
}

void fakecuda__op_ref(struct fc_op *op)
{
	atomic_fetch_add_explicit(&op->refs, 1, memory_order_relaxed);
}

static void op_drop_deps(struct fc_op *op)
{
	for (uint32_t i = 0; i < op->ndeps; i++)
		fakecuda__op_unref(i < 4 ? op->deps[i] : op->xdeps[i - 4]);
	op->ndeps = 0;
	free(op->xdeps);
	op->xdeps = NULL;
}

void fakecuda__op_unref(struct fc_op *op)
{
	if (!op)
		return;
	/* acq_rel: the last owner must see every write the others made. */
	if (atomic_fetch_sub_explicit(&op->refs, 1, memory_order_acq_rel) != 1)
		return;
	op_drop_deps(op);
	fakecuda__cmd_fini(&op->cmd);
	free(op);
}

int fakecuda__op_done(const struct fc_op *op)
{
	/* Acquire: pairs with the release in op_complete(), so whoever sees done
	 * also sees the op's effects (copied bytes, kernel writes, t_ns). */
	return !op || atomic_load_explicit(&op->done, memory_order_acquire);
}

static void op_complete(struct fc_op *op)
{
	pthread_mutex_lock(&done_mu);
	atomic_store_explicit(&op->done, 1, memory_order_release);
	pthread_cond_broadcast(&done_cv);
	pthread_mutex_unlock(&done_mu);
}

void fakecuda__op_wait(struct fc_op *op)
{
	if (fakecuda__op_done(op))
		return;
	pthread_mutex_lock(&done_mu);
	while (!atomic_load_explicit(&op->done, memory_order_acquire) &&
	       !atomic_load(&g_fc.shutdown))
		pthread_cond_wait(&done_cv, &done_mu);
	pthread_mutex_unlock(&done_mu);
}

static int op_add_dep(struct fc_op *op, struct fc_op *dep)
{
	if (fakecuda__op_done(dep))
		return 0;
	if (op->ndeps >= 4) {
		uint32_t n = op->ndeps - 4;
		/* Capacity: 4, then doubling at 4, 8, 16, ... */
		if (n == 0 || (n >= 4 && (n & (n - 1)) == 0)) {
			struct fc_op **x = realloc(op->xdeps, (n ? 2 * n : 4) * sizeof(*x));
			if (!x)
				return -ENOMEM;
			op->xdeps = x;
		}
		op->xdeps[n] = dep;
	} else {
		op->deps[op->ndeps] = dep;
	}
	op->ndeps++;
	fakecuda__op_ref(dep);
	return 0;
}

/* ---- commands ------------------------------------------------------------------ */

void fakecuda__cmd_fini(struct fc_cmd *cmd)
{
	switch (cmd->kind) {
	case FC_CMD_KERNEL:
		free(cmd->u.k.params);
		free(cmd->u.k.pptrs);
		break;
	case FC_CMD_COPY:
		free(cmd->u.copy.staging);
		break;
	case FC_CMD_COPYV:
		free(cmd->u.copyv.v);
		free(cmd->u.copyv.staging);
		break;
	case FC_CMD_MEMOPS:
		free(cmd->u.memops.v);
		break;
	case FC_CMD_GRAPH:
		fakecuda__gexec_unref(cmd->u.graph.exec);
		break;
	case FC_CMD_CHILD:
		fakecuda__graph_free(cmd->u.child.g);
		break;
	case FC_CMD_COND:
		for (unsigned i = 0; i < cmd->u.cond.n; i++)
			fakecuda__graph_free(cmd->u.cond.body[i]);
		free(cmd->u.cond.body);
		free(cmd->u.cond.out);
		break;
	default:
		break;
	}
	memset(cmd, 0, sizeof(*cmd));
}

static const char *rebase(const char *p, const void *old, size_t n, void *nu)
{
	if (old && p >= (const char *)old && p < (const char *)old + n)
		return (const char *)nu + (p - (const char *)old);
	return p;
}

int fakecuda__cmd_clone(struct fc_cmd *dst, const struct fc_cmd *src)
{
	*dst = *src;
	switch (src->kind) {
	case FC_CMD_KERNEL: {
		const struct fc_kentry *k = src->u.k.k;
		if (fakecuda__kargs_alloc(k, &dst->u.k.params, &dst->u.k.pptrs) != 0)
			goto nomem;
		memcpy(dst->u.k.params, src->u.k.params, k->total);
		break;
	}
	case FC_CMD_COPY:
		if (src->u.copy.staging) {
			dst->u.copy.staging = malloc(src->u.copy.staging_size);
			if (!dst->u.copy.staging)
				goto nomem;
			memcpy(dst->u.copy.staging, src->u.copy.staging, src->u.copy.staging_size);
			dst->u.copy.c.src = rebase(src->u.copy.c.src, src->u.copy.staging,
						   src->u.copy.staging_size, dst->u.copy.staging);
		}
		break;
	case FC_CMD_COPYV:
		dst->u.copyv.v = malloc(src->u.copyv.n * sizeof(struct fc_copy));
		dst->u.copyv.staging = NULL;
		if (!dst->u.copyv.v)
			goto nomem;
		memcpy(dst->u.copyv.v, src->u.copyv.v, src->u.copyv.n * sizeof(struct fc_copy));
		if (src->u.copyv.staging) {
			dst->u.copyv.staging = malloc(src->u.copyv.staging_size);
			if (!dst->u.copyv.staging)
				goto nomem;
			memcpy(dst->u.copyv.staging, src->u.copyv.staging,
			       src->u.copyv.staging_size);
			for (size_t i = 0; i < src->u.copyv.n; i++)
				dst->u.copyv.v[i].src =
				    rebase(src->u.copyv.v[i].src, src->u.copyv.staging,
					   src->u.copyv.staging_size, dst->u.copyv.staging);
		}
		break;
	case FC_CMD_MEMOPS:
		dst->u.memops.v = malloc(src->u.memops.n * sizeof(struct fc_memop));
		if (!dst->u.memops.v)
			goto nomem;
		memcpy(dst->u.memops.v, src->u.memops.v, src->u.memops.n * sizeof(struct fc_memop));
		break;
	case FC_CMD_GRAPH:
		atomic_fetch_add(&src->u.graph.exec->refs, 1);
		break;
	case FC_CMD_CHILD:
		dst->u.child.g = fakecuda__graph_clone(src->u.child.g);
		if (!dst->u.child.g)
			goto nomem;
		break;
	case FC_CMD_COND: {
		unsigned n = src->u.cond.n;
		dst->u.cond.n = 0;
		dst->u.cond.body = calloc(n ? n : 1, sizeof(*dst->u.cond.body));
		dst->u.cond.out = calloc(n ? n : 1, sizeof(*dst->u.cond.out));
		if (!dst->u.cond.body || !dst->u.cond.out)
			goto nomem;
		for (unsigned i = 0; i < n; i++) {
			dst->u.cond.body[i] = fakecuda__graph_clone(src->u.cond.body[i]);
			if (!dst->u.cond.body[i])
				goto nomem;
			dst->u.cond.out[i] = (CUgraph)dst->u.cond.body[i];
			dst->u.cond.n = i + 1;
		}
		break;
	}
	default:
		break;
	}
	return 0;
nomem:
	fakecuda__cmd_fini(dst);
	return -ENOMEM;
}

static void run_copy(const struct fc_copy *c)
{
	for (size_t z = 0; z < c->depth; z++)
		for (size_t y = 0; y < c->height; y++)
			memcpy(c->dst + (z * c->dheight + y) * c->dpitch,
			       c->src + (z * c->sheight + y) * c->spitch, c->width);
}

static int memop_holds(const struct fc_memop *m)
{
	uint64_t v, want = m->value;
	if (m->is64)
		v = __atomic_load_n((uint64_t *)m->addr, __ATOMIC_ACQUIRE);
	else
		v = __atomic_load_n((uint32_t *)m->addr, __ATOMIC_ACQUIRE);
	switch (m->flags & 0xf) {
	case CU_STREAM_WAIT_VALUE_GEQ:
		/* Cyclic comparison: (int32_t)(*addr - value) >= 0. */
		return m->is64 ? (int64_t)(v - want) >= 0 : (int32_t)(uint32_t)(v - want) >= 0;
	case CU_STREAM_WAIT_VALUE_EQ:
		return v == want;
	case CU_STREAM_WAIT_VALUE_AND:
		return (v & want) != 0;
	case CU_STREAM_WAIT_VALUE_NOR:
		return m->is64 ? ~(v | want) != 0 : (uint32_t) ~(v | want) != 0;
	}
	return 1;
}

static void run_memop(const struct fc_memop *m)
{
	if (!m->wait) {
		/* Release: the default write is preceded by a memory fence, so what the
		 * stream did before is visible to whoever observes the value. */
		if (m->is64)
			__atomic_store_n((uint64_t *)m->addr, m->value, __ATOMIC_RELEASE);
		else
			__atomic_store_n((uint32_t *)m->addr, (uint32_t)m->value, __ATOMIC_RELEASE);
		return;
	}
	/* Spin on the worker, as the GPU front end would, but let the cores breathe. */
	for (unsigned spins = 0; !memop_holds(m); spins++) {
		if (atomic_load(&g_fc.shutdown))
			return;
		if (spins < 64) {
			sched_yield();
		} else {
			struct timespec ts = {0, 50000};
			nanosleep(&ts, NULL);
		}
	}
}

static void run_memset(struct fc_cmd *cmd)
{
	char *row = cmd->u.memset.dst;
	uint32_t v = cmd->u.memset.value;
	for (size_t y = 0; y < cmd->u.memset.height; y++, row += cmd->u.memset.pitch) {
		size_t w = cmd->u.memset.width;
		switch (cmd->u.memset.elem) {
		case 1:
			memset(row, (int)(v & 0xff), w);
			break;
		case 2:
			for (size_t i = 0; i < w; i++)
				((uint16_t *)row)[i] = (uint16_t)v;
			break;
		default:
			for (size_t i = 0; i < w; i++)
				((uint32_t *)row)[i] = v;
		}
	}
}

static void event_set(struct fc_event *e, struct fc_op *op, struct fc_capture *cap);

/* External event nodes of a graph: the record completes the event now; the
 * wait blocks the replay until the event's generation current now is done. */
static void run_event_node(struct fc_cmd *cmd)
{
	struct fc_event *e = cmd->u.ev.e;
	if (!fakecuda__registry_is(e, FC_T_EVENT))
		return; /* destroyed meanwhile: undefined in CUDA, ignored here */
	if (cmd->kind == FC_CMD_EVRECORD) {
		struct fc_op *op = fakecuda__op_new();
		if (!op)
			return;
		op->t_ns = fakecuda__now_ns();
		atomic_store(&op->done, 1); /* nobody can wait on it yet */
		event_set(e, op, NULL);
		return;
	}
	pthread_mutex_lock(&e->mu);
	struct fc_op *op = e->op;
	if (op)
		fakecuda__op_ref(op);
	pthread_mutex_unlock(&e->mu);
	fakecuda__op_wait(op);
	fakecuda__op_unref(op);
}

/* Runs one command on @s's worker; returns nonzero for a device fault. */
int fakecuda__cmd_run(struct fc_stream *s, struct fc_cmd *cmd, int from_graph)
{
	struct fc_tls *t = fakecuda__tls();
	int fault = 0;
	switch (cmd->kind) {
	case FC_CMD_KERNEL:
		if (cmd->u.k.inject_fault)
			fault = 1;
		else
			fakecuda__kernel_run(s, cmd, from_graph, &fault);
		break;
	case FC_CMD_COPY:
		run_copy(&cmd->u.copy.c);
		break;
	case FC_CMD_COPYV:
		for (size_t i = 0; i < cmd->u.copyv.n; i++)
			run_copy(&cmd->u.copyv.v[i]);
		break;
	case FC_CMD_MEMSET:
		run_memset(cmd);
		break;
	case FC_CMD_HOSTFN:
		t->in_callback = 1;
		cmd->u.host.fn(cmd->u.host.ud);
		t->in_callback = 0;
		break;
	case FC_CMD_CALLBACK:
		t->in_callback = 1;
		cmd->u.cb.fn(cmd->u.cb.handle, (CUresult)atomic_load(&s->ctx->sticky),
			     cmd->u.cb.ud);
		t->in_callback = 0;
		break;
	case FC_CMD_FREE:
		fakecuda__mem_release(cmd->u.free.ptr);
		break;
	case FC_CMD_MEMOPS:
		for (unsigned i = 0; i < cmd->u.memops.n; i++)
			run_memop(&cmd->u.memops.v[i]);
		break;
	case FC_CMD_EVRECORD:
	case FC_CMD_EVWAIT:
		run_event_node(cmd);
		break;
	case FC_CMD_GRAPH: {
		struct fc_cmd *nodes = cmd->u.graph.nodes;
		size_t n = cmd->u.graph.n;
		fakecuda__cond_reset(nodes, n);
		for (size_t i = 0; i < n && !fault; i++) {
			if (atomic_load(&s->ctx->sticky) || atomic_load(&g_fc.shutdown))
				break;
			fault = fakecuda__cmd_run(s, &nodes[i], 1);
		}
		break;
	}
	case FC_CMD_CHILD:
		fault = fakecuda__graph_run(s, cmd->u.child.g);
		break;
	case FC_CMD_COND: {
		struct fc_cond *h = cmd->u.cond.h;
		unsigned v = atomic_load(&h->value);
		if (cmd->u.cond.type == CU_GRAPH_COND_TYPE_WHILE) {
			/* A body that never clears the value loops forever on a GPU
			 * too; here it faults after 2^24 rounds instead. */
			for (uint32_t round = 0; v && !fault; round++) {
				if (round >= (1u << 24) || atomic_load(&s->ctx->sticky) ||
				    atomic_load(&g_fc.shutdown)) {
					fault = round >= (1u << 24);
					break;
				}
				fault = fakecuda__graph_run(s, cmd->u.cond.body[0]);
				v = atomic_load(&h->value);
			}
		} else if (cmd->u.cond.type == CU_GRAPH_COND_TYPE_IF) {
			if (v)
				fault = fakecuda__graph_run(s, cmd->u.cond.body[0]);
			else if (cmd->u.cond.n > 1)
				fault = fakecuda__graph_run(s, cmd->u.cond.body[1]);
		} else if (v < cmd->u.cond.n) { /* switch */
			fault = fakecuda__graph_run(s, cmd->u.cond.body[v]);
		}
		break;
	}
	default:
		break;
	}
	return fault;
}

/*
 * A device fault is sticky for the whole device: measured on the H200, a
 * fault in a created context makes the primary context (and every later
 * call needing a context) report CUDA_ERROR_ILLEGAL_ADDRESS, even after the
 * faulting context is destroyed.
 */
void fakecuda__ctx_fault(struct fc_ctx *c)
{
	struct fc_device *d = c->dev;
	int zero = 0, code = g_fc.fault_code ? g_fc.fault_code : CUDA_ERROR_ILLEGAL_ADDRESS;
	atomic_compare_exchange_strong(&d->sticky, &zero, code);
	pthread_mutex_lock(&g_fc.mu);
	for (struct fc_ctx *x = g_fc.ctxs; x; x = x->next_all) {
		zero = 0;
		if (x->dev == d)
			atomic_compare_exchange_strong(&x->sticky, &zero, code);
	}
	pthread_mutex_unlock(&g_fc.mu);
}

/* ---- workers -------------------------------------------------------------------- */

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void run_op(struct fc_stream *s, struct fc_op *op)
{
	for (uint32_t i = 0; i < op->ndeps; i++)
		fakecuda__op_wait(i < 4 ? op->deps[i] : op->xdeps[i - 4]);
	/* Dependencies are released as soon as they are met so that chains of
	 * ops never pin each other's memory. */
	op_drop_deps(op);
	unsigned j = atomic_load_explicit(&g_fc.jitter_us, memory_order_relaxed);
	if (j) {
		uint64_t us = splitmix(&s->rng) % ((uint64_t)j + 1);
		struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
		nanosleep(&ts, NULL);
	}
	if (atomic_load(&g_fc.shutdown))
		return;
	op->t_ns = fakecuda__now_ns();
	struct fc_cmd *cmd = &op->cmd;
	if (cmd->kind == FC_CMD_NOP)
		return;
	/* After a fault the context is unusable: work is skipped (but completes, so
	 * nothing hangs); callbacks still run and see the error; host functions
	 * do not ("the function will not be called in the event of an error in
	 * the CUDA context"). Freeing still happens. */
	if (atomic_load(&s->ctx->sticky) && cmd->kind != FC_CMD_CALLBACK &&
	    cmd->kind != FC_CMD_FREE)
		return;
	if (fakecuda__cmd_run(s, cmd, 0))
		fakecuda__ctx_fault(s->ctx);
}

static void *worker_main(void *arg)
{
	struct fc_stream *s = arg;
	for (;;) {
		pthread_mutex_lock(&s->qmu);
		while (!s->qhead && !s->qclose && !atomic_load(&g_fc.shutdown))
			pthread_cond_wait(&s->qcv, &s->qmu);
		struct fc_op *op = s->qhead;
		if (!op) {
			s->exited = 1;
			pthread_mutex_unlock(&s->qmu);
			break;
		}
		s->qhead = op->qnext;
		if (!s->qhead)
			s->qtail = NULL;
		pthread_mutex_unlock(&s->qmu);
		run_op(s, op);
		/* Nothing reads a command after it ran; releasing it now also breaks the
		 * cycle graph exec -> last launch op -> command -> graph exec. */
		fakecuda__cmd_fini(&op->cmd);
		op_complete(op);
		fakecuda__op_unref(op); /* the queue's reference */
	}
	atomic_fetch_sub(&g_fc.live_workers, 1);
	return NULL;
}

/* Caller holds s->ctx->mu. Takes two references: the queue's and the tail's. */
static void enqueue_locked(struct fc_stream *s, struct fc_op *op)
{
	fakecuda__op_ref(op);
	fakecuda__op_ref(op);
	fakecuda__op_unref(s->tail);
	s->tail = op;
	pthread_mutex_lock(&s->qmu);
	if (s->qtail)
		s->qtail->qnext = op;
	else
		s->qhead = op;
	s->qtail = op;
	if (!s->started) {
		pthread_attr_t a;
		pthread_attr_init(&a);
		pthread_attr_setstacksize(&a, 1 << 20);
		if (pthread_create(&s->thread, &a, worker_main, s) != 0) {
			fprintf(stderr, "fakecuda: cannot create a stream worker\n");
			abort();
		}
		pthread_attr_destroy(&a);
		s->started = 1;
		atomic_fetch_add(&g_fc.live_workers, 1);
	}
	pthread_cond_signal(&s->qcv);
	pthread_mutex_unlock(&s->qmu);
}

/* ---- streams ------------------------------------------------------------------- */

static int is_blocking(const struct fc_stream *t)
{
	return (t->kind == FC_S_USER || t->kind == FC_S_PERTHREAD) &&
	       !(t->flags & CU_STREAM_NON_BLOCKING);
}

static void stream_free(struct fc_stream *s)
{
	struct fc_op *op = s->qhead;
	while (op) {
		struct fc_op *next = op->qnext;
		op_complete(op);
		fakecuda__op_unref(op);
		op = next;
	}
	fakecuda__op_unref(s->tail);
	if (s->capture)
		fakecuda__capture_put(s->capture);
	pthread_mutex_destroy(&s->qmu);
	pthread_cond_destroy(&s->qcv);
	free(s);
}

static void stream_close(struct fc_stream *s)
{
	pthread_mutex_lock(&s->qmu);
	s->qclose = 1;
	pthread_cond_signal(&s->qcv);
	pthread_mutex_unlock(&s->qmu);
}

static void stream_stop_join(struct fc_stream *s)
{
	stream_close(s);
	if (s->started) {
		pthread_join(s->thread, NULL);
		s->started = 0;
	}
}

/* Frees destroyed streams whose work has drained. Caller holds c->mu. */
static void ctx_reap_locked(struct fc_ctx *c)
{
	struct fc_stream **pp = &c->streams;
	while (*pp) {
		struct fc_stream *s = *pp;
		int gone = 0;
		if (s->destroyed && fakecuda__op_done(s->tail)) {
			pthread_mutex_lock(&s->qmu);
			gone = !s->started || s->exited;
			pthread_mutex_unlock(&s->qmu);
		}
		if (!gone) {
			pp = &s->next;
			continue;
		}
		*pp = s->next;
		if (s->started)
			pthread_join(s->thread, NULL); /* it has returned already */
		s->started = 0;
		stream_free(s);
	}
}

static CUresult submit_locked(struct fc_stream *s, struct fc_cmd *cmd, struct fc_op *dep,
			      struct fc_op **out);

/* Caller holds c->mu. */
struct fc_stream *fakecuda__stream_new(struct fc_ctx *c, int kind, unsigned flags, int prio)
{
	struct fc_stream *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->ctx = c;
	s->kind = kind;
	s->flags = flags;
	s->priority = prio;
	s->id = fakecuda__new_id();
	s->rng = atomic_load(&g_fc.seed) ^ (s->id * 0x9e3779b97f4a7c15ull);
	pthread_mutex_init(&s->qmu, NULL);
	pthread_cond_init(&s->qcv, NULL);
	s->handle = kind == FC_S_LEGACY	     ? CU_STREAM_LEGACY
		    : kind == FC_S_PERTHREAD ? CU_STREAM_PER_THREAD
					     : (CUstream)s;
	s->next = c->streams;
	c->streams = s;
	if (kind == FC_S_USER)
		fakecuda__registry_add(s, FC_T_STREAM);
	/* cuGreenCtxWaitEvent: "all future work submitted to hCtx" waits. */
	if (c->wait_barrier && !fakecuda__op_done(c->wait_barrier)) {
		struct fc_cmd nop = {.kind = FC_CMD_NOP};
		submit_locked(s, &nop, c->wait_barrier, NULL);
	}
	return s;
}

/* Per-thread default streams: one per (thread, context), destroyed at thread exit. */
struct ptds_ent {
	struct fc_ctx *ctx;
	unsigned long long ctx_id;
	struct fc_stream *s;
	unsigned long long s_id;
};
static _Thread_local struct ptds_ent ptds_tab[16];
static _Thread_local int ptds_n;
static pthread_key_t ptds_key;
static pthread_once_t ptds_once = PTHREAD_ONCE_INIT;

static void ptds_thread_exit(void *unused)
{
	(void)unused;
	for (int i = 0; i < ptds_n; i++) {
		struct ptds_ent *e = &ptds_tab[i];
		if (!fakecuda__registry_is(e->ctx, FC_T_CTX) || e->ctx->id != e->ctx_id)
			continue;
		pthread_mutex_lock(&e->ctx->mu);
		for (struct fc_stream *s = e->ctx->streams; s; s = s->next)
			if (s == e->s && s->id == e->s_id) {
				s->destroyed = 1;
				stream_close(s);
			}
		pthread_mutex_unlock(&e->ctx->mu);
	}
	ptds_n = 0;
}

static void ptds_key_init(void)
{
	pthread_key_create(&ptds_key, ptds_thread_exit);
}

/* Caller holds c->mu. */
static struct fc_stream *ptds_get_locked(struct fc_ctx *c)
{
	for (int i = 0; i < ptds_n; i++)
		if (ptds_tab[i].ctx == c && ptds_tab[i].ctx_id == c->id)
			return ptds_tab[i].s;
	if (ptds_n == (int)(sizeof(ptds_tab) / sizeof(ptds_tab[0])))
		return NULL;
	struct fc_stream *s = fakecuda__stream_new(c, FC_S_PERTHREAD, 0, 0);
	if (!s)
		return NULL;
	pthread_once(&ptds_once, ptds_key_init);
	pthread_setspecific(ptds_key, (void *)1);
	ptds_tab[ptds_n++] = (struct ptds_ent){c, c->id, s, s->id};
	return s;
}

CUresult fakecuda__stream_resolve(CUstream h, int ptds, struct fc_stream **out)
{
	if (!h)
		h = ptds ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY;
	if (h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
		struct fc_ctx *c;
		CUresult r = fakecuda__ctx_get(&c);
		if (r)
			return r;
		struct fc_stream *s;
		pthread_mutex_lock(&c->mu);
		if (h == CU_STREAM_LEGACY) {
			if (!c->legacy)
				c->legacy = fakecuda__stream_new(c, FC_S_LEGACY, 0, 0);
			s = c->legacy;
		} else {
			s = ptds_get_locked(c);
		}
		pthread_mutex_unlock(&c->mu);
		if (!s)
			return CUDA_ERROR_OUT_OF_MEMORY;
		*out = s;
		return CUDA_SUCCESS;
	}
	if (!fakecuda__registry_is(h, FC_T_STREAM))
		return CUDA_ERROR_INVALID_HANDLE;
	struct fc_stream *s = (struct fc_stream *)h;
	if (__atomic_load_n(&s->detached, __ATOMIC_ACQUIRE))
		return CUDA_ERROR_CONTEXT_IS_DESTROYED;
	*out = s;
	return CUDA_SUCCESS;
}

/* ---- submission ---------------------------------------------------------------- */

/* Caller holds s->ctx->mu. Consumes @cmd in every case. */
static CUresult submit_locked(struct fc_stream *s, struct fc_cmd *cmd, struct fc_op *dep,
			      struct fc_op **out)
{
	struct fc_ctx *c = s->ctx;
	if (s->detached) {
		fakecuda__cmd_fini(cmd);
		return CUDA_ERROR_CONTEXT_IS_DESTROYED;
	}
	/* After a device fault every call in the context reports it. */
	CUresult sticky = (CUresult)atomic_load(&c->sticky);
	if (sticky) {
		fakecuda__cmd_fini(cmd);
		return sticky;
	}
	if (s->capture) {
		if (out) {
			/* A caller that must wait for the op cannot: it does not run. */
			fakecuda__capture_invalidate(s->capture);
			fakecuda__cmd_fini(cmd);
			return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
		}
		return fakecuda__capture_add(s, cmd);
	}
	if (s->kind == FC_S_LEGACY) {
		/* "When a blocking stream is capturing, the legacy stream is in an
		 * unusable state": the implicit dependency would cross the capture. */
		int bad = 0;
		for (struct fc_stream *t = c->streams; t; t = t->next)
			if (is_blocking(t) && t->capture) {
				fakecuda__capture_invalidate(t->capture);
				bad = 1;
			}
		if (bad) {
			fakecuda__cmd_fini(cmd);
			return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
		}
	}
	struct fc_op *op = fakecuda__op_new();
	if (!op) {
		fakecuda__cmd_fini(cmd);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	op->cmd = *cmd;
	memset(cmd, 0, sizeof(*cmd));
	int err = 0;
	if (dep)
		err |= op_add_dep(op, dep);
	if (s->kind == FC_S_LEGACY) {
		for (struct fc_stream *t = c->streams; t; t = t->next)
			if (t != s && is_blocking(t) && t->tail)
				err |= op_add_dep(op, t->tail);
	} else if (is_blocking(s) && c->legacy && c->legacy->tail) {
		err |= op_add_dep(op, c->legacy->tail);
	}
	if (err) {
		fakecuda__op_unref(op);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (out) {
		fakecuda__op_ref(op);
		*out = op;
	}
	enqueue_locked(s, op);
	fakecuda__op_unref(op); /* ours; the queue, the tail and *out hold theirs */
	return CUDA_SUCCESS;
}

CUresult fakecuda__submit(struct fc_stream *s, struct fc_cmd *cmd, struct fc_op *dep,
			  struct fc_op **out)
{
	pthread_mutex_lock(&s->ctx->mu);
	CUresult r = submit_locked(s, cmd, dep, out);
	pthread_mutex_unlock(&s->ctx->mu);
	return r;
}

/* Submits and, if @wait, blocks until the op ran; reports a sticky fault then. */
CUresult fakecuda__submit_sync(struct fc_stream *s, struct fc_cmd *cmd, int wait)
{
	struct fc_op *op = NULL;
	CUresult r = fakecuda__submit(s, cmd, NULL, wait ? &op : NULL);
	if (r || !wait)
		return r;
	fakecuda__op_wait(op);
	fakecuda__op_unref(op);
	return (CUresult)atomic_load(&s->ctx->sticky);
}

CUresult fakecuda__ctx_sync(struct fc_ctx *c)
{
	size_t n = 0, cap = 16;
	struct fc_op **v = malloc(cap * sizeof(*v));
	if (!v)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_lock(&c->mu);
	for (struct fc_stream *s = c->streams; s; s = s->next) {
		if (!s->tail || fakecuda__op_done(s->tail))
			continue;
		if (n == cap) {
			struct fc_op **nv = realloc(v, 2 * cap * sizeof(*v));
			if (!nv)
				break;
			v = nv;
			cap *= 2;
		}
		fakecuda__op_ref(s->tail);
		v[n++] = s->tail;
	}
	ctx_reap_locked(c);
	pthread_mutex_unlock(&c->mu);
	for (size_t i = 0; i < n; i++) {
		fakecuda__op_wait(v[i]);
		fakecuda__op_unref(v[i]);
	}
	free(v);
	return (CUresult)atomic_load(&c->sticky);
}

/* cuCtxSynchronize: synchronizing a capturing stream is illegal, so a capture
 * anywhere in the context is invalidated and the call fails (measured, also
 * in relaxed mode). */
CUresult fakecuda__ctx_sync_api(struct fc_ctx *c)
{
	int bad = 0;
	pthread_mutex_lock(&c->mu);
	for (struct fc_stream *t = c->streams; t; t = t->next)
		if (t->capture) {
			fakecuda__capture_invalidate(t->capture);
			bad = 1;
		}
	pthread_mutex_unlock(&c->mu);
	return bad ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : fakecuda__ctx_sync(c);
}

/* Waits for all work of every context on the device (cuMemFree and friends). */
CUresult fakecuda__device_sync(struct fc_device *d)
{
	CUresult r = CUDA_SUCCESS;
	pthread_mutex_lock(&g_fc.mu);
	size_t n = 0;
	for (struct fc_ctx *c = g_fc.ctxs; c; c = c->next_all)
		n++;
	struct fc_ctx **v = malloc((n ? n : 1) * sizeof(*v));
	n = 0;
	for (struct fc_ctx *c = g_fc.ctxs; v && c; c = c->next_all)
		if (c->dev == d && !c->destroyed)
			v[n++] = c;
	pthread_mutex_unlock(&g_fc.mu);
	if (!v)
		return CUDA_ERROR_OUT_OF_MEMORY;
	/* Contexts are never freed before exit, so the snapshot stays valid. */
	for (size_t i = 0; i < n; i++) {
		CUresult e = fakecuda__ctx_sync(v[i]);
		if (!r)
			r = e;
	}
	free(v);
	return r;
}

/*
 * Stops and frees every stream of @c (context destroy, green context
 * destroy, exit). With @keep_handles, live user streams stay registered but
 * detached, so later calls get CUDA_ERROR_CONTEXT_IS_DESTROYED.
 */
static void ctx_teardown(struct fc_ctx *c, int keep_handles)
{
	pthread_mutex_lock(&c->mu);
	struct fc_stream *list = c->streams;
	c->streams = c->legacy = c->aux = NULL;
	c->destroyed = 1;
	struct fc_op *barrier = c->wait_barrier;
	c->wait_barrier = NULL;
	for (struct fc_stream *s = list; s; s = s->next)
		__atomic_store_n(&s->detached, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&c->mu);
	fakecuda__op_unref(barrier);
	while (list) {
		struct fc_stream *s = list;
		list = s->next;
		stream_stop_join(s);
		if (keep_handles && s->kind == FC_S_USER && !s->destroyed) {
			pthread_mutex_lock(&detached_mu);
			s->next = detached;
			detached = s;
			pthread_mutex_unlock(&detached_mu);
			continue;
		}
		if (s->kind == FC_S_USER && !s->destroyed)
			fakecuda__registry_del(s);
		stream_free(s);
	}
}

void fakecuda__ctx_teardown(struct fc_ctx *c)
{
	ctx_teardown(c, c->green != NULL);
}

void fakecuda__streams_shutdown(void)
{
	/* Wake every waiter: shutdown makes waits and spins give up. */
	pthread_mutex_lock(&done_mu);
	pthread_cond_broadcast(&done_cv);
	pthread_mutex_unlock(&done_mu);
	pthread_mutex_lock(&g_fc.mu);
	struct fc_ctx *list = g_fc.ctxs;
	pthread_mutex_unlock(&g_fc.mu);
	for (struct fc_ctx *c = list; c; c = c->next_all)
		ctx_teardown(c, 0);
	pthread_mutex_lock(&detached_mu);
	struct fc_stream *s = detached;
	detached = NULL;
	pthread_mutex_unlock(&detached_mu);
	while (s) {
		struct fc_stream *next = s->next;
		fakecuda__registry_del(s);
		stream_free(s);
		s = next;
	}
}

/* ---- stream API ------------------------------------------------------------------ */

static CUresult stream_create(CUstream *ph, unsigned flags, int prio)
{
	struct fc_ctx *c;
	CUresult r = fakecuda__ctx_get(&c);
	if (r)
		return r;
	if (!ph || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
		return CUDA_ERROR_INVALID_VALUE;
	/* "If the specified priority is outside the numerical range returned by
	 * cuCtxGetStreamPriorityRange, it will automatically be clamped". */
	prio = FC_MAX(-5, FC_MIN(0, prio));
	pthread_mutex_lock(&c->mu);
	ctx_reap_locked(c);
	struct fc_stream *s = fakecuda__stream_new(c, FC_S_USER, flags, prio);
	pthread_mutex_unlock(&c->mu);
	if (!s)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*ph = (CUstream)s;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
	FC_ENTER();
	return stream_create(phStream, Flags, 0);
}

CUresult CUDAAPI cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
	FC_ENTER();
	return stream_create(phStream, flags, priority);
}

/* Used by cuGreenCtxStreamCreate. */
FC_HIDDEN CUresult fakecuda__stream_create_in(struct fc_ctx *c, CUstream *ph, unsigned flags,
					      int prio);
CUresult fakecuda__stream_create_in(struct fc_ctx *c, CUstream *ph, unsigned flags, int prio)
{
	prio = FC_MAX(-5, FC_MIN(0, prio));
	pthread_mutex_lock(&c->mu);
	ctx_reap_locked(c);
	struct fc_stream *s = fakecuda__stream_new(c, FC_S_USER, flags, prio);
	pthread_mutex_unlock(&c->mu);
	if (!s)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*ph = (CUstream)s;
	return CUDA_SUCCESS;
}

/* "In case the device is still doing work in the stream hStream when
 * cuStreamDestroy() is called, the function will return immediately and the
 * resources associated with hStream will be released automatically once the
 * device has completed all work in hStream." */
static CUresult stream_destroy(CUstream h)
{
	if (!h || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD ||
	    !fakecuda__registry_is(h, FC_T_STREAM))
		return CUDA_ERROR_INVALID_HANDLE;
	struct fc_stream *s = (struct fc_stream *)h;
	if (__atomic_load_n(&s->detached, __ATOMIC_ACQUIRE))
		return CUDA_ERROR_CONTEXT_IS_DESTROYED;
	struct fc_ctx *c = s->ctx;
	pthread_mutex_lock(&c->mu);
	fakecuda__registry_del(s);
	s->destroyed = 1;
	if (s->capture) {
		fakecuda__capture_invalidate(s->capture);
		fakecuda__capture_put(s->capture);
		s->capture = NULL;
	}
	stream_close(s);
	ctx_reap_locked(c);
	pthread_mutex_unlock(&c->mu);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamDestroy(CUstream hStream)
{
	FC_ENTER();
	return stream_destroy(hStream);
}

CUresult CUDAAPI cuStreamDestroy_v2(CUstream hStream)
{
	FC_ENTER();
	return stream_destroy(hStream);
}

static CUresult stream_sync(CUstream h, int ptds)
{
	struct fc_stream *s;
	CUresult r = fakecuda__stream_resolve(h, ptds, &s);
	if (r)
		return r;
	if (s->kind == FC_S_LEGACY) {
		if ((r = fakecuda__capture_unsafe()))
			return r;
		/* A marker on the legacy stream waits for every blocking stream. */
		struct fc_cmd nop = {.kind = FC_CMD_NOP};
		return fakecuda__submit_sync(s, &nop, 1);
	}
	struct fc_ctx *c = s->ctx;
	pthread_mutex_lock(&c->mu);
	if (s->capture) {
		fakecuda__capture_invalidate(s->capture);
		pthread_mutex_unlock(&c->mu);
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	}
	pthread_mutex_unlock(&c->mu);
	if ((r = fakecuda__capture_unsafe()))
		return r;
	pthread_mutex_lock(&c->mu);
	struct fc_op *t = s->tail;
	if (t)
		fakecuda__op_ref(t);
	pthread_mutex_unlock(&c->mu);
	fakecuda__op_wait(t);
	fakecuda__op_unref(t);
	return (CUresult)atomic_load(&c->sticky);
}

static CUresult stream_query(CUstream h, int ptds)
{
	struct fc_stream *s;
	CUresult r = fakecuda__stream_resolve(h, ptds, &s);
	if (r)
		return r;
	struct fc_ctx *c = s->ctx;
	int done = 1;
	pthread_mutex_lock(&c->mu);
	if (s->capture) {
		fakecuda__capture_invalidate(s->capture);
		pthread_mutex_unlock(&c->mu);
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	}
	pthread_mutex_unlock(&c->mu);
	if ((r = fakecuda__capture_unsafe()))
		return r;
	pthread_mutex_lock(&c->mu);
	done = fakecuda__op_done(s->tail);
	if (s->kind == FC_S_LEGACY)
		for (struct fc_stream *t = c->streams; t && done; t = t->next)
			if (is_blocking(t))
				done = fakecuda__op_done(t->tail);
	pthread_mutex_unlock(&c->mu);
	r = (CUresult)atomic_load(&c->sticky);
	if (r)
		return r;
	return done ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

FC_DEF(cuStreamSynchronize, (CUstream hStream), stream_sync(hStream, 0))
FC_DEF(cuStreamSynchronize_ptsz, (CUstream hStream), stream_sync(hStream, 1))
FC_DEF(cuStreamQuery, (CUstream hStream), stream_query(hStream, 0))
FC_DEF(cuStreamQuery_ptsz, (CUstream hStream), stream_query(hStream, 1))

static CUresult stream_get_flags(CUstream h, unsigned *flags, int ptds)
{
	struct fc_stream *s;
	CUresult r = fakecuda__stream_resolve(h, ptds, &s);
	if (r)
		return r;
	if (!flags)
		return CUDA_ERROR_INVALID_VALUE;
	*flags = s->flags;
	return CUDA_SUCCESS;
}

static CUresult stream_get_priority(CUstream h, int *prio, int ptds)
{
	struct fc_stream *s;
	CUresult r = fakecuda__stream_resolve(h, ptds, &s);
	if (r)
		return r;
	if (!prio)
		return CUDA_ERROR_INVALID_VALUE;
	*prio = s->priority;
	return CUDA_SUCCESS;
}

static CUresult stream_get_id(CUstream h, unsigned long long *id, int ptds)
{
	struct fc_stream *s;
	CUresult r = fakecuda__stream_resolve(h, ptds, &s);
	if (r)
		return r;
	if (!id)
		return CUDA_ERROR_INVALID_VALUE;
	*id = s->id;
	return CUDA_SUCCESS;
}

static CUresult stream_get_device(CUstream h, CUdevice *dev, int ptds)
{
	struct fc_stream *s;
	CUresult r = fakecuda__stream_resolve(h, ptds, &s);
	if (r)
		return r;
	if (!dev)
		return CUDA_ERROR_INVALID_VALUE;
	*dev = s->ctx->dev->ordinal;
	return CUDA_SUCCESS;
}

/* v1: a green-context stream reports the green context's CUcontext. */
static CUresult stream_get_ctx(CUstream h, CUcontext *pctx, int ptds)
{
	struct fc_stream *s;
	CUresult r = fakecuda__stream_resolve(h, ptds, &s);
	if (r)
		return r;
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	*pctx = (CUcontext)s->ctx;
	return CUDA_SUCCESS;
}

/* v2: a green-context stream reports the device's primary context plus the green context. */
static CUresult stream_get_ctx2(CUstream h, CUcontext *pctx, CUgreenCtx *pg, int ptds)
{
	struct fc_ctx *cur = fakecuda__ctx_current();
	if ((h == CU_STREAM_PER_THREAD || (!h && ptds)) && cur && cur->green)
		return CUDA_ERROR_INVALID_HANDLE;
	struct fc_stream *s;
	CUresult r = fakecuda__stream_resolve(h, ptds, &s);
	if (r)
		return r;
	if (!pctx || !pg)
		return CUDA_ERROR_INVALID_VALUE;
	struct fc_ctx *c = s->ctx;
	*pctx = (CUcontext)(c->green ? c->dev->primary : c);
	*pg = (CUgreenCtx)c->green;
	return CUDA_SUCCESS;
}

static CUresult stream_get_green(CUstream h, CUgreenCtx *pg)
{
	struct fc_stream *s;
	CUresult r = fakecuda__stream_resolve(h, 0, &s);
	if (r)
		return r;
	if (!pg)
		return CUDA_ERROR_INVALID_VALUE;
	*pg = (CUgreenCtx)s->ctx->green;
	return CUDA_SUCCESS;
}

FC_DEF(cuStreamGetFlags, (CUstream hStream, unsigned int *flags),
       stream_get_flags(hStream, flags, 0))
FC_DEF(cuStreamGetFlags_ptsz, (CUstream hStream, unsigned int *flags),
       stream_get_flags(hStream, flags, 1))
FC_DEF(cuStreamGetPriority, (CUstream hStream, int *priority),
       stream_get_priority(hStream, priority, 0))
FC_DEF(cuStreamGetPriority_ptsz, (CUstream hStream, int *priority),
       stream_get_priority(hStream, priority, 1))
FC_DEF(cuStreamGetId, (CUstream hStream, unsigned long long *streamId),
       stream_get_id(hStream, streamId, 0))
FC_DEF(cuStreamGetId_ptsz, (CUstream hStream, unsigned long long *streamId),
       stream_get_id(hStream, streamId, 1))
FC_DEF(cuStreamGetDevice, (CUstream hStream, CUdevice *device),
       stream_get_device(hStream, device, 0))
FC_DEF(cuStreamGetDevice_ptsz, (CUstream hStream, CUdevice *device),
       stream_get_device(hStream, device, 1))
FC_DEF(cuStreamGetCtx, (CUstream hStream, CUcontext *pctx), stream_get_ctx(hStream, pctx, 0))
FC_DEF(cuStreamGetCtx_ptsz, (CUstream hStream, CUcontext *pctx), stream_get_ctx(hStream, pctx, 1))
FC_DEF(cuStreamGetCtx_v2, (CUstream hStream, CUcontext *pCtx, CUgreenCtx *pGreenCtx),
       stream_get_ctx2(hStream, pCtx, pGreenCtx, 0))
FC_DEF(cuStreamGetCtx_v2_ptsz, (CUstream hStream, CUcontext *pCtx, CUgreenCtx *pGreenCtx),
       stream_get_ctx2(hStream, pCtx, pGreenCtx, 1))
FC_DEF(cuStreamGetGreenCtx, (CUstream hStream, CUgreenCtx *phCtx), stream_get_green(hStream, phCtx))

/* ---- events ---------------------------------------------------------------------- */

static CUresult event_check(CUevent h, struct fc_event **out)
{
	if (!fakecuda__registry_is(h, FC_T_EVENT))
		return CUDA_ERROR_INVALID_HANDLE;
	*out = (struct fc_event *)h;
	return CUDA_SUCCESS;
}

void fakecuda__event_free(struct fc_event *e)
{
	fakecuda__op_unref(e->op);
	if (e->cap)
		fakecuda__capture_put(e->cap);
	pthread_mutex_destroy(&e->mu);
	free(e);
}

CUresult CUDAAPI cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
	FC_ENTER();
	struct fc_ctx *c;
	CUresult r = fakecuda__ctx_get(&c);
	if (r)
		return r;
	const unsigned ok =
	    CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
	if (!phEvent || (Flags & ~ok))
		return CUDA_ERROR_INVALID_VALUE;
	/* "CU_EVENT_INTERPROCESS ... CU_EVENT_DISABLE_TIMING flag also must be set". */
	if ((Flags & CU_EVENT_INTERPROCESS) && !(Flags & CU_EVENT_DISABLE_TIMING))
		return CUDA_ERROR_INVALID_VALUE;
	struct fc_event *e = calloc(1, sizeof(*e));
	if (!e)
		return CUDA_ERROR_OUT_OF_MEMORY;
	e->ctx = c;
	e->flags = Flags;
	pthread_mutex_init(&e->mu, NULL);
	fakecuda__registry_add(e, FC_T_EVENT);
	*phEvent = (CUevent)e;
	return CUDA_SUCCESS;
}

/* "In case hEvent has been recorded but has not yet been completed when
 * cuEventDestroy() is called, the function will return immediately and the
 * resources associated with hEvent will be released automatically once the
 * device has completed hEvent." The op is refcounted, so that holds. */
static CUresult event_destroy(CUevent h)
{
	struct fc_event *e;
	CUresult r = event_check(h, &e);
	if (r)
		return r;
	fakecuda__registry_del(e);
	fakecuda__event_free(e);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventDestroy(CUevent hEvent)
{
	FC_ENTER();
	return event_destroy(hEvent);
}

CUresult CUDAAPI cuEventDestroy_v2(CUevent hEvent)
{
	FC_ENTER();
	return event_destroy(hEvent);
}

/* Makes @op the event's current generation. */
static void event_set(struct fc_event *e, struct fc_op *op, struct fc_capture *cap)
{
	pthread_mutex_lock(&e->mu);
	struct fc_op *old = e->op;
	struct fc_capture *oldcap = e->cap;
	e->op = op;
	e->cap = cap;
	pthread_mutex_unlock(&e->mu);
	fakecuda__op_unref(old);
	if (oldcap)
		fakecuda__capture_put(oldcap);
}

/* Records on @s: a marker op that captures the stream's completion point. */
FC_HIDDEN CUresult fakecuda__event_record_on(struct fc_event *e, struct fc_stream *s,
					     unsigned flags);
CUresult fakecuda__event_record_on(struct fc_event *e, struct fc_stream *s, unsigned flags)
{
	struct fc_ctx *c = s->ctx;
	pthread_mutex_lock(&c->mu);
	/* CU_EVENT_RECORD_EXTERNAL outside a capture: CUDA_ERROR_ILLEGAL_STATE (measured). */
	if ((flags & CU_EVENT_RECORD_EXTERNAL) && !s->capture) {
		pthread_mutex_unlock(&c->mu);
		return CUDA_ERROR_ILLEGAL_STATE;
	}
	if (s->capture) {
		/* An external event record node, replayed by graph launches. */
		if (flags & CU_EVENT_RECORD_EXTERNAL) {
			struct fc_cmd cmd = {.kind = FC_CMD_EVRECORD, .u.ev.e = e};
			CUresult r = fakecuda__capture_add(s, &cmd);
			pthread_mutex_unlock(&c->mu);
			return r;
		}
		/* Recorded into the capture: a wait on it from another stream forks
		 * that stream into the capture (cross-stream capture). */
		struct fc_capture *cap = s->capture;
		atomic_fetch_add(&cap->refs, 1);
		pthread_mutex_unlock(&c->mu);
		event_set(e, NULL, cap);
		return CUDA_SUCCESS;
	}
	struct fc_cmd nop = {.kind = FC_CMD_NOP};
	struct fc_op *op = NULL;
	CUresult r = submit_locked(s, &nop, NULL, &op);
	pthread_mutex_unlock(&c->mu);
	if (r)
		return r;
	event_set(e, op, NULL);
	return CUDA_SUCCESS;
}

static CUresult event_record(CUevent h, CUstream hs, unsigned flags, int ptds)
{
	struct fc_event *e;
	struct fc_stream *s;
	CUresult r = event_check(h, &e);
	if (!r)
		r = fakecuda__stream_resolve(hs, ptds, &s);
	if (r)
		return r;
	if (flags & ~(unsigned)CU_EVENT_RECORD_EXTERNAL)
		return CUDA_ERROR_INVALID_VALUE;
	return fakecuda__event_record_on(e, s, flags);
}

FC_DEF(cuEventRecord, (CUevent hEvent, CUstream hStream), event_record(hEvent, hStream, 0, 0))
FC_DEF(cuEventRecord_ptsz, (CUevent hEvent, CUstream hStream), event_record(hEvent, hStream, 0, 1))
FC_DEF(cuEventRecordWithFlags, (CUevent hEvent, CUstream hStream, unsigned int flags),
       event_record(hEvent, hStream, flags, 0))
FC_DEF(cuEventRecordWithFlags_ptsz, (CUevent hEvent, CUstream hStream, unsigned int flags),
       event_record(hEvent, hStream, flags, 1))

/* Current generation of @e (ref) or NULL. If it was last recorded in a capture
 * and the caller does not take the capture, CUDA_ERROR_CAPTURED_EVENT, and the
 * capture is invalidated (measured for query and synchronize). */
static CUresult event_get(struct fc_event *e, struct fc_op **op, struct fc_capture **cap)
{
	pthread_mutex_lock(&e->mu);
	*op = e->op;
	if (*op)
		fakecuda__op_ref(*op);
	if (cap) {
		*cap = e->cap;
		if (*cap)
			atomic_fetch_add(&(*cap)->refs, 1);
	}
	int captured = e->cap != NULL;
	if (captured && !cap)
		fakecuda__capture_invalidate(e->cap);
	pthread_mutex_unlock(&e->mu);
	return captured && !cap ? CUDA_ERROR_CAPTURED_EVENT : CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventQuery(CUevent hEvent)
{
	FC_ENTER();
	struct fc_event *e;
	struct fc_op *op;
	CUresult r = event_check(hEvent, &e);
	if (!r)
		r = event_get(e, &op, NULL);
	if (r)
		return r;
	if ((r = fakecuda__capture_unsafe())) {
		fakecuda__op_unref(op);
		return r;
	}
	/* "Returns CUDA_SUCCESS ... if cuEventRecord() has not been called on hEvent". */
	int done = fakecuda__op_done(op);
	fakecuda__op_unref(op);
	if (!done)
		return CUDA_ERROR_NOT_READY;
	return (CUresult)atomic_load(&e->ctx->sticky);
}

CUresult CUDAAPI cuEventSynchronize(CUevent hEvent)
{
	FC_ENTER();
	struct fc_event *e;
	struct fc_op *op;
	CUresult r = event_check(hEvent, &e);
	if (!r)
		r = event_get(e, &op, NULL);
	if (r)
		return r;
	if ((r = fakecuda__capture_unsafe())) {
		fakecuda__op_unref(op);
		return r;
	}
	fakecuda__op_wait(op);
	fakecuda__op_unref(op);
	return (CUresult)atomic_load(&e->ctx->sticky);
}

/*
 * Elapsed time between the host clocks taken when the two records executed.
 * "If either event was created with the CU_EVENT_DISABLE_TIMING flag, then
 * this function will return CUDA_ERROR_INVALID_HANDLE"; never recorded:
 * CUDA_ERROR_INVALID_HANDLE; recorded but not completed: CUDA_ERROR_NOT_READY.
 */
static CUresult event_elapsed(float *ms, CUevent hs, CUevent he)
{
	struct fc_event *a, *b;
	CUresult r = event_check(hs, &a);
	if (!r)
		r = event_check(he, &b);
	if (r)
		return r;
	if (!ms)
		return CUDA_ERROR_INVALID_VALUE;
	if ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING)
		return CUDA_ERROR_INVALID_HANDLE;
	struct fc_op *x, *y;
	if ((r = event_get(a, &x, NULL)))
		return r;
	if ((r = event_get(b, &y, NULL))) {
		fakecuda__op_unref(x);
		return r;
	}
	if (!x || !y)
		r = CUDA_ERROR_INVALID_HANDLE;
	else if (!fakecuda__op_done(x) || !fakecuda__op_done(y))
		r = CUDA_ERROR_NOT_READY;
	else
		*ms = (float)((double)((int64_t)y->t_ns - (int64_t)x->t_ns) / 1e6);
	fakecuda__op_unref(x);
	fakecuda__op_unref(y);
	return r;
}

FC_DEF(cuEventElapsedTime, (float *pMilliseconds, CUevent hStart, CUevent hEnd),
       event_elapsed(pMilliseconds, hStart, hEnd))
FC_DEF(cuEventElapsedTime_v2, (float *pMilliseconds, CUevent hStart, CUevent hEnd),
       event_elapsed(pMilliseconds, hStart, hEnd))

FC_HIDDEN CUresult fakecuda__capture_join(struct fc_stream *s, struct fc_capture *cap);

/* Makes later work on @s wait for the event's generation captured now. */
FC_HIDDEN CUresult fakecuda__stream_wait_event(struct fc_stream *s, struct fc_event *e,
					       unsigned flags);
CUresult fakecuda__stream_wait_event(struct fc_stream *s, struct fc_event *e, unsigned flags)
{
	struct fc_op *op;
	struct fc_capture *cap;
	event_get(e, &op, &cap);
	CUresult r = CUDA_SUCCESS;
	if ((flags & CU_EVENT_WAIT_EXTERNAL) && !cap) {
		/* An external event wait node when capturing; a plain wait otherwise. */
		pthread_mutex_lock(&s->ctx->mu);
		if (s->capture) {
			struct fc_cmd cmd = {.kind = FC_CMD_EVWAIT, .u.ev.e = e};
			r = fakecuda__capture_add(s, &cmd);
		} else if (op && !fakecuda__op_done(op)) {
			struct fc_cmd nop = {.kind = FC_CMD_NOP};
			r = submit_locked(s, &nop, op, NULL);
		}
		pthread_mutex_unlock(&s->ctx->mu);
		fakecuda__op_unref(op);
		return r;
	}
	if (cap) {
		r = fakecuda__capture_join(s, cap);
		fakecuda__capture_put(cap);
	} else {
		pthread_mutex_lock(&s->ctx->mu);
		if (s->capture && op) {
			/* A dependency from inside a capture onto uncaptured work, even
			 * completed work (measured). */
			fakecuda__capture_invalidate(s->capture);
			r = CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
		} else if (op && !s->capture && !fakecuda__op_done(op)) {
			struct fc_cmd nop = {.kind = FC_CMD_NOP};
			r = submit_locked(s, &nop, op, NULL);
		}
		pthread_mutex_unlock(&s->ctx->mu);
	}
	fakecuda__op_unref(op);
	return r;
}

static CUresult stream_wait_event(CUstream hs, CUevent he, unsigned flags, int ptds)
{
	struct fc_stream *s;
	struct fc_event *e;
	CUresult r = fakecuda__stream_resolve(hs, ptds, &s);
	if (!r)
		r = event_check(he, &e);
	if (r)
		return r;
	if (flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL)
		return CUDA_ERROR_INVALID_VALUE;
	return fakecuda__stream_wait_event(s, e, flags);
}

FC_DEF(cuStreamWaitEvent, (CUstream hStream, CUevent hEvent, unsigned int Flags),
       stream_wait_event(hStream, hEvent, Flags, 0))
FC_DEF(cuStreamWaitEvent_ptsz, (CUstream hStream, CUevent hEvent, unsigned int Flags),
       stream_wait_event(hStream, hEvent, Flags, 1))

/*
 * Context-wide record/wait (cuCtxRecordEvent, cuGreenCtxRecordEvent and the
 * Wait counterparts). A record joins the tails of all the context's streams
 * on an internal stream; a wait puts a marker on every stream and makes
 * streams created later start behind it.
 */
FC_HIDDEN CUresult fakecuda__ctx_record_event(struct fc_ctx *c, struct fc_event *e);
CUresult fakecuda__ctx_record_event(struct fc_ctx *c, struct fc_event *e)
{
	pthread_mutex_lock(&c->mu);
	for (struct fc_stream *t = c->streams; t; t = t->next)
		if (t->capture) {
			fakecuda__capture_invalidate(t->capture);
			pthread_mutex_unlock(&c->mu);
			return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
		}
	if (!c->aux)
		c->aux = fakecuda__stream_new(c, FC_S_AUX, CU_STREAM_NON_BLOCKING, 0);
	struct fc_op *op = fakecuda__op_new();
	if (!c->aux || !op) {
		pthread_mutex_unlock(&c->mu);
		fakecuda__op_unref(op);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	int err = 0;
	for (struct fc_stream *t = c->streams; t; t = t->next)
		if (t->tail)
			err |= op_add_dep(op, t->tail);
	if (err) {
		pthread_mutex_unlock(&c->mu);
		fakecuda__op_unref(op);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	enqueue_locked(c->aux, op);
	pthread_mutex_unlock(&c->mu);
	event_set(e, op, NULL); /* takes our reference */
	return CUDA_SUCCESS;
}

FC_HIDDEN CUresult fakecuda__ctx_wait_event(struct fc_ctx *c, struct fc_event *e);
CUresult fakecuda__ctx_wait_event(struct fc_ctx *c, struct fc_event *e)
{
	struct fc_op *op;
	CUresult r = event_get(e, &op, NULL);
	if (r)
		return r == CUDA_ERROR_CAPTURED_EVENT ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : r;
	if (fakecuda__op_done(op)) {
		fakecuda__op_unref(op);
		return CUDA_SUCCESS;
	}
	pthread_mutex_lock(&c->mu);
	for (struct fc_stream *t = c->streams; t; t = t->next)
		if (t->capture) {
			fakecuda__capture_invalidate(t->capture);
			r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
		}
	if (!r) {
		for (struct fc_stream *t = c->streams; t; t = t->next) {
			if (t->destroyed || t->kind == FC_S_AUX)
				continue;
			struct fc_cmd nop = {.kind = FC_CMD_NOP};
			submit_locked(t, &nop, op, NULL);
		}
		fakecuda__op_unref(c->wait_barrier);
		c->wait_barrier = op;
		op = NULL;
	}
	pthread_mutex_unlock(&c->mu);
	fakecuda__op_unref(op);
	return r;
}

static CUresult ctx_event_args(CUcontext h, CUevent he, struct fc_ctx **c, struct fc_event **e)
{
	if (!fakecuda__registry_is(h, FC_T_CTX))
		return CUDA_ERROR_INVALID_CONTEXT;
	*c = (struct fc_ctx *)h;
	return event_check(he, e);
}

CUresult CUDAAPI cuCtxRecordEvent(CUcontext hCtx, CUevent hEvent)
{
	FC_ENTER();
	struct fc_ctx *c;
	struct fc_event *e;
	CUresult r = ctx_event_args(hCtx, hEvent, &c, &e);
	if (r)
		return r;
	return fakecuda__ctx_record_event(c, e);
}

CUresult CUDAAPI cuCtxWaitEvent(CUcontext hCtx, CUevent hEvent)
{
	FC_ENTER();
	struct fc_ctx *c;
	struct fc_event *e;
	CUresult r = ctx_event_args(hCtx, hEvent, &c, &e);
	if (r)
		return r;
	return fakecuda__ctx_wait_event(c, e);
}

/* ---- host functions ------------------------------------------------------------------ */

static CUresult launch_host_func(CUstream hs, CUhostFn fn, void *ud, int ptds)
{
	struct fc_stream *s;
	CUresult r = fakecuda__stream_resolve(hs, ptds, &s);
	if (r)
		return r;
	if (!fn)
		return CUDA_ERROR_INVALID_VALUE;
	struct fc_cmd cmd = {.kind = FC_CMD_HOSTFN, .u.host = {fn, ud}};
	return fakecuda__submit(s, &cmd, NULL, NULL);
}

static CUresult add_callback(CUstream hs, CUstreamCallback fn, void *ud, unsigned flags, int ptds)
{
	struct fc_stream *s;
	CUresult r = fakecuda__stream_resolve(hs, ptds, &s);
	if (r)
		return r;
	if (!fn || flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&s->ctx->mu);
	if (s->capture) {
		/* Only cuLaunchHostFunc is capturable. */
		fakecuda__capture_invalidate(s->capture);
		pthread_mutex_unlock(&s->ctx->mu);
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	}
	struct fc_cmd cmd = {.kind = FC_CMD_CALLBACK, .u.cb = {fn, ud, hs}};
	r = submit_locked(s, &cmd, NULL, NULL);
	pthread_mutex_unlock(&s->ctx->mu);
	return r;
}

FC_DEF(cuLaunchHostFunc, (CUstream hStream, CUhostFn fn, void *userData),
       launch_host_func(hStream, fn, userData, 0))
FC_DEF(cuLaunchHostFunc_ptsz, (CUstream hStream, CUhostFn fn, void *userData),
       launch_host_func(hStream, fn, userData, 1))
FC_DEF(cuStreamAddCallback,
       (CUstream hStream, CUstreamCallback callback, void *userData, unsigned int flags),
       add_callback(hStream, callback, userData, flags, 0))
FC_DEF(cuStreamAddCallback_ptsz,
       (CUstream hStream, CUstreamCallback callback, void *userData, unsigned int flags),
       add_callback(hStream, callback, userData, flags, 1))

/* ---- stream memory operations ---------------------------------------------------------- */

/* The address must be device-accessible memory the fake knows: device memory
 * or mapped (pinned / registered) host memory. */
static CUresult memop_check(uintptr_t addr, int is64)
{
	struct fc_alloc a;
	size_t sz = is64 ? 8 : 4;
	if (addr % sz)
		return CUDA_ERROR_INVALID_VALUE;
	if (!fakecuda__mem_find(addr, &a) || addr + sz > a.base + a.size)
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

static CUresult submit_memops(CUstream hs, struct fc_memop *v, unsigned n, int ptds)
{
	struct fc_stream *s;
	CUresult r = fakecuda__stream_resolve(hs, ptds, &s);
	if (r) {
		free(v);
		return r;
	}
	for (unsigned i = 0; i < n; i++)
		if ((r = memop_check(v[i].addr, v[i].is64))) {
			free(v);
			return r;
		}
	struct fc_cmd cmd = {.kind = FC_CMD_MEMOPS, .u.memops = {n, v}};
	return fakecuda__submit(s, &cmd, NULL, NULL);
}

static CUresult memop1(CUstream hs, CUdeviceptr addr, uint64_t value, unsigned flags, int wait,
		       int is64, int v2, int ptds)
{
	if (wait) {
		if ((flags & 0xf) > CU_STREAM_WAIT_VALUE_NOR ||
		    (flags & ~(0xfu | (unsigned)CU_STREAM_WAIT_VALUE_FLUSH)))
			return CUDA_ERROR_INVALID_VALUE;
		/* CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES is 0. */
		if (flags & CU_STREAM_WAIT_VALUE_FLUSH)
			return CUDA_ERROR_NOT_SUPPORTED;
	} else {
		/* "This flag is not supported in the v2 API." */
		if (flags & ~(unsigned)(v2 ? 0 : CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER))
			return CUDA_ERROR_INVALID_VALUE;
	}
	struct fc_memop *m = malloc(sizeof(*m));
	if (!m)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*m = (struct fc_memop){wait, is64, (uintptr_t)addr, value, flags};
	return submit_memops(hs, m, 1, ptds);
}

#define FC_MEMOP(name, decl_t, wait, is64, v2, ptds)                                               \
	CUresult CUDAAPI name(CUstream stream, CUdeviceptr addr, decl_t value, unsigned int flags) \
	{                                                                                          \
		FC_ENTER();                                                                        \
		return memop1(stream, addr, value, flags, wait, is64, v2, ptds);                   \
	}
FC_MEMOP(cuStreamWriteValue32, cuuint32_t, 0, 0, 0, 0)
FC_MEMOP(cuStreamWriteValue32_ptsz, cuuint32_t, 0, 0, 0, 1)
FC_MEMOP(cuStreamWriteValue32_v2, cuuint32_t, 0, 0, 1, 0)
FC_MEMOP(cuStreamWriteValue32_v2_ptsz, cuuint32_t, 0, 0, 1, 1)
FC_MEMOP(cuStreamWaitValue32, cuuint32_t, 1, 0, 0, 0)
FC_MEMOP(cuStreamWaitValue32_ptsz, cuuint32_t, 1, 0, 0, 1)
FC_MEMOP(cuStreamWaitValue32_v2, cuuint32_t, 1, 0, 1, 0)
FC_MEMOP(cuStreamWaitValue32_v2_ptsz, cuuint32_t, 1, 0, 1, 1)
FC_MEMOP(cuStreamWriteValue64, cuuint64_t, 0, 1, 0, 0)
FC_MEMOP(cuStreamWriteValue64_ptsz, cuuint64_t, 0, 1, 0, 1)
FC_MEMOP(cuStreamWriteValue64_v2, cuuint64_t, 0, 1, 1, 0)
FC_MEMOP(cuStreamWriteValue64_v2_ptsz, cuuint64_t, 0, 1, 1, 1)
FC_MEMOP(cuStreamWaitValue64, cuuint64_t, 1, 1, 0, 0)
FC_MEMOP(cuStreamWaitValue64_ptsz, cuuint64_t, 1, 1, 0, 1)
FC_MEMOP(cuStreamWaitValue64_v2, cuuint64_t, 1, 1, 1, 0)
FC_MEMOP(cuStreamWaitValue64_v2_ptsz, cuuint64_t, 1, 1, 1, 1)

static CUresult batch_memop(CUstream hs, unsigned count, CUstreamBatchMemOpParams *p,
			    unsigned flags, int v2, int ptds)
{
	/* CUDA's documented limit for count is 256. */
	if (flags != 0 || count == 0 || count > 256 || !p)
		return CUDA_ERROR_INVALID_VALUE;
	struct fc_memop *v = calloc(count, sizeof(*v));
	if (!v)
		return CUDA_ERROR_OUT_OF_MEMORY;
	unsigned n = 0;
	for (unsigned i = 0; i < count; i++) {
		switch (p[i].operation) {
		case CU_STREAM_MEM_OP_WAIT_VALUE_32:
		case CU_STREAM_MEM_OP_WAIT_VALUE_64: {
			int is64 = p[i].operation == CU_STREAM_MEM_OP_WAIT_VALUE_64;
			unsigned f = p[i].waitValue.flags;
			if ((f & 0xf) > CU_STREAM_WAIT_VALUE_NOR ||
			    (f & CU_STREAM_WAIT_VALUE_FLUSH))
				goto inval;
			v[n++] = (struct fc_memop){
			    1, is64, (uintptr_t)p[i].waitValue.address,
			    is64 ? p[i].waitValue.value64 : p[i].waitValue.value, f};
			break;
		}
		case CU_STREAM_MEM_OP_WRITE_VALUE_32:
		case CU_STREAM_MEM_OP_WRITE_VALUE_64: {
			int is64 = p[i].operation == CU_STREAM_MEM_OP_WRITE_VALUE_64;
			v[n++] = (struct fc_memop){0, is64, (uintptr_t)p[i].writeValue.address,
						   is64 ? p[i].writeValue.value64
							: p[i].writeValue.value,
						   p[i].writeValue.flags};
			break;
		}
		case CU_STREAM_MEM_OP_BARRIER:
			if (!v2)
				goto inval;
			break; /* stream order plus release/acquire already give it */
		case CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES:
			goto inval;
		default:
			goto inval;
		}
	}
	if (!n) {
		free(v);
		struct fc_stream *s;
		CUresult r = fakecuda__stream_resolve(hs, ptds, &s);
		if (r)
			return r;
		struct fc_cmd nop = {.kind = FC_CMD_NOP};
		return fakecuda__submit(s, &nop, NULL, NULL);
	}
	return submit_memops(hs, v, n, ptds);
inval:
	free(v);
	return CUDA_ERROR_INVALID_VALUE;
}

#define FC_BATCH(name, v2, ptds)                                                                   \
	CUresult CUDAAPI name(CUstream stream, unsigned int count,                                 \
			      CUstreamBatchMemOpParams *paramArray, unsigned int flags)            \
	{                                                                                          \
		FC_ENTER();                                                                        \
		return batch_memop(stream, count, paramArray, flags, v2, ptds);                    \
	}
FC_BATCH(cuStreamBatchMemOp, 0, 0)
FC_BATCH(cuStreamBatchMemOp_ptsz, 0, 1)
FC_BATCH(cuStreamBatchMemOp_v2, 1, 0)
FC_BATCH(cuStreamBatchMemOp_v2_ptsz, 1, 1)
