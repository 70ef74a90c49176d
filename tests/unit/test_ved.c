/* SPDX-License-Identifier: MIT */
/*
 * ved end to end, with real processes: the daemon ($VE_BUILD/ved, run with
 * VE_VED_CHECK=1 so that it aborts loudly if two concurrently leased entries
 * ever overlap or its books disagree with the coordinator's), and client
 * processes that each run random programs through a vctx, a dispatcher and
 * the remote link over a simulated GPU of their own (every client builds the
 * same pool from the same split, as real processes do from one device).
 *
 * Each client program mixes kernels (some cooperative, with a minimum SM
 * count), copies, memsets, host functions, timed and untimed event records,
 * cross-stream waits and queries over legacy, blocking, non-blocking and
 * per-thread streams; the reference model of CUDA's ordering rules
 * (refmodel.h) is built alongside. Checked in every client:
 *  - happens-before: an op is submitted (a host function runs) only after
 *    every reference predecessor completed; queries agree with the reference
 *    in both directions;
 *  - exactly once: every tracked op is submitted and completed once (host
 *    functions run once), and the vctx is empty at the end;
 *  - bindings: every kernel ved bound runs on an entry large enough for it.
 * Submissions fail at random in some clients (SUBMIT_FAILED records).
 *
 * Tests:
 *  ved_basic       one in-process client, then ve-ctl-level status checks
 *  ved_refuse      second instance, stale socket, pool mismatch, bad records
 *  ved_many        8 client processes under policy chaos (shared entries too)
 *  ved_kill        8 clients under tput; clients SIGKILLed at random points,
 *                  ved SIGKILLed and restarted once: survivors finish
 *                  correctly (safe mode, then re-registration), the leases
 *                  of the dead are reclaimed (status shows none held by dead
 *                  pids), nothing hangs
 *  ved_threaded    a dispatcher thread (helper-thread wake-ups, spin) over ved
 *  ved_kill_pending_per_op  ved (per-op) SIGKILLed while ops wait for their
 *                  BIND, not restarted: safe mode binds them, nothing hangs
 *  ved_overflow    bindings beyond a full ring wait in ved: in order, none
 *                  dropped or duplicated
 * Every wait is bounded; a watchdog alarm ends a stuck test. VE_SEED=<seed>
 * replays the client programs of one seed.
 */
#include "../harness.h"
#include "refmodel.h"
#include "ved_helper.h"
#include "workload.h"

#include "backend/sim.h"
#include "core/vctx.h"
#include "ipc/ctl.h"
#include "ipc/ring.h"
#include "ipc/shm.h"
#include "pool/pool.h"
#include "runtime/runtime.h"
#include "util/util.h"
#include "ved/client.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define VT_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define VT_SANITIZED 1
#endif
#endif
#ifndef VT_SANITIZED
#define VT_SANITIZED 0
#endif

#define MAX_CALLS  300
#define MAX_EVENTS 6
#define NCLIENTS   8

_Static_assert(MAX_CALLS <= WL_MAX_CALLS, "calls fit a program");

/* ------------------------------------------------------------------ daemon */

static char g_dir[200], g_sock[256], g_ved[PATH_MAX + 8], g_log[256];

static bool find_ved(void)
{
	return vh_find(NULL, g_ved, sizeof(g_ved));
}

static void make_dir(void)
{
	snprintf(g_dir, sizeof(g_dir), "%s/ve-test-ved-%d", vh_tmpdir(), (int)getpid());
	mkdir(g_dir, 0700);
	snprintf(g_sock, sizeof(g_sock), "%s/ved-0.sock", g_dir);
	snprintf(g_log, sizeof(g_log), "%s/ved.log", g_dir);
}

static void remove_dir(void)
{
	if (getenv("VE_VED_TEST_KEEP"))
		return; /* keep the log for a look */
	char p[PATH_MAX + 32];
	snprintf(p, sizeof(p), "%s/ved.log", g_dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/ved-0.lock", g_dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/vitamin-e/ved-0.lock", g_dir); /* the device lock */
	unlink(p);
	snprintf(p, sizeof(p), "%s/vitamin-e", g_dir);
	rmdir(p);
	unlink(g_sock);
	rmdir(g_dir);
}

static void dump_log(void)
{
	FILE *f = fopen(g_log, "r");
	if (!f)
		return;
	char line[1024];
	int n = 0;
	fprintf(stderr, "---- ved log (%s) ----\n", g_log);
	while (fgets(line, sizeof(line), f) && n++ < 400)
		fputs(line, stderr);
	fclose(f);
	fprintf(stderr, "----\n");
}

static pid_t g_ved_pid; /* the ved a test started, for cleanup after a failed check */
static pid_t g_kids[16];
static int g_nkids;

static void forget(pid_t pid)
{
	for (int i = 0; i < g_nkids; i++)
		if (g_kids[i] == pid)
			g_kids[i] = 0;
}

/* Starts ved with the given policy (and one more "NAME=value"); waits for
 * its socket. Checks its invariants after every round (VE_VED_CHECK). */
/* Grant mode (ved grants entries, clients bind their own ops) or the
 * paper's per-op binding (every kernel a READY and a BIND record). */
static bool g_grant;

static pid_t start_ved(const char *policy, const char *extra_env)
{
	char pol[128];
	snprintf(pol, sizeof(pol), "VE_VED_POLICY=%s", policy);
	const char *env[] = {pol,
			     g_grant ? "VE_VED_PER_OP=0" : "VE_VED_PER_OP=1",
			     "VE_VED_CHECK=1",
			     "VE_VED_CLIENT_OPS=2048",
			     "VE_VED_STATS_INTERVAL=1",
			     getenv("VE_VED_TEST_DEBUG") ? "VE_VED_LOG_LEVEL=debug"
							 : "VE_VED_LOG_LEVEL=info",
			     "VE_VED_SPIN_US=20",
			     extra_env,
			     NULL};
	pid_t pid = vh_start(g_ved, g_sock, g_log, env);
	g_ved_pid = pid > 0 ? pid : 0;
	return pid;
}

/* SIGTERM, bounded wait; returns the exit status (or -1 if it had to be killed). */
static int stop_ved(pid_t pid)
{
	g_ved_pid = 0;
	return vh_stop(pid);
}

static union {
	uint8_t b[VE_CTL_MAX_MSG];
	uint64_t align;
} g_msg;

/* One STATUS reply into g_msg; 0 or -1. */
static int status(void)
{
	int fd = ve_ctl_connect(g_sock);
	if (fd < 0)
		return -1;
	struct ve_ctl_status_req q;
	memset(&q, 0, sizeof(q));
	ve_ctl_hdr_init(&q.h, VE_CTL_STATUS_REQ, sizeof(q));
	int n = -1;
	if (ve_ctl_send(fd, &q, sizeof(q)) == 0)
		n = ve_ctl_recv(fd, g_msg.b, sizeof(g_msg.b), NULL, 5000);
	close(fd);
	if (n <= 0 || ve_ctl_check(g_msg.b, (size_t)n, VE_CTL_FROM_VED))
		return -1;
	return ((struct ve_ctl_hdr *)(void *)g_msg.b)->type == VE_CTL_STATUS ? 0 : -1;
}

static const struct ve_ctl_status *st_msg(void)
{
	return (const void *)g_msg.b;
}
static const struct ve_ctl_entry *st_entries(void)
{
	return (const void *)(st_msg() + 1);
}
static const struct ve_ctl_client *st_clients(void)
{
	return (const void *)(st_entries() + st_msg()->nentries);
}

/* No client of a dead pid; no entry held, shared or reserved by a client
 * id that is not registered. Returns NULL or what is wrong. */
static const char *leases_clean(char *why, size_t len)
{
	if (status())
		return "no status";
	const struct ve_ctl_status *m = st_msg();
	bool live[VE_CTL_MAX_CLIENTS] = {0};
	for (uint32_t i = 0; i < m->nclients; i++) {
		const struct ve_ctl_client *c = &st_clients()[i];
		if (kill(c->pid, 0) != 0 && errno == ESRCH) {
			snprintf(why, len, "client %d of dead pid %d still registered", c->id,
				 c->pid);
			return why;
		}
		live[c->id] = true;
	}
	for (uint32_t e = 0; e < m->nentries; e++) {
		const struct ve_ctl_entry *pe = &st_entries()[e];
		if (pe->state == VE_ENTRY_LEASED && pe->holder >= 0 && !live[pe->holder]) {
			snprintf(why, len, "entry %u leased to departed client %d", e, pe->holder);
			return why;
		}
		if (pe->state == VE_ENTRY_LEASED)
			for (int k = 0; k < pe->nsharers; k++)
				if (!live[pe->sharers[k]]) {
					snprintf(why, len, "entry %u shared by departed client %d",
						 e, pe->sharers[k]);
					return why;
				}
		if (pe->reserve_for >= 0 && !live[pe->reserve_for]) {
			snprintf(why, len, "entry %u reserved for departed client %d", e,
				 pe->reserve_for);
			return why;
		}
	}
	return NULL;
}

static bool all_idle(void)
{
	if (status())
		return false;
	for (uint32_t e = 0; e < st_msg()->nentries; e++)
		if (st_entries()[e].state != VE_ENTRY_IDLE || st_entries()[e].outstanding)
			return false;
	return true;
}

/* ------------------------------------------------------------------ programs */

struct run {
	struct wl_prog p;
	struct ve_vctx *v;
	struct ve_runtime *rt;
	struct ve_remote *rem; /* the runtime's ved client, for its statistics */
	uint64_t granted; /* ops the dispatcher bound to its grant (grant mode) */
	struct ve_dispatcher *d;
	struct ve_backend *b;
	const struct ve_pool *pool;
	ve_stream sh[RM_MAX_STREAMS];
	ve_event eh[MAX_EVENTS];
	ve_tok tok[RM_MAX_OPS];
	uint8_t nsub[RM_MAX_OPS], ncomp[RM_MAX_OPS], nhost[RM_MAX_OPS];
	rm_set done;
	int pc;
	bool failed;
	char err[512];
	uint64_t binds, kernels, queries;
};

static struct run g_run;

#define rnd wl_rnd

static void fail_run(struct run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void fail_run(struct run *r, const char *fmt, ...)
{
	if (r->failed)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->err, sizeof(r->err), fmt, ap);
	va_end(ap);
	r->failed = true;
}

static const struct wl_mix mix = {.kernel = 45, .coop = 52, .copy = 70, .memset = 82};

static void gen_prog(struct wl_prog *p, uint64_t *r, int ncalls)
{
	wl_prog_init(p, r, 0x100, MAX_EVENTS);
	wl_prog_calls(p, r, ncalls, &mix, true);
}

static void host_fn(void *arg);

static void build_desc(const struct wl_prog *p, int op, struct ve_desc *d)
{
	wl_build_desc(p->wk[op], p->shp[op], (uint64_t)op + 1, op, host_fn, d);
}

static int op_of_desc(struct run *r, const struct ve_desc *d)
{
	uint64_t code = 0;
	switch (d->kind) {
	case VE_OP_KERNEL:
		code = d->u.k.name_id;
		break;
	case VE_OP_MEMCPY:
		code = d->u.cp.src;
		break;
	case VE_OP_MEMSET:
		code = d->u.ms.value;
		break;
	case VE_OP_HOST_FN:
		code = (uint64_t)(uintptr_t)d->u.host.arg;
		break;
	case VE_OP_EVENT_RECORD:
		code = d->u.ev.app_event;
		break;
	default:
		break;
	}
	int op = (int)code - 1;
	return op >= 0 && op < r->p.m.nops && rm_set_has(&r->p.ext, op) ? op : RM_NONE;
}

static int first_missing(const struct run *r, const rm_set *need)
{
	for (int w = 0; w < RM_WORDS; w++) {
		uint64_t miss = need->w[w] & r->p.ext.w[w] & ~r->done.w[w];
		if (miss)
			return w * 64 + __builtin_ctzll(miss);
	}
	return RM_NONE;
}

static void host_fn(void *arg)
{
	struct run *r = &g_run;
	int op = (int)(uintptr_t)arg - 1;
	if (op < 0 || op >= r->p.m.nops) {
		fail_run(r, "host function with a bad argument");
		return;
	}
	if (++r->nhost[op] > 1)
		fail_run(r, "op%d: host function ran twice", op);
	int miss = first_missing(r, &r->p.m.anc[op]);
	if (miss != RM_NONE)
		fail_run(r, "op%d (host function) ran before its predecessor op%d completed", op,
			 miss);
	rm_set_add(&r->done, op);
}

static void on_submit(void *arg, uint32_t client, ve_tok tok, uint32_t lane,
		      const struct ve_desc *d)
{
	struct run *r = arg;
	int op = op_of_desc(r, d);
	if (op == RM_NONE) {
		fail_run(r, "submission of an untracked op (kind %s)", ve_op_kind_name(d->kind));
		return;
	}
	if (++r->nsub[op] > 1)
		fail_run(r, "op%d submitted twice", op);
	if (tok != r->tok[op])
		fail_run(r, "op%d submitted with token %#llx, issued as %#llx", op,
			 (unsigned long long)tok, (unsigned long long)r->tok[op]);
	int miss = first_missing(r, &r->p.m.anc[op]);
	if (miss != RM_NONE)
		fail_run(r, "op%d submitted before its predecessor op%d completed", op, miss);
	r->kernels += d->kind == VE_OP_KERNEL;
}

static void on_bind(void *arg, const struct ve_binding *b, uint32_t lane)
{
	struct run *r = arg;
	const struct ve_desc *d = ve_vctx_desc(r->v, b->op.tok);
	int op = d ? op_of_desc(r, d) : RM_NONE;
	if (op == RM_NONE) {
		fail_run(r, "binding of token %#llx names no tracked op",
			 (unsigned long long)b->op.tok);
		return;
	}
	if (b->entry >= r->pool->nentries || VE_LANE_ENTRY(lane) != b->entry) {
		fail_run(r, "op%d bound to entry %u, submitted on lane %#x", op, b->entry, lane);
		return;
	}
	uint32_t need = r->p.wk[op] == W_COOP ? wl_cshapes[r->p.shp[op]].min_sms : 1;
	if (r->pool->e[b->entry].sms < need)
		fail_run(r, "op%d needs %u SMs, bound to entry %u of %u", op, need, b->entry,
			 r->pool->e[b->entry].sms);
	r->binds++;
}

static void on_complete(void *arg, uint32_t client, ve_tok tok, uint32_t lane, int status)
{
	struct run *r = arg;
	int op = RM_NONE;
	for (int i = 0; i < r->p.m.nops; i++)
		if (r->nsub[i] == 1 && !r->ncomp[i] && r->tok[i] == tok) {
			op = i;
			break;
		}
	if (op == RM_NONE) {
		fail_run(r, "completion of token %#llx that is not in flight",
			 (unsigned long long)tok);
		return;
	}
	r->ncomp[op]++;
	if (status)
		fail_run(r, "op%d completed with status %d", op, status);
	rm_set_add(&r->done, op);
}

static void check_query(struct run *r, const struct wl_call *c, int rc)
{
	int miss = first_missing(r, &c->req);
	r->queries++;
	if (rc == 0 && miss != RM_NONE)
		fail_run(r, "query reported done but required op%d is incomplete", miss);
	else if (rc == -EBUSY && miss == RM_NONE)
		fail_run(r, "query reported busy although every required op completed");
	else if (rc != 0 && rc != -EBUSY)
		fail_run(r, "query returned %d", rc);
}

static void issue(struct run *r)
{
	const struct wl_call *c = &r->p.c[r->pc++];
	int rc = 0;
	switch (c->kind) {
	case C_WORK: {
		struct ve_desc d;
		build_desc(&r->p, c->op, &d);
		rc = ve_vctx_submit(r->v, r->sh[c->s], &d, VE_SUBMIT_NONBLOCK, &r->tok[c->op]);
		break;
	}
	case C_RECORD:
		rc = ve_vctx_event_record(r->v, r->eh[c->e], r->sh[c->s], (uint64_t)c->op + 1);
		if (rc == 0 && rm_set_has(&r->p.ext, c->op))
			rc = ve_vctx_event_generation(r->v, r->eh[c->e], NULL, &r->tok[c->op]);
		break;
	case C_WAIT:
		rc = ve_vctx_stream_wait_event(r->v, r->sh[c->s], r->eh[c->e]);
		break;
	case C_SQUERY:
		check_query(r, c, ve_vctx_stream_query(r->v, r->sh[c->s]));
		break;
	default:
		check_query(r, c, ve_vctx_event_query(r->v, r->eh[c->e]));
		break;
	}
	if (rc)
		fail_run(r, "call #%d (kind %d) returned %d", r->pc - 1, c->kind, rc);
}

/* Runs one program through a fresh vctx + dispatcher + remote link + sim.
 * Returns true if every check passed (r->err says why not). */
static bool run_program(struct run *r, uint64_t seed, int ncalls, bool fail_submits,
			uint32_t pace_us, struct ve_remote_stats *rs)
{
	uint64_t rng = seed;
	memset(r, 0, sizeof(*r));
	gen_prog(&r->p, &rng, ncalls);
	struct ve_sim_config sc;
	ve_sim_config_default(&sc);
	sc.seed = seed;
	sc.capacity = 4096;
	sc.jitter = 0.05 + 0.4 * (double)rnd(&rng, 1000) / 1000.0;
	sc.submit_latency_ns = rnd(&rng, 4) ? rnd(&rng, 4000) : 0;
	sc.fail_submit_prob = fail_submits ? 0.03 : 0;
	if (ve_sim_create(&sc, &r->b)) {
		fail_run(r, "sim");
		return false;
	}
	struct ve_gpu_info gi;
	r->b->ops->info(r->b, &gi);
	char err[512];
	struct ve_runtime_config rcfg = {.daemon = g_sock, /* absent ved: safe mode */
					 .name = "test_ved",
					 .max_ops = 2048,
					 .ved_spin_ns = 0,
					 .ved_heartbeat_timeout_ms = 3000,
					 .ved_reconnect_ms = 100,
					 .dispatch = {.lanes_per_entry = 1 + rnd(&rng, 4),
						      .copy_lanes = 1 + rnd(&rng, 4),
						      .max_inflight = 4096,
						      .host_inline = true,
						      .on_submit = on_submit,
						      .on_complete = on_complete,
						      .on_bind = on_bind,
						      .observer_arg = r}};
	int e = ve_runtime_create(&rcfg, r->b, &r->rt, err, sizeof(err));
	if (e || ve_runtime_mode(r->rt) != VE_RUNTIME_VED) {
		fail_run(r, "runtime over ved: %s", e ? err : "not through ved");
		ve_runtime_destroy(e ? NULL : r->rt);
		r->rt = NULL;
		r->b->ops->destroy(r->b);
		return false;
	}
	r->rem = ve_runtime_remote(r->rt);
	r->d = ve_runtime_dispatcher(r->rt);
	r->pool = ve_runtime_pool(r->rt);
	struct ve_vctx_config vc = {.client_id = 0, .max_ops = 2048};
	if (ve_vctx_create(&vc, &r->v)) {
		fail_run(r, "vctx");
		goto out;
	}
	for (int s = 1; s < r->p.m.nstreams; s++) {
		int k = r->p.m.st[s].kind, x;
		if (k == RM_PER_THREAD)
			x = ve_vctx_stream_per_thread(r->v, r->p.skey[s], &r->sh[s]);
		else
			x = ve_vctx_stream_create(
			    r->v, k == RM_NONBLOCKING ? VE_STREAM_NON_BLOCKING : VE_STREAM_DEFAULT,
			    r->p.sprio[s], &r->sh[s]);
		if (x)
			fail_run(r, "stream create %d", x);
	}
	for (int ev = 0; ev < r->p.m.nevents; ev++)
		if (ve_vctx_event_create(
			r->v, r->p.m.ev[ev].timing ? VE_EVENT_DEFAULT : VE_EVENT_DISABLE_TIMING,
			&r->eh[ev]))
			fail_run(r, "event create");
	if (ve_runtime_attach(r->rt, r->v, 0, 0)) {
		fail_run(r, "attach");
		goto out;
	}
	uint64_t t_real = ve__now_ns(), last_move = t_real;
	uint64_t limit = (VT_SANITIZED ? 120 : 40) * 1000000000ull;
	while (!r->failed) {
		bool issued = false;
		for (int k = (int)rnd(&rng, 5); k > 0 && r->pc < r->p.ncalls; k--) {
			issue(r);
			issued = true;
		}
		if (issued && pace_us)
			usleep(pace_us); /* a slow program: it outlives a ved restart */
		int moved = 0;
		for (int k = 0; k < 16; k++) {
			int n = ve_dispatcher_poll(r->d);
			if (n <= 0)
				break;
			moved += n;
		}
		uint64_t now_r = ve__now_ns(), t;
		if (issued || moved)
			last_move = now_r;
		if (ve_sim_peek(r->b, &t) == 0) {
			uint64_t now = ve_sim_now(r->b);
			if (t > now && rnd(&rng, 4) == 0)
				ve_sim_advance_to(
				    r->b, now + 1 + rnd(&rng, (uint32_t)VE_MIN(t - now, 1u << 30)));
			else
				ve_sim_advance(r->b, NULL);
			last_move = now_r;
			continue;
		}
		if (issued || moved)
			continue;
		if (r->pc == r->p.ncalls && ve_dispatcher_quiescent(r->d))
			break;
		/* Waiting for ved (a BIND), or for time-based policy decisions. */
		if (now_r - last_move > limit) {
			fail_run(r, "stuck: no progress for %llu s (%d of %d calls issued)",
				 (unsigned long long)(limit / 1000000000ull), r->pc, r->p.ncalls);
			break;
		}
		ve_sim_advance_to(r->b, ve_sim_now(r->b) + 20000);
		usleep(20);
	}
	if (!r->failed) {
		for (int i = 0; i < r->p.m.nops && !r->failed; i++) {
			if (!rm_set_has(&r->p.ext, i))
				continue;
			bool host = r->p.wk[i] == W_HOST && r->p.m.op[i].kind == RM_OP_WORK;
			if (host ? (r->nhost[i] != 1 || r->nsub[i])
				 : (r->nsub[i] != 1 || r->ncomp[i] != 1))
				fail_run(r, "op%d lost or duplicated: sub %u comp %u host %u", i,
					 r->nsub[i], r->ncomp[i], r->nhost[i]);
		}
		struct ve_vctx_stats vs;
		ve_vctx_stats(r->v, &vs);
		if (!r->failed && (vs.live_ops || vs.ready_ops || ve_vctx_ctx_query(r->v) != 0))
			fail_run(r, "vctx not idle at the end: %u live, %u ready", vs.live_ops,
				 vs.ready_ops);
	}
	/* Nothing of ours is at ved any more: the detach says BYE. */
	ve_runtime_detach(r->rt, 0);
out:
	if (rs)
		ve_remote_stats(r->rem, rs);
	if (r->rt) {
		struct ve_runtime_stats rst;
		ve_runtime_stats(r->rt, &rst);
		r->granted = rst.dispatch.local_binds + rst.dispatch.pipelined;
	}
	ve_runtime_destroy(r->rt);
	r->rt = NULL;
	if (r->v)
		ve_vctx_destroy(r->v);
	r->b->ops->destroy(r->b);
	return !r->failed;
}

/* ------------------------------------------------------------------ client processes */

struct child {
	pid_t pid;
	int fd; /* result pipe */
	bool killed, reported, ok;
	char line[512];
};

/* A client process: programs until 'min_ms' of real time and 'min_progs'
 * programs passed, then one line on the pipe and exit. */
static void client_main(int fd, uint64_t seed, int min_progs, uint64_t min_ms, int ncalls,
			bool fail_submits, uint32_t pace_us)
{
	uint64_t t0 = ve__now_ns();
	uint64_t failovers = 0, reconnects = 0, binds = 0, kernels = 0, dropped = 0, local = 0,
		 granted = 0;
	int progs = 0;
	char line[600];
	for (;;) {
		struct ve_remote_stats rs;
		uint64_t s = ve__mix64(seed + (uint64_t)progs);
		if (!run_program(&g_run, s, ncalls, fail_submits, pace_us, &rs)) {
			snprintf(line, sizeof(line), "FAIL pid %d program %d seed %#llx: %s\n",
				 (int)getpid(), progs, (unsigned long long)s, g_run.err);
			ssize_t w = write(fd, line, strlen(line));
			(void)w;
			_exit(1);
		}
		progs++;
		failovers += rs.failovers;
		reconnects += rs.reconnects;
		binds += g_run.binds - rs.local_bindings;
		kernels += g_run.kernels;
		dropped += rs.dones_dropped;
		local += rs.local_bindings;
		granted += g_run.granted;
		if (progs >= min_progs && ve__now_ns() - t0 >= min_ms * 1000000ull)
			break;
	}
	snprintf(line, sizeof(line),
		 "OK pid %d: %d programs, %llu kernels, %llu bound by ved, %llu bound locally, "
		 "%llu granted, %llu failovers, %llu reconnects, %llu completions dropped\n",
		 (int)getpid(), progs, (unsigned long long)kernels, (unsigned long long)binds,
		 (unsigned long long)local, (unsigned long long)granted,
		 (unsigned long long)failovers,
		 (unsigned long long)reconnects, (unsigned long long)dropped);
	ssize_t w = write(fd, line, strlen(line));
	(void)w;
	_exit(0);
}

static void spawn(struct child *c, uint64_t seed, int min_progs, uint64_t min_ms, int ncalls,
		  bool fail_submits, uint32_t pace_us)
{
	int p[2];
	if (pipe(p) < 0) {
		c->pid = -1;
		return;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		alarm(VT_SANITIZED ? 300 : 120);
		client_main(p[1], seed, min_progs, min_ms, ncalls, fail_submits, pace_us);
	}
	close(p[1]);
	if (g_nkids < (int)VE_ARRAY_SIZE(g_kids))
		g_kids[g_nkids++] = pid;
	c->pid = pid;
	c->fd = p[0];
	c->killed = c->reported = c->ok = false;
	c->line[0] = 0;
}

/* Collects every child's line and exit status within timeout_s. */
static int reap(struct child *cs, int n, int timeout_s)
{
	int bad = 0;
	uint64_t dl = ve__now_ns() + (uint64_t)timeout_s * 1000000000ull;
	for (int i = 0; i < n; i++) {
		struct child *c = &cs[i];
		if (c->pid <= 0) {
			bad++;
			continue;
		}
		size_t len = 0;
		for (;;) {
			uint64_t now = ve__now_ns();
			int left = now < dl ? (int)((dl - now) / 1000000) : 0;
			struct pollfd p = {.fd = c->fd, .events = POLLIN};
			if (poll(&p, 1, left) <= 0) {
				snprintf(c->line, sizeof(c->line), "no result (timed out)");
				kill(c->pid, SIGKILL);
				break;
			}
			ssize_t k = read(c->fd, c->line + len, sizeof(c->line) - 1 - len);
			if (k <= 0)
				break;
			len += (size_t)k;
			c->line[len] = 0;
		}
		close(c->fd);
		int st = 0;
		waitpid(c->pid, &st, 0);
		forget(c->pid);
		c->reported = true;
		c->ok = !c->killed && WIFEXITED(st) && WEXITSTATUS(st) == 0 &&
			strncmp(c->line, "OK", 2) == 0;
		if (c->killed) {
			printf("# client %d (pid %d): killed on purpose\n", i, (int)c->pid);
			continue;
		}
		printf("# client %d: %s%s", i, c->line[0] ? c->line : "(nothing)\n",
		       c->line[0] && c->line[strlen(c->line) - 1] == '\n' ? "" : "\n");
		if (!c->ok) {
			fprintf(stderr, "client %d (pid %d) failed: status %#x: %s\n", i,
				(int)c->pid, st, c->line);
			bad++;
		}
	}
	return bad;
}

static uint64_t sum_field(const struct child *cs, int n, const char *what)
{
	uint64_t sum = 0;
	for (int i = 0; i < n; i++) {
		if (!cs[i].ok)
			continue;
		const char *p = strstr(cs[i].line, what);
		if (!p)
			continue;
		/* the number precedes the word */
		while (p > cs[i].line && p[-1] == ' ')
			p--;
		while (p > cs[i].line && p[-1] >= '0' && p[-1] <= '9')
			p--;
		sum += strtoull(p, NULL, 10);
	}
	return sum;
}

static void on_alarm(int sig)
{
	(void)sig;
	static const char m[] = "\ntest_ved: watchdog: test hung\n";
	ssize_t w = write(2, m, sizeof(m) - 1);
	(void)w;
	_exit(1);
}

/* What an earlier test left behind when a check failed: its ved, its clients. */
static void cleanup(void)
{
	for (int i = 0; i < g_nkids; i++)
		if (g_kids[i] > 0 && kill(g_kids[i], SIGKILL) == 0)
			waitpid(g_kids[i], NULL, 0);
	g_nkids = 0;
	if (g_ved_pid > 0) {
		kill(g_ved_pid, SIGKILL);
		waitpid(g_ved_pid, NULL, 0);
		g_ved_pid = 0;
	}
	if (g_dir[0])
		remove_dir();
}

static bool setup(void)
{
	static bool registered;
	if (!registered) {
		atexit(cleanup); /* a failed check must not leave ved or clients running */
		registered = true;
	}
	cleanup();
	if (!find_ved())
		return false;
	make_dir();
	unlink(g_log);
	struct sigaction sa = {.sa_handler = on_alarm};
	sigaction(SIGALRM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	return true;
}

/* ------------------------------------------------------------------ tests */

static void basic(void)
{
	if (!setup())
		VE_SKIP("no ved binary next to the tests (set VE_BUILD)");
	alarm(VT_SANITIZED ? 240 : 60);
	pid_t v = start_ved("tput", NULL);
	VE_CHECK_MSG(v > 0, "ved did not start (log %s)", g_log);
	VE_CHECK_EQ(status(), 0);
	VE_CHECK_EQ(st_msg()->nclients, 0);
	VE_CHECK_EQ(st_msg()->nentries, 0); /* no pool until the first client */
	uint64_t seed = ve_test_seed(0xbA51c);
	printf("# seed %#llx\n", (unsigned long long)seed);
	struct ve_remote_stats rs;
	bool ok = run_program(&g_run, seed, 200, true, 0, &rs);
	if (!ok)
		dump_log();
	VE_CHECK_MSG(ok, "%s", g_run.err);
	printf("# %llu kernels, %llu bound by ved (%llu READY, %llu DONE, %llu SUBMIT_FAILED "
	       "records), %llu bound locally\n",
	       (unsigned long long)g_run.kernels, (unsigned long long)g_run.binds,
	       (unsigned long long)rs.ready_sent, (unsigned long long)rs.dones_sent,
	       (unsigned long long)rs.failed_sent, (unsigned long long)rs.local_bindings);
	if (g_grant) {
		VE_CHECK_EQ(rs.ready_sent, 0); /* no record per op */
		VE_CHECK(g_run.granted > 0);
	} else {
		VE_CHECK(rs.ready_sent > 0 && rs.binds == rs.ready_sent + rs.failed_sent);
	}
	VE_CHECK_EQ(rs.local_bindings, 0);
	VE_CHECK_EQ(rs.failovers, 0);
	/* The BYE went out: ved removes the client and all its leases. */
	bool gone = false;
	for (int i = 0; i < 200 && !gone; i++) {
		gone = status() == 0 && st_msg()->nclients == 0 && all_idle();
		if (!gone)
			usleep(10000);
	}
	VE_CHECK_MSG(gone, "client still registered or entries busy after it left");
	VE_CHECK(st_msg()->nentries > 0);
	VE_CHECK_EQ(st_msg()->joined, 1);
	VE_CHECK_EQ(st_msg()->left, 1);
	VE_CHECK_EQ(st_msg()->protocol_errors, 0);
	if (!g_grant) /* in grant mode ved sees no op */
		VE_CHECK(st_msg()->completions > 0);
	VE_CHECK_EQ(stop_ved(v), 0);
	struct stat st;
	VE_CHECK_MSG(stat(g_sock, &st) != 0, "socket left behind after SIGTERM");
	remove_dir();
}

/* The grant word (ctl.h): generation's low 32 bits, lend, entry; and the full
 * generation ved rebuilds from the 32 bits a client acknowledges, across the
 * 2^32 boundary and with acknowledgements behind the coordinator. */
VE_TEST(ved_grant_word_and_gen_from32)
{
	uint64_t w = VE_VED_GRANT_WORD(0x123456789ull, 17, 3);
	VE_CHECK_EQ(w & 0xffff, 3);
	VE_CHECK_EQ((w >> 16) & 0xffff, 17);
	VE_CHECK_EQ(w >> 32, 0x23456789ull);
	w = VE_VED_GRANT_WORD(0, VE_POOL_NONE, VE_POOL_NONE);
	VE_CHECK_EQ(w, 0xffffffffull); /* before the first grant: none, none */
	const uint64_t nows[] = {5, 0xffffffffull, 0x100000000ull, 0x100000003ull, 0x7fffffff12ull};
	for (size_t i = 0; i < VE_ARRAY_SIZE(nows); i++)
		for (uint64_t back = 0; back < 8 && back <= nows[i]; back++) {
			uint64_t acked = nows[i] - back;
			VE_CHECK_EQ(ve_ved_gen_from32(nows[i], acked & 0xffffffffull), acked);
			VE_CHECK_EQ(ve_ved_gen_from32(nows[i], acked), acked); /* high bits ignored */
		}
	/* An acknowledgement ahead of the coordinator (a confused client): none. */
	VE_CHECK_EQ(ve_ved_gen_from32(5, 7), 0);
}

VE_TEST(ved_basic)
{
	g_grant = false;
	basic();
}

VE_TEST(ved_basic_grant)
{
	g_grant = true;
	basic();
}

static uint32_t g_raw_ring; /* ring_records a raw client asks for (0: ved's choice) */

/* Registers by hand (the protocol as a foreign client speaks it). */
static int raw_register(const uint32_t *leaf_sms, uint32_t nleaves, uint64_t fingerprint,
			struct ve_shm *shm, int *efd, char *msg, size_t msglen)
{
	int fd = ve_ctl_connect(g_sock);
	if (fd < 0)
		return fd;
	struct ve_ctl_hello h;
	memset(&h, 0, sizeof(h));
	ve_ctl_hdr_init(&h.h, VE_CTL_HELLO, sizeof(h));
	h.ipc_version = VE_IPC_VERSION;
	h.pid = (int32_t)getpid();
	h.nleaves = nleaves;
	h.fingerprint = fingerprint;
	h.ring_records = g_raw_ring;
	memcpy(h.leaf_sms, leaf_sms, nleaves * sizeof(uint32_t));
	snprintf(h.name, sizeof(h.name), "raw");
	ve_ctl_send(fd, &h, sizeof(h));
	int seg = -1;
	int n = ve_ctl_recv(fd, g_msg.b, sizeof(g_msg.b), &seg, 5000);
	if (n <= 0 || ve_ctl_check(g_msg.b, (size_t)n, VE_CTL_FROM_VED)) {
		close(fd);
		return -EPROTO;
	}
	const struct ve_ctl_hdr *hd = (const void *)g_msg.b;
	if (hd->type == VE_CTL_REFUSE) {
		snprintf(msg, msglen, "%.255s",
			 ((const struct ve_ctl_refuse *)(const void *)g_msg.b)->msg);
		close(fd);
		return -EACCES;
	}
	if (seg < 0 || ve_shm_attach_fd(seg, shm)) {
		close(fd);
		return -EPROTO;
	}
	n = ve_ctl_recv(fd, g_msg.b, sizeof(g_msg.b), efd, 5000);
	if (n <= 0 || *efd < 0) {
		close(fd);
		return -EPROTO;
	}
	return fd;
}

static void ring_bell(struct ve_shm *shm, int efd)
{
	struct ve_ved_words *w = ve_ved_words_of(shm);
	if (atomic_exchange(&w->daemon_sleeping, 0)) {
		uint64_t one = 1;
		ssize_t k = write(efd, &one, 8);
		(void)k;
	}
}

/* Waits for the control socket's EOF (ved disconnected us). */
static bool hung_up(int fd, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
	return poll(&p, 1, ms) > 0;
}

VE_TEST(ved_refuse)
{
	if (!setup())
		VE_SKIP("no ved binary next to the tests (set VE_BUILD)");
	alarm(VT_SANITIZED ? 240 : 60);
	/* A stale socket and lock (a ved that was SIGKILLed) are cleaned up. */
	pid_t v = start_ved("tput", NULL);
	VE_CHECK(v > 0);
	kill(v, SIGKILL);
	waitpid(v, NULL, 0);
	struct stat st;
	VE_CHECK_MSG(stat(g_sock, &st) == 0, "a killed ved leaves its socket (the test needs it)");
	VE_CHECK_EQ(ve_ctl_connect(g_sock), -ECONNREFUSED);
	v = start_ved("tput", NULL);
	VE_CHECK_MSG(v > 0, "ved did not take over a stale socket");
	/* A second ved on the same device is refused (and leaves the first alone). */
	pid_t v2 = fork();
	if (v2 == 0) {
		int fd = open("/dev/null", O_WRONLY);
		dup2(fd, 2);
		vh_isolate(g_sock);
		execl(g_ved, "ved", "--socket", g_sock, "--config", "/dev/null", (char *)NULL);
		_exit(127);
	}
	int s2;
	waitpid(v2, &s2, 0);
	VE_CHECK_MSG(WIFEXITED(s2) && WEXITSTATUS(s2) == 1, "second ved exited with %#x", s2);
	VE_CHECK_EQ(status(), 0);

	/* The first client sets the pool (15 x 8 + 12); another split is refused. */
	uint32_t good[16], bad[8];
	for (int i = 0; i < 15; i++)
		good[i] = 8;
	good[15] = 12;
	for (int i = 0; i < 8; i++)
		bad[i] = 8;
	struct ve_pool pg, pb;
	VE_CHECK_EQ(ve_pool_init(&pg, good, 16, 0), 0);
	VE_CHECK_EQ(ve_pool_init(&pb, bad, 8, 0), 0);
	struct ve_shm shm = {.fd = -1};
	int efd = -1;
	char msg[300] = "";
	int fd = raw_register(good, 16, pg.fingerprint, &shm, &efd, msg, sizeof(msg));
	VE_CHECK_MSG(fd >= 0, "registration refused: %d %s", fd, msg);
	struct ve_shm shm2 = {.fd = -1};
	int efd2 = -1;
	int fd2 = raw_register(bad, 8, pb.fingerprint, &shm2, &efd2, msg, sizeof(msg));
	VE_CHECK_EQ(fd2, -EACCES);
	printf("# refused as expected: %s\n", msg);
	VE_CHECK(strstr(msg, "pool mismatch") != NULL);
	/* A lying fingerprint is refused too. */
	fd2 = raw_register(good, 16, pg.fingerprint ^ 1, &shm2, &efd2, msg, sizeof(msg));
	VE_CHECK_EQ(fd2, -EACCES);

	/* A READY gets a BIND; then a malformed record: ved disconnects us,
	 * reclaims the lease, and keeps serving. */
	struct ve_ring_producer p;
	struct ve_ring_consumer c;
	VE_CHECK_EQ(ve_ring_producer_init(&p, &shm.to_coord), 0);
	VE_CHECK_EQ(ve_ring_consumer_init(&c, &shm.to_client), 0);
	struct ve_rec r;
	ve_rec_init(&r, VE_REC_READY);
	r.u.ready = (struct ve_rec_ready){
	    .tok = 0x77, .key = 1, .blocks = 132, .threads_per_block = 256, .kind = VE_OP_KERNEL};
	VE_CHECK_EQ(ve_ring_push(&p, &r, 1), 1);
	ring_bell(&shm, efd);
	VE_CHECK_EQ(ve_ring_wait(&c, 5000000000ull), 1);
	struct ve_rec b;
	VE_CHECK_EQ(ve_ring_pop(&c, &b, 1), 1);
	VE_CHECK_EQ(ve_proto_check(&b, VE_DIR_TO_CLIENT), 0);
	VE_CHECK_EQ(b.type, VE_REC_BIND);
	VE_CHECK_EQ(b.u.bind.tok, 0x77);
	VE_CHECK_EQ(status(), 0);
	VE_CHECK_EQ(st_msg()->nclients, 1);
	VE_CHECK(st_entries()[b.u.bind.entry].state == VE_ENTRY_LEASED);
	VE_CHECK_EQ(st_entries()[b.u.bind.entry].outstanding, 1);
	ve_rec_init(&r, VE_REC_DONE);
	r.seq = 1;
	r.u.done.tok = 0x77;
	r.u.done.entry = (uint16_t)(b.u.bind.entry + 1); /* not the entry it was bound to */
	VE_CHECK_EQ(ve_ring_push(&p, &r, 1), 1);
	ring_bell(&shm, efd);
	VE_CHECK_MSG(hung_up(fd, 5000), "ved did not disconnect a client that lied");
	bool clean = false;
	for (int i = 0; i < 200 && !clean; i++) {
		clean = status() == 0 && st_msg()->nclients == 0 && all_idle();
		if (!clean)
			usleep(10000);
	}
	VE_CHECK_MSG(clean, "lease of a disconnected client not reclaimed");
	VE_CHECK_EQ(st_msg()->protocol_errors, 1);
	VE_CHECK_EQ(st_msg()->reclaimed_ops, 1);
	close(fd);
	close(efd);
	ve_shm_fini(&shm);

	/* Garbage on the control socket: that connection goes, ved stays. */
	fd = ve_ctl_connect(g_sock);
	VE_CHECK(fd >= 0);
	char junk[100];
	memset(junk, 0x5a, sizeof(junk));
	ve_ctl_send(fd, junk, sizeof(junk));
	VE_CHECK(hung_up(fd, 5000));
	close(fd);
	VE_CHECK_EQ(status(), 0);
	VE_CHECK_EQ(stop_ved(v), 0);
	remove_dir();
}

static void many(const char *policy, uint64_t base, bool kill_some)
{
	alarm(VT_SANITIZED ? 600 : 240);
	pid_t v = start_ved(policy, NULL);
	VE_CHECK_MSG(v > 0, "ved did not start (log %s)", g_log);
	uint64_t seed = ve_test_seed(base);
	printf("# policy %s, seed %#llx (VE_SEED replays the client programs)\n", policy,
	       (unsigned long long)seed);
	struct child cs[NCLIENTS];
	int ncalls = kill_some ? 220 : VT_SANITIZED ? 120 : 220;
	uint64_t min_ms = kill_some ? 2500 : 0;
	int progs = kill_some ? 2 : (VT_SANITIZED ? 2 : 3);
	for (int i = 0; i < NCLIENTS; i++)
		spawn(&cs[i], ve__mix64(seed + 1000 * (uint64_t)i), progs, min_ms, ncalls, i & 1,
		      kill_some ? 8000 : 0);
	char why[256];
	const char *bad = NULL;
	int nkilled = 0, back_after = 0, back_seen = 0;
	if (kill_some) {
		uint64_t r = seed;
		/* Every client registered first: under a sanitizer on a loaded
		 * machine a client's set-up took longer than the wait below, ved
		 * was killed before anyone had joined it, and nothing failed over. */
		int joined = 0;
		for (int t = 0; t < 1000 && joined < NCLIENTS; t++) {
			/* Registrations so far (one that already finished counts). */
			if (status() == 0)
				joined = (int)st_msg()->joined;
			if (joined < NCLIENTS)
				usleep(10000);
		}
		VE_CHECK_MSG(joined == NCLIENTS, "only %d of %d clients joined ved in 10 s", joined,
			     NCLIENTS);
		usleep(300000 + rnd(&r, 300000));
		/* Two clients die mid-run; ved reclaims their leases. */
		for (int k = 0; k < 2; k++) {
			int i = (int)rnd(&r, NCLIENTS);
			if (cs[i].killed)
				continue;
			kill(cs[i].pid, SIGKILL);
			cs[i].killed = true;
			nkilled++;
			usleep(rnd(&r, 100000));
		}
		for (int i = 0; i < NCLIENTS; i++)
			if (cs[i].killed && cs[i].pid > 0) {
				waitpid(cs[i].pid, NULL, 0);
				forget(cs[i].pid);
				cs[i].pid = -cs[i].pid;
			}
		for (int t = 0; t < 300; t++) {
			bad = leases_clean(why, sizeof(why));
			if (!bad)
				break;
			usleep(10000);
		}
		if (bad)
			dump_log();
		VE_CHECK_MSG(!bad, "after killing clients: %s", bad);
		printf("# %d clients killed; their leases were reclaimed (%llu ops)\n", nkilled,
		       (unsigned long long)st_msg()->reclaimed_ops);
		/* ved dies and comes back: clients fail over and re-register. */
		kill(v, SIGKILL);
		waitpid(v, NULL, 0);
		usleep(200000 + rnd(&r, 200000));
		v = start_ved(policy, NULL);
		VE_CHECK_MSG(v > 0, "ved did not restart over its stale socket");
		int back = 0;
		uint64_t t_back = ve__now_ns();
		/* Two back if the survivors allow: one more is killed below, and
		 * the one that came back first may be it (seen under ASan: the
		 * only client that had re-registered was the one killed, and the
		 * survivors had finished in safe mode). */
		int want_back = 0;
		for (int i = 0; i < NCLIENTS; i++)
			want_back += !cs[i].killed;
		want_back = want_back > 2 ? 2 : want_back;
		for (int t = 0; t < 500 && back < want_back; t++) {
			if (status() == 0)
				back = (int)st_msg()->nclients;
			if (back < want_back)
				usleep(10000);
		}
		printf("# ved restarted; %d clients re-registered within %.1f s\n", back,
		       (double)(ve__now_ns() - t_back) / 1e9);
		VE_CHECK_MSG(back > 0, "no client came back to the restarted ved");
		back_seen = back;
		/* One more client dies under the new ved. */
		for (int i = 0; i < NCLIENTS; i++) {
			if (cs[i].killed)
				continue;
			usleep(rnd(&r, 200000));
			kill(cs[i].pid, SIGKILL);
			waitpid(cs[i].pid, NULL, 0);
			forget(cs[i].pid);
			cs[i].killed = true;
			cs[i].pid = -cs[i].pid;
			nkilled++;
			break;
		}
		for (int t = 0; t < 300; t++) {
			bad = leases_clean(why, sizeof(why));
			if (!bad)
				break;
			usleep(10000);
		}
		VE_CHECK_MSG(!bad, "after killing a client under the restarted ved: %s", bad);
		if (status() == 0)
			back_after = (int)st_msg()->nclients;
	}
	/* Survivors finish correctly. */
	struct child alive[NCLIENTS];
	int na = 0;
	for (int i = 0; i < NCLIENTS; i++) {
		if (cs[i].killed) {
			close(cs[i].fd);
			continue;
		}
		alive[na++] = cs[i];
	}
	int failed = reap(alive, na, VT_SANITIZED ? 500 : 200);
	if (failed)
		dump_log();
	VE_CHECK_MSG(failed == 0, "%d client(s) failed", failed);
	uint64_t fo = sum_field(alive, na, "failovers"), rc = sum_field(alive, na, "reconnects");
	printf("# %d survivors ok; %llu failovers, %llu reconnects, %llu kernels bound by ved\n",
	       na, (unsigned long long)fo, (unsigned long long)rc,
	       (unsigned long long)sum_field(alive, na, "bound by ved"));
	if (kill_some) {
		VE_CHECK_MSG(fo > 0, "the daemon was killed but no client failed over");
		/* Re-registered: a survivor says so, ved had clients again after
		 * its restart (a survivor whose program ended in safe mode joins
		 * with its next program, which counts no reconnect), or still had
		 * one after the last kill. */
		VE_CHECK_MSG(rc > 0 || back_seen > 0 || back_after > 0,
			     "no client re-registered with the restarted daemon");
	}
	if (g_grant) /* ved decides grants; the clients bind */
		VE_CHECK(sum_field(alive, na, "granted") > 0);
	else
		VE_CHECK(sum_field(alive, na, "bound by ved") > 0);
	/* Everything back: no clients, every entry idle, the self-check never fired. */
	bool idle = false;
	for (int t = 0; t < 300 && !idle; t++) {
		idle = status() == 0 && st_msg()->nclients == 0 && all_idle();
		if (!idle)
			usleep(10000);
	}
	if (!idle)
		dump_log();
	VE_CHECK_MSG(idle, "ved not idle after every client left");
	bad = leases_clean(why, sizeof(why));
	VE_CHECK_MSG(!bad, "%s", bad);
	printf("# ved: %llu bindings, %llu completions, %llu ops reclaimed, %llu joined, %llu "
	       "protocol errors\n",
	       (unsigned long long)st_msg()->bindings, (unsigned long long)st_msg()->completions,
	       (unsigned long long)st_msg()->reclaimed_ops, (unsigned long long)st_msg()->joined,
	       (unsigned long long)st_msg()->protocol_errors);
	VE_CHECK_EQ(st_msg()->protocol_errors, 0);
	int code = stop_ved(v);
	if (code)
		dump_log();
	VE_CHECK_MSG(code == 0, "ved exited with %d (the self-check aborts with 134)", code);
	remove_dir();
}

VE_TEST(ved_many)
{
	if (!setup())
		VE_SKIP("no ved binary next to the tests (set VE_BUILD)");
	g_grant = false;
	many("chaos", 0x3a7e, false);
}

VE_TEST(ved_kill)
{
	if (!setup())
		VE_SKIP("no ved binary next to the tests (set VE_BUILD)");
	g_grant = false;
	many("tput", 0x6b11, true);
}

/* Grant mode: chaos changes every client's grant at random every tick. */
VE_TEST(ved_many_grant)
{
	if (!setup())
		VE_SKIP("no ved binary next to the tests (set VE_BUILD)");
	g_grant = true;
	many("chaos", 0x3a7f, false);
}

VE_TEST(ved_kill_grant)
{
	if (!setup())
		VE_SKIP("no ved binary next to the tests (set VE_BUILD)");
	g_grant = true;
	many("tput", 0x6b12, true);
}

/* Keys with at least one measured time in a saved profile ("k <key> <ns|->..."). */
static int profile_measured(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	char line[4096];
	int n = 0;
	while (fgets(line, sizeof(line), f)) {
		char *save = NULL, *t = strtok_r(line, " \n", &save);
		if (!t || strcmp(t, "k") != 0 || !strtok_r(NULL, " \n", &save))
			continue;
		bool measured = false;
		while ((t = strtok_r(NULL, " \n", &save)))
			measured |= *t >= '0' && *t <= '9';
		n += measured;
	}
	fclose(f);
	return n;
}

/* A dispatcher thread over ved: the remote link's helper thread must wake it
 * when a BIND arrives while nothing else runs (a chain of dependent kernels:
 * each waits for the previous one's completion, then for its own BIND). */
static void threaded(void)
{
	alarm(VT_SANITIZED ? 240 : 60);
	pid_t v = start_ved("tput", NULL);
	VE_CHECK(v > 0);
	struct ve_sim_config sc;
	ve_sim_config_default(&sc);
	sc.wait_advances = true;
	struct ve_backend *b;
	VE_CHECK_EQ(ve_sim_create(&sc, &b), 0);
	struct ve_gpu_info gi;
	b->ops->info(b, &gi);
	char err[512];
	struct ve_runtime_config rcfg = {.daemon = g_sock, .dispatch = {.host_inline = true}};
	struct ve_runtime *rt;
	VE_CHECK_MSG(ve_runtime_create(&rcfg, b, &rt, err, sizeof(err)) == 0, "%s", err);
	VE_CHECK_EQ(ve_runtime_mode(rt), VE_RUNTIME_VED);
	struct ve_remote *rem = ve_runtime_remote(rt);
	struct ve_vctx_config vc = {.client_id = 0};
	struct ve_vctx *vx;
	VE_CHECK_EQ(ve_vctx_create(&vc, &vx), 0);
	VE_CHECK_EQ(ve_runtime_attach(rt, vx, 0, 0), 0);
	VE_CHECK_EQ(ve_runtime_start(rt), 0);
	ve_stream s;
	VE_CHECK_EQ(ve_vctx_stream_create(vx, VE_STREAM_NON_BLOCKING, 0, &s), 0);
	int n = VT_SANITIZED ? 300 : 2000;
	uint64_t t0 = ve__now_ns();
	for (int i = 0; i < n; i++) {
		struct ve_desc k = {.kind = VE_OP_KERNEL};
		k.u.k.fn = 0x42;
		k.u.k.grid = (struct ve_dim3){16, 1, 1};
		k.u.k.block = (struct ve_dim3){128, 1, 1};
		VE_CHECK_EQ(ve_vctx_submit(vx, s, &k, 0, NULL), 0);
		if (i % 100 == 99)
			VE_CHECK_EQ(ve_vctx_stream_sync(vx, s), 0);
	}
	VE_CHECK_EQ(ve_vctx_ctx_sync(vx), 0);
	double us = (double)(ve__now_ns() - t0) / 1e3 / n;
	struct ve_remote_stats rs;
	ve_remote_stats(rem, &rs);
	/* The time per op is mostly the dispatcher spinning before its backend
	 * wait lets the sim's virtual time move: not a latency measurement. */
	printf("# %d chained kernels through ved: %.1f us each (sim), %llu helper wake-ups, %llu "
	       "doorbells\n",
	       n, us, (unsigned long long)rs.waiter_wakes, (unsigned long long)rs.doorbells);
	VE_CHECK_EQ(rs.binds, g_grant ? 0 : (uint64_t)n);
	VE_CHECK_EQ(rs.failovers, 0);
	ve_runtime_stop(rt);
	if (g_grant) {
		/* The dispatcher's own counters: read with its thread stopped. */
		struct ve_runtime_stats rst;
		ve_runtime_stats(rt, &rst);
		VE_CHECK_EQ(rst.dispatch.local_binds + rst.dispatch.pipelined, (uint64_t)n);
	}
	/* VE_PROFILE_OUT under ved: the profile ved refined from our
	 * completions, fetched from ved, not the unused local one. */
	char prof[300];
	snprintf(prof, sizeof(prof), "%s/profile.txt", g_dir);
	VE_CHECK_EQ(ve_runtime_profile_save(rt, prof), 0);
	VE_CHECK_MSG(profile_measured(prof) > 0, "no measured key in the profile ved sent");
	unlink(prof);
	struct ve_runtime_stats st;
	ve_runtime_stats(rt, &st);
	VE_CHECK_EQ(strcmp(st.link.where, "ved"), 0);
	VE_CHECK_EQ(st.link.bindings, g_grant ? 0 : (uint64_t)n); /* grants: bound here */
	ve_runtime_detach(rt, 0);
	ve_runtime_destroy(rt);
	ve_vctx_destroy(vx);
	b->ops->destroy(b);
	VE_CHECK_EQ(stop_ved(v), 0);
	remove_dir();
}

VE_TEST(ved_threaded)
{
	if (!setup())
		VE_SKIP("no ved binary next to the tests (set VE_BUILD)");
	g_grant = false;
	threaded();
}

VE_TEST(ved_threaded_grant)
{
	if (!setup())
		VE_SKIP("no ved binary next to the tests (set VE_BUILD)");
	g_grant = true;
	threaded();
}

/* ved (per-op) dies while ops wait for their BIND and is not restarted: the
 * ops move to the safe-mode coordinator, which binds by grants, and the
 * dispatcher must still have them bound (it stopped calling schedule in
 * grant mode: the ops stayed popped and the program hung for good). */
VE_TEST(ved_kill_pending_per_op)
{
	if (!setup())
		VE_SKIP("no ved binary next to the tests (set VE_BUILD)");
	g_grant = false;
	alarm(VT_SANITIZED ? 240 : 60);
	pid_t v = start_ved("tput", NULL);
	VE_CHECK(v > 0);
	struct ve_sim_config sc;
	ve_sim_config_default(&sc);
	struct ve_backend *b;
	VE_CHECK_EQ(ve_sim_create(&sc, &b), 0);
	char err[512];
	struct ve_runtime_config rcfg = {.daemon = g_sock,
					 .ved_reconnect_ms = 100,
					 .dispatch = {.host_inline = true}};
	struct ve_runtime *rt;
	VE_CHECK_MSG(ve_runtime_create(&rcfg, b, &rt, err, sizeof(err)) == 0, "%s", err);
	VE_CHECK_EQ(ve_runtime_mode(rt), VE_RUNTIME_VED);
	struct ve_remote *rem = ve_runtime_remote(rt);
	struct ve_dispatcher *d = ve_runtime_dispatcher(rt);
	struct ve_vctx_config vc = {.client_id = 0};
	struct ve_vctx *vx;
	VE_CHECK_EQ(ve_vctx_create(&vc, &vx), 0);
	VE_CHECK_EQ(ve_runtime_attach(rt, vx, 0, 0), 0);
	ve_stream s[2];
	for (int i = 0; i < 2; i++)
		VE_CHECK_EQ(ve_vctx_stream_create(vx, VE_STREAM_NON_BLOCKING, 0, &s[i]), 0);
	/* ved cannot answer: the READYs wait for a BIND when it dies. */
	VE_CHECK_EQ(kill(v, SIGSTOP), 0);
	for (int i = 0; i < 2; i++) {
		struct ve_desc k = {.kind = VE_OP_KERNEL};
		k.u.k.fn = 0x42;
		k.u.k.grid = (struct ve_dim3){16, 1, 1};
		k.u.k.block = (struct ve_dim3){128, 1, 1};
		VE_CHECK_EQ(ve_vctx_submit(vx, s[i], &k, 0, NULL), 0);
	}
	ve_dispatcher_poll(d);
	struct ve_remote_stats rs;
	ve_remote_stats(rem, &rs);
	VE_CHECK_EQ(rs.ready_sent, 2);
	VE_CHECK_EQ(rs.binds, 0);
	kill(v, SIGKILL);
	waitpid(v, NULL, 0);
	g_ved_pid = 0;
	/* Not restarted: safe mode must run them (a reconnect would hide it). */
	uint64_t t_end = ve__now_ns() + 5000000000ull;
	while (ve_vctx_ctx_query(vx) != 0 && ve__now_ns() < t_end) {
		ve_dispatcher_poll(d);
		if (ve_sim_advance(b, NULL) != 0)
			usleep(1000);
	}
	ve_remote_stats(rem, &rs);
	printf("# %llu failovers, %llu bound locally\n", (unsigned long long)rs.failovers,
	       (unsigned long long)rs.local_bindings);
	VE_CHECK_EQ(rs.failovers, 1);
	VE_CHECK_MSG(ve_vctx_ctx_query(vx) == 0,
		     "the ops waiting for ved's BIND never ran after it died");
	VE_CHECK_EQ(rs.local_bindings, 2);
	ve_runtime_detach(rt, 0);
	ve_runtime_destroy(rt);
	ve_vctx_destroy(vx);
	b->ops->destroy(b);
	remove_dir();
}

/* Bindings that do not fit the client's ring wait in ved's per-client queue:
 * none dropped, none sent twice, in order, sequence numbers contiguous. */
/* The MPS control endpoint is a FIFO with some drivers and a Unix socket
 * with the H200's driver 580: both mean MPS is reachable from this
 * CUDA_MPS_PIPE_DIRECTORY (the socket was taken for "elsewhere" and every
 * client under MPS was told it was not). */
VE_TEST(mps_control_pipe_fifo_or_socket)
{
	char dir[] = "/tmp/ve-mps-XXXXXX";
	VE_CHECK(mkdtemp(dir) != NULL);
	char path[64];
	snprintf(path, sizeof(path), "%s/control", dir);
	VE_CHECK(!ve__mps_control_present(dir));
	VE_CHECK_EQ(mkfifo(path, 0600), 0);
	VE_CHECK(ve__mps_control_present(dir));
	VE_CHECK_EQ(unlink(path), 0);
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	VE_CHECK(fd >= 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	VE_CHECK_EQ(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	VE_CHECK(ve__mps_control_present(dir));
	close(fd);
	VE_CHECK_EQ(unlink(path), 0);
	FILE *f = fopen(path, "w"); /* a plain file is not an endpoint */
	VE_CHECK(f != NULL);
	fclose(f);
	VE_CHECK(!ve__mps_control_present(dir));
	VE_CHECK_EQ(unlink(path), 0);
	VE_CHECK_EQ(rmdir(dir), 0);
}

VE_TEST(ved_overflow)
{
	if (!setup())
		VE_SKIP("no ved binary next to the tests (set VE_BUILD)");
	alarm(VT_SANITIZED ? 240 : 60);
	pid_t v = start_ved("whole", NULL); /* binds every op at once (shared root) */
	VE_CHECK(v > 0);
	uint32_t leaves[16];
	for (int i = 0; i < 15; i++)
		leaves[i] = 8;
	leaves[15] = 12;
	struct ve_pool pg;
	VE_CHECK_EQ(ve_pool_init(&pg, leaves, 16, 0), 0);
	struct ve_shm shm = {.fd = -1};
	int efd = -1;
	char msg[300] = "";
	g_raw_ring = 16;
	int fd = raw_register(leaves, 16, pg.fingerprint, &shm, &efd, msg, sizeof(msg));
	g_raw_ring = 0;
	VE_CHECK_MSG(fd >= 0, "registration refused: %s", msg);
	VE_CHECK_EQ(shm.ring_records, 16);
	struct ve_ring_producer p;
	struct ve_ring_consumer c;
	VE_CHECK_EQ(ve_ring_producer_init(&p, &shm.to_coord), 0);
	VE_CHECK_EQ(ve_ring_consumer_init(&c, &shm.to_client), 0);
	enum { N = 300 };
	uint32_t seq = 0;
	uint64_t t_end = ve__now_ns() + 20000000000ull;
	for (int i = 0; i < N;) {
		struct ve_rec r;
		ve_rec_init(&r, VE_REC_READY);
		r.seq = seq;
		r.u.ready = (struct ve_rec_ready){.tok = 1000 + (uint64_t)i,
						  .key = 7,
						  .blocks = 16,
						  .threads_per_block = 128,
						  .kind = VE_OP_KERNEL};
		if (ve_ring_push(&p, &r, 1) == 1) {
			seq++;
			i++;
			ring_bell(&shm, efd);
		} else {
			VE_CHECK(ve__now_ns() < t_end);
			usleep(100);
		}
	}
	/* Every op is bound; 16 BINDs fit, the rest wait in ved. */
	uint32_t queued = 0;
	for (int t = 0; t < 500 && queued < N - 16; t++) {
		if (status() == 0 && st_msg()->nclients == 1)
			queued = st_clients()[0].overflow;
		if (queued < N - 16)
			usleep(10000);
	}
	printf("# %u bindings queued in ved behind a 16-record ring\n", queued);
	VE_CHECK_EQ(queued, N - 16);
	VE_CHECK_EQ(st_clients()[0].bound, N);
	static bool seen[N];
	uint32_t got = 0, in_seq = 0;
	while (got < N) {
		struct ve_rec b;
		int n = ve_ring_pop(&c, &b, 1);
		VE_CHECK(n >= 0);
		if (n == 0) {
			VE_CHECK_MSG(ve__now_ns() < t_end, "only %u of %d bindings arrived", got,
				     N);
			usleep(100);
			continue;
		}
		VE_CHECK_EQ(ve_proto_check(&b, VE_DIR_TO_CLIENT), 0);
		VE_CHECK_EQ(b.type, VE_REC_BIND);
		VE_CHECK_EQ(b.seq, in_seq);
		in_seq++;
		uint64_t k = b.u.bind.tok - 1000;
		VE_CHECK_MSG(k < N && !seen[k], "binding of token %#llx unknown or sent twice",
			     (unsigned long long)b.u.bind.tok);
		seen[k] = true;
		got++;
		struct ve_rec d;
		ve_rec_init(&d, VE_REC_DONE);
		d.seq = seq;
		d.u.done.tok = b.u.bind.tok;
		d.u.done.entry = b.u.bind.entry;
		while (ve_ring_push(&p, &d, 1) != 1) {
			VE_CHECK(ve__now_ns() < t_end);
			ring_bell(&shm, efd);
			usleep(100);
		}
		seq++;
		ring_bell(&shm, efd);
	}
	bool idle = false;
	for (int t = 0; t < 300 && !idle; t++) {
		idle = all_idle() && st_msg()->completions == N;
		if (!idle)
			usleep(10000);
	}
	VE_CHECK_MSG(idle, "ved not idle after every op completed");
	VE_CHECK_EQ(st_msg()->protocol_errors, 0);
	close(fd);
	close(efd);
	ve_shm_fini(&shm);
	VE_CHECK_EQ(stop_ved(v), 0);
	remove_dir();
}
