/* SPDX-License-Identifier: MIT */
/*
 * ved: one per GPU device. Owns the pool's lease state and runs the policy
 * for every client process through the same coordinator the embedded
 * placement uses (src/ved/server.h wraps it for records). docs/daemon.md
 * is the user's view; this file is the loop:
 *
 *   for each client: pop its records (serve checks each one), apply them
 *   if anything changed (or ops wait and a tick is due): schedule
 *   push bindings to each client's ring (a full ring keeps them queued)
 *   nothing moved for spin_us: announce 'sleeping' in every segment,
 *   re-check every ring, then epoll_wait on the listening socket, every
 *   control socket, every client's doorbell eventfd and a signalfd
 *
 * The lost-wake-up argument is in ipc/ctl.h (struct ve_ved_words).
 */
#include "ved/ved.h"
#include "ved/http.h"
#include "ved/metrics.h"
#include "ved/server.h"
#include "ipc/ctl.h"
#include "ipc/fdpass.h"
#include "ipc/ring.h"
#include "ipc/shm.h"
#include "util/futex.h"
#include "util/util.h"
#include "util/version.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <libgen.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

extern char **environ;

#define MAX_CONNS  160 /* registered clients plus tools */
#define OWNER_RESERVE 32 /* slots users other than ved's own never take */
#define BATCH	   64
#define TAG_LISTEN 1u
#define TAG_SIGNAL 2u
#define TAG_CONN   3u
#define TAG_BELL   4u
#define TAG_HTTP   5u /* the metrics endpoint's sockets (http.h) */

struct vconn {
	bool used, registered;
	int fd, efd;
	uint32_t id; /* serve's client id */
	pid_t pid;
	uid_t uid;
	struct ve_shm shm;
	struct ve_ring_consumer in;  /* client -> ved */
	struct ve_ring_producer out; /* ved -> client */
	struct ve_ved_words *w;
	uint64_t last_completions;
	double ops_per_s;
	/* grant mode */
	uint32_t rep_seen;     /* rep_seq last applied */
	uint64_t grant_pub;    /* grant word last published */
	uint32_t contended_pub;
	uint32_t others_pub;
	uint64_t beat, beat_ns; /* the client's heartbeat and when it last moved */
	uint64_t wait_since;	/* it asked for a grant then (0: it does not wait) */
	bool stale;
	uint32_t fallbacks; /* safe-mode fallbacks it reported at HELLO */
	uint64_t last_ns; /* accepted or last request (unregistered: HELLO deadline) */
};

struct ved {
	struct ved_config cfg;
	char lock_path[128], devlock_path[128];
	int lfd, lockfd, devlockfd, epfd, sigfd;
	bool own_socket;
	struct ve_serve *srv;
	char pool_desc[128];
	struct vconn conn[MAX_CONNS];
	struct vconn *by_id[VE_COORD_MAX_CLIENTS];
	uint32_t nregistered;
	uint64_t start_ns;
	uint64_t next_beat, next_rate, next_stats, next_tick;
	uint64_t sleeps, wakeups, refused, hello_timeouts;
	uint64_t next_idle_check;
	uint64_t rate_records, rate_ns;
	double records_per_s;
	int mps;
	bool mps_warned;
	struct ve_rec recs[BATCH];
	/* Operations (docs/operations.md): metrics, drain, reload. */
	struct ved_metrics *met;
	struct ved_http *http;
	struct ved_overrides ov;
	bool draining;
	uint64_t start_unix_ns, refused_draining, reloads, reload_failures;
	union {
		uint8_t b[VE_CTL_MAX_MSG];
		uint64_t align;
	} msg;
};

static uint64_t tag(uint32_t kind, uint32_t idx)
{
	return (uint64_t)kind << 32 | idx;
}

/* ------------------------------------------------------------------ pool */

static void describe_pool(struct ved *d)
{
	const struct ve_pool *p = ve_serve_pool(d->srv);
	char leaves[96];
	ved_format_leaves(p->leaf_sms, p->nleaves, leaves, sizeof(leaves));
	snprintf(d->pool_desc, sizeof(d->pool_desc), "%u leaves (%s SMs), %u entries", p->nleaves,
		 leaves, p->nentries);
}

static int make_serve(struct ved *d, const uint32_t *leaf_sms, uint32_t nleaves,
		      uint32_t max_entries, char *err, size_t errlen)
{
	struct ve_serve_config sc = {
	    .coord = {.leaf_sms = leaf_sms,
		      .nleaves = nleaves,
		      .max_entries = max_entries,
		      .max_clients = d->cfg.max_clients,
		      .policy = d->cfg.policy,
		      .profile_path = d->cfg.profile[0] ? d->cfg.profile : NULL,
		      .seed = ve__now_ns(),
		      .log_decisions = d->cfg.log_level >= VE_LOG_DEBUG,
		      .per_op = d->cfg.per_op,
		      .share_contended = d->cfg.share_contended,
		      .tick_ns = (uint64_t)d->cfg.tick_us * 1000,
		      .watchdog_ns = (uint64_t)d->cfg.watchdog_ms * 1000000ull},
	    .client_ops = d->cfg.client_ops,
	    .trace_events = d->cfg.trace_events,
	    .check = d->cfg.check,
	    .check_abort = d->cfg.check,
	};
	int rc = ve_serve_create(&sc, &d->srv, err, errlen);
	if (rc)
		return rc;
	describe_pool(d);
	VE_INFO("ved: pool of %s, policy %s", d->pool_desc,
		ve_coord_policy_name(ve_serve_coord(d->srv)));
	return 0;
}

/* ------------------------------------------------------------------ socket, lock */

static int private_dir(const char *dir, const struct ved_config *c)
{
	struct stat st;
	if (lstat(dir, &st) < 0) {
		if (errno != ENOENT || mkdir(dir, c->group[0] ? 0750 : 0700) < 0) {
			fprintf(stderr, "ved: cannot create socket directory %s: %s\n", dir,
				strerror(errno));
			return -1;
		}
		if (c->group[0] && (chown(dir, (uid_t)-1, c->gid) < 0 || chmod(dir, 0750) < 0)) {
			fprintf(stderr, "ved: cannot give %s to group %s: %s\n", dir, c->group,
				strerror(errno));
			return -1;
		}
		if (lstat(dir, &st) < 0)
			return -1;
	}
	/* Nobody else may create or replace the socket in there. */
	if (!S_ISDIR(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 022)) {
		fprintf(stderr,
			"ved: %s must be a directory owned by uid %u and writable by it only "
			"(found mode %o, owner %u)\n",
			dir, (unsigned)getuid(), (unsigned)(st.st_mode & 07777),
			(unsigned)st.st_uid);
		return -1;
	}
	return 0;
}

/* Takes the lock file at 'path' (flock), writing "pid socket" into it; the
 * fd, or -1 with a message naming the ved that holds it. */
static int take_lock_at(struct ved *d, const char *path)
{
	for (int tries = 0; tries < 5; tries++) {
		int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd < 0) {
			fprintf(stderr, "ved: cannot open lock file %s: %s\n", path, strerror(errno));
			return -1;
		}
		if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
			char who[160] = "";
			ssize_t n = pread(fd, who, sizeof(who) - 1, 0);
			who[n > 0 ? n : 0] = 0;
			char *nl = strchr(who, '\n'), *sock = nl ? nl + 1 : NULL;
			if (nl)
				*nl = 0;
			if (sock)
				sock[strcspn(sock, "\n")] = 0;
			fprintf(stderr,
				"ved: another ved (pid %s) already serves device %d on %s; stop it "
				"first (one ved per device)\n",
				who[0] ? who : "?", d->cfg.device,
				sock && *sock ? sock : d->cfg.socket);
			close(fd);
			return -1;
		}
		/* The file we locked must still be the one at the path: a ved that
		 * exits unlinks it, and a lock on an unlinked file guards nothing. */
		struct stat a, b;
		if (fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_ino == b.st_ino &&
		    a.st_dev == b.st_dev) {
			char who[160];
			int n = snprintf(who, sizeof(who), "%d\n%s\n", (int)getpid(), d->cfg.socket);
			if (ftruncate(fd, 0) < 0 || pwrite(fd, who, (size_t)n, 0) != n)
				VE_WARN("ved: cannot write our pid into %s", path);
			return fd;
		}
		close(fd);
	}
	fprintf(stderr, "ved: lock file %s keeps changing; giving up\n", path);
	return -1;
}

static int take_lock(struct ved *d)
{
	d->lockfd = take_lock_at(d, d->lock_path);
	return d->lockfd < 0 ? -1 : 0;
}

/* One ved per device, whatever socket each was given: the lock next to the
 * device's default socket is taken too (the same file when the socket is
 * the default one). A second ved then refuses and names the first. */
static int take_device_lock(struct ved *d)
{
	char sock[108], dir[108];
	if (ve_ctl_default_path(d->cfg.device, sock, sizeof(sock)) ||
	    ve_ctl_lock_path(sock, d->devlock_path, sizeof(d->devlock_path))) {
		d->devlock_path[0] = 0;
		return 0; /* no default place: the socket's lock is all there is */
	}
	char lock[128];
	if (ve_ctl_lock_path(d->cfg.socket, lock, sizeof(lock)) == 0 &&
	    strcmp(lock, d->devlock_path) == 0) {
		d->devlock_path[0] = 0;
		return 0;
	}
	snprintf(dir, sizeof(dir), "%s", sock);
	if (private_dir(dirname(dir), &d->cfg))
		return -1;
	d->devlockfd = take_lock_at(d, d->devlock_path);
	return d->devlockfd < 0 ? -1 : 0;
}

static int listen_socket(struct ved *d)
{
	char dirbuf[sizeof(d->cfg.socket)];
	snprintf(dirbuf, sizeof(dirbuf), "%s", d->cfg.socket);
	if (private_dir(dirname(dirbuf), &d->cfg))
		return -1;
	if (ve_ctl_lock_path(d->cfg.socket, d->lock_path, sizeof(d->lock_path))) {
		fprintf(stderr, "ved: socket path too long: %s\n", d->cfg.socket);
		return -1;
	}
	if (take_device_lock(d) || take_lock(d))
		return -1;
	struct stat st;
	if (lstat(d->cfg.socket, &st) == 0) {
		/* We hold the lock, so no live ved owns it: a crashed one left it. */
		if (!S_ISSOCK(st.st_mode)) {
			fprintf(stderr, "ved: %s exists and is not a socket; not touching it\n",
				d->cfg.socket);
			return -1;
		}
		unlink(d->cfg.socket);
		VE_INFO("ved: removed the stale socket %s of a ved that did not exit cleanly",
			d->cfg.socket);
	}
	d->lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (d->lfd < 0)
		return -1;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", d->cfg.socket);
	/* 0600: connecting needs write permission on the socket, nothing more. */
	mode_t old = umask(0177);
	int rc = bind(d->lfd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (rc < 0) {
		fprintf(stderr, "ved: cannot bind %s: %s\n", d->cfg.socket, strerror(errno));
		return -1;
	}
	d->own_socket = true;
	if (d->cfg.group[0] &&
	    (chown(d->cfg.socket, (uid_t)-1, d->cfg.gid) < 0 || chmod(d->cfg.socket, 0660) < 0)) {
		fprintf(stderr, "ved: cannot give %s to group %s: %s\n", d->cfg.socket,
			d->cfg.group, strerror(errno));
		return -1;
	}
	if (listen(d->lfd, 64) < 0)
		return -1;
	return 0;
}

static void cleanup_files(struct ved *d)
{
	if (d->own_socket)
		unlink(d->cfg.socket);
	if (d->lockfd >= 0) {
		unlink(d->lock_path);
		close(d->lockfd);
		d->lockfd = -1;
	}
	if (d->devlockfd >= 0) {
		unlink(d->devlock_path);
		close(d->devlockfd);
		d->devlockfd = -1;
	}
}

/* ------------------------------------------------------------------ connections */

/* Closing a socket with unread messages resets the connection, and the
 * peer's next read fails with ECONNRESET instead of returning what we sent
 * last (a REFUSE saying why). So: no more from us, read what came, close. */
static void close_politely(int fd)
{
	shutdown(fd, SHUT_WR);
	char sink[512];
	for (int i = 0; i < 64 && recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0; i++)
		;
	close(fd);
}

/* The cumulative counts of a client's report (grant mode: the ops it bound
 * itself, completed, late), for status and metrics: counts, not decisions,
 * so read on their own. */
static void report_counts(struct ved *d, const struct vconn *c)
{
	ve_serve_grant_activity(d->srv, c->id, atomic_load_explicit(&c->w->binds, memory_order_relaxed),
				atomic_load_explicit(&c->w->done, memory_order_relaxed),
				atomic_load_explicit(&c->w->late, memory_order_relaxed), 0);
}

static void conn_close(struct ved *d, struct vconn *c, const char *why, bool violation)
{
	if (c->registered) {
		/* Its last report may have come with its BYE, in the same pass,
		 * before grants() read it: take its counts now (the segment is
		 * still mapped) so the line below is whole. */
		if (c->w)
			report_counts(d, c);
		struct ve_serve_client_info ci;
		ve_serve_client_info(d->srv, c->id, &ci);
		/* What it was granted, for the log line benchmarks read (grant
		 * mode): how many SMs on average, how much of the time shared. */
		char use[160] = "";
		struct ve_grant_usage u;
		const struct ve_coord *co = ve_serve_coord(d->srv);
		if (ve_coord_grant_mode(co) && ve_coord_grant_usage(co, c->id, &u) == 0 && u.span_ns)
			snprintf(use, sizeof(use),
				 "; granted %.1f SMs on average over %.2f s (%.0f%% of it granted, "
				 "%.0f%% shared)",
				 (double)u.sm_ns / (double)u.span_ns, (double)u.span_ns / 1e9,
				 100.0 * (double)u.granted_ns / (double)u.span_ns,
				 100.0 * (double)u.shared_ns / (double)u.span_ns);
		char late[48] = "";
		if (ci.late)
			snprintf(late, sizeof(late), " (%llu after their deadline)",
				 (unsigned long long)ci.late);
		uint32_t reclaimed = ve_serve_client_remove(d->srv, c->id);
		d->by_id[c->id] = NULL;
		d->nregistered--;
		if (violation)
			VE_WARN("ved: client %u (pid %d, %s) disconnected: %s; %u ops reclaimed",
				c->id, (int)c->pid, ci.name, why, reclaimed);
		else
			VE_INFO(
			    "ved: client %u (pid %d, %s) left (%s): %llu ops done%s, %u reclaimed, "
			    "its leases released; %u clients%s",
			    c->id, (int)c->pid, ci.name, why, (unsigned long long)ci.completions,
			    late, reclaimed, d->nregistered, use);
		ve_shm_set_state(&c->shm, VE_SIDE_COORD, VE_IPC_S_DETACHED);
		ve_shm_fini(&c->shm);
		if (c->efd >= 0) {
			epoll_ctl(d->epfd, EPOLL_CTL_DEL, c->efd, NULL);
			close(c->efd);
		}
	}
	epoll_ctl(d->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close_politely(c->fd);
	memset(c, 0, sizeof(*c));
	c->fd = c->efd = -1;
}

static int send_refuse(int fd, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int send_refuse(int fd, int status, const char *fmt, ...)
{
	struct ve_ctl_refuse m;
	memset(&m, 0, sizeof(m));
	ve_ctl_hdr_init(&m.h, VE_CTL_REFUSE, sizeof(m));
	m.status = status;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(m.msg, sizeof(m.msg), fmt, ap);
	va_end(ap);
	for (char *p = m.msg; *p; p++)
		if ((unsigned char)*p < 0x20)
			*p = ' ';
	size_t n = strlen(m.msg);
	memset(m.msg + n, 0, sizeof(m.msg) - n);
	VE_WARN("ved: refused: %s", m.msg);
	return ve_ctl_send(fd, &m, sizeof(m));
}

static bool peer_allowed(struct ved *d, int fd, struct ucred *cr)
{
	socklen_t len = sizeof(*cr);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, cr, &len) < 0)
		return false;
	if (cr->uid == getuid() || cr->uid == 0)
		return true;
	if (!d->cfg.group[0])
		return false;
	if (cr->gid == d->cfg.gid)
		return true;
	/* Supplementary groups as they were at connect (SO_PEERGROUPS, Linux 4.13). */
	gid_t g[256];
	len = sizeof(g);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, g, &len) == 0)
		for (size_t i = 0; i < len / sizeof(gid_t); i++)
			if (g[i] == d->cfg.gid)
				return true;
	return false;
}

static uint32_t nprocs(const struct ved *d)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < MAX_CONNS; i++) {
		const struct vconn *c = &d->conn[i];
		if (!c->registered)
			continue;
		bool seen = false;
		for (uint32_t j = 0; j < i && !seen; j++)
			seen = d->conn[j].registered && d->conn[j].pid == c->pid;
		n += !seen;
	}
	return n;
}

static void mps_check(struct ved *d)
{
	uint32_t n = nprocs(d);
	if (n < 2 || d->mps_warned)
		return;
	char detail[512];
	d->mps = ve_mps_probe(detail, sizeof(detail));
	if (d->mps == VE_MPS_RUNNING) {
		VE_INFO("ved: %u processes share device %d; %s", n, d->cfg.device, detail);
		return;
	}
	d->mps_warned = true;
	VE_WARN("ved: %u processes now share device %d, but %s: their kernels will be time-sliced, "
		"not run side by side on their SMs. Start MPS for the device before the clients "
		"(export CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps "
		"CUDA_MPS_LOG_DIRECTORY=/tmp/nvidia-log; "
		"nvidia-cuda-mps-control -d; leave CUDA_MPS_ACTIVE_THREAD_PERCENTAGE unset); see "
		"docs/daemon.md, \"MPS\". ved starts nothing itself",
		n, d->cfg.device, detail);
}

static void do_hello(struct ved *d, struct vconn *c, const struct ve_ctl_hello *h)
{
	char err[512];
	if (c->registered) {
		conn_close(d, c, "a second HELLO", true);
		return;
	}
	if (d->draining) {
		send_refuse(c->fd, -EBUSY,
			    "ved is draining device %d: it admits no new client until "
			    "'ve-ctl resume' (or a restart)",
			    d->cfg.device);
		d->refused_draining++;
		goto refused;
	}
	if (h->ipc_version != VE_IPC_VERSION) {
		send_refuse(c->fd, -EPROTO,
			    "this process speaks IPC version %u, ved speaks %u: run ved and its "
			    "clients from the same release",
			    h->ipc_version, VE_IPC_VERSION);
		goto refused;
	}
	if (h->device != d->cfg.device) {
		send_refuse(c->fd, -ENODEV, "this ved serves device %d, not %d", d->cfg.device,
			    h->device);
		goto refused;
	}
	if (!d->srv) {
		/* The first client tells us the split (as the backend made it) and,
		 * unless configured, the pool bound. */
		int rc = make_serve(d, d->cfg.nleaves ? d->cfg.leaf_sms : h->leaf_sms,
				    d->cfg.nleaves ? d->cfg.nleaves : h->nleaves,
				    d->cfg.pool_entries_set ? d->cfg.pool_entries : h->max_entries,
				    err, sizeof(err));
		if (rc) {
			send_refuse(c->fd, rc,
				    "ved cannot build the pool this process asks for: %s", err);
			goto refused;
		}
	}
	const struct ve_pool *p = ve_serve_pool(d->srv);
	bool same = h->nleaves == p->nleaves && h->fingerprint == p->fingerprint;
	for (uint32_t i = 0; same && i < p->nleaves; i++)
		same = h->leaf_sms[i] == p->leaf_sms[i];
	if (!same) {
		char leaves[96];
		ved_format_leaves(h->leaf_sms, h->nleaves, leaves, sizeof(leaves));
		send_refuse(c->fd, -EPROTO,
			    "pool mismatch: ved has %s (fp %016llx), this process %u leaves (%s "
			    "SMs) bound %u (fp %016llx); use one VE_LEAF_SMS and VE_POOL_ENTRIES "
			    "everywhere, or set ved's leaves/pool_entries",
			    d->pool_desc, (unsigned long long)p->fingerprint, h->nleaves, leaves,
			    h->max_entries, (unsigned long long)h->fingerprint);
		goto refused;
	}
	uint32_t id;
	int rc = ve_serve_client_add(d->srv,
				     (h->class_flags & VE_CTL_CLASS_LATENCY) ? VE_READY_LATENCY : 0,
				     c->pid, h->name, &id);
	if (rc) {
		send_refuse(c->fd, rc == -ENOSPC ? -EUSERS : rc,
			    rc == -ENOSPC ? "ved already serves max_clients = %u clients"
					  : "ved cannot add a client (%u)",
			    d->cfg.max_clients);
		goto refused;
	}
	struct ve_shm_opts so = {.ring_records =
				     h->ring_records ? h->ring_records : d->cfg.ring_records,
				 .client_id = (int32_t)id,
				 .gid = d->cfg.group[0] ? (long)d->cfg.gid : -1};
	if (so.ring_records > 65536)
		so.ring_records = 65536;
	if (so.ring_records < 16)
		so.ring_records = 16;
	rc = ve_shm_create_ex(&so, &c->shm);
	if (rc == 0)
		rc = ve_ring_consumer_init(&c->in, &c->shm.to_coord);
	if (rc == 0)
		rc = ve_ring_producer_init(&c->out, &c->shm.to_client);
	c->efd = rc == 0 ? eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC) : -1;
	if (rc || c->efd < 0) {
		ve_serve_client_remove(d->srv, id);
		if (c->shm.base)
			ve_shm_fini(&c->shm);
		send_refuse(c->fd, rc ? rc : -errno, "ved cannot create the client's segment");
		goto refused;
	}
	c->w = ve_ved_words_of(&c->shm);
	/* Before the segment is handed over: no grant and no lend yet (a zeroed
	 * field would name entry 0, the whole GPU). */
	c->grant_pub = VE_VED_GRANT_WORD(0, VE_POOL_NONE, VE_POOL_NONE);
	c->rep_seen = 0;
	c->contended_pub = 0;
	c->others_pub = 0;
	c->stale = false;
	c->beat = 0;
	c->beat_ns = ve__now_ns();
	c->wait_since = 0;
	atomic_store_explicit(&c->w->grant, c->grant_pub, memory_order_relaxed);
	atomic_store_explicit(&c->w->grant_mode, ve_coord_grant_mode(ve_serve_coord(d->srv)),
			      memory_order_relaxed);
	ve_shm_announce(&c->shm, VE_SIDE_COORD);
	c->id = id;
	c->fallbacks = h->failovers;
	c->registered = true;
	d->by_id[id] = c;
	d->nregistered++;
	struct ve_ctl_welcome w;
	memset(&w, 0, sizeof(w));
	ve_ctl_hdr_init(&w.h, VE_CTL_WELCOME, sizeof(w));
	w.client_id = (int32_t)id;
	w.client_ops = ve_serve_client_ops(d->srv);
	w.ring_records = c->shm.ring_records;
	w.heartbeat_ms = d->cfg.heartbeat_ms;
	w.ved_pid = (int32_t)getpid();
	w.nprocs = nprocs(d);
	w.mps = (uint32_t)(d->mps ? d->mps : VE_MPS_UNKNOWN);
	w.nentries = p->nentries;
	w.fingerprint = p->fingerprint;
	snprintf(w.policy, sizeof(w.policy), "%s", ve_coord_policy_name(ve_serve_coord(d->srv)));
	struct ve_ctl_doorbell db;
	memset(&db, 0, sizeof(db));
	ve_ctl_hdr_init(&db.h, VE_CTL_DOORBELL, sizeof(db));
	rc = ve_fd_send(c->fd, c->shm.fd, &w, sizeof(w));
	if (rc == 0)
		rc = ve_fd_send(c->fd, c->efd, &db, sizeof(db));
	if (rc) {
		conn_close(d, c, "registration reply failed", false);
		return;
	}
	struct epoll_event ev = {.events = EPOLLIN,
				 .data.u64 = tag(TAG_BELL, (uint32_t)(c - d->conn))};
	epoll_ctl(d->epfd, EPOLL_CTL_ADD, c->efd, &ev);
	VE_INFO("ved: client %u joined: pid %d (%s), %s class, %u-record rings; %u clients", id,
		(int)c->pid, h->name, (h->class_flags & VE_CTL_CLASS_LATENCY) ? "latency" : "batch",
		c->shm.ring_records, d->nregistered);
	mps_check(d);
	return;
refused:
	d->refused++;
	conn_close(d, c, "refused", false);
}

/* ------------------------------------------------------------------ operations */
/* Metrics, drain and reload (docs/operations.md): new functions only, called
 * from a few one-line hooks in the loop, the HELLO path and the control
 * socket's dispatch. */

static int send_bounded(int fd, const void *m, size_t len);

static void fill_daemon(struct ved *d, struct ved_metrics_daemon *dm)
{
	memset(dm, 0, sizeof(*dm));
	dm->device = d->cfg.device;
	dm->max_clients = d->cfg.max_clients;
	dm->draining = d->draining;
	dm->mps = (uint32_t)d->mps;
	dm->start_unix_ns = d->start_unix_ns;
	dm->sleeps = d->sleeps;
	dm->wakeups = d->wakeups;
	dm->refused = d->refused;
	dm->refused_draining = d->refused_draining;
	dm->reloads = d->reloads;
	dm->reload_failures = d->reload_failures;
	dm->records_per_s = d->records_per_s;
	for (uint32_t id = 0; id < VE_COORD_MAX_CLIENTS; id++) {
		const struct vconn *v = d->by_id[id];
		if (!v)
			continue;
		dm->cl[dm->nclients++] = (struct ved_metrics_client){.id = id,
								     .pid = (int32_t)v->pid,
								     .uid = (uint32_t)v->uid,
								     .fallbacks = v->fallbacks,
								     .ops_per_s = v->ops_per_s};
	}
}

/* The metrics text, malloc'd (the HTTP endpoint's body and METRICS). */
static int metrics_text(void *arg, char **text, size_t *len)
{
	struct ved *d = arg;
	static struct ved_metrics_daemon dm;
	fill_daemon(d, &dm);
	FILE *f = open_memstream(text, len);
	if (!f)
		return -ENOMEM;
	int rc = ved_metrics_render(d->met, d->srv, &dm, f);
	if (fclose(f) || rc)
		return rc ? rc : -EIO;
	return 0;
}

static int http_start(struct ved *d, const char *addr, struct ved_http **out, char *err,
		      size_t errlen)
{
	*out = NULL;
	if (!addr[0])
		return 0;
	/* "HOST:9400+": one port per GPU, 9400 + the device index, so one line
	 * in the shared ved.conf serves every ved@N. */
	char buf[96];
	size_t n = strlen(addr);
	if (addr[n - 1] == '+') {
		const char *colon = strrchr(addr, ':');
		const char *port = colon ? colon + 1 : addr;
		long p = strtol(port, NULL, 10) + d->cfg.device;
		if (p > 65535) {
			snprintf(err, errlen, "metrics_listen %s: port %ld + device %d is past 65535",
				 addr, p - d->cfg.device, d->cfg.device);
			return -EINVAL;
		}
		snprintf(buf, sizeof(buf), "%.*s%ld", (int)(port - addr), addr, p);
		addr = buf;
	}
	int rc = ved_http_create(addr, d->epfd, TAG_HTTP, metrics_text, d, out, err, errlen);
	if (rc == 0)
		VE_INFO("ved: metrics at http://%s/metrics", ved_http_address(*out));
	return rc;
}

/* At start-up, after the socket: metrics state and, if configured, the endpoint. */
static int ops_start(struct ved *d, const struct ved_overrides *ov)
{
	d->ov = *ov;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	d->start_unix_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	char err[256];
	if (ved_metrics_create(&d->met)) {
		fprintf(stderr, "ved: out of memory\n");
		return -1;
	}
	if (http_start(d, d->cfg.metrics_listen, &d->http, err, sizeof(err))) {
		fprintf(stderr, "ved: %s\n", err);
		return -1;
	}
	return 0;
}

static void ops_tick(struct ved *d, uint64_t now)
{
	ved_metrics_observe(d->met, d->srv, now);
	ved_http_sweep(d->http, now);
}

/* A policy name checked the way main checks it before the pool exists. */
static int policy_valid(const struct ved_config *c, char *err, size_t errlen)
{
	uint32_t probe[VE_CTL_MAX_LEAVES], np = c->nleaves;
	if (np)
		memcpy(probe, c->leaf_sms, np * sizeof(uint32_t));
	else
		ved_parse_leaves("15x8,12", probe, &np);
	struct ve_serve_config sc = {.coord = {.leaf_sms = probe,
					       .nleaves = np,
					       .max_entries = c->pool_entries,
					       .max_clients = c->max_clients,
					       .policy = c->policy},
				     .client_ops = 64};
	struct ve_serve *tmp;
	int rc = ve_serve_create(&sc, &tmp, err, errlen);
	if (rc == 0)
		ve_serve_destroy(tmp);
	return rc;
}

/* Re-reads the configuration (SIGHUP, ve-ctl reload). What can change while
 * clients run changes: policy, log_level, stats_interval, metrics_listen;
 * the rest (the pool's shape, limits, paths) needs a restart and is kept,
 * with a warning. All or nothing: a key that does not apply leaves the
 * running configuration as it was. Returns 0 or -errno; msg says what. */
static int ops_reload(struct ved *d, char *msg, size_t len)
{
	struct ved_config nc;
	char err[512] = "";
	int rc = ved_config_load(&nc, &d->ov);
	if (rc) {
		snprintf(msg, len, "the configuration does not load (ved's log says why); kept the "
				   "running one");
		goto fail;
	}
	char kept[256] = "";
#define KEPT(cond, key)                                                                            \
	if (cond)                                                                                  \
		snprintf(kept + strlen(kept), sizeof(kept) - strlen(kept), "%s%s", kept[0] ? ", " : "", \
			 key)
	KEPT(nc.device != d->cfg.device, "device");
	KEPT(strcmp(nc.socket, d->cfg.socket), "socket");
	KEPT(strcmp(nc.group, d->cfg.group), "group");
	KEPT(nc.nleaves != d->cfg.nleaves ||
		 memcmp(nc.leaf_sms, d->cfg.leaf_sms, sizeof(nc.leaf_sms)),
	     "leaves");
	KEPT(nc.pool_entries != d->cfg.pool_entries || nc.pool_entries_set != d->cfg.pool_entries_set,
	     "pool_entries");
	KEPT(nc.max_clients != d->cfg.max_clients, "max_clients");
	KEPT(nc.client_ops != d->cfg.client_ops, "client_ops");
	KEPT(nc.ring_records != d->cfg.ring_records, "ring_records");
	KEPT(strcmp(nc.profile, d->cfg.profile), "profile");
	KEPT(nc.spin_us != d->cfg.spin_us, "spin_us");
	KEPT(nc.heartbeat_ms != d->cfg.heartbeat_ms, "heartbeat_ms");
	KEPT(nc.trace_events != d->cfg.trace_events, "trace_events");
	KEPT(nc.check != d->cfg.check, "check");
#undef KEPT
	struct ved_http *nh = NULL;
	bool new_http = strcmp(nc.metrics_listen, d->cfg.metrics_listen) != 0;
	if (new_http && nc.metrics_listen[0]) {
		/* The old listener may hold the same port: let it go first only
		 * when the address is the same one (never the case here). */
		rc = http_start(d, nc.metrics_listen, &nh, err, sizeof(err));
		if (rc) {
			snprintf(msg, len, "%.180s; kept the running configuration", err);
			goto fail;
		}
	}
	bool new_policy = strcmp(nc.policy, d->cfg.policy) != 0;
	if (new_policy) {
		rc = d->srv ? ve_coord_set_policy(ve_serve_coord(d->srv), nc.policy, err, sizeof(err))
			    : policy_valid(&nc, err, sizeof(err));
		if (rc) {
			ved_http_destroy(nh);
			snprintf(msg, len, "policy %.60s: %.150s; kept the running configuration", nc.policy,
				 err);
			goto fail;
		}
		snprintf(d->cfg.policy, sizeof(d->cfg.policy), "%s", nc.policy);
	}
	if (new_http) {
		ved_http_destroy(d->http);
		d->http = nh;
		snprintf(d->cfg.metrics_listen, sizeof(d->cfg.metrics_listen), "%s",
			 nc.metrics_listen);
	}
	d->cfg.log_level = nc.log_level;
	ve__log_level = nc.log_level;
	d->cfg.stats_interval_s = nc.stats_interval_s;
	d->reloads++;
	/* A long sentence is cut: the return value says by how much, nobody cares. */
	if (snprintf(msg, len, "reloaded %.80s: policy %.40s%s, metrics %.48s%s%.60s%s",
		 nc.config_path[0] ? nc.config_path : "(no file)",
		 d->srv ? ve_coord_policy_name(ve_serve_coord(d->srv)) : d->cfg.policy,
		 new_policy ? " (new)" : "",
		 d->http ? ved_http_address(d->http) : "off", kept[0] ? "; needs a restart: " : "",
		 kept, kept[0] ? " (kept as running)" : "") < 0)
		msg[0] = 0;
	VE_INFO("ved: %s", msg);
	return 0;
fail:
	d->reload_failures++;
	VE_WARN("ved: reload refused: %s", msg);
	return rc ? rc : -EINVAL;
}

/* The peer closed its end: its tool stopped waiting for our answer. */
static bool peer_gone(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLRDHUP};
	return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

static const char *admin_name(uint32_t op)
{
	return op == VE_ADMIN_RELOAD ? "reload" : op == VE_ADMIN_DRAIN ? "drain" : "resume";
}

static void do_admin(struct ved *d, struct vconn *c, const struct ve_ctl_admin_req *q)
{
	struct ve_ctl_admin *m = (void *)d->msg.b;
	memset(m, 0, sizeof(*m));
	ve_ctl_hdr_init(&m->h, VE_CTL_ADMIN, sizeof(*m));
	if (q->op == VE_ADMIN_RELOAD) {
		m->status = ops_reload(d, m->msg, sizeof(m->msg));
	} else {
		bool drain = q->op == VE_ADMIN_DRAIN;
		if (drain != d->draining)
			VE_INFO("ved: %s (%u clients registered)",
				drain ? "draining: no new client is admitted, registered ones go on"
				      : "resumed: admitting clients again",
				d->nregistered);
		d->draining = drain;
		snprintf(m->msg, sizeof(m->msg), "%s; %u clients registered",
			 drain ? "draining" : "admitting clients", d->nregistered);
	}
	m->nclients = d->nregistered;
	m->draining = d->draining;
	/* The sentence goes to a tool: printable, zero-padded (ve_ctl_check). */
	for (char *p = m->msg; *p; p++)
		if ((unsigned char)*p < 0x20)
			*p = ' ';
	size_t n = strlen(m->msg);
	memset(m->msg + n, 0, sizeof(m->msg) - n);
	if (ve_ctl_send(c->fd, m, sizeof(*m)))
		conn_close(d, c, "admin reply failed", false);
}

/* Text in chunks (PROFILE's layout): the METRICS and PROFILE replies. */
static void send_text(struct ved *d, struct vconn *c, uint16_t type, const char *text, size_t n,
		      const char *fail_why)
{
	struct ve_ctl_profile *m = (void *)d->msg.b;
	uint32_t chunk = 0;
	size_t off = 0;
	do {
		uint32_t k = (uint32_t)(n - off < VE_CTL_PROFILE_CHUNK ? n - off : VE_CTL_PROFILE_CHUNK);
		size_t len = sizeof(*m) + k;
		ve_ctl_hdr_init(&m->h, type, (uint32_t)len);
		m->nbytes = k;
		m->chunk = chunk++;
		m->total = n;
		if (off + k == n)
			m->h.flags = VE_CTL_F_LAST;
		if (k)
			memcpy(m + 1, text + off, k);
		off += k;
		if (send_bounded(c->fd, m, len)) {
			conn_close(d, c, fail_why, false);
			return;
		}
	} while (off < n);
}

static void do_metrics(struct ved *d, struct vconn *c)
{
	char *text = NULL;
	size_t n = 0;
	if (metrics_text(d, &text, &n)) {
		free(text);
		conn_close(d, c, "metrics reply failed", false);
		return;
	}
	/* Label values are the only free text, and no NUL gets into them. */
	send_text(d, c, VE_CTL_METRICS, text, n, "reply failed");
	free(text);
}

/* Keeps the events that ended at or after since (0: all), in order. */
static uint32_t trace_since(struct ve_ctl_tev *ev, uint32_t n, uint64_t since)
{
	if (!since || !ev)
		return n;
	uint32_t k = 0;
	for (uint32_t i = 0; i < n; i++)
		if (ev[i].t1_ns >= since)
			ev[k++] = ev[i];
	return k;
}

static void do_status(struct ved *d, struct vconn *c)
{
	struct ve_ctl_status *m = (void *)d->msg.b;
	memset(m, 0, sizeof(*m));
	m->ved_pid = (int32_t)getpid();
	m->device = d->cfg.device;
	m->uptime_ns = ve__now_ns() - d->start_ns;
	m->max_clients = d->cfg.max_clients;
	m->mps = (uint32_t)d->mps;
	m->records_per_s = d->records_per_s;
	m->sleeps = d->sleeps;
	m->wakeups = d->wakeups;
	m->refused = d->refused;
	m->hello_timeouts = d->hello_timeouts;
	struct ve_ctl_entry *e = (void *)(m + 1);
	if (d->srv) {
		const struct ve_pool *p = ve_serve_pool(d->srv);
		struct ve_coord *co = ve_serve_coord(d->srv);
		snprintf(m->policy, sizeof(m->policy), "%s", ve_coord_policy_name(co));
		m->nentries = p->nentries;
		m->nleaves = p->nleaves;
		m->sm_count = p->total_sms;
		m->fingerprint = p->fingerprint;
		memcpy(m->leaf_sms, p->leaf_sms, p->nleaves * sizeof(uint32_t));
		struct ve_coord_stats cs;
		ve_coord_stats(co, &cs);
		m->rounds = cs.rounds;
		m->picks = cs.picks;
		m->bindings = cs.bindings;
		m->rejects = cs.rejects;
		m->defers = cs.defers;
		m->failed_submits = cs.failed_submits;
		m->completions = cs.completions;
		m->drains = cs.drains;
		m->reservations = cs.reservations;
		m->hints = cs.hints;
		m->gate_closes = cs.gate_closes;
		m->decide_ns = cs.decide_ns;
		m->watchdog_binds = cs.watchdog_binds;
		struct ve_serve_stats ss;
		ve_serve_stats(d->srv, &ss);
		m->records_in = ss.records_in;
		m->records_out = ss.records_out;
		m->reclaimed_ops = ss.reclaimed_ops;
		m->joined = ss.joined;
		m->left = ss.left;
		m->protocol_errors = ss.protocol_errors;
		for (uint32_t i = 0; i < p->nentries; i++) {
			const struct ve_pool_entry *pe = &p->e[i];
			e[i] = (struct ve_ctl_entry){.leaves = pe->leaves,
						     .sms = pe->sms,
						     .outstanding = pe->outstanding,
						     .holder = pe->holder,
						     .reserve_for = pe->reserve_for,
						     .state = pe->state,
						     .kind = pe->kind,
						     .gate_open = pe->gate_open};
			for (int k = 0; k < VE_CTL_MAX_SHARERS; k++)
				e[i].sharers[k] = -1;
			if (pe->state == VE_ENTRY_LEASED || pe->state == VE_ENTRY_DRAINING) {
				e[i].nsharers = p->nsharers[i];
				for (unsigned k = 0; k < p->nsharers[i]; k++)
					e[i].sharers[k] = p->sharers[i][k];
			}
		}
	}
	struct ve_ctl_client *cl = (void *)(e + m->nentries);
	uint64_t now = ve__now_ns();
	for (uint32_t id = 0; id < VE_COORD_MAX_CLIENTS; id++) {
		struct vconn *v = d->by_id[id];
		if (!v)
			continue;
		struct ve_serve_client_info ci;
		ve_serve_client_info(d->srv, id, &ci);
		struct ve_ctl_client *o = &cl[m->nclients++];
		memset(o, 0, sizeof(*o));
		o->id = (int32_t)id;
		o->pid = (int32_t)v->pid;
		o->uid = (uint32_t)v->uid;
		o->class_flags = (ci.flags & VE_READY_LATENCY) ? VE_CTL_CLASS_LATENCY : 0;
		o->ready = ci.nready;
		o->bound = ci.nbound;
		o->ring_in = atomic_load_explicit(&v->shm.to_coord.sh->tail, memory_order_relaxed) -
			     v->in.head;
		o->ring_out = v->out.tail - atomic_load_explicit(&v->shm.to_client.sh->head,
								 memory_order_relaxed);
		o->overflow = ci.nqueued;
		o->bindings = ci.bindings;
		o->completions = ci.completions;
		o->failed = ci.failed;
		o->records_in = ci.records_in;
		o->records_out = ci.records_out;
		o->age_ns = now - ci.joined_ns;
		o->ops_per_s = v->ops_per_s;
		o->late = ci.late;
		memcpy(o->name, ci.name, sizeof(o->name));
		uint32_t sms;
		ved_metrics_client_sms(d->met, id, &o->grant_entry, &sms);
		o->granted_sms = (uint16_t)(sms < 4096 ? sms : 4096);
		const struct ve_coord *co = ve_serve_coord(d->srv);
		o->lend_entry = ve_coord_lend(co, id);
		o->why = ve_coord_why(co, id);
		const struct ve_pool *lp = ve_serve_pool(d->srv);
		o->lent_sms = lp && o->lend_entry < lp->nentries ? (uint16_t)lp->e[o->lend_entry].sms : 0;
	}
	size_t len = sizeof(*m) + m->nentries * sizeof(*e) + m->nclients * sizeof(*cl);
	ve_ctl_hdr_init(&m->h, VE_CTL_STATUS, (uint32_t)len);
	if (d->draining)
		m->h.flags |= VE_CTL_F_DRAINING;
	if (ve_ctl_send(c->fd, m, len))
		conn_close(d, c, "status reply failed", false);
}

/* Sends with a bound: a tool that stops reading must not stall the daemon. */
static int send_bounded(int fd, const void *m, size_t len)
{
	for (int tries = 0; tries < 100; tries++) {
		ssize_t n = send(fd, m, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n == (ssize_t)len)
			return 0;
		if (n >= 0 || (errno != EAGAIN && errno != EINTR))
			return -EIO;
		struct pollfd p = {.fd = fd, .events = POLLOUT};
		poll(&p, 1, 10);
	}
	return -ETIMEDOUT;
}

static void do_trace(struct ved *d, struct vconn *c, const struct ve_ctl_trace_req *q)
{
	uint32_t cap = d->cfg.trace_events;
	uint32_t nopen = cap ? VE_CTL_MAX_ENTRIES * 2 + VE_CTL_MAX_CLIENTS : 0;
	struct ve_ctl_tev *ev = cap ? calloc(cap + nopen, sizeof(*ev)) : NULL;
	uint32_t n = ev && d->srv ? ve_serve_trace(d->srv, ev, cap) : 0;
	/* A full ring whose oldest event ended after since lost some. */
	bool gap = q->since_ns && n == cap && n && ev[0].t1_ns > q->since_ns;
	n = trace_since(ev, n, q->since_ns);
	if (ev && d->srv)
		n += ved_metrics_open_spans(d->met, d->srv, ev + n, nopen, ve__now_ns());
	if (q->max_events && n > q->max_events) {
		memmove(ev, ev + (n - q->max_events), q->max_events * sizeof(*ev));
		n = q->max_events;
	}
	struct ve_ctl_trace *m = (void *)d->msg.b;
	uint32_t chunk = 0, off = 0;
	do {
		uint32_t k = n - off < VE_CTL_TRACE_CHUNK ? n - off : VE_CTL_TRACE_CHUNK;
		size_t len = sizeof(*m) + k * sizeof(*ev);
		ve_ctl_hdr_init(&m->h, VE_CTL_TRACE, (uint32_t)len);
		m->nevents = k;
		m->chunk = chunk++;
		m->total = n;
		if (off + k == n)
			m->h.flags = VE_CTL_F_LAST;
		if (gap)
			m->h.flags |= VE_CTL_F_GAP;
		if (k)
			memcpy(m + 1, ev + off, k * sizeof(*ev));
		off += k;
		if (send_bounded(c->fd, m, len)) {
			conn_close(d, c, "trace reply failed", false);
			break;
		}
	} while (off < n);
	free(ev);
}

/* The profiles ved's coordinator refined online, as text in chunks: what a
 * client saves as VE_PROFILE_OUT (the measurements are here, not in the
 * client). Before the first client there is no pool: an empty last chunk. */
static void do_profile(struct ved *d, struct vconn *c)
{
	char *text = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&text, &n);
	if (!f) {
		conn_close(d, c, "profile reply failed", false);
		return;
	}
	int rc = d->srv ? ve_profile_write(ve_coord_profile(ve_serve_coord(d->srv)), f, "") : 0;
	if (fclose(f) || rc) {
		free(text);
		conn_close(d, c, "profile reply failed", false);
		return;
	}
	send_text(d, c, VE_CTL_PROFILE, text, n, "profile reply failed");
	free(text);
}

static void on_conn(struct ved *d, struct vconn *c, uint32_t events)
{
	if (c->registered) {
		/* A client sends nothing after HELLO: readable means gone. */
		conn_close(d, c,
			   (events & (EPOLLHUP | EPOLLRDHUP | EPOLLERR)) ? "hang-up"
									 : "unexpected message",
			   false);
		return;
	}
	for (int k = 0; k < 8; k++) {
		int fd = -1;
		int n = ve_fd_recv(c->fd, &fd, d->msg.b, sizeof(d->msg.b));
		if (fd >= 0)
			close(fd); /* nobody passes fds to ved */
		if (n == -EAGAIN || n == -EWOULDBLOCK)
			return;
		if (n <= 0) {
			conn_close(d, c, n == 0 ? "closed" : "error", false);
			return;
		}
		c->last_ns = ve__now_ns();
		int rc = ve_ctl_check(d->msg.b, (size_t)n, VE_CTL_TO_VED);
		if (rc) {
			if (rc == -EPROTO)
				send_refuse(c->fd, -EPROTO,
					    "control protocol version mismatch (ved "
					    "speaks %u)",
					    VE_CTL_VERSION);
			conn_close(d, c, "malformed control message", true);
			return;
		}
		const struct ve_ctl_hdr *h = (const void *)d->msg.b;
		if (h->type == VE_CTL_HELLO) {
			struct ve_ctl_hello hello;
			memcpy(&hello, d->msg.b, sizeof(hello));
			do_hello(d, c, &hello);
			return;
		} else if (h->type == VE_CTL_STATUS_REQ) {
			do_status(d, c);
		} else if (h->type == VE_CTL_PROFILE_REQ) {
			do_profile(d, c);
		} else if (h->type == VE_CTL_METRICS_REQ) {
			do_metrics(d, c);
		} else if (h->type == VE_CTL_ADMIN_REQ) {
			struct ve_ctl_admin_req q;
			memcpy(&q, d->msg.b, sizeof(q));
			/* A tool that gave up waiting (ved was stopped or busy) told
			 * its user the request failed: acting on it now would
			 * contradict that. */
			if (peer_gone(c->fd)) {
				VE_WARN("ved: %s request dropped: the tool that sent it has gone "
					"(it gave up waiting for ved)",
					admin_name(q.op));
				conn_close(d, c, "tool gone", false);
				return;
			}
			do_admin(d, c, &q);
		} else {
			struct ve_ctl_trace_req q;
			memcpy(&q, d->msg.b, sizeof(q));
			do_trace(d, c, &q);
		}
		if (!c->used)
			return;
	}
}

static void on_accept(struct ved *d)
{
	for (;;) {
		int fd = accept4(d->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		struct ucred cr;
		if (!peer_allowed(d, fd, &cr)) {
			send_refuse(fd, -EACCES,
				    "uid %u may not use this ved (it serves uid %u%s%s)",
				    (unsigned)cr.uid, (unsigned)getuid(),
				    d->cfg.group[0] ? " and group " : "", d->cfg.group);
			d->refused++;
			close_politely(fd);
			continue;
		}
		/* Bounds, so that no user can lock the others out by holding
		 * connections open: one uid may hold max_conns_per_uid, and
		 * users other than ved's own (and root) leave OWNER_RESERVE
		 * slots free for it. Idle ones close at the HELLO deadline. */
		uint32_t i, free_at = MAX_CONNS, mine = 0, foreign = 0;
		for (i = 0; i < MAX_CONNS; i++) {
			const struct vconn *o = &d->conn[i];
			if (!o->used) {
				if (free_at == MAX_CONNS)
					free_at = i;
				continue;
			}
			mine += o->uid == cr.uid;
			foreign += o->uid != getuid() && o->uid != 0;
		}
		uint32_t per_uid = d->cfg.max_conns_per_uid ? d->cfg.max_conns_per_uid
							     : d->cfg.max_clients + 8;
		bool owner = cr.uid == getuid() || cr.uid == 0;
		const char *full = free_at == MAX_CONNS		      ? "ved has too many connections"
				   : mine >= per_uid		      ? "this user has too many connections "
								"open (max_conns_per_uid)"
				   : !owner && foreign >= MAX_CONNS - OWNER_RESERVE ? "other users hold too "
								"many connections"
										 : NULL;
		if (full) {
			d->refused++;
			send_refuse(fd, -EUSERS, "%s; try again later", full);
			close_politely(fd);
			continue;
		}
		i = free_at;
		struct vconn *c = &d->conn[i];
		memset(c, 0, sizeof(*c));
		c->used = true;
		c->fd = fd;
		c->efd = -1;
		c->pid = cr.pid;
		c->uid = cr.uid;
		c->last_ns = ve__now_ns();
		struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP,
					 .data.u64 = tag(TAG_CONN, i)};
		epoll_ctl(d->epfd, EPOLL_CTL_ADD, fd, &ev);
	}
}

/* ------------------------------------------------------------------ loop */

static int pump(struct ved *d, struct vconn *c)
{
	int total = 0;
	for (int iter = 0; iter < 16; iter++) {
		int n = ve_ring_pop(&c->in, d->recs, BATCH);
		if (n < 0) {
			conn_close(d, c, "corrupt ring", true);
			return total;
		}
		for (int i = 0; i < n; i++) {
			int rc = ve_serve_apply(d->srv, c->id, &d->recs[i]);
			if (rc == 1) {
				conn_close(d, c, "BYE", false);
				return total + n;
			}
			if (rc < 0) {
				conn_close(d, c, ve_serve_error(d->srv), true);
				return total + n;
			}
		}
		total += n;
		if (n < BATCH)
			break;
	}
	return total;
}

static int flush_all(struct ved *d)
{
	int moved = 0;
	for (uint32_t id = 0; id < VE_COORD_MAX_CLIENTS; id++) {
		struct vconn *c = d->by_id[id];
		if (!c || !ve_serve_queued(d->srv, id))
			continue;
		int n = ve_serve_flush(d->srv, id, &c->out);
		if (n < 0) {
			conn_close(d, c, "corrupt ring", true);
			continue;
		}
		moved += n;
	}
	return moved;
}

static bool any_queued(struct ved *d)
{
	for (uint32_t id = 0; id < VE_COORD_MAX_CLIENTS; id++)
		if (d->by_id[id] && ve_serve_queued(d->srv, id))
			return true;
	return false;
}

/* The HELLO deadline: a connection that has not registered and sends no
 * request for hello_timeout_ms holds a slot for nothing. */
static void close_idle(struct ved *d, uint64_t now)
{
	uint64_t limit = (uint64_t)d->cfg.hello_timeout_ms * 1000000ull;
	for (uint32_t i = 0; i < MAX_CONNS; i++) {
		struct vconn *c = &d->conn[i];
		if (!c->used || c->registered || now - c->last_ns < limit)
			continue;
		d->hello_timeouts++;
		send_refuse(c->fd, -ETIMEDOUT, "nothing received for %u ms (hello_timeout_ms)",
			    d->cfg.hello_timeout_ms);
		conn_close(d, c, "HELLO deadline", false);
	}
}

static void periodic(struct ved *d, uint64_t now)
{
	ops_tick(d, now);
	if (now >= d->next_idle_check) {
		close_idle(d, now);
		d->next_idle_check = now + 50000000ull;
	}
	if (now >= d->next_beat) {
		for (uint32_t id = 0; id < VE_COORD_MAX_CLIENTS; id++)
			if (d->by_id[id])
				ve_shm_beat(&d->by_id[id]->shm, VE_SIDE_COORD);
		d->next_beat = now + (uint64_t)d->cfg.heartbeat_ms * 1000000ull;
	}
	if (now >= d->next_rate && d->srv) {
		struct ve_serve_stats ss;
		ve_serve_stats(d->srv, &ss);
		double dt = (double)(now - d->rate_ns) / 1e9;
		uint64_t recs = ss.records_in + ss.records_out;
		d->records_per_s = dt > 0 ? (double)(recs - d->rate_records) / dt : 0;
		d->rate_records = recs;
		d->rate_ns = now;
		for (uint32_t id = 0; id < VE_COORD_MAX_CLIENTS; id++) {
			struct vconn *c = d->by_id[id];
			if (!c)
				continue;
			struct ve_serve_client_info ci;
			ve_serve_client_info(d->srv, id, &ci);
			c->ops_per_s =
			    dt > 0 ? (double)(ci.completions - c->last_completions) / dt : 0;
			c->last_completions = ci.completions;
		}
		d->next_rate = now + 1000000000ull;
	}
	if (d->cfg.stats_interval_s && now >= d->next_stats) {
		if (d->srv && ve__log_level >= VE_LOG_INFO) {
			const struct ve_pool *p = ve_serve_pool(d->srv);
			uint32_t busy = 0;
			for (uint32_t e = 0; e < p->nentries; e++)
				busy += p->e[e].state != VE_ENTRY_IDLE;
			struct ve_coord_stats cs;
			ve_coord_stats(ve_serve_coord(d->srv), &cs);
			VE_INFO("ved: %u clients, %u of %u entries busy, %.0f records/s, %llu "
				"bindings, "
				"%llu completions, %llu sleeps",
				d->nregistered, busy, p->nentries, d->records_per_s,
				(unsigned long long)cs.bindings, (unsigned long long)cs.completions,
				(unsigned long long)d->sleeps);
		}
		d->next_stats = now + (uint64_t)d->cfg.stats_interval_s * 1000000000ull;
	}
}

/* Announce sleep in every segment, then look at every ring once more: a
 * client that published before our store is seen here, one that publishes
 * after it sees the flag and rings its doorbell (ctl.h). */
static bool announce_sleep(struct ved *d)
{
	for (uint32_t id = 0; id < VE_COORD_MAX_CLIENTS; id++)
		if (d->by_id[id])
			atomic_store_explicit(&d->by_id[id]->w->daemon_sleeping, 1,
					      memory_order_seq_cst);
	for (uint32_t id = 0; id < VE_COORD_MAX_CLIENTS; id++) {
		struct vconn *c = d->by_id[id];
		if (c && ve__ring_cons_refresh(&c->in, memory_order_seq_cst) != 0)
			return false; /* records (or a corrupt ring, which pump reports) */
	}
	return true;
}

static void end_sleep(struct ved *d)
{
	for (uint32_t id = 0; id < VE_COORD_MAX_CLIENTS; id++)
		if (d->by_id[id])
			atomic_store_explicit(&d->by_id[id]->w->daemon_sleeping, 0,
					      memory_order_relaxed);
}

static int handle_events(struct ved *d, int timeout_ms)
{
	struct epoll_event ev[64];
	int n = epoll_wait(d->epfd, ev, 64, timeout_ms);
	int stop = 0;
	for (int i = 0; i < n; i++) {
		uint32_t kind = (uint32_t)(ev[i].data.u64 >> 32), idx = (uint32_t)ev[i].data.u64;
		if (kind == TAG_LISTEN) {
			on_accept(d);
		} else if (kind == TAG_SIGNAL) {
			struct signalfd_siginfo si = {0};
			if (read(d->sigfd, &si, sizeof(si)) == sizeof(si) &&
			    si.ssi_signo == SIGHUP) {
				char msg[VE_CTL_TEXT_MAX];
				ops_reload(d, msg, sizeof(msg));
			} else if (si.ssi_signo) {
				VE_INFO("ved: %s: shutting down", strsignal((int)si.ssi_signo));
				stop = 1;
			}
		} else if (kind == TAG_CONN && idx < MAX_CONNS && d->conn[idx].used) {
			on_conn(d, &d->conn[idx], ev[i].events);
		} else if (kind == TAG_HTTP) {
			ved_http_event(d->http, idx, ev[i].events, ve__now_ns());
		} else if (kind == TAG_BELL && idx < MAX_CONNS && d->conn[idx].registered) {
			uint64_t v;
			ssize_t r = read(d->conn[idx].efd, &v, sizeof(v));
			(void)r;
		}
	}
	return stop;
}

/* One line that benchmarks read (bench/gpu): how often grants changed and
 * how long handing SMs over took (a grant taken away -> its SMs drained). */
static void log_grant_stats(struct ved *d)
{
	if (!d->srv || !ve_coord_grant_mode(ve_serve_coord(d->srv)))
		return;
	struct ve_coord_stats st;
	ve_coord_stats(ve_serve_coord(d->srv), &st);
	VE_INFO("ved: grants: %llu ticks, %llu changes, %llu reclaims, reclaim_us p50 %.1f p99 "
		"%.1f max %.1f; %llu lends, %llu taken back",
		(unsigned long long)st.ticks, (unsigned long long)st.grant_changes,
		(unsigned long long)st.reclaims, (double)st.reclaim_ns_p50 / 1e3,
		(double)st.reclaim_ns_p99 / 1e3, (double)st.reclaim_ns_max / 1e3,
		(unsigned long long)st.lends, (unsigned long long)st.lend_takes);
}

static void shutdown_clients(struct ved *d)
{
	log_grant_stats(d);
	for (uint32_t id = 0; id < VE_COORD_MAX_CLIENTS; id++) {
		struct vconn *c = d->by_id[id];
		if (!c)
			continue;
		/* Best effort: the socket's EOF tells them anyway. */
		struct ve_rec r;
		ve_rec_init(&r, VE_REC_SHUTDOWN);
		ve_serve_flush(d->srv, id, &c->out);
		struct ve_serve_client_info ci;
		ve_serve_client_info(d->srv, id, &ci);
		r.seq = (uint32_t)ci.records_out;
		ve_ring_push(&c->out, &r, 1);
		conn_close(d, c, "ved shutting down", false);
	}
	for (uint32_t i = 0; i < MAX_CONNS; i++)
		if (d->conn[i].used)
			conn_close(d, &d->conn[i], "ved shutting down", false);
}

/* Grant mode: applies each client's report (sequence lock, ipc/ctl.h),
 * lets the coordinator tick (on its clock, or now when a client waits),
 * and publishes every grant that changed. A client whose heartbeat stopped
 * for stale_ms (a stopped process) has its grant taken back; it gets one
 * again once it answers. Returns the changes seen. */
/* A word the client reads, stored only when it changed ('pub': what was
 * stored last), so an unchanged word costs its cache line nothing. */
static void publish_u32(_Atomic uint32_t *word, uint32_t *pub, uint32_t v)
{
	if (v == *pub)
		return;
	atomic_store_explicit(word, v, memory_order_relaxed);
	*pub = v;
}

static int grants(struct ved *d, uint64_t now)
{
	struct ve_coord *co = ve_serve_coord(d->srv);
	if (!ve_coord_grant_mode(co))
		return 0;
	int work = 0;
	bool urgent = false;
	uint32_t n = nprocs(d);
	for (uint32_t id = 0; id < VE_COORD_MAX_CLIENTS; id++) {
		struct vconn *c = d->by_id[id];
		if (!c)
			continue;
		struct ve_ved_words *w = c->w;
		uint64_t b = ve_shm_peer_beat(&c->shm, VE_SIDE_COORD);
		if (b != c->beat) {
			c->beat = b;
			c->beat_ns = now;
			if (c->stale) {
				c->stale = false;
				ve_coord_client_pause(co, id, false);
				VE_INFO("ved: client %u (pid %d) answers again", id, (int)c->pid);
			}
		} else if (!c->stale && d->cfg.stale_ms &&
			   now - c->beat_ns > (uint64_t)d->cfg.stale_ms * 1000000ull) {
			c->stale = true;
			ve_coord_client_pause(co, id, true);
			VE_WARN("ved: client %u (pid %d) stopped answering for %u ms: its grant is "
				"taken back until it does",
				id, (int)c->pid, d->cfg.stale_ms);
		}
		if (atomic_load_explicit(&w->urgent, memory_order_relaxed)) {
			atomic_store_explicit(&w->urgent, 0, memory_order_relaxed);
			urgent = true;
		}
		/* A (pairs with the client's release store of the even value). */
		uint32_t s1 = atomic_load_explicit(&w->rep_seq, memory_order_acquire);
		if (s1 == c->rep_seen || (s1 & 1))
			continue;
		struct ve_grant_report r;
		memset(&r, 0, sizeof(r));
		r.demand.ready = atomic_load_explicit(&w->ready, memory_order_acquire);
		r.demand.inflight = atomic_load_explicit(&w->inflight, memory_order_acquire);
		r.demand.want_sms = atomic_load_explicit(&w->want_sms, memory_order_acquire);
		r.demand.min_sms = atomic_load_explicit(&w->min_sms, memory_order_acquire);
		r.demand.flags = atomic_load_explicit(&w->flags, memory_order_acquire);
		r.demand.entry = (uint16_t)atomic_load_explicit(&w->entry, memory_order_acquire);
		r.demand.active_ns = atomic_load_explicit(&w->active_ns, memory_order_acquire);
		r.demand.deadline_ns = atomic_load_explicit(&w->deadline_ns, memory_order_acquire);
		/* The grant word carries the low 32 bits of the generation:
		 * the acknowledged one is the latest with those bits (it is
		 * never ahead of the coordinator's). */
		uint64_t ack32 = atomic_load_explicit(&w->ack_gen, memory_order_acquire);
		{
			uint16_t e0;
			uint64_t gnow = 0;
			ve_coord_grant(co, id, &e0, &gnow);
			r.ack_gen = ve_ved_gen_from32(gnow, ack32);
		}
		r.busy_leaves = atomic_load_explicit(&w->busy_leaves, memory_order_acquire);
		uint32_t op_us = atomic_load_explicit(&w->op_us, memory_order_acquire);
		r.demand.op_us = (uint16_t)(op_us > 65535 ? 65535 : op_us);
		/* The field loads are acquires: seq is read again after them. */
		if (atomic_load_explicit(&w->rep_seq, memory_order_relaxed) != s1)
			continue; /* torn: the client is writing; next pass */
		c->rep_seen = s1;
		/* The client's view of time is its own clock (CLOCK_MONOTONIC, as
		 * ours on one host); a value from the future is ignored. */
		if (r.demand.active_ns > now)
			r.demand.active_ns = now;
		if (r.demand.min_sms > VE_PROTO_MAX_SMS)
			r.demand.min_sms = VE_PROTO_MAX_SMS;
		ve_coord_report(co, id, &r);
		/* Waiting for a grant: from the first report that says so to
		 * the grant it gets (recorded below, where it is published). */
		bool waits = (r.demand.flags & VE_DEMAND_WAITING) ||
			     (r.demand.ready && r.demand.entry == VE_POOL_NONE);
		if (waits && !c->wait_since)
			c->wait_since = now;
		report_counts(d, c);
		work++;
	}
	work += ve_coord_tick(co, urgent);
	for (uint32_t id = 0; id < VE_COORD_MAX_CLIENTS; id++) {
		struct vconn *c = d->by_id[id];
		if (!c)
			continue;
		uint16_t e;
		uint64_t gen;
		ve_coord_grant(co, id, &e, &gen);
		uint64_t word = VE_VED_GRANT_WORD(gen, ve_coord_lend(co, id), e);
		if (word != c->grant_pub) {
			/* R (pairs with the client's acquire load). */
			atomic_store_explicit(&c->w->grant, word, memory_order_seq_cst);
			c->grant_pub = word;
			work++;

			if (e != VE_POOL_NONE && c->wait_since) {
				ve_serve_grant_activity(d->srv, id, 0, 0, 0,
							VE_MAX(now - c->wait_since, 1ull));
				c->wait_since = 0;
			}
		}
		/* A client asleep with nothing in flight reads its grant (stored
		 * above or earlier) before it submits again (ctl.h, client_idle):
		 * whatever was taken from it is drained. */
		if (atomic_load_explicit(&c->w->client_idle, memory_order_seq_cst))
			ve_coord_client_drained(co, id);
		/* Others run or may want SMs back: short submit-ahead. Not
		 * while this client settled into sharing one entry with them
		 * (ve_coord_share_settled): nothing is taken back there. */
		uint32_t ct = n > 1 && !ve_coord_share_settled(co, id);
		publish_u32(&c->w->contended, &c->contended_pub, ct);
		publish_u32(&c->w->others, &c->others_pub, n - 1);
	}
	return work;
}

static void run(struct ved *d)
{
	uint64_t spin_ns = (uint64_t)d->cfg.spin_us * 1000ull;
	uint64_t last_work = ve__now_ns();
	uint32_t spins = 0;
	for (;;) {
		int work = 0;
		uint64_t now = ve__now_ns();
		if (d->srv) {
			for (uint32_t id = 0; id < VE_COORD_MAX_CLIENTS; id++)
				if (d->by_id[id])
					work += pump(d, d->by_id[id]);
			work += grants(d, now);
			struct ve_coord *co = ve_serve_coord(d->srv);
			bool tick = now >= d->next_tick && ve_coord_view(co)->nready;
			if (ve_serve_dirty(d->srv) || tick) {
				work += ve_serve_schedule(d->srv);
				d->next_tick = now + 1000000ull; /* time-based policies: 1 ms */
			}
			work += flush_all(d);
		}
		periodic(d, now);
		if (work) {
			last_work = now;
			/* Sockets still get a look while records keep coming. */
			if (++spins % 1024 == 0 && handle_events(d, 0))
				return;
			continue;
		}
		if (now - last_work < spin_ns) {
			ve__cpu_relax();
			/* After 5 us, yield now and then: on a busy machine the
			 * client we wait for may share our CPU, and spinning would
			 * keep it from sending what we wait for (yield returns at
			 * once if nothing else is runnable here). */
			if (++spins % 16 == 0 && now - last_work > 5000)
				sched_yield();
			if (spins % 256 == 0 && handle_events(d, 0))
				return;
			continue;
		}
		int timeout = (int)d->cfg.heartbeat_ms;
		if (d->srv && (any_queued(d) || ve_coord_view(ve_serve_coord(d->srv))->nready))
			timeout = 1; /* a full ring to drain, or a tick for waiting ops */
		if (d->srv && d->nregistered && ve_coord_grant_mode(ve_serve_coord(d->srv)))
			timeout = 1; /* grant ticks; a client that waits rings the doorbell */
		if (!announce_sleep(d)) {
			end_sleep(d);
			last_work = ve__now_ns();
			continue;
		}
		d->sleeps++;
		int stop = handle_events(d, timeout);
		end_sleep(d);
		d->wakeups++;
		last_work = ve__now_ns();
		if (stop)
			return;
	}
}

/* ------------------------------------------------------------------ main */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: ved [--config PATH] [--socket PATH] [--device N] [--check-config]\n"
		"The Vitamin-E daemon: one per GPU device; arbitrates pool leases among the\n"
		"processes that run under the shim (docs/daemon.md).\n"
		"  -c, --config PATH   configuration file (default %s, if it exists)\n"
		"  -s, --socket PATH   control socket (default: $XDG_RUNTIME_DIR/vitamin-e/\n"
		"                      ved-<device>.sock, else /tmp/vitamin-e-<uid>/...)\n"
		"  -d, --device N      CUDA device served\n"
		"      --check-config  validate the configuration and exit\n"
		"      --version       release, commit, CUDA headers, driver found\n"
		"  -h, --help          this text\n",
		VED_DEFAULT_CONFIG);
	ved_config_usage(f);
}

int main(int argc, char **argv)
{
	static struct ved D;
	struct ved *d = &D;
	struct ved_overrides ov = {0};
	bool check_only = false;
	static const struct option opts[] = {
	    {"config", required_argument, 0, 'c'}, {"socket", required_argument, 0, 's'},
	    {"device", required_argument, 0, 'd'}, {"check-config", no_argument, 0, 'C'},
	    {"help", no_argument, 0, 'h'},	   {"version", no_argument, 0, 'V'},
	    {0, 0, 0, 0}};
	int o;
	while ((o = getopt_long(argc, argv, "c:s:d:h", opts, NULL)) != -1) {
		switch (o) {
		case 'c':
			ov.config = optarg;
			break;
		case 's':
			ov.socket = optarg;
			break;
		case 'd': {
			uint64_t v;
			if (ve__parse_u64(optarg, &v) || v > 1024) {
				fprintf(stderr, "ved: --device %s: not a device number\n", optarg);
				return 2;
			}
			ov.device = (int)v;
			ov.device_set = true;
			break;
		}
		case 'C':
			check_only = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			ve_version_print(stdout, "ved");
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "ved: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	ve__log_init();
	if (ved_config_load(&d->cfg, &ov))
		return 2;
	ve__log_level = d->cfg.log_level;
	/* Validate the policy (name, arguments) and the profile now, with the
	 * configured leaves or an H200-like split, even if the real pool comes
	 * with the first client. */
	char err[512];
	{
		uint32_t probe[VE_CTL_MAX_LEAVES], np = d->cfg.nleaves;
		if (np)
			memcpy(probe, d->cfg.leaf_sms, np * sizeof(uint32_t));
		else
			ved_parse_leaves("15x8,12", probe, &np);
		struct ve_serve_config sc = {
		    .coord = {.leaf_sms = probe,
			      .nleaves = np,
			      .max_entries = d->cfg.pool_entries,
			      .max_clients = d->cfg.max_clients,
			      .policy = d->cfg.policy,
			      .profile_path = d->cfg.profile[0] ? d->cfg.profile : NULL},
		    .client_ops = 64};
		struct ve_serve *tmp;
		int rc = ve_serve_create(&sc, &tmp, err, sizeof(err));
		if (rc) {
			fprintf(stderr, "ved: policy / profile / leaves / pool_entries: %s\n", err);
			return 2;
		}
		ve_serve_destroy(tmp);
	}
	if (check_only) {
		/* Say where the keys came from: the file alone may not be it. */
		int nenv = 0;
		for (char **e = environ; e && *e; e++)
			nenv += strncmp(*e, "VE_VED_", 7) == 0 && strncmp(*e, "VE_VED_TEST_", 12) != 0;
		printf("ved: configuration ok (%s%s", d->cfg.config_path[0] ? d->cfg.config_path : "defaults",
		       nenv ? ", with " : ")\n");
		if (nenv)
			printf("%d VE_VED_* variable%s)\n", nenv, nenv == 1 ? "" : "s");
		return 0;
	}
	d->lfd = d->lockfd = d->devlockfd = d->epfd = d->sigfd = -1;
	for (uint32_t i = 0; i < MAX_CONNS; i++)
		d->conn[i].fd = d->conn[i].efd = -1;
	signal(SIGPIPE, SIG_IGN);
	sigset_t ss;
	sigemptyset(&ss);
	sigaddset(&ss, SIGTERM);
	sigaddset(&ss, SIGINT);
	sigaddset(&ss, SIGHUP);
	sigprocmask(SIG_BLOCK, &ss, NULL);
	d->sigfd = signalfd(-1, &ss, SFD_NONBLOCK | SFD_CLOEXEC);
	d->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (d->sigfd < 0 || d->epfd < 0 || listen_socket(d)) {
		cleanup_files(d);
		return 1;
	}
	if (ops_start(d, &ov)) {
		cleanup_files(d);
		return 2;
	}
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = tag(TAG_LISTEN, 0)};
	epoll_ctl(d->epfd, EPOLL_CTL_ADD, d->lfd, &ev);
	ev.data.u64 = tag(TAG_SIGNAL, 0);
	epoll_ctl(d->epfd, EPOLL_CTL_ADD, d->sigfd, &ev);
	d->start_ns = d->rate_ns = ve__now_ns();
	if (d->cfg.nleaves &&
	    make_serve(d, d->cfg.leaf_sms, d->cfg.nleaves, d->cfg.pool_entries, err, sizeof(err))) {
		fprintf(stderr, "ved: %s\n", err);
		cleanup_files(d);
		return 2;
	}
	char mps[512];
	d->mps = ve_mps_probe(mps, sizeof(mps));
	VE_INFO("ved %d: serving device %d on %s (policy %s%s%s, max %u clients, %u ops each%s); "
		"%s",
		(int)getpid(), d->cfg.device, d->cfg.socket, d->cfg.policy,
		d->cfg.nleaves ? ", " : ", pool from the first client",
		d->cfg.nleaves ? d->pool_desc : "", d->cfg.max_clients, d->cfg.client_ops,
		d->cfg.check ? ", self-check on" : "", mps);
	prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
	run(d);
	if (d->srv)
		shutdown_clients(d);
	cleanup_files(d);
	ved_http_destroy(d->http);
	ved_metrics_destroy(d->met);
	ve_serve_destroy(d->srv);
	VE_INFO("ved: stopped");
	return 0;
}
