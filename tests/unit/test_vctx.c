/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the vctx, one per ordering rule of docs/semantics.md
 * ("Ordering rules implemented by the vctx") plus the API contract: errors,
 * back-pressure, requeue, sticky errors, dumps, deep marker chains. The
 * randomised cross-check against the reference model is test_vctx_prop.
 */
#include "../harness.h"

#include "core/vctx.h"
#include "util/util.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------ helpers */

static void dummy_kernel(void)
{
}

static atomic_int g_host_runs;

static void host_fn(void *arg)
{
	(void)arg;
	atomic_fetch_add(&g_host_runs, 1);
}

static struct ve_vctx *mk(uint32_t max_ops, uint32_t max_edges)
{
	struct ve_vctx_config cfg = {.max_ops = max_ops,
				     .max_edges = max_edges,
				     .max_streams = 64,
				     .max_events = 64,
				     .big_payloads = 4};
	struct ve_vctx *v = NULL;
	VE_CHECK_EQ(ve_vctx_create(&cfg, &v), 0);
	return v;
}

static struct ve_desc kdesc(uint32_t id)
{
	struct ve_desc d = {.kind = VE_OP_KERNEL};
	d.u.k.fn = (uint64_t)(uintptr_t)&dummy_kernel;
	d.u.k.name_id = id;
	d.u.k.grid = (struct ve_dim3){1, 1, 1};
	d.u.k.block = (struct ve_dim3){32, 1, 1};
	return d;
}

static ve_tok kern(struct ve_vctx *v, ve_stream s)
{
	struct ve_desc d = kdesc(1);
	ve_tok t = 0;
	VE_CHECK_EQ(ve_vctx_submit(v, s, &d, 0, &t), 0);
	VE_CHECK(t != VE_TOK_NONE);
	return t;
}

static ve_stream mkstream(struct ve_vctx *v, unsigned flags)
{
	ve_stream s = 0;
	VE_CHECK_EQ(ve_vctx_stream_create(v, flags, 0, &s), 0);
	VE_CHECK(s != VE_STREAM_LEGACY);
	return s;
}

static ve_event mkevent(struct ve_vctx *v, unsigned flags)
{
	ve_event e = 0;
	VE_CHECK_EQ(ve_vctx_event_create(v, flags, &e), 0);
	return e;
}

/* Ops popped so far and not completed: the test's dispatcher. */
struct rd {
	ve_tok t[256];
	int n;
};

static int pop(struct ve_vctx *v, struct rd *r)
{
	struct ve_ready_info ri[64];
	int total = 0, n;
	while ((n = ve_vctx_pop_ready(v, ri, 64)) > 0) {
		for (int i = 0; i < n && r->n < 256; i++)
			r->t[r->n++] = ri[i].tok;
		total += n;
	}
	return total;
}

/* Pops everything ready and reports whether t is among what was popped. */
static bool ready(struct ve_vctx *v, struct rd *r, ve_tok t)
{
	pop(v, r);
	for (int i = 0; i < r->n; i++)
		if (r->t[i] == t)
			return true;
	return false;
}

static void done_t(struct ve_vctx *v, struct rd *r, ve_tok t, uint64_t t_ns)
{
	VE_CHECK(ready(v, r, t));
	VE_CHECK_EQ(ve_vctx_dispatched(v, t, 0), 0);
	VE_CHECK_EQ(ve_vctx_complete(v, t, 0, t_ns), 0);
	for (int i = 0; i < r->n; i++)
		if (r->t[i] == t) {
			r->t[i] = r->t[--r->n];
			break;
		}
}

static void done(struct ve_vctx *v, struct rd *r, ve_tok t)
{
	done_t(v, r, t, 0);
}

/* Runs everything to completion. */
static void drain(struct ve_vctx *v, struct rd *r)
{
	for (;;) {
		pop(v, r);
		if (!r->n)
			break;
		while (r->n)
			VE_CHECK_EQ(ve_vctx_complete(v, r->t[--r->n], 0, 0), 0);
	}
	VE_CHECK_EQ(ve_vctx_ctx_query(v), 0);
}

static void msleep(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* A real second thread that blocks in a sync call. */
enum { W_STREAM, W_EVENT, W_CTX, W_SUBMIT, W_RECORD };

struct waiter {
	pthread_t th;
	struct ve_vctx *v;
	int kind;
	uint64_t h, h2;
	atomic_int finished;
	int rc;
	ve_tok tok;
};

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;
	switch (w->kind) {
	case W_STREAM:
		w->rc = ve_vctx_stream_sync(w->v, w->h);
		break;
	case W_EVENT:
		w->rc = ve_vctx_event_sync(w->v, w->h);
		break;
	case W_CTX:
		w->rc = ve_vctx_ctx_sync(w->v);
		break;
	case W_SUBMIT: {
		struct ve_desc d = kdesc(2);
		w->rc = ve_vctx_submit(w->v, w->h, &d, 0, &w->tok);
		break;
	}
	default:
		w->rc = ve_vctx_event_record(w->v, w->h2, w->h, 0);
		break;
	}
	atomic_store(&w->finished, 1);
	return NULL;
}

static void waiter_start(struct waiter *w, struct ve_vctx *v, int kind, uint64_t h)
{
	memset(w, 0, sizeof(*w));
	w->v = v;
	w->kind = kind;
	w->h = h;
	VE_CHECK_EQ(pthread_create(&w->th, NULL, waiter_main, w), 0);
}

/* The waiter is still blocked after a while (it cannot prove it never
 * returns, but an early return is caught with high probability). */
static void still_blocked(struct waiter *w)
{
	msleep(30);
	VE_CHECK(!atomic_load(&w->finished));
}

static int waiter_join(struct waiter *w)
{
	VE_CHECK_EQ(pthread_join(w->th, NULL), 0);
	VE_CHECK(atomic_load(&w->finished));
	return w->rc;
}

/* ------------------------------------------------------------------ S1 */

VE_TEST(s1_stream_order)
{
	struct ve_vctx *v = mk(0, 0);
	struct rd r = {0};
	ve_stream s = mkstream(v, VE_STREAM_NON_BLOCKING);
	ve_tok a = kern(v, s), b = kern(v, s), c = kern(v, s);
	VE_CHECK(ready(v, &r, a));
	VE_CHECK(!ready(v, &r, b));
	done(v, &r, a);
	VE_CHECK(ready(v, &r, b));
	VE_CHECK(!ready(v, &r, c));
	done(v, &r, b);
	done(v, &r, c);
	/* An empty stream's tail is satisfied. */
	ve_stream e = mkstream(v, 0);
	ve_tok t = 1;
	VE_CHECK_EQ(ve_vctx_stream_tail(v, e, &t), 0);
	VE_CHECK_EQ(t, VE_TOK_NONE);
	VE_CHECK_EQ(ve_vctx_stream_query(v, e), 0);
	VE_CHECK_EQ(ve_vctx_stream_sync(v, e), 0);
	ve_vctx_destroy(v);
}

/* ------------------------------------------------------------------ D1-D4 */

VE_TEST(d1_d2_legacy_after_blocking_and_back)
{
	struct ve_vctx *v = mk(0, 0);
	struct rd r = {0};
	ve_stream s1 = mkstream(v, 0), s2 = mkstream(v, 0);
	/* k_1 on s, k_2 on legacy, k_3 on s: k_2 after k_1, k_3 after k_2. */
	ve_tok k1 = kern(v, s1), k1b = kern(v, s2);
	ve_tok k2 = kern(v, VE_STREAM_LEGACY);
	ve_tok k3 = kern(v, s1), k3b = kern(v, s2);
	VE_CHECK(ready(v, &r, k1) && ready(v, &r, k1b));
	done(v, &r, k1);
	VE_CHECK(!ready(v, &r, k2)); /* still waits for s2 */
	done(v, &r, k1b);
	VE_CHECK(ready(v, &r, k2));
	VE_CHECK(!ready(v, &r, k3) && !ready(v, &r, k3b));
	done(v, &r, k2);
	VE_CHECK(ready(v, &r, k3) && ready(v, &r, k3b));
	/* Legacy first, then blocking, then legacy again. */
	ve_tok l1 = kern(v, VE_STREAM_LEGACY);
	ve_tok b1 = kern(v, s2);
	ve_tok l2 = kern(v, VE_STREAM_LEGACY);
	done(v, &r, k3);
	done(v, &r, k3b);
	VE_CHECK(ready(v, &r, l1));
	VE_CHECK(!ready(v, &r, b1));
	done(v, &r, l1);
	VE_CHECK(ready(v, &r, b1));
	VE_CHECK(!ready(v, &r, l2));
	done(v, &r, b1);
	done(v, &r, l2);
	ve_vctx_destroy(v);
}

VE_TEST(d3_non_blocking_exempt_both_directions)
{
	struct ve_vctx *v = mk(0, 0);
	struct rd r = {0};
	ve_stream nb = mkstream(v, VE_STREAM_NON_BLOCKING);
	unsigned fl = 9;
	VE_CHECK_EQ(ve_vctx_stream_flags(v, nb, &fl), 0);
	VE_CHECK_EQ(fl, VE_STREAM_NON_BLOCKING);
	ve_tok n1 = kern(v, nb);
	ve_tok l = kern(v, VE_STREAM_LEGACY); /* does not wait for n1 */
	ve_tok n2 = kern(v, nb);	      /* does not wait for l */
	VE_CHECK(ready(v, &r, n1) && ready(v, &r, l));
	done(v, &r, n1);
	VE_CHECK(ready(v, &r, n2)); /* l still pending */
	/* The legacy stream's sync/query ignore non-blocking work too. */
	ve_tok n3 = kern(v, nb);
	done(v, &r, l);
	VE_CHECK_EQ(ve_vctx_stream_query(v, VE_STREAM_LEGACY), 0);
	VE_CHECK_EQ(ve_vctx_stream_sync(v, VE_STREAM_LEGACY), 0);
	VE_CHECK_EQ(ve_vctx_ctx_query(v), -EBUSY);
	done(v, &r, n2);
	done(v, &r, n3);
	ve_vctx_destroy(v);
}

VE_TEST(d4_per_thread_blocking_wrt_legacy_only)
{
	struct ve_vctx *v = mk(0, 0);
	struct rd r = {0};
	ve_stream p1, p1b, p2;
	VE_CHECK_EQ(ve_vctx_stream_per_thread(v, 11, &p1), 0);
	VE_CHECK_EQ(ve_vctx_stream_per_thread(v, 11, &p1b), 0);
	VE_CHECK_EQ(ve_vctx_stream_per_thread(v, 22, &p2), 0);
	VE_CHECK_EQ(p1, p1b);
	VE_CHECK(p1 != p2 && p1 != VE_STREAM_LEGACY);
	VE_CHECK_EQ(ve_vctx_stream_destroy(v, p1), -EINVAL);
	ve_stream s = mkstream(v, 0);
	ve_tok ks = kern(v, s), kp = kern(v, p1), kq = kern(v, p2);
	/* Not ordered with another blocking stream or another thread's. */
	VE_CHECK(ready(v, &r, ks) && ready(v, &r, kp) && ready(v, &r, kq));
	/* Ordered with the legacy stream, both ways. */
	ve_tok l = kern(v, VE_STREAM_LEGACY);
	ve_tok kp2 = kern(v, p1);
	done(v, &r, ks);
	done(v, &r, kq);
	VE_CHECK(!ready(v, &r, l));
	done(v, &r, kp);
	VE_CHECK(ready(v, &r, l));
	VE_CHECK(!ready(v, &r, kp2));
	done(v, &r, l);
	VE_CHECK(ready(v, &r, kp2));
	done(v, &r, kp2);
	ve_vctx_destroy(v);
}

/* Y1 for blocking streams: after a legacy op, a blocking stream's sync and
 * query include it even with nothing issued on the stream since. */
VE_TEST(y1_blocking_stream_sync_includes_later_legacy_op)
{
	struct ve_vctx *v = mk(0, 0);
	struct rd r = {0};
	ve_stream s = mkstream(v, 0), nb = mkstream(v, VE_STREAM_NON_BLOCKING), p;
	VE_CHECK_EQ(ve_vctx_stream_per_thread(v, 5, &p), 0);
	ve_tok l = kern(v, VE_STREAM_LEGACY);
	VE_CHECK_EQ(ve_vctx_stream_query(v, s), -EBUSY);
	VE_CHECK_EQ(ve_vctx_stream_query(v, p), -EBUSY);
	VE_CHECK_EQ(ve_vctx_stream_query(v, nb), 0);
	struct waiter w;
	waiter_start(&w, v, W_STREAM, s);
	still_blocked(&w);
	done(v, &r, l);
	VE_CHECK_EQ(waiter_join(&w), 0);
	VE_CHECK_EQ(ve_vctx_stream_query(v, s), 0);
	ve_vctx_destroy(v);
}

/* The legacy stream's sync/query behave as an empty op issued on it. */
VE_TEST(y1_legacy_sync_waits_for_blocking_streams)
{
	struct ve_vctx *v = mk(0, 0);
	struct rd r = {0};
	ve_stream s = mkstream(v, 0), p;
	VE_CHECK_EQ(ve_vctx_stream_per_thread(v, 3, &p), 0);
	ve_tok a = kern(v, s), b = kern(v, p);
	VE_CHECK_EQ(ve_vctx_stream_query(v, VE_STREAM_LEGACY), -EBUSY);
	struct waiter w;
	waiter_start(&w, v, W_STREAM, VE_STREAM_LEGACY);
	still_blocked(&w);
	done(v, &r, a);
	still_blocked(&w);
	/* Work issued after the sync began does not extend it. */
	ve_tok c = kern(v, s);
	done(v, &r, b);
	for (int i = 0; i < 2000 && !atomic_load(&w.finished); i++)
		msleep(5);
	bool early = atomic_load(&w.finished);
	if (!early)
		done(v, &r, c); /* let it go, then fail */
	VE_CHECK_EQ(waiter_join(&w), 0);
	VE_CHECK_MSG(early, "legacy sync waited for work issued after it began");
	VE_CHECK_EQ(ve_vctx_stream_query(v, VE_STREAM_LEGACY), -EBUSY); /* c */
	done(v, &r, c);
	VE_CHECK_EQ(ve_vctx_stream_query(v, VE_STREAM_LEGACY), 0);
	ve_vctx_destroy(v);
}

/* ------------------------------------------------------------------ E1-E4 */

VE_TEST(e4_wait_on_never_recorded_event_is_noop)
{
	struct ve_vctx *v = mk(0, 0);
	struct rd r = {0};
	ve_stream s = mkstream(v, 0), s2 = mkstream(v, 0);
	ve_event e = mkevent(v, 0);
	VE_CHECK_EQ(ve_vctx_event_query(v, e), 0);
	VE_CHECK_EQ(ve_vctx_event_sync(v, e), 0);
	VE_CHECK_EQ(ve_vctx_stream_wait_event(v, s, e), 0);
	ve_tok k = kern(v, s);
	VE_CHECK(ready(v, &r, k));
	/* On the legacy stream the wait is still an action that joins the
	 * blocking streams: later work on s2 waits for k. */
	VE_CHECK_EQ(ve_vctx_stream_wait_event(v, VE_STREAM_LEGACY, e), 0);
	ve_tok k2 = kern(v, s2);
	VE_CHECK(!ready(v, &r, k2));
	done(v, &r, k);
	VE_CHECK(ready(v, &r, k2));
	done(v, &r, k2);
	ve_vctx_destroy(v);
}

VE_TEST(e1_e2_record_and_wait_across_streams)
{
	struct ve_vctx *v = mk(0, 0);
	struct rd r = {0};
	ve_stream a = mkstream(v, VE_STREAM_NON_BLOCKING), b = mkstream(v, VE_STREAM_NON_BLOCKING);
	ve_event e = mkevent(v, VE_EVENT_DISABLE_TIMING);
	ve_tok k1 = kern(v, a);
	VE_CHECK_EQ(ve_vctx_event_record(v, e, a, 0), 0);
	ve_tok k2 = kern(v, a); /* after the record: not captured */
	VE_CHECK_EQ(ve_vctx_stream_wait_event(v, b, e), 0);
	ve_tok k3 = kern(v, b);
	VE_CHECK_EQ(ve_vctx_event_query(v, e), -EBUSY);
	VE_CHECK(!ready(v, &r, k3));
	done(v, &r, k1);
	VE_CHECK_EQ(ve_vctx_event_query(v, e), 0);
	VE_CHECK(ready(v, &r, k3)); /* k2 still pending */
	done(v, &r, k2);
	done(v, &r, k3);
	ve_vctx_destroy(v);
}

/* Context-wide record (cuCtxRecordEvent): after the pending work of every
 * stream, non-blocking ones included, while the recording stream orders no
 * other. Context-wide wait (cuCtxWaitEvent): every stream's later work, and a
 * stream created after the wait, waits for the event; earlier work does not. */
VE_TEST(e_context_wide_record_and_wait)
{
	struct ve_vctx *v = mk(0, 0);
	struct rd r = {0};
	ve_stream a = mkstream(v, VE_STREAM_NON_BLOCKING), b = mkstream(v, 0);
	ve_stream own = mkstream(v, VE_STREAM_NON_BLOCKING);
	ve_event e = mkevent(v, VE_EVENT_DISABLE_TIMING);
	ve_tok ka = kern(v, a), kb = kern(v, b);
	VE_CHECK_EQ(ve_vctx_event_record_after_all(v, e, own, 0), 0);
	ve_tok ka2 = kern(v, a); /* after the record: not covered, not held */
	done(v, &r, ka);
	VE_CHECK(ready(v, &r, ka2)); /* the record orders nothing after it */
	VE_CHECK_EQ(ve_vctx_event_query(v, e), -EBUSY); /* b still pending */
	done(v, &r, kb);
	VE_CHECK_EQ(ve_vctx_event_query(v, e), 0);
	done(v, &r, ka2);

	ve_tok k1 = kern(v, a);
	VE_CHECK_EQ(ve_vctx_event_record(v, e, a, 0), 0);
	ve_tok early = kern(v, b); /* before the wait: free to run */
	VE_CHECK_EQ(ve_vctx_ctx_wait_event(v, e), 0);
	ve_tok kb2 = kern(v, b);
	ve_stream c = mkstream(v, VE_STREAM_NON_BLOCKING); /* made after the wait */
	ve_tok kc = kern(v, c);
	VE_CHECK(ready(v, &r, early));
	VE_CHECK(!ready(v, &r, kb2));
	VE_CHECK(!ready(v, &r, kc));
	done(v, &r, k1);
	done(v, &r, early);
	VE_CHECK(ready(v, &r, kb2));
	VE_CHECK(ready(v, &r, kc));
	done(v, &r, kb2);
	done(v, &r, kc);
	VE_CHECK_EQ(ve_vctx_ctx_sync(v), 0);
	/* Once the event completed, a new stream starts free. */
	ve_stream d = mkstream(v, VE_STREAM_NON_BLOCKING);
	ve_tok kd = kern(v, d);
	VE_CHECK(ready(v, &r, kd));
	done(v, &r, kd);
	ve_vctx_destroy(v);
}

VE_TEST(e3_rerecord_after_wait_keeps_old_generation)
{
	struct ve_vctx *v = mk(0, 0);
	struct rd r = {0};
	ve_stream a = mkstream(v, VE_STREAM_NON_BLOCKING), b = mkstream(v, VE_STREAM_NON_BLOCKING);
	ve_stream c = mkstream(v, VE_STREAM_NON_BLOCKING);
	ve_event e = mkevent(v, VE_EVENT_DISABLE_TIMING);
	ve_tok k1 = kern(v, a);
	VE_CHECK_EQ(ve_vctx_event_record(v, e, a, 0), 0);
	uint64_t g1 = 0, g2 = 0;
	VE_CHECK_EQ(ve_vctx_event_generation(v, e, &g1, NULL), 0);
	VE_CHECK_EQ(ve_vctx_stream_wait_event(v, b, e), 0);
	ve_tok kb = kern(v, b);
	/* Re-record on c behind a long op: the earlier wait must not move. */
	ve_tok kc = kern(v, c);
	VE_CHECK_EQ(ve_vctx_event_record(v, e, c, 0), 0);
	VE_CHECK_EQ(ve_vctx_event_generation(v, e, &g2, NULL), 0);
	VE_CHECK(g2 != g1 && g1 != 0);
	done(v, &r, k1);
	VE_CHECK(ready(v, &r, kb));
	/* Queries see the new generation. */
	VE_CHECK_EQ(ve_vctx_event_query(v, e), -EBUSY);
	done(v, &r, kc);
	VE_CHECK_EQ(ve_vctx_event_query(v, e), 0);
	done(v, &r, kb);
	ve_vctx_destroy(v);
}

VE_TEST(e_event_destroy_with_pending_generation)
{
	struct ve_vctx *v = mk(0, 0);
	struct rd r = {0};
	ve_stream a = mkstream(v, VE_STREAM_NON_BLOCKING), b = mkstream(v, VE_STREAM_NON_BLOCKING);
	ve_event e = mkevent(v, 0);
	ve_tok k1 = kern(v, a);
	VE_CHECK_EQ(ve_vctx_event_record(v, e, a, 0), 0);
	VE_CHECK_EQ(ve_vctx_stream_wait_event(v, b, e), 0);
	VE_CHECK_EQ(ve_vctx_event_destroy(v, e), 0);
	VE_CHECK_EQ(ve_vctx_event_destroy(v, e), -ENOENT);
	VE_CHECK_EQ(ve_vctx_event_query(v, e), -ENOENT);
	ve_tok kb = kern(v, b);
	VE_CHECK(!ready(v, &r, kb)); /* the wait still holds */
	done(v, &r, k1);
	pop(v, &r);
	/* The timed record marker also ran (and stamps nothing now). */
	drain(v, &r);
	ve_vctx_destroy(v);
}

/* ------------------------------------------------------------------ Y: events */

VE_TEST(y_event_query_and_elapsed)
{
	struct ve_vctx *v = mk(0, 0);
	struct rd r = {0};
	ve_stream s = mkstream(v, 0);
	ve_event a = mkevent(v, 0), b = mkevent(v, VE_EVENT_BLOCKING_SYNC);
	ve_event nt = mkevent(v, VE_EVENT_DISABLE_TIMING);
	float ms = -1;
	VE_CHECK_EQ(ve_vctx_event_elapsed(v, a, b, &ms), -ENODATA);
	VE_CHECK_EQ(ve_vctx_event_elapsed(v, a, nt, &ms), -EINVAL);
	VE_CHECK_EQ(ve_vctx_event_elapsed(v, a, b, NULL), -EINVAL);
	VE_CHECK_EQ(ve_vctx_event_elapsed(v, a, 0x7777, &ms), -ENOENT);
	VE_CHECK_EQ(ve_vctx_event_record(v, a, s, 0xaa), 0);
	VE_CHECK_EQ(ve_vctx_event_elapsed(v, a, b, &ms), -ENODATA); /* b never recorded */
	ve_tok k = kern(v, s);
	VE_CHECK_EQ(ve_vctx_event_record(v, b, s, 0xbb), 0);
	VE_CHECK_EQ(ve_vctx_event_record(v, nt, s, 0), 0);
	VE_CHECK_EQ(ve_vctx_event_elapsed(v, a, b, &ms), -EBUSY);
	VE_CHECK_EQ(ve_vctx_event_query(v, b), -EBUSY);
	/* Timed records leave the vctx as copy-lane ops carrying the app event. */
	pop(v, &r);
	VE_CHECK_EQ(r.n, 1);
	const struct ve_desc *d = ve_vctx_desc(v, r.t[0]);
	VE_CHECK(d && d->kind == VE_OP_EVENT_RECORD && (d->flags & VE_DESC_TIMED));
	VE_CHECK_EQ(d->u.ev.app_event, 0xaa);
	VE_CHECK_EQ(ve_desc_class(d), VE_CLASS_COPY);
	done_t(v, &r, r.t[0], 1000000);
	done_t(v, &r, k, 2000000);
	pop(v, &r);
	VE_CHECK_EQ(r.n, 1); /* b's marker; nt's is inline */
	done_t(v, &r, r.t[0], 3500000);
	VE_CHECK_EQ(ve_vctx_event_query(v, a), 0);
	VE_CHECK_EQ(ve_vctx_event_query(v, b), 0);
	VE_CHECK_EQ(ve_vctx_event_query(v, nt), 0);
	VE_CHECK_EQ(ve_vctx_event_elapsed(v, a, b, &ms), 0);
	VE_CHECK(fabsf(ms - 2.5f) < 1e-5f);
	VE_CHECK_EQ(ve_vctx_event_elapsed(v, b, a, &ms), 0);
	VE_CHECK(fabsf(ms + 2.5f) < 1e-5f);
	VE_CHECK_EQ(ve_vctx_event_elapsed(v, nt, a, &ms), -EINVAL);
	/* Re-record: elapsed uses the new generation, busy until it completes. */
	VE_CHECK_EQ(ve_vctx_event_record(v, a, s, 0xaa), 0);
	VE_CHECK_EQ(ve_vctx_event_elapsed(v, a, b, &ms), -EBUSY);
	pop(v, &r);
	done_t(v, &r, r.t[0], 4000000);
	VE_CHECK_EQ(ve_vctx_event_elapsed(v, b, a, &ms), 0);
	VE_CHECK(fabsf(ms - 0.5f) < 1e-5f);
	ve_vctx_destroy(v);
}

/* ------------------------------------------------------------------ Y: threads */

VE_TEST(y_sync_from_another_thread_blocks_until_completion)
{
	struct ve_vctx *v = mk(0, 0);
	struct rd r = {0};
	ve_stream s = mkstream(v, VE_STREAM_NON_BLOCKING);
	ve_event e = mkevent(v, VE_EVENT_BLOCKING_SYNC);
	struct waiter w;

	ve_tok k = kern(v, s);
	waiter_start(&w, v, W_STREAM, s);
	still_blocked(&w);
	done(v, &r, k);
	VE_CHECK_EQ(waiter_join(&w), 0);

	k = kern(v, s);
	VE_CHECK_EQ(ve_vctx_event_record(v, e, s, 0), 0);
	waiter_start(&w, v, W_EVENT, e);
	still_blocked(&w);
	done(v, &r, k);
	pop(v, &r); /* the timed record */
	still_blocked(&w);
	done(v, &r, r.t[0]);
	VE_CHECK_EQ(waiter_join(&w), 0);

	ve_tok k1 = kern(v, s), k2 = kern(v, VE_STREAM_LEGACY);
	waiter_start(&w, v, W_CTX, 0);
	still_blocked(&w);
	done(v, &r, k2);
	still_blocked(&w);
	done(v, &r, k1);
	VE_CHECK_EQ(waiter_join(&w), 0);

	/* Timed token waits. */
	k = kern(v, s);
	VE_CHECK_EQ(ve_vctx_tok_wait_timeout(v, k, 0), -EBUSY);
	VE_CHECK_EQ(ve_vctx_tok_wait_timeout(v, k, 2000000), -ETIMEDOUT);
	VE_CHECK(!ve_vctx_tok_done(v, k));
	done(v, &r, k);
	VE_CHECK(ve_vctx_tok_done(v, k));
	VE_CHECK_EQ(ve_vctx_tok_wait_timeout(v, k, 0), 0);
	VE_CHECK_EQ(ve_vctx_tok_wait(v, k), 0);
	ve_vctx_destroy(v);
}

/* Context-wide waits see every stream, those past the context's stack room
 * for tails (128) too: a context sync and a context-wide record wait for
 * work on the 200th stream, a legacy sync for 150 blocking streams. */
VE_TEST(y_context_waits_cover_hundreds_of_streams)
{
	struct ve_vctx_config cfg = {.max_streams = 512, .max_events = 4};
	struct ve_vctx *v = NULL;
	VE_CHECK_EQ(ve_vctx_create(&cfg, &v), 0);
	struct rd r = {0};
	ve_stream s[200];
	for (int i = 0; i < 200; i++)
		s[i] = mkstream(v, VE_STREAM_NON_BLOCKING);
	ve_tok last = kern(v, s[199]);
	ve_stream own = mkstream(v, VE_STREAM_NON_BLOCKING);
	ve_event e = mkevent(v, VE_EVENT_DISABLE_TIMING);
	VE_CHECK_EQ(ve_vctx_event_record_after_all(v, e, own, 0), 0);
	VE_CHECK_EQ(ve_vctx_event_query(v, e), -EBUSY);
	struct waiter w;
	waiter_start(&w, v, W_CTX, 0);
	still_blocked(&w);
	done(v, &r, last);
	VE_CHECK_EQ(waiter_join(&w), 0);
	VE_CHECK_EQ(ve_vctx_event_query(v, e), 0);

	ve_stream b[150];
	ve_tok k[150];
	for (int i = 0; i < 150; i++) {
		b[i] = mkstream(v, 0);
		k[i] = kern(v, b[i]);
	}
	waiter_start(&w, v, W_STREAM, VE_STREAM_LEGACY);
	for (int i = 0; i < 149; i++)
		done(v, &r, k[i]);
	still_blocked(&w);
	done(v, &r, k[149]);
	VE_CHECK_EQ(waiter_join(&w), 0);
	ve_vctx_destroy(v);
}

/* ------------------------------------------------------------------ X */

VE_TEST(x_destroy_stream_with_pending_work)
{
	struct ve_vctx *v = mk(0, 0);
	struct rd r = {0};
	ve_stream s = mkstream(v, 0);
	ve_tok k1 = kern(v, s), k2 = kern(v, s);
	VE_CHECK_EQ(ve_vctx_stream_destroy(v, s), 0); /* returns at once */
	VE_CHECK_EQ(ve_vctx_stream_destroy(v, s), -ENOENT);
	VE_CHECK_EQ(ve_vctx_stream_destroy(v, VE_STREAM_LEGACY), -EINVAL);
	struct ve_desc d = kdesc(1);
	VE_CHECK_EQ(ve_vctx_submit(v, s, &d, 0, NULL), -ENOENT);
	VE_CHECK_EQ(ve_vctx_stream_query(v, s), -ENOENT);
	VE_CHECK_EQ(ve_vctx_stream_sync(v, s), -ENOENT);
	/* Still counts for the legacy stream (X2) ... */
	ve_tok l = kern(v, VE_STREAM_LEGACY);
	VE_CHECK_EQ(ve_vctx_stream_query(v, VE_STREAM_LEGACY), -EBUSY);
	/* ... and for context sync, and still runs in order. */
	struct waiter w;
	waiter_start(&w, v, W_CTX, 0);
	VE_CHECK(ready(v, &r, k1) && !ready(v, &r, k2) && !ready(v, &r, l));
	done(v, &r, k1);
	still_blocked(&w);
	done(v, &r, k2);
	VE_CHECK(ready(v, &r, l));
	still_blocked(&w);
	done(v, &r, l);
	VE_CHECK_EQ(waiter_join(&w), 0);
	ve_vctx_destroy(v);
}

/* Destroyed streams must be reusable even in programs that never touch the
 * legacy stream (their done tails cannot block anything). */
VE_TEST(x_destroyed_streams_are_reclaimed)
{
	struct ve_vctx_config cfg = {.max_streams = 4};
	struct ve_vctx *v = NULL;
	struct rd r = {0};
	VE_CHECK_EQ(ve_vctx_create(&cfg, &v), 0);
	for (int i = 0; i < 20; i++) {
		ve_stream s = 0;
		int rc = ve_vctx_stream_create(v, 0, 0, &s);
		VE_CHECK_MSG(rc == 0, "iteration %d: stream_create %d", i, rc);
		ve_tok k = kern(v, s);
		VE_CHECK_EQ(ve_vctx_stream_destroy(v, s), 0);
		done(v, &r, k);
	}
	/* A destroyed stream with pending work is not reclaimed. */
	ve_stream s[3];
	ve_tok k[3];
	for (int i = 0; i < 3; i++) {
		VE_CHECK_EQ(ve_vctx_stream_create(v, 0, 0, &s[i]), 0);
		k[i] = kern(v, s[i]);
		VE_CHECK_EQ(ve_vctx_stream_destroy(v, s[i]), 0);
	}
	ve_stream x;
	VE_CHECK_EQ(ve_vctx_stream_create(v, 0, 0, &x), -EAGAIN);
	ve_tok l = kern(v, VE_STREAM_LEGACY);
	VE_CHECK(!ready(v, &r, l));
	done(v, &r, k[0]);
	VE_CHECK_EQ(ve_vctx_stream_create(v, 0, 0, &x), 0);
	VE_CHECK(!ready(v, &r, l));
	done(v, &r, k[1]);
	done(v, &r, k[2]);
	done(v, &r, l);
	ve_vctx_destroy(v);
}

/* Threads that exit release their per-thread streams: a program that starts
 * many more threads than there are streams keeps getting one, a released
 * stream's pending work still counts, and the other threads keep theirs
 * (the map's deletion keeps every key reachable). */
VE_TEST(x_per_thread_streams_released_at_thread_exit)
{
	struct ve_vctx_config cfg = {.max_streams = 8};
	struct ve_vctx *v = NULL;
	struct rd r = {0};
	VE_CHECK_EQ(ve_vctx_create(&cfg, &v), 0);
	ve_stream keep[3];
	for (int i = 0; i < 3; i++)
		VE_CHECK_EQ(ve_vctx_stream_per_thread(v, 1000 + (uint64_t)i, &keep[i]), 0);
	for (uint64_t key = 1; key <= 200; key++) {
		ve_stream p;
		int rc = ve_vctx_stream_per_thread(v, key, &p);
		VE_CHECK_MSG(rc == 0, "thread %llu: %d", (unsigned long long)key, rc);
		ve_tok k = kern(v, p);
		VE_CHECK_EQ(ve_vctx_stream_per_thread_release(v, key), 0);
		VE_CHECK_EQ(ve_vctx_stream_per_thread_release(v, key), -ENOENT);
		if (key == 100) { /* exited with work pending: the legacy stream waits for it */
			ve_tok l = kern(v, VE_STREAM_LEGACY);
			VE_CHECK(!ready(v, &r, l));
			done(v, &r, k);
			done(v, &r, l);
		} else {
			done(v, &r, k);
		}
		for (int i = 0; i < 3; i++) {
			ve_stream again;
			VE_CHECK_EQ(ve_vctx_stream_per_thread(v, 1000 + (uint64_t)i, &again), 0);
			VE_CHECK_EQ(again, keep[i]);
		}
	}
	ve_vctx_destroy(v);
}

/* A serial chain (each op freed before the next is made) uses every slot in
 * turn, not the one freed last, and generations past 32 bits survive in a
 * token: a stale token (an old event's) comes back to a live generation of
 * its slot only after 2^39 ops per slot. With a stack of free slots and 32
 * bits, a job at 100k serial ops/s got there in 6 hours. */
VE_TEST(tokens_spread_over_slots_and_do_not_wrap)
{
	struct ve__toktab t;
	VE_CHECK_EQ(ve__toktab_init(&t, 8, 16), 0);
	ve_tok first, prev;
	VE_CHECK_EQ(ve__tok_alloc(&t, &first), 0);
	VE_CHECK_EQ(ve__tok_complete(&t, first, NULL, NULL), 0);
	prev = first;
	for (int i = 1; i < 7; i++) { /* 7 usable slots: all different */
		ve_tok k;
		VE_CHECK_EQ(ve__tok_alloc(&t, &k), 0);
		VE_CHECK_MSG(ve_tok_slot(k) != ve_tok_slot(first) && ve_tok_slot(k) != ve_tok_slot(prev),
			     "op %d reused slot %u", i, ve_tok_slot(k));
		VE_CHECK_EQ(ve__tok_complete(&t, k, NULL, NULL), 0);
		prev = k;
	}
	uint64_t g = (UINT64_C(1) << 35) + 1;
	VE_CHECK_EQ(ve_tok_gen(ve_tok_make(5, g)), g);
	VE_CHECK_EQ(ve_tok_slot(ve_tok_make(5, g)), 5u);
	/* 2^31 ops later, the slot's live generation equals the stale token's
	 * modulo 2^32: it must still not read as live. */
	uint32_t s = ve_tok_slot(first);
	t.gen[s] = ve_tok_gen(first) + (UINT64_C(1) << 32) - 1; /* free */
	bool seen = false;
	for (int i = 0; i < 8; i++) {
		ve_tok k;
		VE_CHECK_EQ(ve__tok_alloc(&t, &k), 0);
		seen |= ve_tok_slot(k) == s;
		VE_CHECK(!ve__tok_live(&t, first));
		VE_CHECK_EQ(ve__tok_complete(&t, k, NULL, NULL), 0);
	}
	VE_CHECK(seen);
	ve__toktab_fini(&t);
}

/* ------------------------------------------------------------------ errors */

VE_TEST(sticky_error)
{
	struct ve_vctx *v = mk(0, 0);
	struct rd r = {0};
	ve_stream s = mkstream(v, 0);
	ve_event e = mkevent(v, 0);
	ve_tok a = kern(v, s);
	VE_CHECK_EQ(ve_vctx_error(v), 0);
	VE_CHECK(ready(v, &r, a));
	VE_CHECK_EQ(ve_vctx_complete(v, a, 700, 0), 0);
	r.n = 0;
	VE_CHECK_EQ(ve_vctx_error(v), 700);
	VE_CHECK_EQ(ve_vctx_stream_sync(v, s), -EIO);
	VE_CHECK_EQ(ve_vctx_stream_query(v, s), -EIO);
	VE_CHECK_EQ(ve_vctx_ctx_sync(v), -EIO);
	VE_CHECK_EQ(ve_vctx_ctx_query(v), -EIO);
	VE_CHECK_EQ(ve_vctx_tok_wait(v, a), -EIO);
	/* Later ops still run (the app sees the error at its next sync). */
	ve_tok b = kern(v, s);
	VE_CHECK_EQ(ve_vctx_stream_query(v, s), -EBUSY);
	done(v, &r, b);
	VE_CHECK_EQ(ve_vctx_event_record(v, e, s, 0), 0);
	pop(v, &r);
	done(v, &r, r.t[0]);
	VE_CHECK_EQ(ve_vctx_event_query(v, e), -EIO);
	VE_CHECK_EQ(ve_vctx_event_sync(v, e), -EIO);
	/* The first error sticks. */
	ve_tok c = kern(v, s);
	VE_CHECK(ready(v, &r, c));
	VE_CHECK_EQ(ve_vctx_complete(v, c, 5, 0), 0);
	VE_CHECK_EQ(ve_vctx_error(v), 700);
	ve_vctx_destroy(v);
}

/* An op whose submission was refused for a reason of its own is reported
 * once, by the first caller that takes it; the context goes on. */
VE_TEST(refused_op_reported_once)
{
	struct ve_vctx *v = mk(0, 0);
	struct rd r = {0};
	ve_stream s = mkstream(v, 0);
	ve_tok a = kern(v, s);
	VE_CHECK(ready(v, &r, a));
	VE_CHECK_EQ(ve_vctx_complete(v, a, 1 | VE_STATUS_REFUSED, 0), 0);
	r.n = 0;
	VE_CHECK_EQ(ve_vctx_error(v), 0);
	VE_CHECK_EQ(ve_vctx_stream_sync(v, s), 0);
	VE_CHECK_EQ(ve_vctx_take_refused(v), 1);
	VE_CHECK_EQ(ve_vctx_take_refused(v), 0);
	/* The first refusal not yet taken is the one reported. */
	ve_tok b = kern(v, s);
	VE_CHECK(ready(v, &r, b));
	VE_CHECK_EQ(ve_vctx_complete(v, b, 701 | VE_STATUS_REFUSED, 0), 0);
	r.n = 0;
	ve_tok c = kern(v, s);
	VE_CHECK(ready(v, &r, c));
	VE_CHECK_EQ(ve_vctx_complete(v, c, 400 | VE_STATUS_REFUSED, 0), 0);
	r.n = 0;
	VE_CHECK_EQ(ve_vctx_take_refused(v), 701);
	VE_CHECK_EQ(ve_vctx_take_refused(v), 0);
	/* A device error stays sticky. */
	ve_tok d = kern(v, s);
	VE_CHECK(ready(v, &r, d));
	VE_CHECK_EQ(ve_vctx_complete(v, d, 700, 0), 0);
	VE_CHECK_EQ(ve_vctx_stream_sync(v, s), -EIO);
	VE_CHECK_EQ(ve_vctx_take_refused(v), 0);
	ve_vctx_destroy(v);
}

/* Once the context is closed (the process exits, nothing will complete),
 * a thread waiting for work returns with the error instead of blocking for
 * good, and so does every later wait. */
VE_TEST(close_ends_every_wait)
{
	struct ve_vctx *v = mk(0, 0);
	ve_stream s = mkstream(v, 0);
	ve_tok a = kern(v, s);
	struct waiter w;
	waiter_start(&w, v, W_STREAM, s);
	still_blocked(&w);
	VE_CHECK_EQ(ve_vctx_live_ops(v), 1u);
	ve_vctx_close(v, 4);
	VE_CHECK_EQ(waiter_join(&w), -EIO);
	VE_CHECK_EQ(ve_vctx_stream_sync(v, s), -EIO);
	VE_CHECK_EQ(ve_vctx_error(v), 4);
	(void)a;
	ve_vctx_destroy(v);
}

VE_TEST(bad_handles)
{
	struct ve_vctx *v = mk(0, 0);
	ve_stream bs = ((uint64_t)5 << 32) | 9;
	ve_event be = ((uint64_t)5 << 32) | 9;
	ve_stream s = mkstream(v, 0);
	ve_event e = mkevent(v, 0);
	struct ve_desc d = kdesc(1);
	unsigned u;
	int p;
	uint32_t idx;
	ve_tok t;
	float ms;
	VE_CHECK_EQ(ve_vctx_submit(v, bs, &d, 0, NULL), -ENOENT);
	VE_CHECK_EQ(ve_vctx_stream_query(v, bs), -ENOENT);
	VE_CHECK_EQ(ve_vctx_stream_sync(v, bs), -ENOENT);
	VE_CHECK_EQ(ve_vctx_stream_destroy(v, bs), -ENOENT);
	VE_CHECK_EQ(ve_vctx_stream_flags(v, bs, &u), -ENOENT);
	VE_CHECK_EQ(ve_vctx_stream_priority(v, bs, &p), -ENOENT);
	VE_CHECK_EQ(ve_vctx_stream_index(v, bs, &idx), -ENOENT);
	VE_CHECK_EQ(ve_vctx_stream_tail(v, bs, &t), -ENOENT);
	VE_CHECK_EQ(ve_vctx_stream_wait_event(v, bs, e), -ENOENT);
	VE_CHECK_EQ(ve_vctx_event_record(v, e, bs, 0), -ENOENT);
	VE_CHECK_EQ(ve_vctx_event_record(v, be, s, 0), -ENOENT);
	VE_CHECK_EQ(ve_vctx_stream_wait_event(v, s, be), -ENOENT);
	VE_CHECK_EQ(ve_vctx_event_query(v, be), -ENOENT);
	VE_CHECK_EQ(ve_vctx_event_sync(v, be), -ENOENT);
	VE_CHECK_EQ(ve_vctx_event_destroy(v, be), -ENOENT);
	VE_CHECK_EQ(ve_vctx_event_generation(v, be, NULL, NULL), -ENOENT);
	VE_CHECK_EQ(ve_vctx_event_elapsed(v, be, e, &ms), -ENOENT);
	/* Destroyed handles, and handles of a recycled slot. */
	VE_CHECK_EQ(ve_vctx_stream_destroy(v, s), 0);
	VE_CHECK_EQ(ve_vctx_event_destroy(v, e), 0);
	ve_event e2 = mkevent(v, 0);
	VE_CHECK(e2 != e);
	VE_CHECK_EQ(ve_vctx_submit(v, s, &d, 0, NULL), -ENOENT);
	VE_CHECK_EQ(ve_vctx_stream_wait_event(v, s, e2), -ENOENT);
	VE_CHECK_EQ(ve_vctx_event_record(v, e, VE_STREAM_LEGACY, 0), -ENOENT);
	VE_CHECK_EQ(ve_vctx_stream_wait_event(v, VE_STREAM_LEGACY, e), -ENOENT);
	VE_CHECK_EQ(ve_vctx_event_query(v, e), -ENOENT);
	/* Bad flags. */
	VE_CHECK_EQ(ve_vctx_stream_create(v, 0x10, 0, &s), -EINVAL);
	VE_CHECK_EQ(ve_vctx_event_create(v, 0x80, &e), -EINVAL);
	VE_CHECK_EQ(ve_vctx_event_create(v, VE_EVENT_INTERPROCESS, &e), -EINVAL);
	VE_CHECK_EQ(ve_vctx_event_create(v, VE_EVENT_INTERPROCESS | VE_EVENT_DISABLE_TIMING, &e),
		    0);
	/* Tokens the vctx never handed out. */
	VE_CHECK_EQ(ve_vctx_complete(v, ve_tok_make(3, 7), 0, 0), -ENOENT);
	VE_CHECK_EQ(ve_vctx_dispatched(v, ve_tok_make(3, 7), 0), -ENOENT);
	VE_CHECK_EQ(ve_vctx_requeue(v, ve_tok_make(3, 7)), -ENOENT);
	VE_CHECK(ve_vctx_desc(v, ve_tok_make(3, 7)) == NULL);
	struct ve_vctx_stats st;
	ve_vctx_stats(v, &st);
	VE_CHECK_EQ(st.submitted, 0);
	ve_vctx_destroy(v);
}

VE_TEST(bad_descriptors)
{
	struct ve_vctx *v = mk(0, 0);
	ve_stream s = mkstream(v, 0);
	static uint8_t big[VE_DESC_MAX_PAYLOAD + 16];
	struct ve_desc d;
	ve_tok t = 0, one = 0;

	d = (struct ve_desc){
	    .kind = VE_OP_MEMCPY, .payload = big, .payload_len = VE_DESC_MAX_PAYLOAD + 1};
	VE_CHECK_EQ(ve_vctx_submit(v, s, &d, 0, &t), -E2BIG);
	d = kdesc(1);
	d.u.k.nattrs = VE_DESC_MAX_ATTRS + 1;
	d.u.k.attr_size = 8;
	d.payload = big;
	d.payload_len = d.u.k.nattrs * 8;
	VE_CHECK_EQ(ve_vctx_submit(v, s, &d, 0, &t), -E2BIG);
	d = kdesc(1);
	d.u.k.nparams = VE_DESC_MAX_PARAMS + 1;
	d.u.k.param_bytes = 8 * d.u.k.nparams;
	d.payload = big;
	d.payload_len = ve_desc_kernel_payload_len(0, 0, d.u.k.param_bytes, d.u.k.nparams);
	VE_CHECK_EQ(ve_vctx_submit(v, s, &d, 0, &t), -E2BIG);

	d = (struct ve_desc){.kind = VE_OP_NONE};
	VE_CHECK_EQ(ve_vctx_submit(v, s, &d, 0, &t), -EINVAL);
	d.kind = VE_OP_KIND_MAX;
	VE_CHECK_EQ(ve_vctx_submit(v, s, &d, 0, &t), -EINVAL);
	d = kdesc(1);
	d.u.k.grid.y = 0;
	VE_CHECK_EQ(ve_vctx_submit(v, s, &d, 0, &t), -EINVAL);
	d = kdesc(1);
	d.u.k.param_bytes = 16; /* payload_len does not match */
	d.payload = big;
	d.payload_len = 8;
	VE_CHECK_EQ(ve_vctx_submit(v, s, &d, 0, &t), -EINVAL);
	d = (struct ve_desc){.kind = VE_OP_MEMCPY, .payload_len = 8}; /* no payload */
	VE_CHECK_EQ(ve_vctx_submit(v, s, &d, 0, &t), -EINVAL);
	d = (struct ve_desc){.kind = VE_OP_HOST_FN};
	VE_CHECK_EQ(ve_vctx_submit(v, s, &d, 0, &t), -EINVAL);
	d = (struct ve_desc){.kind = VE_OP_CALL};
	VE_CHECK_EQ(ve_vctx_submit(v, s, &d, 0, &t), -EINVAL);
	d = (struct ve_desc){.kind = VE_OP_MEMSET};
	d.u.ms.elem_size = 3;
	VE_CHECK_EQ(ve_vctx_submit(v, s, &d, 0, &t), -EINVAL);
	d = (struct ve_desc){.kind = VE_OP_EVENT_RECORD};
	VE_CHECK_EQ(ve_vctx_submit(v, s, &d, 0, &t), -EINVAL);
	d = (struct ve_desc){.kind = VE_OP_EVENT_WAIT};
	VE_CHECK_EQ(ve_vctx_submit(v, s, &d, 0, &t), -EINVAL);
	d = kdesc(1);
	VE_CHECK_EQ(ve_vctx_submit_ex(v, s, &d, 0, NULL, 1, &t), -EINVAL);
	VE_CHECK_EQ(ve_vctx_submit(v, s, NULL, 0, &t), -EINVAL);
	VE_CHECK_EQ(t, 0);
	struct ve_vctx_stats st;
	ve_vctx_stats(v, &st);
	VE_CHECK_EQ(st.submitted, 0);

	/* Exactly at the limits is fine. */
	d = (struct ve_desc){
	    .kind = VE_OP_MEMCPY, .payload = big, .payload_len = VE_DESC_MAX_PAYLOAD};
	VE_CHECK_EQ(ve_vctx_submit(v, s, &d, 0, &one), 0);
	struct rd r = {0};
	done(v, &r, one);
	ve_vctx_destroy(v);
}

VE_TEST(complete_rules)
{
	struct ve_vctx *v = mk(0, 0);
	struct rd r = {0};
	ve_stream s = mkstream(v, 0);
	ve_tok a = kern(v, s), b = kern(v, s);
	/* b is pending, a ready but not popped: neither was handed out. */
	VE_CHECK_EQ(ve_vctx_complete(v, b, 0, 0), -EINVAL);
	VE_CHECK_EQ(ve_vctx_complete(v, a, 0, 0), -EINVAL);
	VE_CHECK_EQ(ve_vctx_dispatched(v, a, 1), -EINVAL);
	VE_CHECK_EQ(ve_vctx_requeue(v, a), -EINVAL);
	VE_CHECK(ready(v, &r, a));
	VE_CHECK_EQ(ve_vctx_dispatched(v, a, 1), 0);
	VE_CHECK_EQ(ve_vctx_dispatched(v, a, 1), -EINVAL);
	VE_CHECK_EQ(ve_vctx_complete(v, a, 0, 0), 0);
	VE_CHECK_EQ(ve_vctx_complete(v, a, 0, 0), -ENOENT); /* double complete */
	VE_CHECK_EQ(ve_vctx_dispatched(v, a, 1), -ENOENT);
	VE_CHECK(ve_vctx_desc(v, a) == NULL);
	r.n = 0;
	done(v, &r, b);
	struct ve_vctx_stats st;
	ve_vctx_stats(v, &st);
	VE_CHECK_EQ(st.submitted, 2);
	VE_CHECK_EQ(st.completed, 2);
	VE_CHECK_EQ(st.live_ops, 0);
	ve_vctx_destroy(v);
}

VE_TEST(requeue_goes_to_front)
{
	struct ve_vctx *v = mk(0, 0);
	ve_stream s1 = mkstream(v, VE_STREAM_NON_BLOCKING),
		  s2 = mkstream(v, VE_STREAM_NON_BLOCKING);
	ve_stream s3 = mkstream(v, VE_STREAM_NON_BLOCKING);
	ve_tok a = kern(v, s1), b = kern(v, s2), c = kern(v, s3);
	struct ve_ready_info ri[4];
	VE_CHECK_EQ(ve_vctx_pop_ready(v, ri, 1), 1);
	VE_CHECK_EQ(ri[0].tok, a); /* in the order they became ready */
	VE_CHECK_EQ(ve_vctx_pop_ready(v, ri, 1), 1);
	VE_CHECK_EQ(ri[0].tok, b);
	/* b could not be dispatched: it goes back before c. */
	VE_CHECK_EQ(ve_vctx_requeue(v, b), 0);
	VE_CHECK_EQ(ve_vctx_requeue(v, b), -EINVAL); /* not popped any more */
	VE_CHECK_EQ(ve_vctx_complete(v, b, 0, 0), -EINVAL);
	/* A dispatched op can be requeued too (submission failed). */
	VE_CHECK_EQ(ve_vctx_dispatched(v, a, 3), 0);
	VE_CHECK_EQ(ve_vctx_requeue(v, a), 0);
	VE_CHECK_EQ(ve_vctx_pop_ready(v, ri, 4), 3);
	VE_CHECK_EQ(ri[0].tok, a);
	VE_CHECK_EQ(ri[1].tok, b);
	VE_CHECK_EQ(ri[2].tok, c);
	VE_CHECK(ri[0].seq < ri[1].seq && ri[1].seq < ri[2].seq);
	VE_CHECK_EQ(ri[0].cls, VE_CLASS_COMPUTE);
	VE_CHECK_EQ(ri[0].kind, VE_OP_KERNEL);
	for (int i = 0; i < 3; i++)
		VE_CHECK_EQ(ve_vctx_complete(v, ri[i].tok, 0, 0), 0);
	ve_vctx_destroy(v);
}

/* ------------------------------------------------------------------ back-pressure */

VE_TEST(back_pressure)
{
	struct ve_vctx *v = mk(4, 0); /* 3 usable slots */
	struct rd r = {0};
	ve_stream s = mkstream(v, 0);
	ve_event e = mkevent(v, VE_EVENT_DISABLE_TIMING);
	ve_tok k[3];
	for (int i = 0; i < 3; i++)
		k[i] = kern(v, s);
	struct ve_vctx_stats before, after;
	ve_vctx_stats(v, &before);
	struct ve_desc d = kdesc(9);
	ve_tok t = 0;
	VE_CHECK_EQ(ve_vctx_submit(v, s, &d, VE_SUBMIT_NONBLOCK, &t), -EAGAIN);
	VE_CHECK_EQ(t, 0);
	ve_vctx_stats(v, &after);
	VE_CHECK_EQ(after.submitted, before.submitted);
	VE_CHECK_EQ(after.live_ops, 3);
	VE_CHECK_EQ(after.free_slots, 0);
	/* A blocking submit waits for a completion to free a slot. */
	struct waiter w;
	waiter_start(&w, v, W_SUBMIT, s);
	still_blocked(&w);
	done(v, &r, k[0]);
	VE_CHECK_EQ(waiter_join(&w), 0);
	ve_tok k3 = w.tok;
	/* So does an event record (it needs a marker slot). */
	memset(&w, 0, sizeof(w));
	w.v = v;
	w.kind = W_RECORD;
	w.h = s;
	w.h2 = e;
	VE_CHECK_EQ(pthread_create(&w.th, NULL, waiter_main, &w), 0);
	still_blocked(&w);
	done(v, &r, k[1]);
	VE_CHECK_EQ(waiter_join(&w), 0);
	/* Nothing lost, still in order. */
	VE_CHECK(!ready(v, &r, k3));
	done(v, &r, k[2]);
	done(v, &r, k3);
	VE_CHECK_EQ(ve_vctx_event_query(v, e), 0);
	VE_CHECK_EQ(ve_vctx_ctx_query(v), 0);
	ve_vctx_stats(v, &after);
	VE_CHECK_EQ(after.submitted, 5);
	VE_CHECK_EQ(after.completed, 5);
	ve_vctx_destroy(v);
}

VE_TEST(big_payloads_limited_and_copied)
{
	struct ve_vctx_config cfg = {.big_payloads = 2};
	struct ve_vctx *v = NULL;
	struct rd r = {0};
	VE_CHECK_EQ(ve_vctx_create(&cfg, &v), 0);
	ve_stream s = mkstream(v, VE_STREAM_NON_BLOCKING);
	static uint8_t buf[3000];
	struct ve_desc d = kdesc(3);
	d.u.k.param_bytes = sizeof(buf);
	d.payload = buf;
	d.payload_len = sizeof(buf);
	ve_tok t[2];
	for (int i = 0; i < 2; i++) {
		memset(buf, 0x10 + i, sizeof(buf));
		VE_CHECK_EQ(ve_vctx_submit(v, s, &d, VE_SUBMIT_NONBLOCK, &t[i]), 0);
	}
	memset(buf, 0xee, sizeof(buf)); /* the caller reuses its memory at once */
	VE_CHECK_EQ(ve_vctx_submit(v, s, &d, VE_SUBMIT_NONBLOCK, NULL), -EAGAIN);
	/* Small payloads do not need a big buffer. */
	struct ve_desc small = kdesc(4);
	uint8_t p64[64];
	memset(p64, 0x5a, sizeof(p64));
	small.u.k.param_bytes = 64;
	small.payload = p64;
	small.payload_len = 64;
	ve_tok ts;
	VE_CHECK_EQ(ve_vctx_submit(v, s, &small, VE_SUBMIT_NONBLOCK, &ts), 0);
	memset(p64, 0, sizeof(p64));
	for (int i = 0; i < 2; i++) {
		VE_CHECK(ready(v, &r, t[i]));
		const struct ve_desc *dd = ve_vctx_desc(v, t[i]);
		VE_CHECK(dd && dd->payload_len == sizeof(buf) && dd->payload != buf);
		for (size_t k = 0; k < sizeof(buf); k++)
			VE_CHECK_EQ(dd->payload[k], 0x10 + i);
		done(v, &r, t[i]);
	}
	VE_CHECK(ready(v, &r, ts));
	const struct ve_desc *ds = ve_vctx_desc(v, ts);
	VE_CHECK(ds && ds->payload_len == 64 && ds->payload[63] == 0x5a);
	done(v, &r, ts);
	VE_CHECK_EQ(ve_vctx_submit(v, s, &d, VE_SUBMIT_NONBLOCK, &t[0]), 0);
	done(v, &r, t[0]);
	ve_vctx_destroy(v);
}

/* A submitter that slept for edge space must recompute how many edges it
 * needs when it wakes: blocking streams that got work meanwhile add edges
 * to a legacy op, and an edge that does not fit would be dropped. */
VE_TEST(back_pressure_edges_recomputed_after_sleep)
{
	struct ve_vctx *v = mk(32, 8);
	struct rd r = {0};
	ve_stream s1 = mkstream(v, 0), s2 = mkstream(v, 0), s3 = mkstream(v, 0);
	ve_stream s4 = mkstream(v, 0), s5 = mkstream(v, 0);
	ve_tok c[6];
	for (int i = 0; i < 6; i++)
		c[i] = kern(v, s1); /* 5 edges */
	ve_tok k2 = kern(v, s2), k3 = kern(v, s3);
	struct ve_vctx_stats st;
	ve_vctx_stats(v, &st);
	VE_CHECK_EQ(st.free_edges, 3);
	/* A legacy op needs up to 4 edges now (its tail, s1, s2, s3): it sleeps. */
	struct waiter w;
	waiter_start(&w, v, W_SUBMIT, VE_STREAM_LEGACY);
	still_blocked(&w);
	/* Two more blocking streams get work (no edge used), then an edge frees
	 * up: the sleeper now needs 6, not the 4 it computed before sleeping. */
	ve_tok k4 = kern(v, s4), k5 = kern(v, s5);
	still_blocked(&w);
	done(v, &r, c[0]);
	msleep(30);
	int i = 1;
	while (i < 6 && !atomic_load(&w.finished)) {
		done(v, &r, c[i++]);
		msleep(10);
	}
	VE_CHECK_EQ(waiter_join(&w), 0);
	while (i < 6)
		done(v, &r, c[i++]);
	done(v, &r, k2);
	done(v, &r, k3);
	done(v, &r, k4);
	VE_CHECK_MSG(!ready(v, &r, w.tok), "legacy op ready before k5: an edge was dropped");
	done(v, &r, k5);
	done(v, &r, w.tok);
	ve_vctx_destroy(v);
}

/* ------------------------------------------------------------------ misc */

static atomic_int g_notified;

static void on_ready(void *arg)
{
	VE_CHECK(arg == &g_notified);
	atomic_fetch_add(&g_notified, 1);
}

VE_TEST(notify_ready_and_host_fn)
{
	struct ve_vctx_config cfg = {.notify_ready = on_ready, .notify_arg = &g_notified};
	struct ve_vctx *v = NULL;
	struct rd r = {0};
	VE_CHECK_EQ(ve_vctx_create(&cfg, &v), 0);
	ve_stream s = mkstream(v, 0);
	struct ve_desc h = {.kind = VE_OP_HOST_FN};
	h.u.host.fn = host_fn;
	ve_tok a = 0, b = 0;
	VE_CHECK_EQ(ve_vctx_submit(v, s, &h, 0, &a), 0);
	VE_CHECK_EQ(atomic_load(&g_notified), 1); /* empty -> non-empty */
	VE_CHECK_EQ(ve_vctx_submit(v, s, &h, 0, &b), 0);
	VE_CHECK_EQ(atomic_load(&g_notified), 1); /* b is pending */
	VE_CHECK(ready(v, &r, a));
	const struct ve_desc *d = ve_vctx_desc(v, a);
	VE_CHECK(d && ve_desc_class(d) == VE_CLASS_HOST);
	d->u.host.fn(d->u.host.arg);
	done(v, &r, a);
	VE_CHECK_EQ(atomic_load(&g_notified), 2); /* b became ready */
	done(v, &r, b);
	VE_CHECK_EQ(atomic_load(&g_host_runs), 1);
	ve_vctx_destroy(v);
}

VE_TEST(submit_ex_extra_predecessors)
{
	struct ve_vctx *v = mk(0, 0);
	struct rd r = {0};
	ve_stream a = mkstream(v, VE_STREAM_NON_BLOCKING), b = mkstream(v, VE_STREAM_NON_BLOCKING);
	ve_tok ka = kern(v, a), bar = 0;
	VE_CHECK_EQ(ve_vctx_stream_tail(v, a, &bar), 0);
	VE_CHECK_EQ(bar, ka);
	struct ve_desc d = kdesc(5);
	ve_tok kb = 0;
	VE_CHECK_EQ(ve_vctx_submit_ex(v, b, &d, 0, &bar, 1, &kb), 0);
	VE_CHECK(!ready(v, &r, kb));
	done(v, &r, ka);
	VE_CHECK(ready(v, &r, kb));
	done(v, &r, kb);
	int prio = 9;
	ve_stream hp;
	VE_CHECK_EQ(ve_vctx_stream_create(v, 0, -3, &hp), 0);
	VE_CHECK_EQ(ve_vctx_stream_priority(v, hp, &prio), 0);
	VE_CHECK_EQ(prio, -3);
	ve_vctx_destroy(v);
}

VE_TEST(dump_shows_pending_ops_and_predecessors)
{
	struct ve_vctx *v = mk(0, 0);
	ve_stream s = mkstream(v, 0);
	ve_event e = mkevent(v, 0);
	ve_tok a = kern(v, s);
	ve_tok b = kern(v, s);
	VE_CHECK_EQ(ve_vctx_event_record(v, e, s, 0), 0);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	VE_CHECK(f);
	ve_vctx_dump(v, f);
	fclose(f);
	char want_a[64], want_b[64];
	snprintf(want_a, sizeof(want_a), "op %u:%llu", ve_tok_slot(a), (unsigned long long)ve_tok_gen(a));
	snprintf(want_b, sizeof(want_b), "op %u:%llu", ve_tok_slot(b), (unsigned long long)ve_tok_gen(b));
	char pred[96];
	snprintf(pred, sizeof(pred), "waits_on=1 %u:%llu", ve_tok_slot(a),
		 (unsigned long long)ve_tok_gen(a));
	bool ok = strstr(buf, want_a) && strstr(buf, want_b) && strstr(buf, pred) &&
		  strstr(buf, "ready") && strstr(buf, "pending") && strstr(buf, "event_record") &&
		  strstr(buf, "blocking");
	if (!ok)
		fprintf(stderr, "%s", buf);
	free(buf);
	VE_CHECK(ok);
	ve_vctx_destroy(v);
}

/* 100k inline markers completing in one cascade: must not recurse. Runs on
 * a thread with a small stack so a recursive cascade fails loudly. */
struct chain_arg {
	struct ve_vctx *v;
	ve_tok k0;
	int rc;
};

static void *chain_complete(void *p)
{
	struct chain_arg *c = p;
	c->rc = ve_vctx_complete(c->v, c->k0, 0, 0);
	return NULL;
}

VE_TEST(long_marker_chain_does_not_overflow_stack)
{
	enum { N = 100000 };
	struct ve_vctx *v = mk(N + 64, 0);
	struct rd r = {0};
	ve_stream s1 = mkstream(v, VE_STREAM_NON_BLOCKING),
		  s2 = mkstream(v, VE_STREAM_NON_BLOCKING);
	ve_event e = mkevent(v, VE_EVENT_DISABLE_TIMING);
	ve_tok k0 = kern(v, s1);
	VE_CHECK_EQ(ve_vctx_event_record(v, e, s1, 0), 0);
	for (int i = 0; i < N; i++)
		VE_CHECK_EQ(ve_vctx_stream_wait_event(v, s2, e), 0);
	ve_tok k1 = kern(v, s2);
	struct ve_vctx_stats st;
	ve_vctx_stats(v, &st);
	VE_CHECK(st.live_ops >= N + 3);
	VE_CHECK(ready(v, &r, k0));
	VE_CHECK_EQ(ve_vctx_dispatched(v, k0, 0), 0);
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setstacksize(&at, 256 * 1024);
	struct chain_arg c = {.v = v, .k0 = k0, .rc = 1};
	pthread_t th;
	VE_CHECK_EQ(pthread_create(&th, &at, chain_complete, &c), 0);
	pthread_join(th, NULL);
	pthread_attr_destroy(&at);
	VE_CHECK_EQ(c.rc, 0);
	r.n = 0;
	VE_CHECK(ready(v, &r, k1));
	done(v, &r, k1);
	ve_vctx_stats(v, &st);
	VE_CHECK_EQ(st.live_ops, 0);
	VE_CHECK(st.inline_completed >= N + 1);
	ve_vctx_destroy(v);
}

/* ------------------------------------------------------------------ ops the caller runs */

static struct ve_desc rdesc(void)
{
	struct ve_desc d = {.kind = VE_OP_MEMCPY};
	d.u.cp.dst = 0x1000;
	d.u.cp.src = 0x2000;
	d.u.cp.bytes = 4;
	return d;
}

/* A read-back behind a kernel already on a lane stays the caller's: it
 * learns the lane and the kernel to wait for, the dispatcher never sees it
 * (not ready when the kernel completes, never a pipelining candidate), and
 * it completes only after the kernel; what follows it waits for it. */
VE_TEST(submit_self_behind_a_kernel_on_a_lane)
{
	struct ve_vctx *v = mk(64, 256);
	struct rd r = {0};
	ve_stream s = mkstream(v, VE_STREAM_NON_BLOCKING);
	/* Nothing before it: no lane, nothing to wait for. */
	struct ve_desc d = rdesc();
	ve_tok t, after;
	uint32_t lane;
	VE_CHECK_EQ(ve_vctx_submit_self(v, s, &d, &t, &lane, &after), 0);
	VE_CHECK_EQ(lane, VE_VCTX_NO_LANE);
	VE_CHECK_EQ(after, VE_TOK_NONE);
	VE_CHECK_EQ(ve_vctx_stream_query(v, s), -EBUSY);
	VE_CHECK_EQ(pop(v, &r), 0);
	VE_CHECK_EQ(ve_vctx_self_done(v, t), 0);
	VE_CHECK_EQ(ve_vctx_stream_query(v, s), 0);
	VE_CHECK_EQ(ve_vctx_self_done(v, t), -ENOENT);

	ve_tok k = kern(v, s);
	VE_CHECK(ready(v, &r, k));
	VE_CHECK_EQ(ve_vctx_dispatched(v, k, 0x305), 0);
	VE_CHECK_EQ(ve_vctx_submit_self(v, s, &d, &t, &lane, &after), 0);
	VE_CHECK_EQ(lane, 0x305);
	VE_CHECK_EQ(after, k);
	ve_tok next = kern(v, s);
	struct ve_pipe_info pi[4];
	VE_CHECK_EQ(ve_vctx_pop_pipeline(v, pi, 4), 0); /* never behind an op not yet on the GPU */
	VE_CHECK_EQ(ve_vctx_self_done(v, t), -EBUSY);
	VE_CHECK_EQ(ve_vctx_complete(v, k, 0, 0), 0);
	r.n = 0;
	VE_CHECK_EQ(pop(v, &r), 0); /* the read-back is the caller's, 'next' waits for it */
	VE_CHECK_EQ(ve_vctx_self_done(v, t), 0);
	VE_CHECK(ready(v, &r, next));
	VE_CHECK_EQ(ve_vctx_self_done(v, next), -EINVAL);
	VE_CHECK_EQ(ve_vctx_dispatched(v, next, 0x305), 0);
	VE_CHECK_EQ(ve_vctx_complete(v, next, 0, 0), 0);
	VE_CHECK_EQ(ve_vctx_ctx_query(v), 0);
	ve_vctx_destroy(v);
}

/* Not the caller's (queued as ve_vctx_submit queues it): behind an op that
 * is not on a lane yet (here ready and never popped: the wait for it ends
 * after the spin), behind two live ops, and behind a pipelined op the
 * dispatcher has claimed but not yet handed to the driver. */
VE_TEST(submit_self_queues_what_it_cannot_follow)
{
	struct ve_vctx_config cfg = {.max_ops = 64, .max_edges = 256, .max_streams = 64,
				     .max_events = 64, .big_payloads = 4, .sync_spin_ns = 200000};
	struct ve_vctx *v = NULL;
	VE_CHECK_EQ(ve_vctx_create(&cfg, &v), 0);
	struct rd r = {0};
	ve_stream s = mkstream(v, VE_STREAM_NON_BLOCKING);
	struct ve_desc d = rdesc();
	ve_tok t, after;
	uint32_t lane;
	ve_tok k = kern(v, s);
	uint64_t t0 = ve__now_ns();
	VE_CHECK_EQ(ve_vctx_submit_self(v, s, &d, &t, &lane, &after), 1);
	VE_CHECK(ve__now_ns() - t0 >= 200000); /* it gave the dispatcher the spin */
	VE_CHECK(ready(v, &r, k));
	VE_CHECK_EQ(ve_vctx_dispatched(v, k, 0x100), 0);
	struct ve_pipe_info pi[4];
	VE_CHECK_EQ(ve_vctx_pop_pipeline(v, pi, 4), 1); /* an ordinary candidate */
	VE_CHECK_EQ(pi[0].tok, t);
	VE_CHECK_EQ(ve_vctx_pipeline_claim(v, t, k), 0);
	/* Claimed, not yet sent: a read-back behind it is queued. */
	ve_tok t2;
	VE_CHECK_EQ(ve_vctx_submit_self(v, s, &d, &t2, &lane, &after), 1);
	ve_vctx_pipeline_sent(v, t);
	VE_CHECK_EQ(ve_vctx_pop_pipeline(v, pi, 4), 1);
	VE_CHECK_EQ(pi[0].tok, t2);
	VE_CHECK_EQ(ve_vctx_pipeline_claim(v, t2, t), 0);
	ve_vctx_pipeline_sent(v, t2);
	/* Sent: the next one follows it. */
	ve_tok t3;
	VE_CHECK_EQ(ve_vctx_submit_self(v, s, &d, &t3, &lane, &after), 0);
	VE_CHECK_EQ(lane, 0x100);
	VE_CHECK_EQ(after, t2);
	/* Two live predecessors: the legacy stream's last op and a blocking
	 * stream's, issued after it. */
	ve_stream b = mkstream(v, 0);
	ve_tok kl = kern(v, VE_STREAM_LEGACY);
	ve_tok kb = kern(v, b);
	ve_tok t4;
	VE_CHECK_EQ(ve_vctx_submit_self(v, VE_STREAM_LEGACY, &d, &t4, &lane, &after), 1);
	VE_CHECK(kl != t4 && kb != t4);
	VE_CHECK_EQ(ve_vctx_complete(v, k, 0, 0), 0);
	VE_CHECK_EQ(ve_vctx_complete(v, t, 0, 0), 0);
	VE_CHECK_EQ(ve_vctx_complete(v, t2, 0, 0), 0);
	VE_CHECK_EQ(ve_vctx_self_done(v, t3), 0);
	r.n = 0; /* k was popped and is complete */
	drain(v, &r);
	ve_vctx_destroy(v);
}
