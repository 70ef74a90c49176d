/* SPDX-License-Identifier: MIT */
/*
 * Reference model of CUDA's ordering rules, for testing the vctx.
 *
 * Written from NVIDIA's documentation only, independently of src/core/vctx.c
 * (it shares no code and no data structure with it): each API call appends
 * nodes and explicit happens-before edges to a graph, and the transitive
 * closure (one ancestor bitset per node, built incrementally, exact because a
 * node's predecessors always precede it) gives the partial order a correct
 * runtime must respect and must not exceed. docs/semantics.md numbers the
 * rules used here (S1, D1-D4, E1-E4, Y1-Y4, X1-X2).
 *
 * Sources (CUDA Driver API reference manual):
 *  [SSB] "3. Stream synchronization behavior" (stream-sync-behavior.html):
 *        legacy default stream, non-blocking streams, per-thread default stream.
 *  [REC] cuEventRecord (6.x Event Management): "Captures in hEvent the contents
 *        of hStream at the time of this call"; re-recording overwrites the
 *        captured state; "Other APIs such as cuStreamWaitEvent() use the most
 *        recently captured state at the time of the API call, and are not
 *        affected by later calls to cuEventRecord()"; "Before the first call to
 *        cuEventRecord(), an event represents an empty set of work".
 *  [SWE] cuStreamWaitEvent (Stream Management): "Makes all future work
 *        submitted to hStream wait for all work captured in hEvent".
 *  [EQ]  cuEventQuery / cuEventSynchronize: status of / wait for "all work
 *        currently captured in hEvent".
 *  [SQ]  cuStreamQuery / cuStreamSynchronize: "all operations in the stream";
 *        both carry the note "This function uses standard default stream
 *        semantics" (i.e. [SSB] applies to the legacy handle).
 *  [CS]  cuCtxSynchronize: "Blocks until the device has completed all
 *        preceding requested tasks".
 *  [SD]  cuStreamDestroy: "In case the device is still doing work in the
 *        stream hStream when cuStreamDestroy() is called, the function will
 *        return immediately and the resources associated with hStream will be
 *        released automatically once the device has completed all work".
 *
 * Host-side synchronisation (sync/query) adds no edge: it constrains when the
 * host issues later calls, not the graph (paper section 4.2: "Any
 * serialization among them is a physical scheduling outcome and adds no edge").
 *
 * Header-only, static functions, no allocation: one struct rm_model per program.
 */
#ifndef VE_TESTS_REFMODEL_H
#define VE_TESTS_REFMODEL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define RM_MAX_OPS     512
#define RM_WORDS       (RM_MAX_OPS / 64)
#define RM_MAX_STREAMS 64
#define RM_MAX_EVENTS  64
#define RM_MAX_PREDS   (RM_MAX_STREAMS + 2)
#define RM_NONE	       (-1)

/* Not every test uses every helper. */
#define RM_FN static __attribute__((unused))

enum rm_stream_kind {
	RM_LEGACY = 0,	/* the legacy default (NULL) stream: model stream 0 */
	RM_BLOCKING,	/* created without CU_STREAM_NON_BLOCKING */
	RM_NONBLOCKING, /* CU_STREAM_NON_BLOCKING */
	RM_PER_THREAD,	/* a thread's per-thread default stream */
};

enum rm_op_kind {
	RM_OP_WORK = 0, /* kernel, copy, memset, host function: leaves the vctx */
	RM_OP_RECORD,	/* event record (external only when timed) */
	RM_OP_WAIT,	/* cuStreamWaitEvent */
};

typedef struct {
	uint64_t w[RM_WORDS];
} rm_set;

struct rm_op {
	uint8_t kind;	/* enum rm_op_kind */
	bool external;	/* observable: popped from the vctx and completed by the executor */
	int16_t stream; /* model stream index */
	int16_t event;	/* RECORD/WAIT: model event index */
	int16_t waited; /* WAIT: the record op (generation) it waits for, RM_NONE if none */
	uint16_t npred; /* explicit edges, for listings */
	int16_t pred[RM_MAX_PREDS];
};

struct rm_stream {
	bool used;
	bool destroyed;
	uint8_t kind; /* enum rm_stream_kind */
	uint64_t thread_key;
	int last; /* last op issued on the stream (stream order, S1), RM_NONE if empty */
};

struct rm_event {
	bool used;
	bool destroyed;
	bool timing;
	int gen; /* op of the most recent record (the current generation), RM_NONE if never */
};

struct rm_model {
	int nops;
	int nstreams;
	int nevents;
	int last_legacy; /* most recent op on the legacy stream */
	struct rm_op op[RM_MAX_OPS];
	rm_set anc[RM_MAX_OPS]; /* strict ancestors (transitive) of each op */
	struct rm_stream st[RM_MAX_STREAMS];
	struct rm_event ev[RM_MAX_EVENTS];
};

static inline void rm_set_clear(rm_set *s)
{
	memset(s, 0, sizeof(*s));
}
static inline void rm_set_add(rm_set *s, int i)
{
	s->w[i >> 6] |= 1ull << (i & 63);
}
static inline bool rm_set_has(const rm_set *s, int i)
{
	return (s->w[i >> 6] >> (i & 63)) & 1;
}
static inline void rm_set_or(rm_set *d, const rm_set *s)
{
	for (int i = 0; i < RM_WORDS; i++)
		d->w[i] |= s->w[i];
}

RM_FN void rm_init(struct rm_model *m)
{
	memset(m, 0, sizeof(*m));
	m->last_legacy = RM_NONE;
	m->st[0].used = true;
	m->st[0].kind = RM_LEGACY;
	m->st[0].last = RM_NONE;
	m->nstreams = 1;
}

/* Legacy-synchronising streams: blocking and per-thread default streams
 * ([SSB]: the per-thread default stream "is not a non-blocking stream and will
 * synchronize with the legacy default stream if both are used in a program"). */
RM_FN bool rm_stream_blocking(const struct rm_model *m, int s)
{
	return m->st[s].kind == RM_BLOCKING || m->st[s].kind == RM_PER_THREAD;
}

RM_FN int rm_stream_create(struct rm_model *m, bool nonblocking)
{
	if (m->nstreams >= RM_MAX_STREAMS)
		return RM_NONE;
	int s = m->nstreams++;
	m->st[s] = (struct rm_stream){
	    .used = true, .kind = nonblocking ? RM_NONBLOCKING : RM_BLOCKING, .last = RM_NONE};
	return s;
}

/* The per-thread default stream of 'key', created on first use ([SSB]: "an
 * implicit stream local to both the thread and the CUcontext"). */
RM_FN int rm_stream_per_thread(struct rm_model *m, uint64_t key)
{
	for (int s = 1; s < m->nstreams; s++)
		if (m->st[s].kind == RM_PER_THREAD && m->st[s].thread_key == key)
			return s;
	if (m->nstreams >= RM_MAX_STREAMS)
		return RM_NONE;
	int s = m->nstreams++;
	m->st[s] = (struct rm_stream){
	    .used = true, .kind = RM_PER_THREAD, .thread_key = key, .last = RM_NONE};
	return s;
}

/* X1 [SD]: destroying returns at once; the stream's ops stay in the graph and
 * still complete. X2 (project rule, see docs/semantics.md): a destroyed
 * blocking stream's pending work still counts for the legacy stream, so the
 * stream keeps its kind and tail here and only stops accepting calls. */
RM_FN void rm_stream_destroy(struct rm_model *m, int s)
{
	m->st[s].destroyed = true;
}

RM_FN int rm_event_create(struct rm_model *m, bool timing)
{
	if (m->nevents >= RM_MAX_EVENTS)
		return RM_NONE;
	int e = m->nevents++;
	m->ev[e] = (struct rm_event){.used = true, .timing = timing, .gen = RM_NONE};
	return e;
}

/* Pending generations of a destroyed event still complete and waits that
 * captured them still hold (cuEventDestroy: resources are released once the
 * recorded work completes); only the handle becomes invalid. */
RM_FN void rm_event_destroy(struct rm_model *m, int e)
{
	m->ev[e].destroyed = true;
}

/* What "all work in stream s" is right now: the frontier set of ops the next
 * call on s must come after. For a blocking stream this includes the last
 * legacy op, because after a legacy action "all blocking streams wait on the
 * legacy stream" ([SSB]), i.e. that wait is part of every blocking stream's
 * contents from then on. For the legacy stream an action first "waits on all
 * blocking streams" ([SSB]), so its frontier is its own tail plus the tails of
 * all blocking streams, destroyed ones included (X2). */
RM_FN int rm_frontier(const struct rm_model *m, int s, int16_t *out)
{
	int n = 0;
	if (m->st[s].last != RM_NONE)
		out[n++] = (int16_t)m->st[s].last;
	if (m->st[s].kind == RM_LEGACY) {
		for (int t = 1; t < m->nstreams; t++)
			if (rm_stream_blocking(m, t) && m->st[t].last != RM_NONE)
				out[n++] = (int16_t)m->st[t].last;
	} else if (rm_stream_blocking(m, s) && m->last_legacy != RM_NONE) {
		out[n++] = (int16_t)m->last_legacy;
	}
	return n;
}

/* Append one op issued on stream s: explicit edges from the stream's
 * frontier (S1 stream order, D1/D2 legacy rules) plus 'extra' (the waited
 * generation, E2). The op becomes the stream's last op, and the legacy last
 * op when s is the legacy stream. */
RM_FN int rm_append(struct rm_model *m, int s, int kind, bool external, int extra)
{
	if (m->nops >= RM_MAX_OPS)
		return RM_NONE;
	int id = m->nops++;
	struct rm_op *o = &m->op[id];
	memset(o, 0, sizeof(*o));
	o->kind = (uint8_t)kind;
	o->external = external;
	o->stream = (int16_t)s;
	o->event = RM_NONE;
	o->waited = RM_NONE;
	int n = rm_frontier(m, s, o->pred);
	if (extra != RM_NONE)
		o->pred[n++] = (int16_t)extra;
	o->npred = (uint16_t)n;
	rm_set_clear(&m->anc[id]);
	for (int i = 0; i < n; i++) {
		rm_set_add(&m->anc[id], o->pred[i]);
		rm_set_or(&m->anc[id], &m->anc[o->pred[i]]);
	}
	m->st[s].last = id;
	if (m->st[s].kind == RM_LEGACY)
		m->last_legacy = id;
	return id;
}

/* A kernel, copy, memset or host function on s. */
RM_FN int rm_work(struct rm_model *m, int s)
{
	return rm_append(m, s, RM_OP_WORK, true, RM_NONE);
}

/* E1 [REC]: a record is an op in stream order that captures the stream's
 * contents; it becomes the event's current generation, replacing the old
 * one for every later query, sync, wait and elapsed-time call. Timed records
 * leave the vctx (they need a device timestamp), untimed ones do not. */
RM_FN int rm_event_record(struct rm_model *m, int e, int s)
{
	int id = rm_append(m, s, RM_OP_RECORD, m->ev[e].timing, RM_NONE);
	if (id == RM_NONE)
		return id;
	m->op[id].event = (int16_t)e;
	m->ev[e].gen = id;
	return id;
}

/* E2 [SWE]: later work on s waits for the generation current now; later
 * records of e do not retarget it (E3). E4 [REC]: an event never recorded is
 * an empty set of work, so the wait has no event edge; it is still a call on
 * s, which on the legacy stream is an action with the D1/D2 edges ([SSB]
 * names cudaStreamWaitEvent() as such an action). */
RM_FN int rm_stream_wait_event(struct rm_model *m, int s, int e)
{
	int id = rm_append(m, s, RM_OP_WAIT, false, m->ev[e].gen);
	if (id == RM_NONE)
		return id;
	m->op[id].event = (int16_t)e;
	m->op[id].waited = (int16_t)m->ev[e].gen;
	return id;
}

/* Required sets: every op that must be complete before a sync returns or a
 * query reports success. The set is the frontier plus its ancestors. */
RM_FN void rm_close(const struct rm_model *m, const int16_t *f, int n, rm_set *out)
{
	rm_set_clear(out);
	for (int i = 0; i < n; i++) {
		rm_set_add(out, f[i]);
		rm_set_or(out, &m->anc[f[i]]);
	}
}

/* Y1/Y2 [SQ]: stream sync/query wait for all operations in the stream; on
 * the legacy handle, with standard default stream semantics, that is what a
 * legacy action would wait for (its frontier). */
RM_FN void rm_required_stream(const struct rm_model *m, int s, rm_set *out)
{
	int16_t f[RM_MAX_PREDS];
	int n = rm_frontier(m, s, f);
	rm_close(m, f, n, out);
}

/* Y3 [EQ]: the current generation; never recorded = empty set (E4). */
RM_FN void rm_required_event(const struct rm_model *m, int e, rm_set *out)
{
	int16_t f[1];
	int n = 0;
	if (m->ev[e].gen != RM_NONE)
		f[n++] = (int16_t)m->ev[e].gen;
	rm_close(m, f, n, out);
}

/* Y4 [CS]: every op issued so far, on every stream, destroyed ones included. */
RM_FN void rm_required_ctx(const struct rm_model *m, rm_set *out)
{
	rm_set_clear(out);
	for (int i = 0; i < m->nops; i++)
		rm_set_add(out, i);
}

/* a happens-before b. */
RM_FN bool rm_before(const struct rm_model *m, int a, int b)
{
	return rm_set_has(&m->anc[b], a);
}

RM_FN bool rm_comparable(const struct rm_model *m, int a, int b)
{
	return a == b || rm_before(m, a, b) || rm_before(m, b, a);
}

RM_FN const char *rm_stream_kind_name(int k)
{
	static const char *n[] = {"legacy", "blocking", "nonblocking", "per-thread"};
	return k >= 0 && k < 4 ? n[k] : "?";
}

RM_FN void rm_print_op(const struct rm_model *m, int id, FILE *f)
{
	const struct rm_op *o = &m->op[id];
	static const char *kn[] = {"work", "record", "wait"};
	fprintf(f, "op%d %s%s s%d", id, kn[o->kind], o->external ? "" : "(inline)", o->stream);
	if (o->event != RM_NONE)
		fprintf(f, " e%d", o->event);
	if (o->kind == RM_OP_WAIT)
		fprintf(f, " gen=op%d", o->waited);
	fprintf(f, " preds={");
	for (int i = 0; i < o->npred; i++)
		fprintf(f, "%sop%d", i ? "," : "", o->pred[i]);
	fprintf(f, "}");
}

#endif
