/* SPDX-License-Identifier: MIT */
/*
 * The random workloads of the end-to-end tests (test_dispatch, test_ved,
 * test_multidev): programs of kernels (some cooperative, with a minimum SM
 * count), copies, memsets, host functions, timed and untimed event records
 * and cross-stream waits over legacy, blocking, non-blocking and per-thread
 * streams, built alongside the reference model of CUDA's ordering rules
 * (refmodel.h), and the descriptor each work op submits.
 *
 * A program is a pure function of the random state it is given: the same
 * seed gives the same program. Header-only, static functions.
 */
#ifndef VE_TESTS_WORKLOAD_H
#define VE_TESTS_WORKLOAD_H

#include "refmodel.h"

#include "core/desc.h"
#include "util/util.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define WL_MAX_CALLS 300
_Static_assert(WL_MAX_CALLS < RM_MAX_OPS, "one op per call at most");

/* A test with more kinds of calls defines its own enum (with these five among
 * them) and WL_OWN_CALL_KINDS before including this header. */
#ifndef WL_OWN_CALL_KINDS
enum wl_call_kind { C_WORK, C_RECORD, C_WAIT, C_SQUERY, C_EQUERY };
#endif
enum wl_work_kind { W_KERNEL, W_COOP, W_COPY, W_MEMSET, W_HOST, W_PEER };
#define WL_NOT_WORK 0xff /* wk[] of an op that is no work (an external record) */

struct wl_shape {
	uint32_t grid, threads, min_sms;
};
/* 256 threads: 8 blocks per SM in the sim and in the default profile model. */
static const struct wl_shape wl_kshapes[] = {
    {1, 128, 0}, {16, 256, 0}, {132, 256, 0}, {528, 256, 0}, {1056, 128, 0}, {4096, 256, 0},
};
/* Cooperative: every block resident, so at least grid / 8 SMs. */
static const struct wl_shape wl_cshapes[] = {{128, 256, 16}, {256, 256, 32}};

/* Cumulative percentages of the work kinds (the rest: host functions). */
struct wl_mix {
	uint8_t kernel, coop, copy, memset;
};

static inline uint32_t wl_rnd(uint64_t *r, uint32_t n)
{
	return n ? (uint32_t)(((ve_test_rand(r) >> 32) * (uint64_t)n) >> 32) : 0;
}

static inline int wl_pick_stream(const struct rm_model *m, uint64_t *r, int legacy_pct)
{
	if ((int)wl_rnd(r, 100) < legacy_pct || m->nstreams == 1)
		return 0;
	return 1 + (int)wl_rnd(r, (uint32_t)m->nstreams - 1);
}

static inline uint8_t wl_pick_work(uint64_t *r, const struct wl_mix *mix)
{
	uint32_t w = wl_rnd(r, 100);
	return w < mix->kernel ? W_KERNEL
	       : w < mix->coop ? W_COOP
	       : w < mix->copy ? W_COPY
	       : w < mix->memset ? W_MEMSET
				 : W_HOST;
}

static inline uint8_t wl_pick_shape(uint64_t *r, uint8_t wk)
{
	return (uint8_t)(wk == W_COOP ? wl_rnd(r, VE_ARRAY_SIZE(wl_cshapes))
				      : wl_rnd(r, VE_ARRAY_SIZE(wl_kshapes)));
}

static inline const struct wl_shape *wl_shape_of(uint8_t wk, uint8_t shp)
{
	return wk == W_COOP ? &wl_cshapes[shp] : &wl_kshapes[shp];
}

/* Streams with random priorities, and the per-thread stream of thread_key
 * half of the time (sprio and skey are indexed by model stream). */
static inline void wl_streams(struct rm_model *m, uint64_t *r, uint64_t thread_key, int8_t *sprio,
			      uint64_t *skey)
{
	for (int i = (int)wl_rnd(r, 4); i >= 0; i--) {
		int s = rm_stream_create(m, wl_rnd(r, 3) == 0);
		sprio[s] = (int8_t) - (int)wl_rnd(r, 3);
	}
	if (wl_rnd(r, 2))
		rm_stream_per_thread(m, thread_key);
	for (int s = 1; s < m->nstreams; s++)
		skey[s] = m->st[s].thread_key;
}

/* The descriptor of work op 'op' (wk, shp): 'code' identifies it in the
 * backend's events and completions; host functions call host_fn(code). */
static inline void wl_build_desc(uint8_t wk, uint8_t shp, uint64_t code, int op,
				 void (*host_fn)(void *), struct ve_desc *d)
{
	memset(d, 0, sizeof(*d));
	switch (wk) {
	case W_KERNEL:
	case W_COOP: {
		const struct wl_shape *sp = wl_shape_of(wk, shp);
		d->kind = VE_OP_KERNEL;
		d->u.k.fn = 0x1000 + shp + (wk == W_COOP ? 100 : 0);
		d->u.k.name_id = code;
		d->u.k.grid = (struct ve_dim3){sp->grid, 1, 1};
		d->u.k.block = (struct ve_dim3){sp->threads, 1, 1};
		if (wk == W_COOP) {
			d->flags |= VE_DESC_COOPERATIVE;
			d->u.k.min_sms = sp->min_sms;
			d->u.k.blocks_per_sm = 8;
		}
		break;
	}
	case W_COPY:
	case W_PEER:
		d->kind = VE_OP_MEMCPY;
		d->u.cp.dst = 0x100000;
		d->u.cp.src = code;
		d->u.cp.bytes = 4096ull << (op % 6);
		d->u.cp.dir = 1;
		d->u.cp.variant = wk == W_PEER ? 3 : 0; /* opaque to the sim */
		break;
	case W_MEMSET:
		d->kind = VE_OP_MEMSET;
		d->u.ms.dst = 0x200000;
		d->u.ms.value = code;
		d->u.ms.width = 1024;
		d->u.ms.height = 1;
		d->u.ms.pitch = 1024;
		d->u.ms.elem_size = 4;
		break;
	default:
		d->kind = VE_OP_HOST_FN;
		d->u.host.fn = host_fn;
		d->u.host.arg = (void *)(uintptr_t)code;
		break;
	}
}

/* ------------------------------------------------------------------ programs */

/* One call of a single-device program. */
struct wl_call {
	uint8_t kind, sub, shape;
	int16_t s, e, op;
	rm_set req; /* queries: ops that must be complete */
};

/* A single-device program and its reference model. */
struct wl_prog {
	struct rm_model m;
	struct wl_call c[WL_MAX_CALLS];
	int ncalls;
	int8_t sprio[RM_MAX_STREAMS];
	uint64_t skey[RM_MAX_STREAMS];
	uint8_t wk[RM_MAX_OPS], shp[RM_MAX_OPS]; /* work kind and shape per model op */
	rm_set ext;				 /* ops the runtime sees (work, external records) */
};

/* Streams (wl_streams) and 1 .. max_events - 1 events, two thirds timed. */
static inline void wl_prog_init(struct wl_prog *p, uint64_t *r, uint64_t thread_key,
				int max_events)
{
	memset(p, 0, sizeof(*p));
	rm_init(&p->m);
	wl_streams(&p->m, r, thread_key, p->sprio, p->skey);
	for (int i = 1 + (int)wl_rnd(r, (uint32_t)max_events - 1); i > 0; i--)
		rm_event_create(&p->m, wl_rnd(r, 3) != 0);
}

/* ncalls random calls: 62% work (kinds by mix), 14% event records, 14%
 * waits, 5% stream and 5% event queries (with the ops each must see
 * complete). mark_records: an external record's wk[] is WL_NOT_WORK. */
static inline void wl_prog_calls(struct wl_prog *p, uint64_t *r, int ncalls,
				 const struct wl_mix *mix, bool mark_records)
{
	struct rm_model *m = &p->m;
	int legacy_pct = (int)wl_rnd(r, 30);
	while (p->ncalls < ncalls && p->ncalls < WL_MAX_CALLS) {
		struct wl_call *c = &p->c[p->ncalls];
		memset(c, 0, sizeof(*c));
		c->s = (int16_t)wl_pick_stream(m, r, legacy_pct);
		c->e = (int16_t)wl_rnd(r, (uint32_t)m->nevents);
		c->op = RM_NONE;
		uint32_t x = wl_rnd(r, 100);
		if (x < 62) {
			c->kind = C_WORK;
			c->sub = wl_pick_work(r, mix);
			c->shape = wl_pick_shape(r, c->sub);
			c->op = (int16_t)rm_work(m, c->s);
			rm_set_add(&p->ext, c->op);
			p->wk[c->op] = c->sub;
			p->shp[c->op] = c->shape;
		} else if (x < 76) {
			c->kind = C_RECORD;
			c->op = (int16_t)rm_event_record(m, c->e, c->s);
			if (m->op[c->op].external) {
				rm_set_add(&p->ext, c->op);
				if (mark_records)
					p->wk[c->op] = WL_NOT_WORK;
			}
		} else if (x < 90) {
			c->kind = C_WAIT;
			c->op = (int16_t)rm_stream_wait_event(m, c->s, c->e);
		} else if (x < 95) {
			c->kind = C_SQUERY;
			rm_required_stream(m, c->s, &c->req);
		} else {
			c->kind = C_EQUERY;
			rm_required_event(m, c->e, &c->req);
		}
		p->ncalls++;
	}
}

#endif
