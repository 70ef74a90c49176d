/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the cross-vctx waits (vctx.h, "cross-vctx waits"): extern
 * markers, completion watchers and ve_vctx_stream_wait_event_extern, the
 * pieces that order work across devices (one vctx per client and device).
 * The randomised multi-device check over dispatchers and simulated GPUs is
 * test_multidev.
 */
#include "../harness.h"

#include "core/vctx.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

/* ------------------------------------------------------------------ helpers */

static struct ve_vctx *mk_w(uint32_t client, uint32_t max_ops, uint32_t max_watchers)
{
	struct ve_vctx_config cfg = {.client_id = client,
				     .max_ops = max_ops,
				     .max_streams = 64,
				     .max_events = 64,
				     .big_payloads = 4,
				     .max_watchers = max_watchers};
	struct ve_vctx *v = NULL;
	VE_CHECK_EQ(ve_vctx_create(&cfg, &v), 0);
	return v;
}

static struct ve_vctx *mk(uint32_t client)
{
	return mk_w(client, 0, 0);
}

static ve_tok kern(struct ve_vctx *v, ve_stream s)
{
	struct ve_desc d = {.kind = VE_OP_KERNEL};
	d.u.k.fn = 0x1234;
	d.u.k.grid = (struct ve_dim3){1, 1, 1};
	d.u.k.block = (struct ve_dim3){32, 1, 1};
	ve_tok t = 0;
	VE_CHECK_EQ(ve_vctx_submit(v, s, &d, 0, &t), 0);
	VE_CHECK(t != VE_TOK_NONE);
	return t;
}

static ve_stream mkstream(struct ve_vctx *v, unsigned flags)
{
	ve_stream s = 0;
	VE_CHECK_EQ(ve_vctx_stream_create(v, flags, 0, &s), 0);
	return s;
}

static ve_event mkevent(struct ve_vctx *v)
{
	ve_event e = 0;
	VE_CHECK_EQ(ve_vctx_event_create(v, VE_EVENT_DISABLE_TIMING, &e), 0);
	return e;
}

/* Ops popped and not completed, per vctx: the test's dispatcher. */
struct rd {
	ve_tok t[256];
	int n;
};

static void pop(struct ve_vctx *v, struct rd *r)
{
	struct ve_ready_info ri[64];
	int n;
	while ((n = ve_vctx_pop_ready(v, ri, 64)) > 0)
		for (int i = 0; i < n && r->n < 256; i++)
			r->t[r->n++] = ri[i].tok;
}

static bool ready(struct ve_vctx *v, struct rd *r, ve_tok t)
{
	pop(v, r);
	for (int i = 0; i < r->n; i++)
		if (r->t[i] == t)
			return true;
	return false;
}

static void done_st(struct ve_vctx *v, struct rd *r, ve_tok t, int status)
{
	VE_CHECK(ready(v, r, t));
	VE_CHECK_EQ(ve_vctx_dispatched(v, t, 0), 0);
	for (int i = 0; i < r->n; i++)
		if (r->t[i] == t) {
			r->t[i] = r->t[--r->n];
			break;
		}
	VE_CHECK_EQ(ve_vctx_complete(v, t, status, 0), 0);
}

static void done(struct ve_vctx *v, struct rd *r, ve_tok t)
{
	done_st(v, r, t, 0);
}

static void idle(struct ve_vctx *v)
{
	struct ve_vctx_stats st;
	ve_vctx_stats(v, &st);
	VE_CHECK_EQ(st.live_ops, 0);
	VE_CHECK_EQ(st.watchers, 0);
	VE_CHECK_EQ(st.extern_holds, 0);
	VE_CHECK_EQ(ve_vctx_ctx_query(v), 0);
}

/* ------------------------------------------------------------------ extern markers */

VE_TEST(extern_marker_holds_stream_until_done)
{
	struct ve_vctx *v = mk(0);
	struct rd r = {0};
	ve_stream s = mkstream(v, 0), s2 = mkstream(v, VE_STREAM_NON_BLOCKING);
	ve_tok k1 = kern(v, s);
	ve_tok m = 0;
	VE_CHECK_EQ(ve_vctx_stream_wait_extern(v, s, &m), 0);
	ve_tok k2 = kern(v, s);
	ve_tok other = kern(v, s2); /* another stream: not held */
	VE_CHECK(ready(v, &r, k1));
	VE_CHECK(ready(v, &r, other));
	VE_CHECK(!ready(v, &r, k2));
	struct ve_vctx_stats st;
	ve_vctx_stats(v, &st);
	VE_CHECK_EQ(st.extern_holds, 1);
	/* Only a held extern marker can be released. */
	VE_CHECK_EQ(ve_vctx_extern_done(v, k1), -EINVAL);
	done(v, &r, k1);
	VE_CHECK(!ready(v, &r, k2)); /* its stream predecessor is done, the hold is not */
	VE_CHECK_EQ(ve_vctx_stream_query(v, s), -EBUSY);
	VE_CHECK_EQ(ve_vctx_extern_done(v, m), 0);
	VE_CHECK(ready(v, &r, k2));
	/* Exactly once: the marker completed, its token is gone. */
	VE_CHECK_EQ(ve_vctx_extern_done(v, m), -ENOENT);
	VE_CHECK_EQ(ve_vctx_extern_done(v, VE_TOK_NONE), -ENOENT);
	done(v, &r, k2);
	done(v, &r, other);
	idle(v);
	ve_vctx_destroy(v);
}

VE_TEST(extern_released_before_stream_predecessor)
{
	struct ve_vctx *v = mk(0);
	struct rd r = {0};
	ve_stream s = mkstream(v, VE_STREAM_NON_BLOCKING);
	ve_tok k1 = kern(v, s);
	ve_tok m = 0;
	VE_CHECK_EQ(ve_vctx_stream_wait_extern(v, s, &m), 0);
	ve_tok k2 = kern(v, s);
	/* Released first: the marker still waits for k1 (S1). */
	VE_CHECK_EQ(ve_vctx_extern_done(v, m), 0);
	VE_CHECK_EQ(ve_vctx_extern_done(v, m), -EINVAL); /* live, but no longer held */
	VE_CHECK(!ready(v, &r, k2));
	done(v, &r, k1);
	VE_CHECK(ready(v, &r, k2));
	done(v, &r, k2);
	idle(v);
	ve_vctx_destroy(v);
}

VE_TEST(extern_marker_on_legacy_is_a_legacy_action)
{
	struct ve_vctx *v = mk(0);
	struct rd r = {0};
	ve_stream b = mkstream(v, 0), nb = mkstream(v, VE_STREAM_NON_BLOCKING);
	ve_tok kb = kern(v, b);
	ve_tok m = 0;
	VE_CHECK_EQ(ve_vctx_stream_wait_extern(v, VE_STREAM_LEGACY, &m), 0);
	ve_tok kb2 = kern(v, b);  /* D2: after the legacy marker */
	ve_tok knb = kern(v, nb); /* D4: exempt */
	VE_CHECK(ready(v, &r, kb));
	VE_CHECK(ready(v, &r, knb));
	VE_CHECK(!ready(v, &r, kb2));
	VE_CHECK_EQ(ve_vctx_extern_done(v, m), 0);
	VE_CHECK(!ready(v, &r, kb2)); /* D1: the marker waits for kb */
	done(v, &r, kb);
	VE_CHECK(ready(v, &r, kb2));
	done(v, &r, kb2);
	done(v, &r, knb);
	idle(v);
	ve_vctx_destroy(v);
}

VE_TEST(extern_bad_arguments)
{
	struct ve_vctx *v = mk(0);
	ve_tok m;
	VE_CHECK_EQ(ve_vctx_stream_wait_extern(v, 0x12345678900ull, &m), -ENOENT);
	VE_CHECK_EQ(ve_vctx_stream_wait_extern(v, VE_STREAM_LEGACY, NULL), -EINVAL);
	VE_CHECK_EQ(ve_vctx_stream_wait_extern(NULL, VE_STREAM_LEGACY, &m), -EINVAL);
	VE_CHECK_EQ(ve_vctx_extern_done(NULL, 1), -EINVAL);
	VE_CHECK_EQ(ve_vctx_on_complete(v, 1, NULL, NULL), -EINVAL);
	struct ve_vctx *w = mk(1);
	VE_CHECK_EQ(ve_vctx_stream_wait_event_extern(v, VE_STREAM_LEGACY, w, 0x77), -ENOENT);
	ve_event e = mkevent(w);
	VE_CHECK_EQ(ve_vctx_stream_wait_event_extern(v, 0x12345678900ull, w, e), -ENOENT);
	VE_CHECK_EQ(ve_vctx_stream_wait_event_extern(NULL, VE_STREAM_LEGACY, w, e), -EINVAL);
	ve_vctx_destroy(w);
	ve_vctx_destroy(v);
}

/* ------------------------------------------------------------------ watchers */

struct probe {
	struct ve_vctx *v;
	atomic_int calls;
	int order[8];
	atomic_int n;
	int tag;
	int ctx_query; /* what ve_vctx_ctx_query(v) said from inside the callback */
};

static void probe_cb(void *arg)
{
	struct probe *p = arg;
	atomic_fetch_add(&p->calls, 1);
	/* Calling back into the vctx whose completion fired us: would deadlock
	 * if the lock were still held. */
	if (p->v)
		p->ctx_query = ve_vctx_ctx_query(p->v);
}

struct tagged {
	struct probe *p;
	int tag;
};

static void order_cb(void *arg)
{
	struct tagged *t = arg;
	int i = atomic_fetch_add(&t->p->n, 1);
	if (i < 8)
		t->p->order[i] = t->tag;
}

VE_TEST(on_complete_now_later_and_in_order)
{
	struct ve_vctx *v = mk(0);
	struct rd r = {0};
	ve_stream s = mkstream(v, 0);
	struct probe p = {.v = v};
	/* Already complete (VE_TOK_NONE, a finished op): called at once. */
	VE_CHECK_EQ(ve_vctx_on_complete(v, VE_TOK_NONE, probe_cb, &p), 0);
	VE_CHECK_EQ(atomic_load(&p.calls), 1);
	ve_tok k = kern(v, s);
	ve_tok k2 = kern(v, s);
	VE_CHECK_EQ(ve_vctx_on_complete(v, k, probe_cb, &p), 0);
	struct tagged t[3] = {{&p, 1}, {&p, 2}, {&p, 3}};
	for (int i = 0; i < 3; i++)
		VE_CHECK_EQ(ve_vctx_on_complete(v, k, order_cb, &t[i]), 0);
	VE_CHECK_EQ(atomic_load(&p.calls), 1);
	struct ve_vctx_stats st;
	ve_vctx_stats(v, &st);
	VE_CHECK_EQ(st.watchers, 4);
	done(v, &r, k);
	/* Called once, outside the lock (ctx_query answered: k2 still pending). */
	VE_CHECK_EQ(atomic_load(&p.calls), 2);
	VE_CHECK_EQ(p.ctx_query, -EBUSY);
	VE_CHECK_EQ(atomic_load(&p.n), 3);
	VE_CHECK(p.order[0] == 1 && p.order[1] == 2 && p.order[2] == 3);
	VE_CHECK_EQ(ve_vctx_on_complete(v, k, probe_cb, &p), 0); /* old token: done */
	VE_CHECK_EQ(atomic_load(&p.calls), 3);
	done(v, &r, k2);
	VE_CHECK_EQ(atomic_load(&p.calls), 3);
	idle(v);
	ve_vctx_destroy(v);
}

VE_TEST(on_complete_fires_for_inline_markers_and_errors)
{
	struct ve_vctx *v = mk(0);
	struct rd r = {0};
	ve_stream s = mkstream(v, 0);
	ve_event e = mkevent(v);
	ve_tok k = kern(v, s);
	VE_CHECK_EQ(ve_vctx_event_record(v, e, s, 0), 0);
	ve_tok g = 0;
	VE_CHECK_EQ(ve_vctx_event_generation(v, e, NULL, &g), 0);
	struct probe p = {0};
	/* The untimed record is an inline marker: it completes inside the
	 * completion of k, in the cascade, and still fires its watcher. */
	VE_CHECK_EQ(ve_vctx_on_complete(v, g, probe_cb, &p), 0);
	done_st(v, &r, k, -EFAULT);
	VE_CHECK_EQ(atomic_load(&p.calls), 1);
	VE_CHECK_EQ(ve_vctx_error(v), -EFAULT);
	ve_vctx_destroy(v);
}

VE_TEST(on_complete_back_pressure)
{
	struct ve_vctx *v = mk_w(0, 64, 2);
	struct rd r = {0};
	ve_stream s = mkstream(v, 0);
	ve_tok k = kern(v, s);
	struct probe p = {0};
	VE_CHECK_EQ(ve_vctx_on_complete(v, k, probe_cb, &p), 0);
	VE_CHECK_EQ(ve_vctx_on_complete(v, k, probe_cb, &p), 0);
	VE_CHECK_EQ(ve_vctx_on_complete(v, k, probe_cb, &p), -EAGAIN);
	/* Nothing armed by the refused call. */
	done(v, &r, k);
	VE_CHECK_EQ(atomic_load(&p.calls), 2);
	/* Records are back once the callbacks ran. */
	ve_tok k2 = kern(v, s);
	VE_CHECK_EQ(ve_vctx_on_complete(v, k2, probe_cb, &p), 0);
	VE_CHECK_EQ(ve_vctx_on_complete(v, k2, probe_cb, &p), 0);
	done(v, &r, k2);
	VE_CHECK_EQ(atomic_load(&p.calls), 4);
	idle(v);
	ve_vctx_destroy(v);
}

/* ------------------------------------------------------------------ event waits across vctxs */

VE_TEST(wait_event_extern_orders_across_vctxs)
{
	struct ve_vctx *a = mk(0), *b = mk(1);
	struct rd ra = {0}, rb = {0};
	ve_stream sa = mkstream(a, 0), sb = mkstream(b, 0);
	ve_event e = mkevent(a);
	ve_tok ka = kern(a, sa);
	VE_CHECK_EQ(ve_vctx_event_record(a, e, sa, 0), 0);
	ve_tok ka2 = kern(a, sa); /* after the record: not captured */
	ve_tok kb0 = kern(b, sb);
	VE_CHECK_EQ(ve_vctx_stream_wait_event_extern(b, sb, a, e), 0);
	ve_tok kb = kern(b, sb);
	/* E3: re-recording e after the wait does not retarget it. */
	VE_CHECK_EQ(ve_vctx_event_record(a, e, sa, 0), 0);
	VE_CHECK(ready(b, &rb, kb0));
	VE_CHECK(!ready(b, &rb, kb));
	done(b, &rb, kb0);
	VE_CHECK(!ready(b, &rb, kb));
	VE_CHECK_EQ(ve_vctx_stream_query(b, sb), -EBUSY);
	done(a, &ra, ka); /* the captured generation completes: b is released */
	VE_CHECK(ready(b, &rb, kb));
	done(b, &rb, kb);
	VE_CHECK_EQ(ve_vctx_event_query(a, e), -EBUSY); /* the new generation waits for ka2 */
	done(a, &ra, ka2);
	idle(a);
	idle(b);
	ve_vctx_destroy(a);
	ve_vctx_destroy(b);
}

VE_TEST(wait_event_extern_e4_no_edge_but_legacy_action)
{
	struct ve_vctx *a = mk(0), *b = mk(1);
	struct rd ra = {0}, rb = {0};
	ve_stream sa = mkstream(a, 0), sb = mkstream(b, 0), sb2 = mkstream(b, 0);
	ve_event never = mkevent(a), fin = mkevent(a);
	ve_tok ka = kern(a, sa);
	VE_CHECK_EQ(ve_vctx_event_record(a, fin, sa, 0), 0);
	done(a, &ra, ka);
	struct ve_vctx_stats st0, st1;
	ve_vctx_stats(b, &st0);
	/* Never recorded, and completed: no edge and, off the legacy stream,
	 * no op at all. */
	VE_CHECK_EQ(ve_vctx_stream_wait_event_extern(b, sb, a, never), 0);
	VE_CHECK_EQ(ve_vctx_stream_wait_event_extern(b, sb, a, fin), 0);
	ve_vctx_stats(b, &st1);
	VE_CHECK_EQ(st1.submitted, st0.submitted);
	ve_tok kb = kern(b, sb);
	VE_CHECK(ready(b, &rb, kb));
	/* On the legacy stream the wait is still a legacy action (E4, D1/D2):
	 * later work on blocking stream sb2 waits for kb. */
	VE_CHECK_EQ(ve_vctx_stream_wait_event_extern(b, VE_STREAM_LEGACY, a, never), 0);
	ve_tok kb2 = kern(b, sb2);
	VE_CHECK(!ready(b, &rb, kb2));
	done(b, &rb, kb);
	VE_CHECK(ready(b, &rb, kb2));
	done(b, &rb, kb2);
	idle(a);
	idle(b);
	ve_vctx_destroy(a);
	ve_vctx_destroy(b);
}

VE_TEST(wait_event_extern_on_legacy_joins_blocking_streams)
{
	struct ve_vctx *a = mk(0), *b = mk(1);
	struct rd ra = {0}, rb = {0};
	ve_stream sa = mkstream(a, VE_STREAM_NON_BLOCKING), sb = mkstream(b, 0),
		  nb = mkstream(b, VE_STREAM_NON_BLOCKING);
	ve_event e = mkevent(a);
	ve_tok ka = kern(a, sa);
	VE_CHECK_EQ(ve_vctx_event_record(a, e, sa, 0), 0);
	ve_tok kb = kern(b, sb);
	VE_CHECK_EQ(ve_vctx_stream_wait_event_extern(b, VE_STREAM_LEGACY, a, e), 0);
	ve_tok kb2 = kern(b, sb), knb = kern(b, nb), kl = kern(b, VE_STREAM_LEGACY);
	VE_CHECK(ready(b, &rb, knb)); /* non-blocking: exempt */
	VE_CHECK(!ready(b, &rb, kb2));
	done(a, &ra, ka);
	VE_CHECK(!ready(b, &rb, kb2)); /* the legacy wait also waits for kb (D1) */
	VE_CHECK(!ready(b, &rb, kl));
	done(b, &rb, kb);
	VE_CHECK(ready(b, &rb, kb2));
	VE_CHECK(!ready(b, &rb, kl)); /* kl: legacy, after the blocking kb2 (D1) */
	done(b, &rb, kb2);
	VE_CHECK(ready(b, &rb, kl));
	done(b, &rb, kl);
	done(b, &rb, knb);
	idle(a);
	idle(b);
	ve_vctx_destroy(a);
	ve_vctx_destroy(b);
}

VE_TEST(wait_event_extern_out_of_watchers_records_nothing)
{
	struct ve_vctx *a = mk_w(0, 64, 1), *b = mk(1);
	struct rd ra = {0}, rb = {0};
	ve_stream sa = mkstream(a, 0), sb = mkstream(b, 0);
	ve_event e = mkevent(a);
	ve_tok ka = kern(a, sa);
	VE_CHECK_EQ(ve_vctx_event_record(a, e, sa, 0), 0);
	VE_CHECK_EQ(ve_vctx_stream_wait_event_extern(b, sb, a, e), 0);
	struct ve_vctx_stats st0, st1;
	ve_vctx_stats(b, &st0);
	VE_CHECK_EQ(st0.extern_holds, 1);
	VE_CHECK_EQ(ve_vctx_stream_wait_event_extern(b, sb, a, e), -EAGAIN);
	ve_vctx_stats(b, &st1);
	VE_CHECK_EQ(st1.submitted, st0.submitted);
	VE_CHECK_EQ(st1.extern_holds, 1);
	ve_tok kb = kern(b, sb);
	VE_CHECK(!ready(b, &rb, kb));
	done(a, &ra, ka);
	VE_CHECK(ready(b, &rb, kb));
	done(b, &rb, kb);
	idle(a);
	idle(b);
	ve_vctx_destroy(a);
	ve_vctx_destroy(b);
}

VE_TEST(wait_event_extern_same_vctx_is_local)
{
	struct ve_vctx *a = mk(0);
	struct rd r = {0};
	ve_stream s1 = mkstream(a, VE_STREAM_NON_BLOCKING),
		  s2 = mkstream(a, VE_STREAM_NON_BLOCKING);
	ve_event e = mkevent(a);
	ve_tok k1 = kern(a, s1);
	VE_CHECK_EQ(ve_vctx_event_record(a, e, s1, 0), 0);
	VE_CHECK_EQ(ve_vctx_stream_wait_event_extern(a, s2, a, e), 0);
	ve_tok k2 = kern(a, s2);
	struct ve_vctx_stats st;
	ve_vctx_stats(a, &st);
	VE_CHECK_EQ(st.extern_holds, 0);
	VE_CHECK(!ready(a, &r, k2));
	done(a, &r, k1);
	VE_CHECK(ready(a, &r, k2));
	done(a, &r, k2);
	idle(a);
	ve_vctx_destroy(a);
}

VE_TEST(dump_names_extern_markers)
{
	struct ve_vctx *v = mk(0);
	ve_tok m;
	VE_CHECK_EQ(ve_vctx_stream_wait_extern(v, mkstream(v, 0), &m), 0);
	char buf[8192];
	FILE *f = fmemopen(buf, sizeof(buf), "w");
	VE_CHECK(f != NULL);
	ve_vctx_dump(v, f);
	fclose(f);
	VE_CHECK_MSG(strstr(buf, "[extern") && strstr(buf, "extern_holds=1"), "%s", buf);
	VE_CHECK_EQ(ve_vctx_extern_done(v, m), 0);
	idle(v);
	ve_vctx_destroy(v);
}

struct small_done {
	struct ve_vctx *v;
	ve_tok t;
	int rc;
};

static void *small_done_main(void *arg)
{
	struct small_done *sd = arg;
	sd->rc = ve_vctx_complete(sd->v, sd->t, 0, 0);
	return NULL;
}

/* A ping-pong of cross waits between two vctxs, all released by one kernel
 * completion: each hop's callback completes the next hop's marker, whose
 * watcher releases the next... They run from one loop, not nested. */
VE_TEST(long_cross_chain_does_not_overflow_stack)
{
	enum { HOPS = 20000 };
	struct ve_vctx *v[2] = {mk_w(0, 4 * HOPS, 2 * HOPS), mk_w(1, 4 * HOPS, 2 * HOPS)};
	struct rd r0 = {0}, r1 = {0};
	ve_stream s[2] = {mkstream(v[0], 0), mkstream(v[1], 0)};
	ve_event e[2] = {mkevent(v[0]), mkevent(v[1])};
	ve_tok k0 = kern(v[0], s[0]);
	VE_CHECK_EQ(ve_vctx_event_record(v[0], e[0], s[0], 0), 0);
	for (int i = 0; i < HOPS; i++) {
		int to = (i + 1) & 1, from = i & 1;
		VE_CHECK_EQ(ve_vctx_stream_wait_event_extern(v[to], s[to], v[from], e[from]), 0);
		VE_CHECK_EQ(ve_vctx_event_record(v[to], e[to], s[to], 0), 0);
	}
	ve_tok last = kern(v[HOPS & 1], s[HOPS & 1]);
	struct rd *rl = (HOPS & 1) ? &r1 : &r0;
	VE_CHECK(!ready(v[HOPS & 1], rl, last));
	/* Completed on a thread with a small stack: nested callbacks would
	 * need HOPS frames of it. */
	VE_CHECK(ready(v[0], &r0, k0));
	VE_CHECK_EQ(ve_vctx_dispatched(v[0], k0, 0), 0);
	struct small_done sd = {.v = v[0], .t = k0, .rc = -1};
	pthread_attr_t at;
	pthread_t th;
	VE_CHECK_EQ(pthread_attr_init(&at), 0);
	VE_CHECK_EQ(pthread_attr_setstacksize(&at, 256 * 1024), 0);
	VE_CHECK_EQ(pthread_create(&th, &at, small_done_main, &sd), 0);
	VE_CHECK_EQ(pthread_join(th, NULL), 0);
	pthread_attr_destroy(&at);
	VE_CHECK_EQ(sd.rc, 0);
	r0.n = 0;
	VE_CHECK(ready(v[HOPS & 1], rl, last));
	done(v[HOPS & 1], rl, last);
	idle(v[0]);
	idle(v[1]);
	ve_vctx_destroy(v[0]);
	ve_vctx_destroy(v[1]);
}

/* ------------------------------------------------------------------ threads */

struct completer {
	struct ve_vctx *v;
	atomic_int stop;
	atomic_long completed;
};

/* A device's completion thread: pops and completes whatever is ready. */
static void *completer_main(void *arg)
{
	struct completer *c = arg;
	struct ve_ready_info ri[64];
	while (!atomic_load(&c->stop)) {
		int n = ve_vctx_pop_ready(c->v, ri, 64);
		for (int i = 0; i < n; i++) {
			ve_vctx_dispatched(c->v, ri[i].tok, 0);
			ve_vctx_complete(c->v, ri[i].tok, 0, 0);
		}
		atomic_fetch_add(&c->completed, n);
		if (!n)
			sched_yield();
	}
	return NULL;
}

struct issuer {
	struct ve_vctx *self, *peer;
	ve_stream s;
	ve_event mine, peers;
	int rounds;
	int rc;
};

/* Each round: a kernel, record my event, wait for the peer's, sync. Both
 * threads do it at once against each other, with completions on two more
 * threads: watchers fire concurrently from either completer. */
static void *issuer_main(void *arg)
{
	struct issuer *is = arg;
	for (int i = 0; i < is->rounds && !is->rc; i++) {
		struct ve_desc d = {.kind = VE_OP_KERNEL};
		d.u.k.fn = 0x99;
		d.u.k.grid = (struct ve_dim3){1, 1, 1};
		d.u.k.block = (struct ve_dim3){32, 1, 1};
		is->rc = ve_vctx_submit(is->self, is->s, &d, 0, NULL);
		if (!is->rc)
			is->rc = ve_vctx_event_record(is->self, is->mine, is->s, 0);
		while (!is->rc) {
			is->rc =
			    ve_vctx_stream_wait_event_extern(is->self, is->s, is->peer, is->peers);
			if (is->rc != -EAGAIN)
				break;
			is->rc = 0;
			sched_yield();
		}
		if (!is->rc && (i & 7) == 7)
			is->rc = ve_vctx_stream_sync(is->self, is->s);
	}
	if (!is->rc)
		is->rc = ve_vctx_ctx_sync(is->self);
	return NULL;
}

VE_TEST(threads_cross_waits_both_directions)
{
	struct ve_vctx *v[2] = {mk_w(0, 256, 8), mk_w(1, 256, 8)};
	struct completer c[2] = {{.v = v[0]}, {.v = v[1]}};
	pthread_t ct[2], it[2];
	struct issuer is[2];
	ve_event ev[2] = {mkevent(v[0]), mkevent(v[1])};
	for (int i = 0; i < 2; i++) {
		is[i] = (struct issuer){.self = v[i],
					.peer = v[1 - i],
					.s = mkstream(v[i], 0),
					.mine = ev[i],
					.peers = ev[1 - i],
					.rounds = 2000};
		VE_CHECK_EQ(pthread_create(&ct[i], NULL, completer_main, &c[i]), 0);
	}
	for (int i = 0; i < 2; i++)
		VE_CHECK_EQ(pthread_create(&it[i], NULL, issuer_main, &is[i]), 0);
	for (int i = 0; i < 2; i++)
		VE_CHECK_EQ(pthread_join(it[i], NULL), 0);
	for (int i = 0; i < 2; i++) {
		atomic_store(&c[i].stop, 1);
		VE_CHECK_EQ(pthread_join(ct[i], NULL), 0);
	}
	for (int i = 0; i < 2; i++) {
		VE_CHECK_EQ(is[i].rc, 0);
		VE_CHECK_EQ(atomic_load(&c[i].completed), 2000);
		idle(v[i]);
	}
	ve_vctx_destroy(v[0]);
	ve_vctx_destroy(v[1]);
}
