/* SPDX-License-Identifier: MIT */
/*
 * A client process of the soak (tests/soak/ve_soak.c) on the simulated GPU:
 * a vctx, its dispatcher thread and the link to ved (VE_DAEMON semantics:
 * safe mode while ved is away), running rounds of random work on several
 * streams with cross-stream event waits until its time is up, and checking
 * every op it issued:
 *   - submitted once, completed once, with status 0 (none lost);
 *   - submitted only after its predecessors completed, or behind them on
 *     the same lane (bounded pipelining keeps the edge in lane order);
 *   - completed only after its predecessors completed.
 *
 *   soak_client SOCKET SEED SECONDS
 * Prints "soak-client: ok ops=N rounds=R failovers=F reconnects=C" and exits
 * 0, or prints what went wrong and exits 1 (wrong) or 3 (lost ops); 2 when
 * it could not start.
 */
#include "backend/sim.h"
#include "core/vctx.h"
#include "runtime/runtime.h"
#include "util/util.h"
#include "ved/client.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_OPS	    512
#define MAX_STREAMS 4
#define MAX_DEPS    2

struct op {
	int deps[MAX_DEPS]; /* -1: none */
	ve_tok tok;
	uint32_t lane;
	uint8_t nsub, ncomp;
	int32_t status;
};

static struct op ops[MAX_OPS];
static _Atomic int nops; /* the dispatcher thread reads it while the main thread issues */
static ve_tok others[64]; /* tokens of ops this program does not track (event records) */
static int nothers;
static char failure[512];
static bool lost;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
	if (failure[0])
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(failure, sizeof(failure), fmt, ap);
	va_end(ap);
}

static int op_of(const struct ve_desc *d)
{
	uint64_t code = d->kind == VE_OP_KERNEL ? d->u.k.name_id
			: d->kind == VE_OP_MEMCPY ? d->u.cp.src
						  : 0;
	int i = (int)code - 1;
	return i >= 0 && i < nops ? i : -1;
}

/* Observers run on the dispatcher thread, one at a time. */
static void on_submit(void *arg, uint32_t client, ve_tok tok, uint32_t lane, const struct ve_desc *d)
{
	(void)arg;
	(void)client;
	if (d->kind != VE_OP_KERNEL && d->kind != VE_OP_MEMCPY) {
		others[nothers++ % 64] = tok;
		return;
	}
	int i = op_of(d);
	if (i < 0) {
		fail("a submission of an op never issued (kind %d)", d->kind);
		return;
	}
	struct op *o = &ops[i];
	if (o->nsub++)
		fail("op %d submitted twice", i);
	o->lane = lane;
	o->tok = tok;
	for (int k = 0; k < MAX_DEPS; k++) {
		int p = o->deps[k];
		if (p < 0 || ops[p].ncomp)
			continue;
		if (!ops[p].nsub || ops[p].lane != lane)
			fail("op %d submitted on lane %#x before its predecessor %d completed "
			     "(%s, lane %#x)",
			     i, lane, p, ops[p].nsub ? "in flight" : "not even submitted",
			     ops[p].lane);
	}
}

static void on_complete(void *arg, uint32_t client, ve_tok tok, uint32_t lane, int status)
{
	(void)arg;
	(void)client;
	(void)lane;
	int i = -1;
	for (int k = 0; k < nops && i < 0; k++)
		if (ops[k].tok == tok && ops[k].nsub && !ops[k].ncomp)
			i = k;
	if (i < 0) {
		for (int k = 0; k < 64; k++)
			if (others[k] == tok)
				return;
		fail("a completion of token %#llx not in flight", (unsigned long long)tok);
		return;
	}
	ops[i].ncomp++;
	ops[i].status = status;
	if (status) {
		lost = true;
		fail("op %d completed with status %d", i, status);
	}
	for (int k = 0; k < MAX_DEPS; k++) {
		int p = ops[i].deps[k];
		if (p >= 0 && !ops[p].ncomp)
			fail("op %d completed before its predecessor %d", i, p);
	}
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: soak_client SOCKET SEED SECONDS\n");
		return 2;
	}
	uint64_t seed = strtoull(argv[2], NULL, 0), secs = strtoull(argv[3], NULL, 0);
	uint64_t rng = seed * 0x9e3779b97f4a7c15ull + 1;
	ve__log_init();
	struct ve_sim_config sc;
	ve_sim_config_default(&sc);
	sc.seed = seed;
	sc.wait_advances = true;
	sc.jitter = 0.2;
	sc.submit_latency_ns = ve__rand_below(&rng, 3000);
	struct ve_backend *b;
	if (ve_sim_create(&sc, &b))
		return 2;
	char err[512];
	struct ve_runtime_config rc = {.daemon = argv[1],
				       .max_clients = 1,
				       .max_ops = 4096,
				       .dispatch = {.on_submit = on_submit, .on_complete = on_complete}};
	struct ve_runtime *rt;
	if (ve_runtime_create(&rc, b, &rt, err, sizeof(err))) {
		fprintf(stderr, "soak-client: %s\n", err);
		return 2;
	}
	struct ve_vctx_config vc = {.client_id = 0, .max_ops = 4096};
	struct ve_vctx *v;
	if (ve_vctx_create(&vc, &v) || ve_runtime_attach(rt, v, 0, 0) || ve_runtime_start(rt))
		return 2;
	ve_stream s[MAX_STREAMS];
	ve_event ev;
	for (int k = 0; k < MAX_STREAMS; k++)
		ve_vctx_stream_create(v, VE_STREAM_NON_BLOCKING, 0, &s[k]);
	ve_vctx_event_create(v, 0, &ev);
	uint64_t total = 0, rounds = 0, t_end = ve__now_ns() + secs * 1000000000ull;
	while (!failure[0] && ve__now_ns() < t_end) {
		/* One round: fresh op table (nothing is in flight between rounds). */
		nops = 0;
		memset(ops, 0, sizeof(ops));
		int last[MAX_STREAMS] = {-1, -1, -1, -1};
		int pending_wait[MAX_STREAMS] = {-1, -1, -1, -1};
		int n = 20 + (int)ve__rand_below(&rng, MAX_OPS - 20);
		for (int i = 0; i < n && !failure[0]; i++) {
			int st = (int)ve__rand_below(&rng, MAX_STREAMS);
			if (ve__rand_below(&rng, 10) == 0 && last[st] >= 0) {
				/* Another stream waits for everything so far on this one. */
				int to = (int)ve__rand_below(&rng, MAX_STREAMS);
				if (to != st && ve_vctx_event_record(v, ev, s[st], 0) == 0 &&
				    ve_vctx_stream_wait_event(v, s[to], ev) == 0)
					pending_wait[to] = last[st];
			}
			struct op *o = &ops[nops];
			o->deps[0] = last[st];
			o->deps[1] = pending_wait[st];
			pending_wait[st] = -1;
			struct ve_desc d;
			memset(&d, 0, sizeof(d));
			if (ve__rand_below(&rng, 5)) {
				d.kind = VE_OP_KERNEL;
				d.u.k.fn = 0x50 + ve__rand_below(&rng, 4);
				d.u.k.name_id = (uint64_t)nops + 1;
				d.u.k.grid = (struct ve_dim3){1 + ve__rand_below(&rng, 2048), 1, 1};
				d.u.k.block = (struct ve_dim3){32u << ve__rand_below(&rng, 5), 1, 1};
				ve_desc_finalize(&d);
			} else {
				d.kind = VE_OP_MEMCPY;
				d.u.cp.src = (uint64_t)nops + 1;
				d.u.cp.bytes = 1 + ve__rand_below(&rng, 1 << 20);
			}
			nops++;
			int r = ve_vctx_submit(v, s[st], &d, 0, NULL);
			if (r) {
				fail("submit returned %d", r);
				break;
			}
			last[st] = nops - 1;
		}
		int r = ve_vctx_ctx_sync(v);
		if (r && !failure[0])
			fail("context sync returned %d", r);
		for (int i = 0; i < nops && !failure[0]; i++) {
			if (ops[i].ncomp != 1 || ops[i].nsub != 1) {
				lost = ops[i].ncomp == 0;
				fail("op %d of round %llu: submitted %u times, completed %u times", i,
				     (unsigned long long)rounds, ops[i].nsub, ops[i].ncomp);
			}
		}
		total += (uint64_t)nops;
		rounds++;
	}
	ve_runtime_stop(rt); /* the link's statistics are the dispatcher thread's */
	struct ve_remote_stats rs = {0};
	if (ve_runtime_remote(rt))
		ve_remote_stats(ve_runtime_remote(rt), &rs);
	ve_runtime_detach(rt, 0);
	ve_runtime_destroy(rt);
	ve_vctx_destroy(v);
	b->ops->destroy(b);
	if (failure[0]) {
		printf("soak-client: FAIL %s (after %llu ops)\n", failure, (unsigned long long)total);
		return lost ? 3 : 1;
	}
	printf("soak-client: ok ops=%llu rounds=%llu failovers=%llu reconnects=%llu\n",
	       (unsigned long long)total, (unsigned long long)rounds,
	       (unsigned long long)rs.failovers, (unsigned long long)rs.reconnects);
	return 0;
}
