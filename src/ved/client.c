/* SPDX-License-Identifier: MIT */
/* The link to ved: records out, bindings in, safe mode (client.h, docs/daemon.md). */
#include "ved/client.h"
#include "ved/toktab.h"
#include "ipc/ctl.h"
#include "ipc/ring.h"
#include "ipc/shm.h"
#include "util/futex.h"
#include "util/util.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define BATCH	    64
#define NENT	    VE_POOL_MAX_ENTRIES
#define NONE	    UINT32_MAX
#define WAIT_NS	    100000000ull /* helper thread: longest sleep between checks */
#define REG_TIMEOUT 2000	 /* ms to wait for WELCOME / DOORBELL */

enum { OP_FREE = 0, OP_PENDING, OP_INFLIGHT };
enum { DEAD_NONE = 0, DEAD_EOF, DEAD_HEARTBEAT, DEAD_SHUTDOWN, DEAD_PROTOCOL, DEAD_RING };

static const char *dead_why(int w)
{
	switch (w) {
	case DEAD_EOF:
		return "control socket closed";
	case DEAD_HEARTBEAT:
		return "heartbeat stopped";
	case DEAD_SHUTDOWN:
		return "ved shut down";
	case DEAD_PROTOCOL:
		return "malformed record from ved";
	case DEAD_RING:
		return "corrupt ring";
	}
	return "gone";
}

/* One registration with one ved instance. Created and freed by the helper
 * thread (or by create/destroy when it does not run); used by the
 * dispatcher's thread from adoption until it sets 'retired'. */
struct conn {
	int sock, efd;
	struct ve_shm shm;
	struct ve_ring_producer out; /* client -> ved: dispatcher thread only */
	struct ve_ring_consumer in;  /* ved -> client: dispatcher thread only */
	struct ve_ved_words *w;
	int32_t client_id;
	uint32_t client_ops, heartbeat_ms, nprocs, mps, ring_records;
	int32_t ved_pid;
	char policy[VE_CTL_NAME_MAX];
	uint64_t epoch;
	_Atomic int dead;    /* DEAD_* once someone decided it is gone */
	_Atomic int adopted; /* the dispatcher thread uses it */
	_Atomic int retired; /* the dispatcher thread stopped using it: free it */
};

struct rop {
	struct ve_ready_op op; /* as the dispatcher gave it */
	uint64_t epoch;	       /* the registration it was sent on */
	uint32_t next, prev;   /* per-entry in-flight list, or the free list */
	uint16_t entry;
	uint8_t state;
	uint8_t pad;
};

struct ve_remote {
	struct ve_remote_config cfg;
	char path[108];
	char name[VE_CTL_NAME_MAX];
	uint32_t leaf_sms[VE_CTL_MAX_LEAVES];
	struct ve_coord *local; /* safe mode: policy whole */
	const struct ve_pool *pool;

	/* ---- dispatcher thread ---- */
	struct conn *conn; /* adopted registration, NULL in safe mode */
	uint64_t epoch;	   /* conn->epoch, or 0 */
	bool have_client, removing, said_bye, was_safe;
	uint32_t local_id, flags;
	struct ve_grant_report rep_last; /* what ved last got from us (grant mode) */
	bool rep_valid;
	uint64_t rep_busy_last;
	struct rop *ops;
	uint32_t cap, free_head;
	struct ve_toktab tab;
	uint32_t ent_head[NENT];
	uint32_t npending, ninflight, ninflight_cur;
	uint32_t local_inflight[NENT];
	uint32_t nlocal_inflight;
	struct ve_rec *outbox; /* DONE / SUBMIT_FAILED / BYE that found the ring full */
	uint32_t ob_head, ob_n, ob_cap;
	uint32_t out_seq, in_seq;
	bool mps_noted;
	struct ve_rec recs[BATCH];

	/* ---- shared with the helper thread ---- */
	_Atomic uint32_t a_pending, a_inflight, a_outbox;
	_Atomic(struct conn *) offer;
	_Atomic int mode;
	_Atomic int stop;
	_Atomic int no_reconnect;
	_Atomic uint32_t stop_word;	/* the helper sleeps on it */
	_Atomic uint32_t consumed_word; /* bumped when schedule() consumed for a waiting helper */
	_Atomic uint32_t want_consumed;
	_Atomic(void (*)(void *)) notify;
	_Atomic(void *) notify_arg;
	_Atomic uint64_t epoch_gen;
	_Atomic uint64_t st_reconnects, st_waiter_wakes;

	/* ---- helper thread ---- */
	pid_t owner; /* the process that created it (a forked child has no helper) */
	pthread_t thr;
	bool thr_started;
	struct conn *conn_w; /* the registration it watches */
	uint64_t last_beat, last_beat_ns;

	/* ---- stats (dispatcher thread) ---- */
	struct ve_remote_stats st;
};

/* ------------------------------------------------------------------ fork */

/* A child forked without exec (Python's multiprocessing, say) would keep our
 * control socket open, and ved would not see our hang-up when we die: the
 * child closes every registration's socket right after fork (close is
 * async-signal-safe). The child has no helper thread and no dispatcher
 * thread; its copy of the link is unusable, as CUDA is after fork. */
#define MAX_SOCKS 16
static _Atomic int g_socks[MAX_SOCKS];
static pthread_once_t g_fork_once = PTHREAD_ONCE_INIT;

static void fork_child(void)
{
	for (int i = 0; i < MAX_SOCKS; i++) {
		int fd = atomic_exchange(&g_socks[i], -1);
		if (fd >= 0)
			close(fd);
	}
}

static void fork_init(void)
{
	for (int i = 0; i < MAX_SOCKS; i++)
		atomic_store(&g_socks[i], -1);
	pthread_atfork(NULL, NULL, fork_child);
}

static void sock_track(int fd, bool add)
{
	pthread_once(&g_fork_once, fork_init);
	for (int i = 0; i < MAX_SOCKS; i++) {
		int want = add ? -1 : fd;
		if (atomic_compare_exchange_strong(&g_socks[i], &want, add ? fd : -1))
			return;
	}
}

/* ------------------------------------------------------------------ registration */

static void conn_free(struct conn *c)
{
	if (!c)
		return;
	if (c->shm.base) {
		ve_shm_set_state(&c->shm, VE_SIDE_CLIENT, VE_IPC_S_DETACHED);
		ve_shm_fini(&c->shm);
	}
	if (c->sock >= 0) {
		sock_track(c->sock, false);
		close(c->sock);
	}
	if (c->efd >= 0)
		close(c->efd);
	free(c);
}

/* Connects and registers. 0 with *out, or -errno with err filled in. */
static int try_register(struct ve_remote *r, struct conn **out, char *err, size_t errlen)
{
	struct conn *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->sock = c->efd = -1;
	c->shm.fd = -1;
	char why[400];
	int rc = ve_ctl_connect_checked(r->path, why, sizeof(why));
	if (rc < 0) {
		snprintf(err, errlen, "cannot connect to %s: %s", r->path,
			 why[0] ? why : strerror(-rc));
		free(c);
		return rc;
	}
	c->sock = rc;
	sock_track(c->sock, true);
	struct ve_ctl_hello h;
	memset(&h, 0, sizeof(h));
	ve_ctl_hdr_init(&h.h, VE_CTL_HELLO, sizeof(h));
	h.ipc_version = VE_IPC_VERSION;
	h.pid = (int32_t)getpid();
	h.device = ve_ctl_host_device(r->cfg.device);
	h.class_flags = (r->cfg.class_flags & VE_READY_LATENCY) ? VE_CTL_CLASS_LATENCY : 0;
	h.nleaves = r->cfg.nleaves;
	h.max_entries = r->cfg.max_entries;
	h.fingerprint = r->pool->fingerprint;
	h.sm_count = r->cfg.sm_count ? r->cfg.sm_count : r->pool->total_sms;
	memcpy(h.leaf_sms, r->leaf_sms, sizeof(h.leaf_sms));
	snprintf(h.name, sizeof(h.name), "%s", r->name);
	h.failovers = (uint32_t)(r->st.failovers < (1u << 30) ? r->st.failovers : (1u << 30));
	rc = ve_ctl_send(c->sock, &h, sizeof(h));
	if (rc) {
		snprintf(err, errlen, "cannot register with %s: %s", r->path, strerror(-rc));
		goto fail;
	}
	union {
		struct ve_ctl_hdr h;
		struct ve_ctl_welcome w;
		struct ve_ctl_refuse f;
		struct ve_ctl_doorbell d;
		uint64_t align;
	} m;
	int segfd = -1;
	rc = ve_ctl_recv(c->sock, &m, sizeof(m), &segfd, REG_TIMEOUT);
	if (rc <= 0 || ve_ctl_check(&m, (size_t)rc, VE_CTL_FROM_VED)) {
		snprintf(err, errlen, "ved at %s did not answer the registration (%s)", r->path,
			 rc == 0  ? "hang-up"
			 : rc < 0 ? strerror(-rc)
				  : "malformed reply");
		if (segfd >= 0)
			close(segfd);
		rc = rc < 0 ? rc : -EPROTO;
		goto fail;
	}
	if (m.h.type == VE_CTL_REFUSE) {
		snprintf(err, errlen, "ved at %s refused this process: %s", r->path, m.f.msg);
		if (segfd >= 0)
			close(segfd);
		rc = -EPROTO;
		goto fail;
	}
	if (m.h.type != VE_CTL_WELCOME || segfd < 0) {
		snprintf(err, errlen, "ved at %s answered %s without a segment", r->path,
			 ve_ctl_type_name(m.h.type));
		if (segfd >= 0)
			close(segfd);
		rc = -EPROTO;
		goto fail;
	}
	struct ve_ctl_welcome w = m.w;
	rc = ve_shm_attach_fd(segfd, &c->shm);
	if (rc) {
		close(segfd);
		snprintf(err, errlen, "ved's segment is unusable: %s", strerror(-rc));
		goto fail;
	}
	int efd = -1;
	rc = ve_ctl_recv(c->sock, &m, sizeof(m), &efd, REG_TIMEOUT);
	if (rc <= 0 || ve_ctl_check(&m, (size_t)rc, VE_CTL_FROM_VED) ||
	    m.h.type != VE_CTL_DOORBELL || efd < 0) {
		if (efd >= 0)
			close(efd);
		snprintf(err, errlen, "ved at %s sent no doorbell", r->path);
		rc = -EPROTO;
		goto fail;
	}
	c->efd = efd;
	if (c->shm.hdr->client_id != w.client_id || w.nentries != r->pool->nentries ||
	    w.fingerprint != r->pool->fingerprint) {
		snprintf(err, errlen, "ved's welcome disagrees with its segment or our pool");
		rc = -EPROTO;
		goto fail;
	}
	if ((rc = ve_ring_producer_init(&c->out, &c->shm.to_coord)) ||
	    (rc = ve_ring_consumer_init(&c->in, &c->shm.to_client))) {
		snprintf(err, errlen, "ved's rings are unusable: %s", strerror(-rc));
		goto fail;
	}
	c->w = ve_ved_words_of(&c->shm);
	c->client_id = w.client_id;
	c->client_ops = w.client_ops;
	c->heartbeat_ms = w.heartbeat_ms;
	c->nprocs = w.nprocs;
	c->mps = w.mps;
	c->ved_pid = w.ved_pid;
	c->ring_records = w.ring_records;
	memcpy(c->policy, w.policy, sizeof(c->policy));
	c->epoch = atomic_fetch_add(&r->epoch_gen, 1) + 1;
	ve_shm_announce(&c->shm, VE_SIDE_CLIENT);
	*out = c;
	return 0;
fail:
	conn_free(c);
	return rc;
}

/* ------------------------------------------------------------------ table */

static void ent_link(struct ve_remote *r, uint32_t k, uint16_t e)
{
	struct rop *o = &r->ops[k];
	o->entry = e;
	o->prev = NONE;
	o->next = r->ent_head[e];
	if (o->next != NONE)
		r->ops[o->next].prev = k;
	r->ent_head[e] = k;
}

static void ent_unlink(struct ve_remote *r, uint32_t k)
{
	struct rop *o = &r->ops[k];
	if (o->prev != NONE)
		r->ops[o->prev].next = o->next;
	else
		r->ent_head[o->entry] = o->next;
	if (o->next != NONE)
		r->ops[o->next].prev = o->prev;
}

static uint32_t rop_alloc(struct ve_remote *r, const struct ve_ready_op *op)
{
	uint32_t k = r->free_head;
	if (k == NONE || ve_toktab_put(&r->tab, op->tok, k))
		return NONE;
	r->free_head = r->ops[k].next;
	r->ops[k] = (struct rop){
	    .op = *op, .epoch = r->epoch, .next = NONE, .prev = NONE, .state = OP_PENDING};
	return k;
}

static void rop_free(struct ve_remote *r, uint32_t k)
{
	ve_toktab_del(&r->tab, r->ops[k].op.tok);
	r->ops[k].state = OP_FREE;
	r->ops[k].next = r->free_head;
	r->free_head = k;
}

static void publish_counts(struct ve_remote *r)
{
	atomic_store_explicit(&r->a_pending, r->npending, memory_order_relaxed);
	atomic_store_explicit(&r->a_inflight, r->ninflight + r->nlocal_inflight,
			      memory_order_relaxed);
	atomic_store_explicit(&r->a_outbox, r->ob_n, memory_order_relaxed);
}

/* ------------------------------------------------------------------ records out */

static void call_notify(struct ve_remote *r)
{
	void (*fn)(void *) = atomic_load_explicit(&r->notify, memory_order_acquire);
	if (fn)
		fn(atomic_load_explicit(&r->notify_arg, memory_order_relaxed));
}

/* After publishing records: ring ved's doorbell if it announced it sleeps
 * (the Dekker pair with its re-check: ctl.h, struct ve_ved_words). */
static void doorbell(struct ve_remote *r, struct conn *c)
{
	if (atomic_load_explicit(&c->w->daemon_sleeping, memory_order_seq_cst) &&
	    atomic_exchange_explicit(&c->w->daemon_sleeping, 0, memory_order_seq_cst)) {
		uint64_t one = 1;
		ssize_t n = write(c->efd, &one, sizeof(one));
		(void)n; /* EAGAIN: the counter is already non-zero, ved wakes anyway */
		r->st.doorbells++;
	}
}

static void failover(struct ve_remote *r, int why, const char *detail);

/* Pushes n records (the caller checked there is room or accepts a short
 * push). Returns how many went in; a corrupt ring fails over. bell: wake
 * ved if it sleeps. Records that can wait for ved's next pass (SAMPLE:
 * advice) go without it: the eventfd write costs ~3 us on the dispatcher
 * thread, and a decode loop completes a sampled op every step. */
static int push_bell(struct ve_remote *r, struct ve_rec *recs, uint32_t n, bool bell)
{
	struct conn *c = r->conn;
	for (uint32_t i = 0; i < n; i++)
		recs[i].seq = r->out_seq + i;
	int k = ve_ring_push(&c->out, recs, n);
	if (k < 0) {
		failover(r, DEAD_RING, "client -> ved ring");
		return 0;
	}
	r->out_seq += (uint32_t)k;
	if (k > 0 && bell)
		doorbell(r, c);
	return k;
}

static int push(struct ve_remote *r, struct ve_rec *recs, uint32_t n)
{
	return push_bell(r, recs, n, true);
}

static void flush_outbox(struct ve_remote *r)
{
	while (r->ob_n && r->conn) {
		uint32_t n = r->ob_n < BATCH ? r->ob_n : BATCH;
		for (uint32_t i = 0; i < n; i++)
			r->recs[i] = r->outbox[(r->ob_head + i) % r->ob_cap];
		int k = push(r, r->recs, n);
		r->ob_head = (r->ob_head + (uint32_t)k) % r->ob_cap;
		r->ob_n -= (uint32_t)k;
		if ((uint32_t)k < n)
			break;
	}
	atomic_store_explicit(&r->a_outbox, r->ob_n, memory_order_relaxed);
}

/* A record that must arrive (DONE, SUBMIT_FAILED, BYE): straight into the
 * ring, or after what already waits in the outbox. */
static void send_must(struct ve_remote *r, const struct ve_rec *rec)
{
	if (!r->conn)
		return;
	if (r->ob_n == 0) {
		struct ve_rec tmp = *rec;
		if (push(r, &tmp, 1) == 1 || !r->conn)
			return;
	}
	if (r->ob_n == r->ob_cap) {
		/* Cannot happen: one record per live op, and no new op is sent
		 * while the outbox holds any. */
		VE_ERR("remote: outbox full; dropping a %s record", ve_proto_type_name(rec->type));
		return;
	}
	r->outbox[(r->ob_head + r->ob_n) % r->ob_cap] = *rec;
	r->ob_n++;
	flush_outbox(r);
}

static void send_done(struct ve_remote *r, const struct rop *o, uint64_t ns, int32_t status)
{
	struct ve_rec rec;
	ve_proto_encode_done(o->op.tok, o->entry, ns, status, ve__now_ns(), &rec);
	send_must(r, &rec);
	r->st.dones_sent++;
}

/* After client_remove: once nothing of ours is at ved any more, say BYE. */
static void maybe_bye(struct ve_remote *r)
{
	if (!r->removing || r->said_bye || !r->conn || r->npending || r->ninflight_cur)
		return;
	struct ve_rec rec;
	ve_rec_init(&rec, VE_REC_BYE);
	send_must(r, &rec);
	r->said_bye = true;
	atomic_store(&r->no_reconnect, 1);
}

/* ------------------------------------------------------------------ mode switches */

static void note_mps(struct ve_remote *r, struct conn *c)
{
	static _Atomic int noted; /* once per process, however many links */
	if (r->mps_noted || c->nprocs < 2 || atomic_load(&noted))
		return;
	char detail[512];
	int st = ve_mps_probe(detail, sizeof(detail));
	if (st == VE_MPS_RUNNING)
		return;
	r->mps_noted = true;
	if (atomic_exchange(&noted, 1))
		return;
	VE_WARN("ved schedules %u processes on device %d but %s: their kernels are time-sliced, "
		"not spatially shared. Start MPS first (docs/daemon.md, \"MPS\")",
		c->nprocs, r->cfg.device, detail);
}

static void adopt(struct ve_remote *r, struct conn *c)
{
	bool back = r->was_safe;
	r->conn = c;
	r->epoch = c->epoch;
	r->out_seq = r->in_seq = 0;
	r->ob_n = r->ob_head = 0;
	r->ninflight_cur = 0;
	r->rep_valid = false; /* a new segment: the first report goes out whole */
	r->rep_busy_last = 0;
	atomic_store_explicit(&c->adopted, 1, memory_order_release);
	atomic_store_explicit(&r->mode, VE_REMOTE_DAEMON, memory_order_relaxed);
	snprintf(r->st.policy, sizeof(r->st.policy), "%s", c->policy);
	r->st.client_id = c->client_id;
	if (back) {
		r->st.reconnects++;
		VE_WARN("ved is back at %s: re-registered as client %d (policy %s); leaving safe "
			"mode",
			r->path, c->client_id, c->policy);
	} else {
		VE_INFO("coordinator: ved at %s (pid %d): client %d, policy %s, %u processes",
			r->path, c->ved_pid, c->client_id, c->policy, c->nprocs);
	}
	note_mps(r, c);
	if (r->removing)
		maybe_bye(r);
}

static void retire(struct ve_remote *r, struct conn *c)
{
	int zero = DEAD_NONE;
	atomic_compare_exchange_strong(&c->dead, &zero, DEAD_PROTOCOL);
	/* R (pairs with the helper's acquire load of 'retired'): we touch
	 * nothing of c after this store. */
	atomic_store_explicit(&c->retired, 1, memory_order_release);
	atomic_fetch_add_explicit(&r->stop_word, 1, memory_order_release);
	ve__futex_wake(&r->stop_word, 1, 1);
	if (!r->thr_started) {
		if (r->conn_w == c)
			r->conn_w = NULL;
		conn_free(c);
	}
}

static void failover(struct ve_remote *r, int why, const char *detail)
{
	struct conn *c = r->conn;
	if (!c)
		return;
	r->conn = NULL;
	r->epoch = 0;
	atomic_store_explicit(&r->mode, VE_REMOTE_SAFE, memory_order_relaxed);
	r->st.failovers++;
	r->was_safe = true;
	r->st.client_id = -1;
	snprintf(r->st.policy, sizeof(r->st.policy), "whole (safe mode)");
	/* Ops waiting for a BIND go to the local coordinator, at their age. */
	uint32_t moved = 0;
	for (uint32_t k = 0; k < r->cap; k++) {
		struct rop *o = &r->ops[k];
		if (o->state != OP_PENDING)
			continue;
		if (r->have_client)
			ve_coord_ready(r->local, &o->op);
		rop_free(r, k);
		moved++;
	}
	r->npending = 0;
	r->ob_n = r->ob_head = 0; /* records for a ved that is gone */
	r->ninflight_cur = 0;	  /* in-flight ops are now of an old registration */
	publish_counts(r);
	VE_WARN("lost ved at %s (%s%s%s): safe mode, local coordinator with policy whole "
		"(every op on the whole GPU): %u waiting ops moved, %u in flight finish; retrying "
		"%s",
		r->path, dead_why(why), detail ? ": " : "", detail ? detail : "", moved,
		r->ninflight, r->cfg.reconnect_ms ? "every second or so" : "never");
	retire(r, c);
	if (r->removing)
		atomic_store(&r->no_reconnect, 1);
}

/* Start of every link call: notice a departed ved, adopt a new one. */
static inline void service(struct ve_remote *r)
{
	struct conn *c = r->conn;
	if (c) {
		/* A (pairs with the helper's release store of 'dead'). */
		int d = atomic_load_explicit(&c->dead, memory_order_acquire);
		if (VE_UNLIKELY(d != DEAD_NONE && r->said_bye)) {
			r->conn = NULL; /* we said BYE: ved closing the socket is the answer */
			atomic_store_explicit(&r->mode, VE_REMOTE_SAFE, memory_order_relaxed);
			retire(r, c);
		} else if (VE_UNLIKELY(d != DEAD_NONE)) {
			failover(r, d, NULL);
		} else if (VE_UNLIKELY(r->ob_n))
			flush_outbox(r);
	}
	if (VE_UNLIKELY(!r->conn && atomic_load_explicit(&r->offer, memory_order_relaxed))) {
		/* A (pairs with the helper's release exchange publishing it): the
		 * registration's rings and fields are initialised. */
		struct conn *n = atomic_exchange_explicit(&r->offer, NULL, memory_order_acquire);
		if (n)
			adopt(r, n);
	}
}

/* ------------------------------------------------------------------ link ops */

static int l_client_add(void *impl, uint32_t client, uint32_t flags)
{
	struct ve_remote *r = impl;
	if (r->have_client || r->removing)
		return -EBUSY; /* one client (vctx) per link: ved knows the process by it */
	int rc = ve_coord_client_add(r->local, client, flags);
	if (rc)
		return rc;
	r->have_client = true;
	r->local_id = client;
	r->flags = flags;
	return 0;
}

static int l_client_remove(void *impl, uint32_t client)
{
	struct ve_remote *r = impl;
	if (!r->have_client || client != r->local_id)
		return -ENOENT;
	service(r);
	ve_coord_client_remove(r->local, client);
	r->have_client = false;
	r->removing = true;
	if (!r->conn)
		atomic_store(&r->no_reconnect, 1);
	maybe_bye(r);
	return 0;
}

static int l_ready(void *impl, const struct ve_ready_op *op)
{
	struct ve_remote *r = impl;
	service(r);
	if (!r->conn || op->tok == 0)
		return ve_coord_ready(r->local, op);
	struct conn *c = r->conn;
	uint32_t need = op->deadline_ns ? 2 : 1;
	if (r->ob_n || r->npending + r->ninflight_cur >= c->client_ops) {
		r->st.eagain++;
		return -EAGAIN;
	}
	int room = ve_ring_room(&c->out, need);
	if (room < 0) {
		failover(r, DEAD_RING, "client -> ved ring");
		return ve_coord_ready(r->local, op);
	}
	if ((uint32_t)room < need) {
		r->st.eagain++;
		doorbell(r, c);
		return -EAGAIN;
	}
	if (r->free_head == NONE) {
		r->st.eagain++;
		return -EAGAIN;
	}
	if (ve_toktab_get(&r->tab, op->tok) != VE_TOKTAB_NONE)
		return -EEXIST;
	struct ve_rec rec[2];
	uint32_t n = ve_proto_encode_ready(op, rec);
	if ((uint32_t)push(r, rec, n) != n) /* only a corrupt ring: room was checked */
		return r->conn ? -EAGAIN : ve_coord_ready(r->local, op);
	rop_alloc(r, op); /* cannot fail: a free slot and a new token were checked */
	r->npending++;
	r->st.ready_sent++;
	atomic_store_explicit(&r->a_pending, r->npending, memory_order_relaxed);
	return 0;
}

/* Bindings from ved; returns how many were stored in out. */
static int pop_binds(struct ve_remote *r, struct ve_binding *out, int max)
{
	int n = 0;
	while (n < max && r->conn) {
		struct conn *c = r->conn;
		int want = max - n < BATCH ? max - n : BATCH;
		int k = ve_ring_pop(&c->in, r->recs, (uint32_t)want);
		if (k < 0) {
			failover(r, DEAD_RING, "ved -> client ring");
			break;
		}
		if (k == 0)
			break;
		for (int i = 0; i < k && r->conn; i++) {
			const struct ve_rec *rec = &r->recs[i];
			char why[96];
			if (ve_proto_check(rec, VE_DIR_TO_CLIENT) || rec->seq != r->in_seq) {
				snprintf(why, sizeof(why), "%s record (seq %u, expected %u)",
					 ve_proto_type_name(rec->type), rec->seq, r->in_seq);
				failover(r, DEAD_PROTOCOL, why);
				break;
			}
			r->in_seq++;
			if (rec->type == VE_REC_SHUTDOWN) {
				failover(r, DEAD_SHUTDOWN, NULL);
				break;
			}
			if (rec->type != VE_REC_BIND)
				continue; /* GATE / RESERVE notices: the bindings say it all */
			const struct ve_rec_bind *b = &rec->u.bind;
			uint32_t s = ve_toktab_get(&r->tab, b->tok);
			struct rop *o = s != NONE ? &r->ops[s] : NULL;
			if (!o || o->state != OP_PENDING || o->epoch != r->epoch ||
			    b->entry >= r->pool->nentries ||
			    r->pool->e[b->entry].sms < o->op.min_sms) {
				snprintf(why, sizeof(why), "BIND of token %#llx to entry %u",
					 (unsigned long long)b->tok, b->entry);
				failover(r, DEAD_PROTOCOL, why);
				break;
			}
			r->npending--;
			r->st.binds++;
			if (r->removing) {
				/* Dropped at detach: hand the binding straight back. */
				o->entry = b->entry;
				send_done(r, o, 0, -ECANCELED);
				rop_free(r, s);
				continue;
			}
			o->state = OP_INFLIGHT;
			ent_link(r, s, b->entry);
			r->ninflight++;
			r->ninflight_cur++;
			struct ve_binding *bd = &out[n++];
			bd->op = o->op;
			bd->pad = 0;
			ve_proto_decode_bind(b, &bd->entry, &bd->flags);
		}
	}
	return n;
}

static int l_schedule(void *impl, struct ve_binding *out, int max)
{
	struct ve_remote *r = impl;
	service(r);
	int n = 0;
	if (r->conn) {
		n = pop_binds(r, out, max);
		/* Nothing else in flight and a BIND due: it usually arrives within
		 * a few microseconds, sooner than a sleep and a wake-up would take. */
		if (n == 0 && r->conn && r->npending && !r->ninflight && !r->nlocal_inflight &&
		    r->cfg.spin_ns && atomic_load_explicit(&r->notify, memory_order_relaxed)) {
			uint64_t t0 = ve__now_ns();
			for (uint32_t i = 0;; i++) {
				if (ve_ring_avail(&r->conn->in) != 0)
					break;
				ve__cpu_relax();
				if ((i & 63) == 63) {
					uint64_t dt = ve__now_ns() - t0;
					if (dt > r->cfg.spin_ns)
						break;
					if (dt > 5000)
						sched_yield(); /* ved may need this CPU to answer */
				}
			}
			n = pop_binds(r, out, max);
		}
		if (atomic_load_explicit(&r->want_consumed, memory_order_seq_cst)) {
			atomic_store_explicit(&r->want_consumed, 0, memory_order_relaxed);
			atomic_fetch_add_explicit(&r->consumed_word, 1, memory_order_release);
			ve__futex_wake(&r->consumed_word, 1, 1);
		}
		if (r->removing)
			maybe_bye(r);
	}
	if (n < max && (!r->conn || ve_coord_view(r->local)->nready)) {
		int m = ve_coord_schedule(r->local, out + n, max - n);
		for (int i = 0; i < m; i++) {
			r->local_inflight[out[n + i].entry]++;
			r->nlocal_inflight++;
		}
		r->st.local_bindings += m > 0 ? (uint64_t)m : 0;
		n += m > 0 ? m : 0;
	}
	publish_counts(r);
	return n;
}

/* The in-flight op of the table that finished on 'entry': one of an old
 * registration first (nobody wants its completion), then one with this key,
 * then any. Preferring what ved does not need keeps ved's view conservative:
 * it may think an entry busy a little longer, never free too early. */
static uint32_t find_inflight(struct ve_remote *r, uint16_t entry, uint64_t key)
{
	uint32_t same_key = NONE, any = NONE;
	for (uint32_t k = r->ent_head[entry]; k != NONE; k = r->ops[k].next) {
		const struct rop *o = &r->ops[k];
		if (o->epoch != r->epoch || !r->conn)
			return k;
		if (same_key == NONE && o->op.key == key)
			same_key = k;
		if (any == NONE)
			any = k;
	}
	return same_key != NONE ? same_key : any;
}

static int l_done(void *impl, uint32_t client, uint16_t entry, uint64_t key, uint64_t ns)
{
	struct ve_remote *r = impl;
	service(r);
	if (entry >= NENT)
		return -EINVAL;
	/* Local first: ops the local coordinator bound run on SMs ved does not
	 * know about, so its view must not be released by their completions. */
	if (r->local_inflight[entry]) {
		r->local_inflight[entry]--;
		r->nlocal_inflight--;
		publish_counts(r);
		return ve_coord_done(r->local, client, entry, key, ns);
	}
	uint32_t k = find_inflight(r, entry, key);
	if (k == NONE)
		return ve_coord_done(r->local, client, entry, key, ns);
	struct rop *o = &r->ops[k];
	ent_unlink(r, k);
	r->ninflight--;
	if (r->conn && o->epoch == r->epoch) {
		r->ninflight_cur--;
		send_done(r, o, ns, 0);
	} else {
		r->st.dones_dropped++;
	}
	rop_free(r, k);
	maybe_bye(r);
	publish_counts(r);
	return 0;
}

static int l_submit_failed(void *impl, const struct ve_binding *b, int status)
{
	struct ve_remote *r = impl;
	service(r);
	uint32_t k = ve_toktab_get(&r->tab, b->op.tok);
	if (k == NONE || r->ops[k].state != OP_INFLIGHT) {
		if (b->entry < NENT && r->local_inflight[b->entry]) {
			r->local_inflight[b->entry]--;
			r->nlocal_inflight--;
		}
		publish_counts(r);
		return ve_coord_submit_failed(r->local, b, status);
	}
	struct rop *o = &r->ops[k];
	ent_unlink(r, k);
	r->ninflight--;
	if (r->conn && o->epoch == r->epoch) {
		r->ninflight_cur--;
		struct ve_rec rec;
		ve_proto_encode_submit_failed(o->op.tok, o->entry, status, &rec);
		o->state = OP_PENDING; /* ved requeues it: a new BIND comes */
		r->npending++;
		r->st.failed_sent++;
		send_must(r, &rec);
	} else {
		/* Bound by a ved that is gone: bind it here instead. */
		struct ve_ready_op op = o->op;
		rop_free(r, k);
		if (r->have_client)
			ve_coord_ready(r->local, &op);
	}
	publish_counts(r);
	return 0;
}

static int l_hint(void *impl, const struct ve_hint *h)
{
	struct ve_remote *r = impl;
	service(r);
	if (!r->conn)
		return ve_coord_hint(r->local, h);
	if (r->ob_n)
		return -EAGAIN;
	struct ve_rec rec;
	ve_proto_encode_hint(h, &rec);
	if (ve_ring_room(&r->conn->out, 1) < 1)
		return -EAGAIN; /* advice only */
	if (push(r, &rec, 1) != 1)
		return -EAGAIN;
	r->st.hints_sent++;
	return 0;
}

/* Bounded pipelining under ved: the op goes behind one of our ved-bound ops
 * still in flight on 'entry'. Its PIPED record precedes that op's DONE on
 * our ring (the DONE is sent only once the dispatcher saw the predecessor
 * complete, and then this op is no candidate any more), so ved still counts
 * the entry as ours when it reads it. Returns 1: ved does not tell us
 * whether we are alone, so the dispatcher's budget always applies. */
static int l_pipeline(void *impl, uint32_t client, uint16_t entry, const struct ve_ready_op *op,
		      bool may_contend)
{
	struct ve_remote *r = impl;
	service(r);
	if (entry >= NENT)
		return -EBUSY;
	if (!r->conn) {
		int rc = ve_coord_pipeline(r->local, client, entry, may_contend);
		if (rc >= 0) {
			r->local_inflight[entry]++;
			r->nlocal_inflight++;
		}
		return rc;
	}
	if (!may_contend)
		return -EBUSY; /* under ved we never know we are alone */
	struct conn *c = r->conn;
	bool ours = false;
	for (uint32_t k = r->ent_head[entry]; k != NONE && !ours; k = r->ops[k].next)
		ours = r->ops[k].epoch == r->epoch && r->ops[k].state == OP_INFLIGHT;
	if (!ours || !op || op->tok == 0 || r->removing || r->ob_n ||
	    r->npending + r->ninflight_cur >= c->client_ops || r->free_head == NONE ||
	    ve_toktab_get(&r->tab, op->tok) != VE_TOKTAB_NONE)
		return -EBUSY;
	if (ve_ring_room(&c->out, 1) < 1)
		return -EBUSY;
	struct ve_rec rec;
	ve_proto_encode_piped(op, entry, &rec);
	uint32_t k = rop_alloc(r, op);
	if (k == NONE)
		return -EBUSY;
	if (push(r, &rec, 1) != 1) {
		rop_free(r, k);
		return -EBUSY;
	}
	r->ops[k].state = OP_INFLIGHT;
	r->ops[k].entry = entry;
	ent_link(r, k, entry);
	r->ninflight++;
	r->ninflight_cur++;
	r->st.piped_sent++;
	publish_counts(r);
	return 1;
}

static void l_pipeline_cancel(void *impl, uint32_t client, uint16_t entry, uint64_t tok)
{
	struct ve_remote *r = impl;
	uint32_t k = tok ? ve_toktab_get(&r->tab, tok) : NONE;
	if (k != NONE && r->ops[k].state == OP_INFLIGHT && r->ops[k].entry == entry) {
		/* Sent as PIPED, then not submitted: a DONE undoes ved's count. */
		struct rop *o = &r->ops[k];
		ent_unlink(r, k);
		r->ninflight--;
		if (r->conn && o->epoch == r->epoch) {
			r->ninflight_cur--;
			send_done(r, o, 0, -ECANCELED);
		}
		rop_free(r, k);
		publish_counts(r);
		return;
	}
	if (entry >= NENT || !r->local_inflight[entry])
		return;
	r->local_inflight[entry]--;
	r->nlocal_inflight--;
	ve_coord_pipeline_cancel(r->local, client, entry);
}

static void l_set_now(void *impl, uint64_t now)
{
	struct ve_remote *r = impl;
	/* ved ages ops on its own clock; the safe-mode coordinator follows ours. */
	ve_coord_set_now(r->local, now);
}

static uint32_t l_pending(void *impl)
{
	struct ve_remote *r = impl;
	service(r);
	return r->npending + r->ob_n + ve_coord_view(r->local)->nready;
}

/* Asks ved for its profiles on a connection of our own (the registration's
 * socket is the liveness signal and carries nothing) and writes them to path. */
static int fetch_profile(struct ve_remote *r, const char *path)
{
	int fd = ve_ctl_connect(r->path);
	if (fd < 0)
		return fd;
	static union {
		uint8_t b[VE_CTL_MAX_MSG];
		uint64_t align;
	} msg; /* one save at a time: the owner's thread, at exit */
	struct ve_ctl_profile_req q;
	memset(&q, 0, sizeof(q));
	ve_ctl_hdr_init(&q.h, VE_CTL_PROFILE_REQ, sizeof(q));
	int rc = ve_ctl_send(fd, &q, sizeof(q));
	FILE *f = rc ? NULL : fopen(path, "w");
	if (!rc && !f)
		rc = -errno;
	for (uint32_t chunk = 0; !rc; chunk++) {
		int n = ve_ctl_recv(fd, msg.b, sizeof(msg.b), NULL, 5000);
		const struct ve_ctl_profile *m = (const void *)msg.b;
		if (n <= 0 || ve_ctl_check(msg.b, (size_t)n, VE_CTL_FROM_VED) ||
		    m->h.type != VE_CTL_PROFILE || m->chunk != chunk) {
			rc = n < 0 ? n : -EPROTO;
			break;
		}
		if (m->nbytes && fwrite(m + 1, 1, m->nbytes, f) != m->nbytes)
			rc = -EIO;
		if (m->h.flags & VE_CTL_F_LAST)
			break;
	}
	if (f && fclose(f) && !rc)
		rc = -errno;
	close(fd);
	return rc;
}

/* SAMPLE records ring no doorbell (l_observe): before asking ved for the
 * profiles they refine, wake it and wait (bounded: ved may be stuck) until
 * it has read everything we pushed. */
static void wait_ring_read(struct ve_remote *r, struct conn *c)
{
	struct ve_ring_shared *sh = c->out.sh;
	uint32_t t = atomic_load_explicit(&sh->tail, memory_order_relaxed);
	if (atomic_load_explicit(&sh->head, memory_order_acquire) == t)
		return;
	doorbell(r, c);
	for (int i = 0; i < 500; i++) {
		if ((int32_t)(atomic_load_explicit(&sh->head, memory_order_acquire) - t) >= 0)
			return;
		usleep(100);
	}
}

/* Under ved the profiles that decide, and that completions refine, are
 * ved's; in safe mode they are the local coordinator's. */
static int l_profile_save(void *impl, const char *path)
{
	struct ve_remote *r = impl;
	if (!r->conn)
		return ve_profile_save(ve_coord_profile(r->local), path, "");
	wait_ring_read(r, r->conn);
	return fetch_profile(r, path);
}

static void l_info(void *impl, struct ve_link_info *out)
{
	struct ve_remote *r = impl;
	struct ve_coord_stats cs;
	ve_coord_stats(r->local, &cs);
	memset(out, 0, sizeof(*out));
	out->where = r->conn ? "ved" : "ved (safe mode)";
	snprintf(out->policy, sizeof(out->policy), "%s", r->st.policy);
	out->bindings = r->st.binds + r->st.local_bindings;
	out->decide_ns = cs.decide_ns;
}

static void l_set_notify(void *impl, void (*fn)(void *), void *arg)
{
	ve_remote_set_notify(impl, fn, arg);
}

static void l_destroy(void *impl)
{
	ve_remote_destroy(impl);
}

/* ------------------------------------------------------------------ grant mode */

/* The grant ved published for us (ipc/ctl.h, struct ve_ved_words), or the
 * safe-mode coordinator's. Generations of different sources are kept
 * apart (the registration epoch above bit 40, safe mode in bit 63), so a
 * switch is always seen as a change. */
static int l_grant(void *impl, uint32_t client, uint16_t *entry, uint16_t *lend, uint64_t *gen)
{
	struct ve_remote *r = impl;
	service(r);
	if (!r->conn) {
		if (!ve_coord_grant_mode(r->local))
			return -EOPNOTSUPP;
		*lend = ve_coord_lend(r->local, client);
		int rc = ve_coord_grant(r->local, client, entry, gen);
		*gen |= 1ull << 63;
		return rc;
	}
	struct ve_ved_words *w = r->conn->w;
	if (!atomic_load_explicit(&w->grant_mode, memory_order_relaxed))
		return -EOPNOTSUPP;
	/* A (pairs with ved's release store of the grant). */
	uint64_t g = atomic_load_explicit(&w->grant, memory_order_acquire);
	uint16_t e = (uint16_t)(g & 0xffff), l = (uint16_t)(g >> 16 & 0xffff);
	*entry = e < r->pool->nentries ? e : VE_POOL_NONE; /* ved's word is input, too */
	/* A lend contains a grant: none without one (ved's word before its
	 * first grant, a confused word). */
	*lend = l < r->pool->nentries && *entry != VE_POOL_NONE ? l : VE_POOL_NONE;
	*gen = (r->epoch << 40) + (g >> 32);
	return 0;
}

static bool l_contended(void *impl, uint32_t client)
{
	struct ve_remote *r = impl;
	if (!r->conn)
		return false;
	return atomic_load_explicit(&r->conn->w->contended, memory_order_relaxed) != 0;
}

static uint32_t l_others(void *impl, uint32_t client)
{
	struct ve_remote *r = impl;
	if (!r->conn)
		return 0;
	return atomic_load_explicit(&r->conn->w->others, memory_order_relaxed);
}

static int l_report(void *impl, uint32_t client, const struct ve_grant_report *rep)
{
	struct ve_remote *r = impl;
	if (!r->conn)
		return ve_coord_report(r->local, client, rep);
	struct conn *c = r->conn;
	struct ve_ved_words *w = c->w;
	const struct ve_client_demand *dm = &rep->demand;
	/* Publish only what changed ved's view (active_ns coarsely): ved then
	 * has work only when there is something to decide. */
	uint64_t ack = rep->ack_gen & ((1ull << 40) - 1);
	uint64_t active = dm->active_ns >> 20; /* ~1 ms */
	bool waiting = dm->flags & VE_DEMAND_WAITING;
	if (r->rep_valid && r->rep_last.demand.ready == dm->ready &&
	    r->rep_last.demand.inflight == dm->inflight &&
	    r->rep_last.demand.want_sms == dm->want_sms &&
	    r->rep_last.demand.min_sms == dm->min_sms &&
	    r->rep_last.demand.flags == dm->flags && r->rep_last.demand.entry == dm->entry &&
	    r->rep_last.demand.deadline_ns == dm->deadline_ns &&
	    r->rep_last.demand.op_us / 32 == dm->op_us / 32 &&
	    (r->rep_last.demand.active_ns >> 20) == active && r->rep_last.ack_gen == rep->ack_gen &&
	    r->rep_last.busy_leaves == rep->busy_leaves && r->rep_last.binds >> 10 == rep->binds >> 10 &&
	    r->rep_last.late == rep->late)
		return 0;
	r->rep_last = *rep;
	r->rep_valid = true;
	uint32_t seq = atomic_load_explicit(&w->rep_seq, memory_order_relaxed);
	atomic_store_explicit(&w->rep_seq, seq + 1, memory_order_relaxed);
	/* Each field is a release store: a reader that sees a new value (an
	 * acquire load) also sees the odd sequence number stored before it. */
	atomic_store_explicit(&w->ready, dm->ready, memory_order_release);
	atomic_store_explicit(&w->inflight, dm->inflight, memory_order_release);
	atomic_store_explicit(&w->want_sms, dm->want_sms, memory_order_release);
	atomic_store_explicit(&w->min_sms, dm->min_sms, memory_order_release);
	atomic_store_explicit(&w->flags, dm->flags, memory_order_release);
	atomic_store_explicit(&w->entry, dm->entry, memory_order_release);
	atomic_store_explicit(&w->active_ns, dm->active_ns, memory_order_release);
	atomic_store_explicit(&w->deadline_ns, dm->deadline_ns, memory_order_release);
	atomic_store_explicit(&w->ack_gen, ack, memory_order_release);
	atomic_store_explicit(&w->busy_leaves, rep->busy_leaves, memory_order_release);
	atomic_store_explicit(&w->op_us, dm->op_us, memory_order_release);
	atomic_store_explicit(&w->binds, rep->binds, memory_order_release);
	atomic_store_explicit(&w->done, rep->done, memory_order_release);
	atomic_store_explicit(&w->late, rep->late, memory_order_release);
	/* R (pairs with ved's acquire load of the even value). */
	atomic_store_explicit(&w->rep_seq, seq + 2, memory_order_release);
	if (waiting || (dm->ready && dm->entry == VE_POOL_NONE) ||
	    (r->rep_busy_last & ~rep->busy_leaves)) {
		/* Waiting for a grant, or SMs just drained: ved should look now. */
		atomic_store_explicit(&w->urgent, 1, memory_order_relaxed);
		doorbell(r, c);
	}
	r->rep_busy_last = rep->busy_leaves;
	return 0;
}

static void l_tick(void *impl)
{
	struct ve_remote *r = impl;
	if (!r->conn)
		ve_coord_tick(r->local, false); /* ved ticks by itself */
}

static void l_observe(void *impl, uint32_t client, uint16_t entry, uint64_t key, uint64_t ns)
{
	struct ve_remote *r = impl;
	if (!r->conn) {
		ve_coord_observe(r->local, client, entry, key, ns);
		return;
	}
	/* To ved, whose profiles the policy reads; a full ring drops the sample
	 * (it is only advice, and more come). No doorbell: this runs before the
	 * completed op's token is released (handle_completion), so a wake-up
	 * here delayed every step of a program that synchronizes each step
	 * (1 per step under ved, none embedded). ved reads the sample at its
	 * next pass: samples come only in grant mode, where its sleep is 1 ms
	 * at most, and any record that rings wakes it sooner. */
	if (!key || !ns || r->ob_n || ve_ring_room(&r->conn->out, 1) < 1)
		return;
	struct ve_rec rec;
	ve_rec_init(&rec, VE_REC_SAMPLE);
	rec.u.sample.key = key;
	rec.u.sample.ns = ns > (1ull << 40) ? 1ull << 40 : ns;
	rec.u.sample.entry = entry;
	if (push_bell(r, &rec, 1, false) == 1)
		r->st.samples_sent++;
}

static void l_idle(void *impl, bool idle)
{
	struct ve_remote *r = impl;
	if (r->conn)
		atomic_store_explicit(&r->conn->w->client_idle, idle ? 1 : 0, memory_order_seq_cst);
}

static const struct ve_link_ops remote_ops = {
    .name = "ved",
    .client_add = l_client_add,
    .client_remove = l_client_remove,
    .ready = l_ready,
    .schedule = l_schedule,
    .submit_failed = l_submit_failed,
    .done = l_done,
    .hint = l_hint,
    .pipeline = l_pipeline,
    .pipeline_cancel = l_pipeline_cancel,
    .set_now = l_set_now,
    .pending = l_pending,
    .set_notify = l_set_notify,
    .profile_save = l_profile_save,
    .info = l_info,
    .destroy = l_destroy,
    .grant = l_grant,
    .report = l_report,
    .tick = l_tick,
    .contended = l_contended,
    .others = l_others,
    .observe = l_observe,
    .idle = l_idle,
};

/* ------------------------------------------------------------------ helper thread */

static bool sock_gone(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
	/* ved sends nothing after DOORBELL: readable means EOF (or a peer that
	 * does not follow the protocol, which we leave just the same). */
	return poll(&p, 1, 0) != 0;
}

static void helper_sleep(struct ve_remote *r, uint64_t ns)
{
	uint32_t seen = atomic_load_explicit(&r->stop_word, memory_order_acquire);
	if (!atomic_load(&r->stop))
		ve__futex_wait(&r->stop_word, seen, ns, 1);
}

/* The dispatcher may sleep with a BIND on its way: wait on the ring's
 * consumer word as a consumer would (docs/ipc.md, "Wake-ups"; ved's push
 * wakes it), then wake the dispatcher, then wait until it consumed so as
 * not to wake it again for the same records. */
static void wait_binds(struct ve_remote *r, struct conn *c)
{
	struct ve_ring_shared *sh = c->shm.to_client.sh;
	uint32_t h = atomic_load_explicit(&sh->head, memory_order_acquire);
	atomic_store_explicit(&sh->cons_wait, 1, memory_order_seq_cst);
	uint32_t t = atomic_load_explicit(&sh->tail, memory_order_seq_cst);
	if (t == h && atomic_load_explicit(&r->a_pending, memory_order_relaxed))
		ve__futex_wait(&sh->cons_wait, 1, WAIT_NS, 0);
	atomic_store_explicit(&sh->cons_wait, 0, memory_order_relaxed);
	t = atomic_load_explicit(&sh->tail, memory_order_acquire);
	if (t == atomic_load_explicit(&sh->head, memory_order_acquire))
		return;
	atomic_fetch_add_explicit(&r->st_waiter_wakes, 1, memory_order_relaxed);
	/* S (seq_cst) before the head load: pairs with the dispatcher's head
	 * store in ve_ring_pop and its load of want_consumed in schedule(). */
	uint32_t seen = atomic_load_explicit(&r->consumed_word, memory_order_acquire);
	atomic_store_explicit(&r->want_consumed, 1, memory_order_seq_cst);
	call_notify(r);
	if ((int32_t)(atomic_load_explicit(&sh->head, memory_order_seq_cst) - t) < 0)
		ve__futex_wait(&r->consumed_word, seen, 2000000, 1);
	atomic_store_explicit(&r->want_consumed, 0, memory_order_relaxed);
}

static void *helper_main(void *arg)
{
	struct ve_remote *r = arg;
	prctl(PR_SET_NAME, "ve-remote", 0, 0, 0);
	uint64_t next_try = 0;
	char err[512];
	while (!atomic_load(&r->stop)) {
		struct conn *c = r->conn_w;
		uint64_t now = ve__now_ns();
		/* A (pairs with the release store in retire()). */
		if (c && atomic_load_explicit(&c->retired, memory_order_acquire)) {
			conn_free(c);
			r->conn_w = NULL;
			next_try = now + (uint64_t)r->cfg.reconnect_ms * 1000000ull;
			continue;
		}
		if (!c) {
			if (r->cfg.reconnect_ms && !atomic_load(&r->no_reconnect) &&
			    now >= next_try) {
				next_try = now + (uint64_t)r->cfg.reconnect_ms * 1000000ull;
				struct stat st;
				if (stat(r->path, &st) == 0 && S_ISSOCK(st.st_mode) &&
				    try_register(r, &c, err, sizeof(err)) == 0) {
					r->conn_w = c;
					r->last_beat = ve_shm_peer_beat(&c->shm, VE_SIDE_CLIENT);
					r->last_beat_ns = now;
					/* R (pairs with the acquire exchange in service()). */
					atomic_store_explicit(&r->offer, c, memory_order_release);
					call_notify(r);
					continue;
				} else if (stat(r->path, &st) == 0) {
					VE_DEBUG("remote: %s", err);
				}
			}
			uint64_t left = next_try > now ? next_try - now : WAIT_NS;
			helper_sleep(r, left < WAIT_NS ? left : WAIT_NS);
			continue;
		}
		int dead = atomic_load_explicit(&c->dead, memory_order_relaxed);
		if (dead == DEAD_NONE) {
			/* Our liveness for ved: a stopped process (SIGSTOP) stops this
			 * too, and ved takes its grant back after a while. */
			ve_shm_beat(&c->shm, VE_SIDE_CLIENT);
			int why = DEAD_NONE;
			uint64_t b = ve_shm_peer_beat(&c->shm, VE_SIDE_CLIENT);
			if (b != r->last_beat) {
				r->last_beat = b;
				r->last_beat_ns = now;
			}
			if (sock_gone(c->sock))
				why = DEAD_EOF;
			else if (r->cfg.heartbeat_timeout_ms &&
				 now - r->last_beat_ns >
				     (uint64_t)r->cfg.heartbeat_timeout_ms * 1000000ull)
				why = DEAD_HEARTBEAT;
			if (why != DEAD_NONE) {
				int zero = DEAD_NONE;
				/* R (pairs with the acquire load in service()). */
				atomic_compare_exchange_strong_explicit(&c->dead, &zero, why,
									memory_order_release,
									memory_order_relaxed);
				shutdown(c->sock, SHUT_RDWR); /* ved reclaims our leases now */
				call_notify(r);
				continue;
			}
		} else {
			/* Retired at the dispatcher's next call; nudge it there. */
			call_notify(r);
			helper_sleep(r, WAIT_NS);
			continue;
		}
		bool threaded = atomic_load_explicit(&r->notify, memory_order_relaxed) != NULL;
		if (threaded && atomic_load_explicit(&c->adopted, memory_order_acquire) &&
		    atomic_load_explicit(&r->a_pending, memory_order_relaxed) &&
		    !atomic_load_explicit(&r->a_inflight, memory_order_relaxed)) {
			wait_binds(r, c);
			continue;
		}
		/* Records stuck in the outbox go out at the dispatcher's next call. */
		bool stuck = threaded && atomic_load_explicit(&r->a_outbox, memory_order_relaxed);
		if (stuck)
			call_notify(r);
		struct pollfd p = {.fd = c->sock, .events = POLLIN | POLLRDHUP};
		poll(&p, 1, stuck ? 1 : (int)(WAIT_NS / 1000000));
	}
	return NULL;
}

/* ------------------------------------------------------------------ create */

int ve_remote_create(const struct ve_remote_config *cfg, struct ve_remote **out, char *err,
		     size_t errlen)
{
	char dummy[8];
	if (!err) {
		err = dummy;
		errlen = sizeof(dummy);
	}
	err[0] = 0;
	if (!cfg || !out || !cfg->leaf_sms || !cfg->nleaves || cfg->nleaves > VE_CTL_MAX_LEAVES) {
		snprintf(err, errlen, "the remote link needs the pool's leaf list");
		return -EINVAL;
	}
	struct ve_remote *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->cfg = *cfg;
	if (!r->cfg.max_ops)
		r->cfg.max_ops = 16384;
	if (!cfg->spin_ns && !cfg->heartbeat_timeout_ms && !cfg->reconnect_ms) {
		/* An all-zero config means the defaults. */
		r->cfg.spin_ns = 20000;
		r->cfg.heartbeat_timeout_ms = 5000;
		r->cfg.reconnect_ms = 1000;
	}
	memcpy(r->leaf_sms, cfg->leaf_sms, cfg->nleaves * sizeof(uint32_t));
	int rc;
	if (cfg->socket_path && *cfg->socket_path) {
		if (strlen(cfg->socket_path) >= sizeof(r->path)) {
			snprintf(err, errlen, "socket path too long: %s", cfg->socket_path);
			free(r);
			return -ENAMETOOLONG;
		}
		snprintf(r->path, sizeof(r->path), "%s", cfg->socket_path);
	} else if ((rc = ve_ctl_default_path(cfg->device, r->path, sizeof(r->path)))) {
		snprintf(err, errlen, "no usable default socket path");
		free(r);
		return rc;
	}
	snprintf(r->name, sizeof(r->name), "%s",
		 cfg->name ? cfg->name : program_invocation_short_name);
	for (char *p = r->name; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	struct ve_coord_config cc = {.leaf_sms = cfg->leaf_sms,
				     .nleaves = cfg->nleaves,
				     .max_entries = cfg->max_entries,
				     .max_clients = VE_COORD_MAX_CLIENTS,
				     .ready_cap = r->cfg.max_ops,
				     .policy = "whole",
				     .profile_path = cfg->profile_path,
				     .sm_count = cfg->sm_count};
	rc = ve_coord_create(&cc, &r->local, err, errlen);
	if (rc) {
		free(r);
		return rc;
	}
	r->pool = ve_coord_pool(r->local);
	r->cap = r->cfg.max_ops;
	r->ob_cap = r->cap + 8;
	r->ops = calloc(r->cap, sizeof(*r->ops));
	r->outbox = calloc(r->ob_cap, sizeof(*r->outbox));
	if (!r->ops || !r->outbox || ve_toktab_init(&r->tab, r->cap)) {
		rc = -ENOMEM;
		goto fail;
	}
	for (uint32_t k = 0; k < r->cap; k++)
		r->ops[k].next = k + 1 < r->cap ? k + 1 : NONE;
	r->free_head = 0;
	for (uint32_t e = 0; e < NENT; e++)
		r->ent_head[e] = NONE;
	r->st.client_id = -1;
	atomic_store(&r->mode, VE_REMOTE_SAFE);
	snprintf(r->st.policy, sizeof(r->st.policy), "whole (safe mode)");

	struct conn *c = NULL;
	rc = try_register(r, &c, err, errlen);
	if (rc && !cfg->start_safe)
		goto fail;
	if (c) {
		r->conn_w = c;
		r->last_beat = ve_shm_peer_beat(&c->shm, VE_SIDE_CLIENT);
		r->last_beat_ns = ve__now_ns();
		adopt(r, c);
	} else {
		VE_WARN("%s; safe mode (policy whole) until ved answers", err);
		r->was_safe = true;
		err[0] = 0;
	}
	if (pthread_create(&r->thr, NULL, helper_main, r)) {
		rc = -EAGAIN;
		snprintf(err, errlen, "cannot start the remote link's helper thread");
		goto fail;
	}
	r->thr_started = true;
	r->owner = getpid();
	*out = r;
	return 0;
fail:
	ve_remote_destroy(r);
	return rc;
}

void ve_remote_destroy(struct ve_remote *r)
{
	if (!r)
		return;
	if (r->owner && r->owner != getpid())
		return; /* a forked child: no helper thread to join, sockets closed at fork */
	if (r->conn && !r->said_bye) {
		struct ve_rec rec;
		ve_rec_init(&rec, VE_REC_BYE);
		flush_outbox(r);
		if (r->conn && r->ob_n == 0) {
			rec.seq = r->out_seq;
			if (ve_ring_push(&r->conn->out, &rec, 1) == 1)
				doorbell(r, r->conn);
		}
	}
	if (r->thr_started) {
		atomic_store(&r->stop, 1);
		atomic_fetch_add(&r->stop_word, 1);
		ve__futex_wake(&r->stop_word, 1, 1);
		pthread_join(r->thr, NULL);
	}
	/* Everything is this thread's now. */
	struct conn *offer = atomic_exchange(&r->offer, NULL);
	if (r->conn_w)
		conn_free(r->conn_w);
	else if (r->conn)
		conn_free(r->conn);
	if (offer && offer != r->conn_w)
		conn_free(offer);
	ve_coord_destroy(r->local);
	ve_toktab_fini(&r->tab);
	free(r->ops);
	free(r->outbox);
	free(r);
}

void ve_remote_link(struct ve_remote *r, struct ve_link *out)
{
	out->ops = &remote_ops;
	out->impl = r;
	out->pool = r->pool;
}

void ve_remote_set_notify(struct ve_remote *r, void (*fn)(void *), void *arg)
{
	atomic_store_explicit(&r->notify_arg, arg, memory_order_relaxed);
	/* R (pairs with the acquire load in call_notify): arg is set first. */
	atomic_store_explicit(&r->notify, fn, memory_order_release);
}

int ve_remote_mode(const struct ve_remote *r)
{
	return atomic_load_explicit(&r->mode, memory_order_relaxed);
}

void ve_remote_stats(const struct ve_remote *r, struct ve_remote_stats *st)
{
	*st = r->st;
	st->mode = (uint32_t)atomic_load(&r->mode);
	st->waiter_wakes = atomic_load(&r->st_waiter_wakes);
}

struct ve_coord *ve_remote_local(struct ve_remote *r)
{
	return r->local;
}

const char *ve_remote_path(const struct ve_remote *r)
{
	return r->path;
}
