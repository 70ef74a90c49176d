/* SPDX-License-Identifier: MIT */
/*
 * Shim state: configuration, lazy initialization (the vctx, the CUDA backend
 * with its green-context pool, and the device's runtime stack from
 * src/runtime), handle maps, stream resolution, error mapping and the
 * pass-through barrier.
 */
#include "shim/shim.h"
#include "shim/hmap.h"
#include "backend/cuda.h"
#include "backend/cuda_desc.h"
#include "runtime/knobs.h"
#include "runtime/runtime.h"
#include "dispatch/trace.h"
#include "ved/client.h"
#include "util/util.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct ve_shim ve__shim;
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int notes_done[VE_NOTE_MAX];

void ve__notice_once(int which, const char *fmt, ...)
{
	if (which < 0 || which >= VE_NOTE_MAX || atomic_exchange(&notes_done[which], 1))
		return;
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	ve__log(VE_LOG_WARN, "%s", buf);
}

/* The capture this thread's per-thread default stream is in (0: none). A
 * thread's stream may join a capture another thread ends: each end bumps
 * captures_ended, and a thread that sees it moved asks the driver whether
 * its stream still captures. */
static _Thread_local uint32_t ptds_capture, ptds_ended_seen;
static _Atomic uint32_t captures_ended;

void ve__ptds_capture_set(uint32_t group)
{
	ptds_capture = group;
	ptds_ended_seen = atomic_load_explicit(&captures_ended, memory_order_acquire);
}

void ve__ptds_capture_ended(uint32_t group)
{
	if (ptds_capture == group)
		ptds_capture = 0;
	atomic_fetch_add_explicit(&captures_ended, 1, memory_order_release);
}

uint32_t ve__ptds_capture(void)
{
	if (VE_LIKELY(!ptds_capture))
		return 0;
	uint32_t ended = atomic_load_explicit(&captures_ended, memory_order_acquire);
	if (ended != ptds_ended_seen) {
		ptds_ended_seen = ended;
		CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_ACTIVE;
		if (ve__real.cuStreamIsCapturing &&
		    ve__real.cuStreamIsCapturing(CU_STREAM_PER_THREAD, &st) == CUDA_SUCCESS &&
		    st == CU_STREAM_CAPTURE_STATUS_NONE)
			ptds_capture = 0;
	}
	return ptds_capture;
}

uint64_t ve__thread_key(void)
{
	static _Atomic uint64_t next = 1;
	static _Thread_local uint64_t key;
	if (!key)
		key = atomic_fetch_add(&next, 1);
	return key;
}

/* A thread that used its per-thread default stream releases it when it exits
 * (a thread-per-request server would otherwise use up the streams). Not at
 * the first pass of the thread-local destructors: one of a key made after
 * ours (a library's, made after the thread's first launch) runs after ours
 * in that pass and may still launch on the stream; released by then, the
 * stream would be a new one, that launch unordered with the thread's earlier
 * work. So ours puts itself back until the C library's last pass but one
 * (not the last: sanitizers tear the thread's state down in that one, and a
 * call of ours after theirs would crash). */
static pthread_key_t ptds_exit_key;
static pthread_once_t ptds_exit_once = PTHREAD_ONCE_INIT;
static bool ptds_exit_ok;
static _Thread_local unsigned ptds_exit_passes;

static void ptds_thread_exit(void *arg)
{
	if (++ptds_exit_passes < PTHREAD_DESTRUCTOR_ITERATIONS - 1 &&
	    pthread_setspecific(ptds_exit_key, arg) == 0)
		return;
	if (ve__shim_is_active())
		ve_vctx_stream_per_thread_release(ve__shim.v, (uint64_t)(uintptr_t)arg);
}

static void ptds_exit_init(void)
{
	ptds_exit_ok = pthread_key_create(&ptds_exit_key, ptds_thread_exit) == 0;
}

static void ptds_release_at_exit(void)
{
	static _Thread_local bool armed;
	if (VE_LIKELY(armed))
		return;
	armed = true;
	pthread_once(&ptds_exit_once, ptds_exit_init);
	if (ptds_exit_ok)
		pthread_setspecific(ptds_exit_key, (void *)(uintptr_t)ve__thread_key());
}

/* ------------------------------------------------------------------ config */

static int env_u64(const char *name, uint64_t dflt, uint64_t lo, uint64_t hi, uint64_t *out)
{
	const char *s = getenv(name);
	if (!s || !*s) {
		*out = dflt;
		return 0;
	}
	uint64_t v;
	if (ve__parse_u64(s, &v) || v < lo || v > hi) {
		VE_ERR("%s=%s is not a number in [%llu, %llu]", name, s, (unsigned long long)lo,
		       (unsigned long long)hi);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

static void env_str(const char *name, const char *dflt, char *out, size_t len)
{
	const char *s = getenv(name);
	snprintf(out, len, "%s", s && *s ? s : dflt);
}

/* A knob that is one word out of 'choices' (the first is the default):
 * its index, or -EINVAL with a line naming the knob and the words. */
static int env_choice(const char *name, const char *const *choices, uint32_t n, uint32_t *out)
{
	const char *s = getenv(name);
	*out = 0;
	if (!s || !*s)
		return 0;
	for (uint32_t i = 0; i < n; i++)
		if (strcmp(s, choices[i]) == 0) {
			*out = i;
			return 0;
		}
	char list[160] = "";
	for (uint32_t i = 0, off = 0; i < n && off < sizeof(list); i++)
		off += (uint32_t)snprintf(list + off, sizeof(list) - off, "%s%s", i ? ", " : "",
					  choices[i]);
	VE_ERR("%s=%s is none of %s", name, s, list);
	return -EINVAL;
}

/* A time in milliseconds, fractions allowed, 0 < ms <= hi_ms; unset: 0. */
static int env_ms(const char *name, double hi_ms, uint64_t *out_ns)
{
	const char *s = getenv(name);
	*out_ns = 0;
	if (!s || !*s)
		return 0;
	double d;
	if (ve__parse_double(s, &d) || !(d > 0) || d > hi_ms) {
		VE_ERR("%s=%s is not a time in milliseconds in (0, %g]", name, s, hi_ms);
		return -EINVAL;
	}
	*out_ns = (uint64_t)(d * 1e6);
	return 0;
}

static int check_daemon_env(void);

/* Reads and validates every VE_* knob (docs/configuration.md). */
static int load_config(struct ve_shim_config *c)
{
	uint64_t v;
	int bad = 0;
	memset(c, 0, sizeof(*c));
	bad |= env_u64("VE_DISABLE", 0, 0, 1, &v);
	c->disabled = (int)v;
	bad |= env_u64("VE_DEVICE", 0, 0, 1024, &v);
	c->device = (int)v;
	env_str("VE_POLICY", "tput", c->policy, sizeof(c->policy));
	bad |= env_u64("VE_POOL_ENTRIES", 0, 0, 256, &v);
	c->pool_entries = (uint32_t)v;
	bad |= env_u64("VE_LEAF_SMS", 8, 1, 1024, &v);
	c->leaf_sms = (uint32_t)v;
	bad |= env_u64("VE_LANES", 4, 1, 64, &v);
	c->lanes = (uint32_t)v;
	bad |= env_u64("VE_COPY_LANES", 4, 1, 64, &v);
	c->copy_lanes = (uint32_t)v;
	bad |= env_u64("VE_MAX_OPS", 16384, 64, 1u << 22, &v);
	c->max_ops = (uint32_t)v;
	bad |= env_u64("VE_WINDOW", 2, 0, 1024, &v);
	c->window = (uint32_t)v;
	bad |= env_u64("VE_PIPE_BUDGET", 0, 0, 65535, &v);
	c->pipe_budget = (uint32_t)v;
	bad |= env_u64("VE_WATCHDOG_MS", 10000, 0, 86400000, &v);
	c->watchdog_ms = v;
	bad |= env_u64("VE_STRICT", 0, 0, 1, &v);
	c->strict = (uint32_t)v;
	bad |= env_u64("VE_PRELOAD", 1, 0, 1, &v);
	c->preload = (uint32_t)v;
	bad |= env_u64("VE_BOUNCE_KB", 64, 0, 16384, &v);
	c->bounce_kb = (uint32_t)v;
	bad |= env_u64("VE_READ_SELF", 1, 0, 1, &v);
	c->read_self = (uint32_t)v;
	bad |= env_u64("VE_EXIT_DRAIN_MS", 5000, 0, 86400000, &c->exit_drain_ms);
	static const char *const binds[] = {"grant", "op"};
	bad |= env_choice("VE_BIND", binds, 2, &c->per_op);
	bad |= env_u64("VE_TICK_US", 200, 10, 1000000, &v);
	c->tick_us = v;
	bad |= env_u64("VE_AHEAD_US", 150, 0, 1000000, &v);
	c->ahead_us = v;
	bad |= env_u64("VE_LEND_US", 400, 1, 1000000, &v);
	c->lend_us = v;
	/* Profiling (VE_PROFILE_OUT) wants every op timed by its own marker. */
	bad |= env_u64("VE_MARK_EVERY", getenv("VE_PROFILE_OUT") ? 1 : 16, 1, 4096, &v);
	c->mark_every = (uint32_t)v;
	bad |= env_u64("VE_MARK_LONG_TAIL", 0, 0, 1, &v);
	c->mark_long_tail = (uint32_t)v;
	bad |= env_u64("VE_PHASE", 0, 0, 1, &v);
	c->phase = (uint32_t)v;
	bad |= env_u64("VE_SYNC_SPIN_US", 1000, 0, 1000000, &v);
	c->sync_spin_us = v;
	bad |= env_u64("VE_POLL_US", 20, 1, 100000, &v);
	c->poll_us = v;
	bad |= env_u64("VE_IDLE_SPIN_US", 100, 0, 100000, &v);
	c->idle_spin_us = v;
	static const char *const wants[] = {"fill", "spread"};
	bad |= env_choice("VE_WANT", wants, 2, &c->want_spread);
	/* In the order of enum ve_graphs_mode (VE_GRAPHS_AUTO first). */
	static const char *const gmodes[] = {"auto", "pool", "whole", "stream", "barrier"};
	bad |= env_choice("VE_GRAPHS", gmodes, VE_ARRAY_SIZE(gmodes), &c->graphs);
	static const char *const classes[] = {"batch", "latency"};
	bad |= env_choice("VE_CLASS", classes, 2, &c->latency);
	bad |= env_ms("VE_TPOT_MS", 60000.0, &c->tpot_ns);
	if (c->tpot_ns && !c->latency) {
		/* Deadlines are for latency-class clients only (ve_advise_step
		 * refuses them to others too). */
		VE_ERR("VE_TPOT_MS is set but VE_CLASS is not latency: step deadlines are only "
		       "for latency-class clients");
		bad = 1;
	}
	env_str("VE_TRACE", "", c->trace, sizeof(c->trace));
	env_str("VE_PROFILE", "", c->profile, sizeof(c->profile));
	env_str("VE_PROFILE_OUT", "", c->profile_out, sizeof(c->profile_out));
	/* Files written at exit must be writable now: found out at exit, the
	 * data would be lost after the whole run. */
	const char *outs[][2] = {{"VE_TRACE", c->trace}, {"VE_PROFILE_OUT", c->profile_out}};
	for (size_t i = 0; i < VE_ARRAY_SIZE(outs); i++) {
		int wrc = outs[i][1][0] ? ve__path_writable(outs[i][1]) : 0;
		if (wrc) {
			VE_ERR("%s=%s: cannot write there: %s", outs[i][0], outs[i][1],
			       strerror(-wrc));
			bad = 1;
		}
	}
	bad |= check_daemon_env() != 0;
	return bad ? -EINVAL : 0;
}

/* ------------------------------------------------------------------ init */

static void shim_atexit(void);
static void shim_forked_child(void);

/* VE_STRICT=1 (read directly: the configuration may be what failed). */
static bool strict_mode(void)
{
	const char *s = getenv("VE_STRICT");
	return s && strcmp(s, "1") == 0;
}

/* The exit status of a process that VE_STRICT=1 stops: EX_CONFIG of
 * sysexits.h (docs/configuration.md). */
#define VE_STRICT_EXIT 78

static void go_passthrough(const char *why)
{
	if (why && strict_mode()) {
		/* Nothing of the program ran on the GPU yet: stopping here loses
		 * nothing, running un-virtualized would hide the problem. */
		ve__log(VE_LOG_ERROR, "%s; VE_STRICT=1: exiting (status %d) instead of running as a "
			"pass-through", why, VE_STRICT_EXIT);
		_exit(VE_STRICT_EXIT);
	}
	atomic_store_explicit(&ve__shim.state, VE_SHIM_PASSTHROUGH, memory_order_release);
	if (why)
		ve__log(VE_LOG_WARN, "%s: running as a transparent pass-through", why);
}

/* VE_DAEMON (docs/daemon.md): 0, 1 or an absolute socket path; what each
 * means is decided with the rest of the placement in ve_runtime_choose. */
static int check_daemon_env(void)
{
	const char *v = getenv("VE_DAEMON");
	if (!v || !*v || strcmp(v, "0") == 0 || strcmp(v, "1") == 0 ||
	    (v[0] == '/' && strlen(v) < 108))
		return 0;
	VE_ERR("VE_DAEMON=%s is none of 0, 1 or an absolute socket path", v);
	return -EINVAL;
}

/* The runtime configuration of this process, from the VE_* knobs. */
static void runtime_config(const struct ve_shim *S, struct ve_runtime_config *rc)
{
	memset(rc, 0, sizeof(*rc));
	rc->disabled = S->cfg.disabled;
	rc->daemon = getenv("VE_DAEMON");
	rc->device = S->cfg.device;
	rc->policy = S->cfg.policy;
	rc->profile_path = S->cfg.profile;
	rc->pool_entries = S->cfg.pool_entries;
	rc->max_clients = 1;
	rc->seed = (uint64_t)ve__now_ns();
	rc->class_flags = S->cfg.latency ? VE_READY_LATENCY : 0;
	rc->max_ops = S->cfg.max_ops;
	rc->per_op = S->cfg.per_op;
	rc->tick_ns = S->cfg.tick_us * 1000;
	rc->watchdog_ns = S->cfg.watchdog_ms * 1000000ull;
	rc->strict = S->cfg.strict;
	rc->dispatch = (struct ve_dispatcher_config){.lanes_per_entry = S->cfg.lanes,
						     .copy_lanes = S->cfg.copy_lanes,
						     .window = S->cfg.window,
						     .pipe_budget = S->cfg.pipe_budget,
						     .ahead_ns = S->cfg.ahead_us * 1000,
						     .lend_ns = S->cfg.lend_us * 1000,
						     .ahead_max = 256,
						     .mark_every = S->cfg.mark_every,
						     .long_tail = S->cfg.mark_long_tail != 0,
						     .phase = S->cfg.phase != 0,
						     .poll_ns = S->cfg.poll_us * 1000,
						     .idle_spin_ns = S->cfg.idle_spin_us * 1000,
						     .wait_spin_ns = S->cfg.sync_spin_us * 1000,
						     .want_spread = S->cfg.want_spread != 0};
	rc->trace = S->cfg.trace[0] != 0;
}

static void launch_limits_read(void); /* for ve__check_launch_config */

/* The backend asks, for a timed record, whether its event was recorded
 * again since (ve_cuda_backend_set_record_filter). */
static bool record_current(void *arg, uint32_t event_idx, uint64_t generation)
{
	return ve_vctx_event_record_current(arg, event_idx, generation);
}

static int start_runtime(struct ve_shim *S)
{
	char err[512] = "";
	if (!ve__real.cuInit || !ve__real.cuDeviceGet || !ve__real.cuDevicePrimaryCtxRetain ||
	    !ve__real.cuCtxGetCurrent) {
		VE_WARN("the CUDA driver lacks the context calls Vitamin-E needs (too old)");
		return -ENOTSUP;
	}
	CUresult r = ve__real.cuInit(0); /* no-op if the app already did it */
	if (r == CUDA_SUCCESS)
		r = ve__real.cuDeviceGet(&S->dev, S->cfg.device);
	if (r != CUDA_SUCCESS) {
		VE_WARN("VE_DEVICE=%d: no such device (%d)", S->cfg.device, r);
		return -ENODEV;
	}
	launch_limits_read();
	r = ve__real.cuDevicePrimaryCtxRetain(&S->ctx, S->dev);
	if (r != CUDA_SUCCESS) {
		VE_WARN("cannot retain the primary context of device %d (%d)", S->cfg.device, r);
		return -ENODEV;
	}
	struct ve_cuda_config bc = {.device = S->cfg.device,
				    .ctx = S->ctx,
				    .min_leaf_sms = S->cfg.leaf_sms,
				    .priority_high = S->cfg.latency != 0};
	int rc = ve_cuda_backend_create(&bc, &S->backend, err, sizeof(err));
	if (rc) {
		VE_WARN("no green-context pool: %s", err[0] ? err : strerror(-rc));
		return rc;
	}
	struct ve_gpu_info gi;
	S->backend->ops->info(S->backend, &gi);
	struct ve_vctx_config vc = {.client_id = 0,
				    .max_ops = S->cfg.max_ops,
				    .sync_spin_ns = S->cfg.sync_spin_us * 1000,
				    .stamp_calls = S->cfg.trace[0] != 0};
	rc = ve_vctx_create(&vc, &S->v);
	if (rc)
		return rc;
	ve_cuda_backend_set_record_filter(S->backend, record_current, S->v);
	struct ve_runtime_config rcfg;
	runtime_config(S, &rcfg);
	uint64_t t0 = ve__now_ns();
	rc = ve_runtime_create(&rcfg, S->backend, &S->rt, err, sizeof(err));
	if (rc) {
		if (!err[0] || strncmp(err, VE_RUNTIME_POOL_ERR, strlen(VE_RUNTIME_POOL_ERR)) == 0)
			VE_WARN("%s", err[0] ? err : strerror(-rc));
		else
			VE_ERR("VE_POLICY/VE_PROFILE/VE_POOL_ENTRIES: %s", err);
		return rc;
	}
	struct ve_cuda_pool_stats ps;
	ve_cuda_backend_pool_stats(S->backend, &ps);
	/* The link belongs to the dispatcher's thread once it runs: ask first. */
	struct ve_link_info li;
	ve_link_info(ve_runtime_link(S->rt), &li);
	rc = ve_runtime_attach(S->rt, S->v, 0, S->cfg.latency ? VE_READY_LATENCY : 0);
	if (rc)
		return rc;
	rc = ve_runtime_start(S->rt);
	if (rc)
		return rc;
	VE_INFO("active on %s: %u SMs, %u leaves, %u pool entries (%u streams) created in %.1f ms, "
		"%.0f MiB device memory; policy %s%s",
		gi.name, gi.sm_count, gi.nleaves, ve_runtime_pool(S->rt)->nentries, ps.streams,
		(double)(ve__now_ns() - t0) / 1e6, (double)ps.mem_used_bytes / (1 << 20),
		li.policy,
		/* ved's policy as its hello named it; in safe mode the local one says so */
		ve_runtime_mode(S->rt) == VE_RUNTIME_VED && strcmp(li.where, "ved") == 0
		    ? " (ved's)"
		    : "");
	return 0;
}

/* One line, whichever path notices first: programs that find the driver through dlsym and
 * cuGetProcAddress (libcudart) never call a hook when disabled (test_shim_interpose). */
static void disabled_notice(void)
{
	ve__log_init();
	ve__notice_once(VE_NOTE_DISABLED, "VE_DISABLE=1: running as a transparent pass-through");
}

static void init_locked(void)
{
	struct ve_shim *S = &ve__shim;
	ve__log_init();
	ve_knobs_check_env();
	if (load_config(&S->cfg)) {
		go_passthrough("vitamin-e: bad configuration (see above)");
		return;
	}
	struct ve_runtime_config rcfg;
	runtime_config(S, &rcfg);
	char path[108];
	bool start_safe;
	if (ve_runtime_choose(&rcfg, path, sizeof(path), &start_safe, NULL) ==
	    VE_RUNTIME_PASSTHROUGH) {
		go_passthrough(NULL);
		disabled_notice();
		return;
	}
	if (ve__real_init()) {
		go_passthrough("no usable CUDA driver");
		return;
	}
	S->init_ns = ve__now_ns();
	int rc = start_runtime(S);
	if (rc) {
		go_passthrough("vitamin-e could not start");
		return;
	}
	S->pid = getpid();
	atexit(shim_atexit);
	pthread_atfork(NULL, NULL, shim_forked_child);
	atomic_store_explicit(&S->state, VE_SHIM_ACTIVE, memory_order_release);
	ve__watchdog_start();
}

bool ve__shim_hooking(void)
{
	static _Atomic int hooking = -1;
	int h = atomic_load_explicit(&hooking, memory_order_relaxed);
	if (h < 0) {
		const char *d = getenv("VE_DISABLE");
		h = !(d && strcmp(d, "1") == 0);
		atomic_store_explicit(&hooking, h, memory_order_relaxed);
		if (!h)
			disabled_notice();
	}
	return h;
}

bool ve__shim_active(void)
{
	int st = atomic_load_explicit(&ve__shim.state, memory_order_acquire);
	if (VE_LIKELY(st != VE_SHIM_UNINIT))
		return st == VE_SHIM_ACTIVE;
	pthread_mutex_lock(&init_lock);
	if (atomic_load(&ve__shim.state) == VE_SHIM_UNINIT)
		init_locked();
	pthread_mutex_unlock(&init_lock);
	return atomic_load(&ve__shim.state) == VE_SHIM_ACTIVE;
}

/* A child forked after the runtime started has none of its threads (the
 * dispatcher, ved's link): its calls go to the driver, which answers as it
 * does in a forked child, and its exit leaves the parent's runtime alone. */
static void shim_forked_child(void)
{
	if (atomic_load(&ve__shim.state) == VE_SHIM_ACTIVE)
		atomic_store(&ve__shim.state, VE_SHIM_PASSTHROUGH);
}

static void shim_atexit(void)
{
	struct ve_shim *S = &ve__shim;
	if (atomic_load(&S->state) != VE_SHIM_ACTIVE || getpid() != S->pid)
		return;
	/* Queued logical work may finish, for VE_EXIT_DRAIN_MS at most: natively
	 * the driver drops what a process leaves queued when it exits, and a
	 * wait that never ends (a stream waiting for a value nobody writes, a
	 * collective whose peer died) must not hold the exit. Polled without the
	 * vctx's lock: exit() may run in a signal handler that interrupted a
	 * thread inside a vctx wait. */
	uint64_t end = ve__now_ns() + S->cfg.exit_drain_ms * 1000000ull;
	while (ve_vctx_live_ops(S->v) && ve__now_ns() < end) {
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
	uint32_t left = ve_vctx_live_ops(S->v);
	atomic_store(&S->state, VE_SHIM_PASSTHROUGH);
	if (left) {
		/* The dispatcher may be held by them: no teardown, the process's
		 * end stops every thread (ved sees the hang-up and reclaims). */
		VE_WARN("exit: %u operations still queued after %llu ms (VE_EXIT_DRAIN_MS) are "
			"dropped, as the driver drops a process's queued work at exit",
			left, (unsigned long long)S->cfg.exit_drain_ms);
		return;
	}
	ve_runtime_stop(S->rt);
	/* A thread that queued work after the drain (exit raced with it)
	 * would wait for good: nothing completes any more. */
	ve_vctx_close(S->v, CUDA_ERROR_DEINITIALIZED);
	struct ve_runtime_stats rs;
	ve_runtime_stats(S->rt, &rs);
	VE_INFO("exit: %llu ops submitted (%llu bound by %s, %llu copies, %llu host functions), "
		"%llu decisions in %.1f ms, %llu submissions the driver refused (bound again)",
		(unsigned long long)rs.dispatch.submitted, (unsigned long long)rs.dispatch.bound,
		ve_runtime_mode(S->rt) == VE_RUNTIME_VED ? "ved" : rs.link.policy,
		(unsigned long long)rs.dispatch.copies, (unsigned long long)rs.dispatch.host_fns,
		(unsigned long long)rs.link.bindings, (double)rs.link.decide_ns / 1e6,
		(unsigned long long)rs.dispatch.submit_failures);
	if (rs.dispatch.slow_submits || atomic_load(&S->preloaded))
		VE_INFO("exit: %llu kernels loaded on the launching thread (VE_PRELOAD=%u); "
			"%llu driver submissions held the dispatcher 1 ms or more (%.1f ms in "
			"all, the longest %.1f ms)",
			(unsigned long long)atomic_load(&S->preloaded), S->cfg.preload,
			(unsigned long long)rs.dispatch.slow_submits,
			(double)rs.dispatch.slow_submit_ns / 1e6,
			(double)rs.dispatch.submit_ns_max / 1e6);
	if (rs.dispatch.lend_binds)
		VE_INFO("exit: %llu of %llu kernels ran on SMs lent to this process (short "
			"kernels, up to VE_LEND_US=%llu us)",
			(unsigned long long)rs.dispatch.lend_binds,
			(unsigned long long)rs.dispatch.granted, (unsigned long long)S->cfg.lend_us);
	VE_DEBUG("exit: completion markers: %llu written, %llu ops deferred to a later one, %llu "
		 "written for deferred ops (a wait, a drain, the idle flush, a kernel behind a "
		 "long one); %llu long kernels "
		 "on an idle lane waited for their stream's next op",
		 (unsigned long long)rs.dispatch.marks, (unsigned long long)rs.dispatch.deferred,
		 (unsigned long long)rs.dispatch.flushes, (unsigned long long)rs.dispatch.long_tails);
	if (S->cfg.phase)
		VE_INFO("exit: VE_PHASE held %llu steps' first op, %.2f ms in all; %llu tries of "
			"a new phase, %llu kept",
			(unsigned long long)rs.dispatch.phase_holds,
			(double)rs.dispatch.phase_hold_ns / 1e6,
			(unsigned long long)rs.dispatch.phase_tries,
			(unsigned long long)rs.dispatch.phase_kept);
	VE_DEBUG("exit: the dispatcher slept %llu times with nothing in flight (VE_IDLE_SPIN_US=%llu)",
		 (unsigned long long)rs.dispatch.idle_sleeps, (unsigned long long)S->cfg.idle_spin_us);
	VE_DEBUG("exit: the dispatcher slept %llu times with work in flight while a thread waited "
		 "for it (VE_SYNC_SPIN_US=%llu)",
		 (unsigned long long)rs.dispatch.wait_sleeps, (unsigned long long)S->cfg.sync_spin_us);
	struct ve_remote *rem = ve_runtime_remote(S->rt);
	if (rem) {
		/* ved's wake-ups cost a syscall each on the dispatcher thread:
		 * how many this process paid (tests/shim/test_shim_ved.c). */
		struct ve_remote_stats vs;
		ve_remote_stats(rem, &vs);
		VE_DEBUG(
		    "exit: ved link: %llu samples sent without a doorbell, %llu doorbells rung",
		    (unsigned long long)vs.samples_sent, (unsigned long long)vs.doorbells);
	}
	uint64_t gcopies, gfailed;
	ve__gcopies_stats(&gcopies, &gfailed);
	if (gcopies || gfailed)
		VE_INFO("exit: %llu graph copies made for pool entries (their kernels on the "
			"entry's SMs), %llu could not be made (those graphs ran on every SM)",
			(unsigned long long)gcopies, (unsigned long long)gfailed);
	uint64_t gp = atomic_load(&S->graph_pool), gw = atomic_load(&S->graph_whole);
	if (gp || gw)
		VE_INFO("exit: %llu graph launches: %llu may run on a pool entry, %llu need the whole "
			"GPU (clusters the driver could not place, cooperative nodes as wide as the "
			"GPU, graphs without copies, stream placement)",
			(unsigned long long)(gp + gw), (unsigned long long)gp,
			(unsigned long long)gw);
	uint64_t nst = atomic_load(&S->steps);
	if (S->cfg.tpot_ns && (nst || rs.dispatch.late_ops))
		VE_INFO("exit: %llu steps (first launch to blocking wait), %llu longer than "
			"VE_TPOT_MS=%g, the longest %.2f ms; %llu ops finished after their "
			"deadline; step time p50 %.3f ms, p99 %.3f ms (within 7%% or 0.5 us)",
			(unsigned long long)nst, (unsigned long long)atomic_load(&S->steps_late),
			(double)S->cfg.tpot_ns / 1e6, (double)atomic_load(&S->step_max_ns) / 1e6,
			(unsigned long long)rs.dispatch.late_ops,
			(double)ve__step_quantile_ns(0.50) / 1e6,
			(double)ve__step_quantile_ns(0.99) / 1e6);
	uint64_t nb = atomic_load(&S->bounced), nf = atomic_load(&S->bounce_full);
	uint64_t ns = atomic_load(&S->read_self);
	if (nb || nf || ns)
		VE_INFO("exit: %llu copies into pageable memory ran in stream order on the GPU "
			"through a pinned bounce buffer (VE_BOUNCE_KB=%u), %llu found every buffer "
			"taken and ran as ordered pass-through calls, %llu ran on the calling thread "
			"right behind their stream's work (VE_READ_SELF)",
			(unsigned long long)nb, S->cfg.bounce_kb, (unsigned long long)nf,
			(unsigned long long)ns);
	uint64_t bn = atomic_load(&S->barrier_done_at_once), bl = atomic_load(&S->barrier_linked);
	if (bn || bl)
		VE_INFO("exit: %llu ordered pass-through calls (pageable copies and the like): %llu "
			"done when they returned, %llu linked into the logical order by an event",
			(unsigned long long)(bn + bl), (unsigned long long)bn, (unsigned long long)bl);
	uint64_t wc = atomic_load(&S->wide_cluster), wo = atomic_load(&S->wide_coop),
		 fc = atomic_load(&S->fit_cluster);
	if (fc)
		VE_INFO("exit: %llu launches with thread-block clusters larger than 2 (largest %u "
			"blocks) ran on entries the driver's occupancy calculator found wide enough",
			(unsigned long long)fc, atomic_load(&S->widest_cluster));
	if (wc || wo)
		VE_INFO("exit: %llu launches could run only on the whole GPU: %llu with thread-block "
			"clusters larger than 2 (largest %u blocks), %llu cooperative grids as wide as "
			"the GPU",
			(unsigned long long)(wc + wo), (unsigned long long)wc,
			atomic_load(&S->widest_cluster), (unsigned long long)wo);
	/* The bind deadline's fallbacks are a problem to see, not a statistic. */
	struct ve_coord_stats cs = {0};
	if (ve_runtime_coord(S->rt))
		ve_coord_stats(ve_runtime_coord(S->rt), &cs);
	if (rs.dispatch.watchdog_binds || cs.watchdog_binds || rs.dispatch.stuck_lanes)
		VE_WARN("exit: the watchdog (VE_WATCHDOG_MS=%llu) bound %llu ops to the whole GPU "
			"and found %llu stuck lanes",
			(unsigned long long)S->cfg.watchdog_ms,
			(unsigned long long)(rs.dispatch.watchdog_binds + cs.watchdog_binds),
			(unsigned long long)rs.dispatch.stuck_lanes);
	if (ve_runtime_trace(S->rt)) {
		const uint64_t *waits;
		uint32_t nw = ve_vctx_wait_log(S->v, &waits);
		ve_trace_set_waits(ve_runtime_trace(S->rt), 0, waits, nw);
		int rc = ve_runtime_trace_write(S->rt, S->cfg.trace);
		if (rc)
			VE_WARN("VE_TRACE=%s: %s", S->cfg.trace, strerror(-rc));
	}
	if (S->cfg.profile_out[0]) {
		/* The profiles of the coordinator that decided: ours, or ved's. */
		int rc = ve_runtime_profile_save(S->rt, S->cfg.profile_out);
		if (rc)
			VE_WARN("VE_PROFILE_OUT=%s: %s", S->cfg.profile_out, strerror(-rc));
	}
	ve_runtime_destroy(S->rt); /* BYE to ved when it decided */
	S->rt = NULL;
	S->backend->ops->destroy(S->backend);
	S->backend = NULL;
}

/* ------------------------------------------------------------------ maps */

/* Handle maps: hmap.c. */
static struct ve__hmap smap = VE__HMAP_INIT;
static struct ve__hmap emap = VE__HMAP_INIT;

int ve__smap_put(CUstream st, const struct ve_stream_info *info)
{
	struct ve__hslot *s = ve__hmap_get_locked(&smap, (uintptr_t)st, true);
	if (!s)
		return -ENOSPC;
	s->v.s = *info;
	pthread_mutex_unlock(&smap.lock);
	return 0;
}

int ve__smap_get(CUstream st, struct ve_stream_info *out)
{
	struct ve__hslot *s = ve__hmap_get_locked(&smap, (uintptr_t)st, false);
	if (!s)
		return -ENOENT;
	*out = s->v.s;
	pthread_mutex_unlock(&smap.lock);
	return 0;
}

int ve__smap_del(CUstream st)
{
	return ve__hmap_del(&smap, (uintptr_t)st);
}

int ve__smap_set_capture(CUstream st, uint32_t group)
{
	struct ve__hslot *s = ve__hmap_get_locked(&smap, (uintptr_t)st, false);
	if (!s)
		return -ENOENT;
	s->v.s.capture = group;
	pthread_mutex_unlock(&smap.lock);
	return 0;
}

void ve__smap_end_capture(uint32_t group)
{
	pthread_mutex_lock(&smap.lock);
	for (uint32_t i = 0; i < VE__HMAP_CAP; i++)
		if (smap.tab[i].key != 0 && smap.tab[i].v.s.capture == group)
			smap.tab[i].v.s.capture = 0;
	pthread_mutex_unlock(&smap.lock);
}

int ve__emap_put(CUevent ev, const struct ve_event_info *info)
{
	struct ve__hslot *s = ve__hmap_get_locked(&emap, (uintptr_t)ev, true);
	if (!s)
		return -ENOSPC;
	s->v.e = *info;
	pthread_mutex_unlock(&emap.lock);
	return 0;
}

int ve__emap_get(CUevent ev, struct ve_event_info *out)
{
	struct ve__hslot *s = ve__hmap_get_locked(&emap, (uintptr_t)ev, false);
	if (!s)
		return -ENOENT;
	*out = s->v.e;
	pthread_mutex_unlock(&emap.lock);
	return 0;
}

int ve__emap_del(CUevent ev)
{
	return ve__hmap_del(&emap, (uintptr_t)ev);
}

int ve__emap_set_capture(CUevent ev, uint32_t group)
{
	struct ve__hslot *s = ve__hmap_get_locked(&emap, (uintptr_t)ev, false);
	if (!s)
		return -ENOENT;
	s->v.e.capture = group;
	pthread_mutex_unlock(&emap.lock);
	return 0;
}

int ve__emap_set_graph(CUevent ev, uint32_t graph)
{
	struct ve__hslot *s = ve__hmap_get_locked(&emap, (uintptr_t)ev, false);
	if (!s)
		return -ENOENT;
	s->v.e.graph = graph;
	pthread_mutex_unlock(&emap.lock);
	return 0;
}

void ve__emap_end_capture(uint32_t group)
{
	pthread_mutex_lock(&emap.lock);
	for (uint32_t i = 0; i < VE__HMAP_CAP; i++)
		if (emap.tab[i].key != 0 && emap.tab[i].v.e.capture == group)
			emap.tab[i].v.e.capture = 0;
	pthread_mutex_unlock(&emap.lock);
}

/* ------------------------------------------------------------------ params */

/* Per-function parameter layouts from cuFuncGetParamInfo (or
 * cuKernelGetParamInfo for a CUkernel passed as a CUfunction), cached. */
#define PCACHE_CAP0 4096u
#define PMAX	    VE_DESC_MAX_PARAMS

/* A function's layout, immutable once published and never freed: a lookup
 * on another thread may hold it while its slot is reused (its function's
 * module unloaded, or forgotten by an unload of some library). */
struct playout {
	struct playout *retired_next; /* replaced records, kept reachable (never read by lookups) */
	uint32_t nparams, total;
	uint32_t max_threads; /* CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 0 unknown */
	uint32_t pairs[];     /* nparams (offset, size) pairs */
};

/* A slot is published by a release store of key after its layout; lookups
 * read without the lock (every launch does one, on any thread) and check
 * the key again after taking the layout, so a slot reused meanwhile is seen.
 * Misses insert under pcache_lock. A function whose module is unloaded
 * leaves a tombstone (PKEY_GONE), which lookups pass over and inserts reuse:
 * the CUfunction's address may come back as another module's function. */
struct pslot {
	_Atomic uintptr_t key;
	_Atomic(const struct playout *) lay;
};
#define PKEY_GONE ((uintptr_t)1)

/* Open addressing, at most half full counting tombstones: a process that
 * launches more distinct functions (Triton and torch.compile make
 * thousands, and never unload them) gets a table twice as large, one that
 * loads and unloads modules a table as large without the tombstones; the
 * live entries are copied over. Earlier tables stay allocated, since a
 * lookup may still be reading one. */
struct ptab {
	struct ptab *older; /* the table this one replaced: kept, and reachable */
	uint32_t cap;  /* a power of two */
	uint32_t used; /* slots holding a key or a tombstone (under pcache_lock) */
	uint32_t live; /* slots holding a key */
	struct pslot slot[];
};

static _Atomic(struct ptab *) pcache;
static struct playout *retired_layouts; /* under pcache_lock */
static pthread_mutex_t pcache_lock = PTHREAD_MUTEX_INITIALIZER;

static struct ptab *ptab_new(uint32_t cap)
{
	struct ptab *t = calloc(1, sizeof(*t) + (size_t)cap * sizeof(struct pslot));
	if (t)
		t->cap = cap;
	return t;
}

/* The slot of key k in t, or where it would go (the first tombstone or the
 * empty slot that ends its chain); NULL if t is full of other keys. */
static struct pslot *ptab_find(struct ptab *t, uintptr_t k, bool *found)
{
	struct pslot *free_slot = NULL;
	uint32_t h = (uint32_t)ve__mix64((uint64_t)k) & (t->cap - 1);
	*found = false;
	for (uint32_t i = 0; i < t->cap; i++, h = (h + 1) & (t->cap - 1)) {
		struct pslot *s = &t->slot[h];
		uintptr_t key = atomic_load_explicit(&s->key, memory_order_relaxed);
		if (key == k) {
			*found = true;
			return s;
		}
		if (key == PKEY_GONE && !free_slot)
			free_slot = s;
		if (!key)
			return free_slot ? free_slot : s;
	}
	return free_slot;
}

/* Under pcache_lock: a table with room for one more entry. */
static struct ptab *ptab_room(void)
{
	struct ptab *t = atomic_load_explicit(&pcache, memory_order_relaxed);
	if (t && t->used + 1 <= t->cap / 2)
		return t;
	uint32_t cap = !t ? PCACHE_CAP0 : t->live + 1 <= t->cap / 4 ? t->cap : 2 * t->cap;
	struct ptab *n = ptab_new(cap);
	if (!n)
		return t && t->used < t->cap ? t : NULL;
	n->older = t;
	for (uint32_t i = 0; t && i < t->cap; i++) {
		uintptr_t key = atomic_load_explicit(&t->slot[i].key, memory_order_relaxed);
		if (key <= PKEY_GONE)
			continue;
		bool found;
		struct pslot *d = ptab_find(n, key, &found);
		atomic_store_explicit(&d->lay, atomic_load_explicit(&t->slot[i].lay, memory_order_relaxed),
				      memory_order_relaxed);
		atomic_store_explicit(&d->key, key, memory_order_relaxed);
		n->used++;
		n->live++;
	}
	atomic_store_explicit(&pcache, n, memory_order_release); /* publishes the copies */
	return n;
}

static int query_layout(CUfunction f, uint32_t *pairs, uint32_t *n, uint32_t *total)
{
	*n = 0;
	*total = 0;
	for (uint32_t i = 0; i < PMAX; i++) {
		size_t off = 0, sz = 0;
		CUresult r = CUDA_ERROR_NOT_SUPPORTED;
		if (ve__real.cuFuncGetParamInfo)
			r = ve__real.cuFuncGetParamInfo(f, i, &off, &sz);
		if (r != CUDA_SUCCESS && r != CUDA_ERROR_INVALID_VALUE && ve__real.cuKernelGetParamInfo)
			r = ve__real.cuKernelGetParamInfo((CUkernel)f, i, &off, &sz);
		if (r == CUDA_ERROR_INVALID_VALUE && i > 0)
			break; /* past the last parameter */
		if (r != CUDA_SUCCESS)
			return i == 0 && r == CUDA_ERROR_INVALID_VALUE ? 0 : -EINVAL;
		pairs[2 * i] = (uint32_t)off;
		pairs[2 * i + 1] = (uint32_t)sz;
		*n = i + 1;
		if (off + sz > *total)
			*total = (uint32_t)(off + sz);
	}
	return 0;
}

/* Lazy loading (the default since CUDA 12.2) loads a kernel's code at its
 * first launch: milliseconds, and tens of them for a large library's
 * fatbin. Natively the application's thread pays that inside its launch
 * call. Here the launch reaches the driver later, on the dispatcher thread,
 * which then stops submitting, polling and answering the coordinator for as
 * long (a grant taken from this process waited ~100 ms at start-up on the
 * H200). So the first launch of each function loads it here, on the
 * caller's thread, as natively; the dispatcher's launch finds it loaded.
 * Best effort: where the driver lacks these calls or refuses, the launch
 * loads it as before. A CUkernel passed as a CUfunction is loaded through
 * its function in the current context (green contexts share the primary
 * context's modules). */
static void preload_function(CUfunction f)
{
	if (!ve__shim.cfg.preload || !ve__real.cuFuncLoad || !ve__real.cuFuncIsLoaded)
		return;
	CUfunctionLoadingState st = CU_FUNCTION_LOADING_STATE_UNLOADED;
	CUfunction fn = f;
	if (ve__real.cuFuncIsLoaded(&st, f) != CUDA_SUCCESS) {
		if (!ve__real.cuKernelGetFunction ||
		    ve__real.cuKernelGetFunction(&fn, (CUkernel)f) != CUDA_SUCCESS ||
		    ve__real.cuFuncIsLoaded(&st, fn) != CUDA_SUCCESS)
			return;
	}
	if (st != CU_FUNCTION_LOADING_STATE_LOADED && ve__real.cuFuncLoad(fn) == CUDA_SUCCESS)
		atomic_fetch_add_explicit(&ve__shim.preloaded, 1, memory_order_relaxed);
}

/* The device's launch limits, read once when the runtime starts, before any
 * launch is virtualized (0: unknown, not checked). */
static struct {
	uint32_t block[3], threads, grid[3];
} lim;

static uint32_t dev_attr(CUdevice_attribute a)
{
	int v = 0;
	if (!ve__real.cuDeviceGetAttribute ||
	    ve__real.cuDeviceGetAttribute(&v, a, ve__shim.dev) != CUDA_SUCCESS || v <= 0)
		return 0;
	return (uint32_t)v;
}

/* Per function (by hash): the dynamic shared memory limit last seen. */
#define SMEM_SEEN 256
static _Atomic uint64_t smem_seen[SMEM_SEEN];

static void launch_limits_read(void)
{
	lim.block[0] = dev_attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X);
	lim.block[1] = dev_attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y);
	lim.block[2] = dev_attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z);
	lim.threads = dev_attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
	lim.grid[0] = dev_attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X);
	lim.grid[1] = dev_attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y);
	lim.grid[2] = dev_attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z);
}

CUresult ve__check_launch_config(CUfunction f, const uint32_t grid[3], const uint32_t block[3],
				 unsigned smem)
{
	uint64_t threads = 1;
	for (int i = 0; i < 3; i++) {
		if (!grid[i] || !block[i] || (lim.grid[i] && grid[i] > lim.grid[i]) ||
		    (lim.block[i] && block[i] > lim.block[i]))
			return CUDA_ERROR_INVALID_VALUE;
		threads *= block[i];
	}
	if (lim.threads && threads > lim.threads)
		return CUDA_ERROR_INVALID_VALUE;
	/* Up to 48 KiB of dynamic shared memory is always allowed; beyond it,
	 * the function's limit, which cuFuncSetAttribute may raise at any time:
	 * the last limit seen per function is kept (tag and limit in one word,
	 * so a racing update is never half read), and the driver is asked again
	 * only when a launch wants more. A limit lowered after a launch that
	 * fitted is not seen (the driver refuses at submission: a sticky error,
	 * as before these checks). cuBLAS and flash-attention kernels launch
	 * with 100-200 KiB each time: one driver call per launch otherwise. */
	if (smem > 48u * 1024u && ve__real.cuFuncGetAttribute) {
		uint64_t h = ve__mix64((uint64_t)(uintptr_t)f);
		_Atomic uint64_t *slot = &smem_seen[h & (SMEM_SEEN - 1)];
		uint64_t tag = (h >> 32) | 1u;
		uint64_t w = atomic_load_explicit(slot, memory_order_relaxed);
		if ((w >> 32) == tag && smem <= (uint32_t)w)
			return CUDA_SUCCESS;
		int max_dyn = 0;
		if (ve__real.cuFuncGetAttribute(&max_dyn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
						f) != CUDA_SUCCESS ||
		    max_dyn < 0)
			return CUDA_SUCCESS; /* cannot tell: the driver decides */
		atomic_store_explicit(slot, tag << 32 | (uint32_t)max_dyn, memory_order_relaxed);
		if (smem > (unsigned)max_dyn)
			return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

static void layout_out(const struct playout *l, struct ve_param_layout *out)
{
	out->nparams = l->nparams;
	out->total = l->total;
	out->max_threads = l->max_threads;
	out->pairs = l->pairs;
}

int ve__param_layout(CUfunction f, struct ve_param_layout *out)
{
	uintptr_t k = (uintptr_t)f;
	if (k <= PKEY_GONE)
		return -EINVAL;
	/* Lock-free hit: a slot, once used, is never empty again, so a probe
	 * that reaches an empty slot has seen every published key before it. */
	struct ptab *t = atomic_load_explicit(&pcache, memory_order_acquire);
	if (t) {
		uint32_t h = (uint32_t)ve__mix64((uint64_t)k) & (t->cap - 1);
		for (uint32_t i = 0; i < t->cap; i++, h = (h + 1) & (t->cap - 1)) {
			struct pslot *s = &t->slot[h];
			uintptr_t key = atomic_load_explicit(&s->key, memory_order_acquire);
			if (key == k) {
				const struct playout *l =
				    atomic_load_explicit(&s->lay, memory_order_acquire);
				/* Still this function's slot once its layout is in hand
				 * (else reused meanwhile: ask under the lock). */
				if (atomic_load_explicit(&s->key, memory_order_acquire) != k)
					break;
				layout_out(l, out);
				return 0;
			}
			if (!key)
				break;
		}
	}
	pthread_mutex_lock(&pcache_lock);
	bool found = false;
	t = atomic_load_explicit(&pcache, memory_order_relaxed);
	struct pslot *slot = t ? ptab_find(t, k, &found) : NULL;
	if (found) { /* inserted by another thread meanwhile */
		layout_out(atomic_load_explicit(&slot->lay, memory_order_relaxed), out);
		pthread_mutex_unlock(&pcache_lock);
		return 0;
	}
	/* Miss: ask the driver once (off the fast path: first launch only). */
	struct playout *l = malloc(sizeof(*l) + 2 * PMAX * sizeof(uint32_t));
	uint32_t n, total;
	int rc = l ? query_layout(f, l->pairs, &n, &total) : -ENOMEM;
	if (rc) {
		free(l);
		pthread_mutex_unlock(&pcache_lock);
		return rc;
	}
	struct playout *fit = realloc(l, sizeof(*l) + 2 * n * sizeof(uint32_t));
	if (fit) /* keep what the layout needs, not PMAX pairs */
		l = fit;
	int mt = 0;
	if (!ve__real.cuFuncGetAttribute ||
	    ve__real.cuFuncGetAttribute(&mt, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f) != CUDA_SUCCESS ||
	    mt < 0)
		mt = 0;
	l->retired_next = NULL;
	l->nparams = n;
	l->total = total;
	l->max_threads = (uint32_t)mt;
	preload_function(f);
	layout_out(l, out);
	t = ptab_room();
	slot = t ? ptab_find(t, k, &found) : NULL;
	if (!slot) { /* no memory for a larger table: this launch goes uncached */
		pthread_mutex_unlock(&pcache_lock);
		static _Atomic int warned;
		if (!atomic_exchange(&warned, 1))
			VE_WARN("the parameter layout cache cannot grow: layouts are asked for "
				"at each launch (slower)");
		return 0; /* l leaks: out points into it */
	}
	/* A tombstone's old layout stays allocated (a reader may hold it). */
	if (atomic_load_explicit(&slot->key, memory_order_relaxed) == PKEY_GONE) {
		struct playout *old = (struct playout *)atomic_load_explicit(&slot->lay,
									     memory_order_relaxed);
		if (old) {
			old->retired_next = retired_layouts;
			retired_layouts = old;
		}
	} else {
		t->used++;
	}
	t->live++;
	atomic_store_explicit(&slot->lay, l, memory_order_release);
	atomic_store_explicit(&slot->key, k, memory_order_release);
	pthread_mutex_unlock(&pcache_lock);
	return 0;
}

void ve__forget_functions(CUmodule mod)
{
	pthread_mutex_lock(&pcache_lock);
	struct ptab *t = atomic_load_explicit(&pcache, memory_order_relaxed);
	for (uint32_t h = 0; t && h < t->cap; h++) {
		struct pslot *s = &t->slot[h];
		uintptr_t key = atomic_load_explicit(&s->key, memory_order_relaxed);
		if (key <= PKEY_GONE)
			continue;
		/* A module's unload: its own functions; a library's (mod NULL):
		 * the keys that are no module's function (CUkernels). Where the
		 * driver cannot tell, forgotten too: a live function forgotten
		 * costs one query at its next launch, nothing else. */
		CUmodule m = NULL;
		bool known = ve__real.cuFuncGetModule &&
			     ve__real.cuFuncGetModule(&m, (CUfunction)key) == CUDA_SUCCESS;
		if (known && (!mod || m != mod))
			continue;
		atomic_store_explicit(&s->key, PKEY_GONE, memory_order_release);
		t->live--;
	}
	pthread_mutex_unlock(&pcache_lock);
	for (uint32_t i = 0; i < SMEM_SEEN; i++)
		atomic_store_explicit(&smem_seen[i], 0, memory_order_relaxed);
}

/* ------------------------------------------------------------------ streams */

void ve__resolve_stream(CUstream s, bool ptsz, struct ve_target *t)
{
	memset(t, 0, sizeof(*t));
	t->real = s;
	if (!ve__shim_active())
		return;
	if (s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD) {
		/* The default streams of whatever context is current: ours only if
		 * the current context is the one we virtualize. */
		CUcontext cur = NULL;
		ve__real.cuCtxGetCurrent(&cur);
		if (cur != ve__shim.ctx) {
			ve__notice_once(VE_NOTE_OTHER_CTX,
					"work on a context other than device %d's primary context "
					"passes through unvirtualized, in order",
					ve__shim.cfg.device);
			return;
		}
		bool per_thread = s == CU_STREAM_PER_THREAD || (s == NULL && ptsz);
		if (per_thread && ve__ptds_capture()) {
			t->capturing = true;
			t->capture = ve__ptds_capture();
			return;
		}
		t->virt = true;
		if (per_thread) {
			if (ve_vctx_stream_per_thread(ve__shim.v, ve__thread_key(), &t->ls)) {
				/* No stream left: the legacy stream orders more (every
				 * blocking stream), never less. */
				t->ls = VE_STREAM_LEGACY;
				ve__notice_once(VE_NOTE_PTDS_FULL,
						"more threads use their per-thread default stream at once "
						"than Vitamin-E has streams: the others' work runs on the "
						"legacy default stream (ordered more strictly, slower)");
			} else {
				ptds_release_at_exit();
			}
		} else
			t->ls = VE_STREAM_LEGACY;
		return;
	}
	struct ve_stream_info si;
	if (ve__smap_get(s, &si)) {
		ve__notice_once(VE_NOTE_UNKNOWN_STREAM,
				"a stream Vitamin-E did not create (another context, or a green "
				"context of the app's own) passes through unvirtualized");
		return;
	}
	if (si.capture) {
		t->capturing = true;
		t->capture = si.capture;
		return;
	}
	t->virt = true;
	t->ls = si.ls;
}

/* ------------------------------------------------------------------ errors */

CUresult ve__cu_error(int rc)
{
	switch (rc) {
	case 0:
		return CUDA_SUCCESS;
	case -ENOENT:
		return CUDA_ERROR_INVALID_HANDLE;
	case -EINVAL:
	case -E2BIG:
		return CUDA_ERROR_INVALID_VALUE;
	case -EBUSY:
		return CUDA_ERROR_NOT_READY;
	case -ENOMEM:
	case -EAGAIN:
		return CUDA_ERROR_OUT_OF_MEMORY;
	case -ENODATA:
		return CUDA_ERROR_INVALID_HANDLE;
	case -EIO:
		return ve__sticky();
	default:
		return CUDA_ERROR_UNKNOWN;
	}
}

/* A completion's status as the app sees it: the driver's CUresult
 * (positive); anything else (a backend errno) as a launch failure. */
static CUresult status_result(int e)
{
	return e > 0 ? (CUresult)e : e < 0 ? CUDA_ERROR_LAUNCH_FAILED : CUDA_SUCCESS;
}

CUresult ve__sticky(void)
{
	return status_result(ve_vctx_error(ve__shim.v));
}

CUresult ve__sync_error(int rc)
{
	CUresult r = ve__cu_error(rc);
	if (r != CUDA_SUCCESS)
		return r;
	return status_result(ve_vctx_take_refused(ve__shim.v));
}

/* ------------------------------------------------------------------ barrier */

CUresult ve__barrier_begin(const struct ve_target *t)
{
	if (!t->virt)
		return CUDA_SUCCESS;
	return ve__cu_error(ve_vctx_stream_sync(ve__shim.v, t->ls));
}

/* VE_OP_CALL body, polled on the host (VE_DESC_HOST_POLL): done when the
 * pass-through work's event is. Not a GPU-side wait on a lane: that lane
 * would be blocked until the real call completes, and an op of another
 * stream queued behind it could be the very one the real call waits for
 * (a cuStreamWriteValue that releases a cuStreamWaitValue). */
static int call_query_event(uint64_t lane_stream, const void *payload, uint32_t len)
{
	(void)lane_stream;
	CUevent ev;
	if (len != sizeof(ev))
		return -EINVAL;
	memcpy(&ev, payload, sizeof(ev));
	CUresult r = ve__real.cuEventQuery(ev);
	if (r == CUDA_ERROR_NOT_READY)
		return -EBUSY;
	ve__real.cuEventDestroy(ev);
	return r == CUDA_SUCCESS ? 0 : (int)r;
}

bool ve__capture_relax(CUstreamCaptureMode *saved)
{
	*saved = CU_STREAM_CAPTURE_MODE_RELAXED;
	return ve__real.cuThreadExchangeStreamCaptureMode &&
	       ve__real.cuThreadExchangeStreamCaptureMode(saved) == CUDA_SUCCESS;
}

void ve__capture_restore(bool relaxed, CUstreamCaptureMode *saved)
{
	if (relaxed)
		ve__real.cuThreadExchangeStreamCaptureMode(saved);
}

static CUresult barrier_link(const struct ve_target *t);

CUresult ve__barrier_end(const struct ve_target *t, CUresult call_rc)
{
	if (!t->virt || call_rc != CUDA_SUCCESS)
		return call_rc;
	/* Our own calls below must not count as the app's unsafe calls
	 * against a global-mode capture that some stream of this process runs
	 * (a query of a stream while capturing invalidates the capture: a
	 * pageable copy inside torch.cuda.graph's capture failed it). */
	CUstreamCaptureMode mode;
	bool relaxed = ve__capture_relax(&mode);
	CUresult r = barrier_link(t);
	ve__capture_restore(relaxed, &mode);
	return r;
}

static CUresult barrier_link(const struct ve_target *t)
{
	/* Most barrier calls are done when they return (a copy to pageable
	 * memory returns once the data is there, "API synchronization
	 * behavior"); the app's real stream carries nothing but such calls. An
	 * idle real stream means there is nothing to link into the logical
	 * order: no event, no op, and the app's next synchronize does not wait
	 * for the dispatcher to poll one (a decode step's .item() paid that
	 * round trip every token). */
	CUstream qs = t->real;
	/* NULL through a _ptsz entry point is the thread's own default stream,
	 * which a plain query of NULL (the legacy stream) does not cover. */
	if (qs == NULL && t->ls != VE_STREAM_LEGACY)
		qs = CU_STREAM_PER_THREAD;
	if (ve__real.cuStreamQuery(qs) == CUDA_SUCCESS) {
		atomic_fetch_add_explicit(&ve__shim.barrier_done_at_once, 1, memory_order_relaxed);
		return CUDA_SUCCESS;
	}
	CUevent ev;
	CUresult r = ve__real.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING);
	if (r == CUDA_SUCCESS)
		r = ve__real.cuEventRecord(ev, t->real);
	if (r != CUDA_SUCCESS) {
		/* Cannot link the real work into the logical order: finish it now. */
		ve__real.cuStreamSynchronize(t->real);
		return CUDA_SUCCESS;
	}
	atomic_fetch_add_explicit(&ve__shim.barrier_linked, 1, memory_order_relaxed);
	struct ve_desc d = {.kind = VE_OP_CALL,
			    .flags = VE_DESC_HOST_POLL,
			    .payload = (const uint8_t *)&ev,
			    .payload_len = sizeof(ev)};
	d.u.call.fn = call_query_event;
	d.u.call.handle = (uint64_t)(uintptr_t)ev;
	int rc = ve_vctx_submit(ve__shim.v, t->ls, &d, 0, NULL);
	if (rc) {
		ve__real.cuStreamSynchronize(t->real);
		ve__real.cuEventDestroy(ev);
	}
	return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ deferred destroy */

struct deferred {
	CUevent e;
	ve_tok tok;
};
static struct deferred deferred_ev[1024];
static uint32_t ndeferred;
static pthread_mutex_t deferred_lock = PTHREAD_MUTEX_INITIALIZER;

void ve__defer_event_destroy(CUevent e, ve_tok pending)
{
	pthread_mutex_lock(&deferred_lock);
	/* Sweep first: most earlier ones are done by now. */
	uint32_t keep = 0;
	for (uint32_t i = 0; i < ndeferred; i++) {
		if (ve_vctx_tok_done(ve__shim.v, deferred_ev[i].tok))
			ve__real.cuEventDestroy(deferred_ev[i].e);
		else
			deferred_ev[keep++] = deferred_ev[i];
	}
	ndeferred = keep;
	if (ndeferred < VE_ARRAY_SIZE(deferred_ev)) {
		deferred_ev[ndeferred++] = (struct deferred){e, pending};
		pthread_mutex_unlock(&deferred_lock);
		return;
	}
	pthread_mutex_unlock(&deferred_lock);
	/* Full: wait for this one (rare; keeps memory bounded). */
	ve_vctx_tok_wait(ve__shim.v, pending);
	ve__real.cuEventDestroy(e);
}
