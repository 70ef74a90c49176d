/* SPDX-License-Identifier: MIT */
/* The ved control socket: message checks, paths, connect/send/recv, MPS probe (ctl.h). */
#include "ipc/ctl.h"
#include "ipc/fdpass.h"
#include "util/util.h"

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* ------------------------------------------------------------------ checks */

static int zero(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint8_t acc = 0;
	for (size_t i = 0; i < n; i++)
		acc |= b[i];
	return acc == 0;
}

#define ZERO(field) zero(&(field), sizeof(field))

/* NUL-terminated inside the array, and nothing but zeros after the NUL, so
 * two encodings of one string cannot differ (and nothing hides behind it). */
static int str_ok(const char *s, size_t cap)
{
	size_t n = strnlen(s, cap);
	if (n == cap)
		return 0;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] == 0x7f)
			return 0;
	return zero(s + n, cap - n);
}

static int check_hello(const struct ve_ctl_hello *m)
{
	if (m->h.flags || m->ipc_version == 0 || m->device < 0 || m->device > 1024)
		return -EINVAL;
	if ((m->class_flags & ~VE_CTL_CLASS_MASK) || m->nleaves == 0 ||
	    m->nleaves > VE_CTL_MAX_LEAVES || m->max_entries > VE_CTL_MAX_ENTRIES)
		return -EINVAL;
	if (m->sm_count > 65536 || m->ring_records > (1u << 24))
		return -EINVAL;
	for (uint32_t i = 0; i < VE_CTL_MAX_LEAVES; i++) {
		uint32_t s = m->leaf_sms[i];
		if (i < m->nleaves ? (s == 0 || s > 1024) : s != 0)
			return -EINVAL;
	}
	if (!str_ok(m->name, sizeof(m->name)) || !ZERO(m->rsvd) || m->failovers > (1u << 30))
		return -EINVAL;
	return 0;
}

static int check_welcome(const struct ve_ctl_welcome *m)
{
	if (m->h.flags || m->client_id < 0 || m->client_id >= VE_CTL_MAX_CLIENTS)
		return -EINVAL;
	if (m->client_ops == 0 || m->ring_records == 0 || m->heartbeat_ms == 0 ||
	    m->nentries == 0 || m->nentries > VE_CTL_MAX_ENTRIES || m->mps > VE_MPS_ELSEWHERE)
		return -EINVAL;
	if (!str_ok(m->policy, sizeof(m->policy)) || !ZERO(m->rsvd))
		return -EINVAL;
	return 0;
}

static int check_refuse(const struct ve_ctl_refuse *m)
{
	if (m->h.flags || m->status >= 0 || m->status < -4095 || m->rsvd)
		return -EINVAL;
	return str_ok(m->msg, sizeof(m->msg)) ? 0 : -EINVAL;
}

static int check_entry(const struct ve_ctl_entry *e)
{
	if (e->state > 3 || e->kind > 3 || e->gate_open > 1 || e->nsharers > VE_CTL_MAX_SHARERS)
		return -EINVAL;
	if (e->holder < -2 || e->holder >= VE_CTL_MAX_CLIENTS || e->reserve_for < -1 ||
	    e->reserve_for >= VE_CTL_MAX_CLIENTS || e->rsvd)
		return -EINVAL;
	for (int i = 0; i < VE_CTL_MAX_SHARERS; i++)
		if (i < e->nsharers ? (e->sharers[i] < 0 || e->sharers[i] >= VE_CTL_MAX_CLIENTS)
				    : e->sharers[i] != -1)
			return -EINVAL;
	return 0;
}

static int check_client(const struct ve_ctl_client *c)
{
	if (c->id < 0 || c->id >= VE_CTL_MAX_CLIENTS || (c->class_flags & ~VE_CTL_CLASS_MASK) ||
	    (c->grant_entry >= VE_CTL_MAX_ENTRIES && c->grant_entry != 0xffff) ||
	    c->granted_sms > 4096)
		return -EINVAL;
	if (!(c->ops_per_s >= 0 && c->ops_per_s < 1e12)) /* also refuses NaN */
		return -EINVAL;
	return str_ok(c->name, sizeof(c->name)) ? 0 : -EINVAL;
}

static int check_status(const struct ve_ctl_status *m, size_t len)
{
	if ((m->h.flags & ~VE_CTL_F_DRAINING) || m->nentries > VE_CTL_MAX_ENTRIES || m->nclients > VE_CTL_MAX_CLIENTS ||
	    m->max_clients > VE_CTL_MAX_CLIENTS || m->mps > VE_MPS_ELSEWHERE ||
	    m->nleaves > VE_CTL_MAX_LEAVES)
		return -EINVAL;
	if (len != sizeof(*m) + m->nentries * sizeof(struct ve_ctl_entry) +
		       m->nclients * sizeof(struct ve_ctl_client))
		return -EINVAL;
	if (!str_ok(m->policy, sizeof(m->policy)) ||
	    !(m->records_per_s >= 0 && m->records_per_s < 1e15))
		return -EINVAL;
	const struct ve_ctl_entry *e = (const void *)(m + 1);
	for (uint32_t i = 0; i < m->nentries; i++)
		if (check_entry(&e[i]))
			return -EINVAL;
	const struct ve_ctl_client *c = (const void *)(e + m->nentries);
	for (uint32_t i = 0; i < m->nclients; i++)
		if (check_client(&c[i]))
			return -EINVAL;
	return 0;
}

static int check_trace(const struct ve_ctl_trace *m, size_t len)
{
	if ((m->h.flags & ~(VE_CTL_F_LAST | VE_CTL_F_GAP)) || m->nevents > VE_CTL_TRACE_CHUNK)
		return -EINVAL;
	if (len != sizeof(*m) + m->nevents * sizeof(struct ve_ctl_tev))
		return -EINVAL;
	const struct ve_ctl_tev *ev = (const void *)(m + 1);
	for (uint32_t i = 0; i < m->nevents; i++)
		if (ev[i].kind < VE_TEV_OP || ev[i].kind > VE_TEV_RESERVE ||
		    ev[i].t1_ns < ev[i].t0_ns || (ev[i].flags & ~VE_TEV_F_OPEN) ||
		    !ZERO(ev[i].rsvd))
			return -EINVAL;
	return 0;
}

static int check_admin(const struct ve_ctl_admin *m)
{
	if (m->h.flags || m->status > 0 || m->status < -4095 || m->draining > 1 || m->rsvd ||
	    m->nclients > VE_CTL_MAX_CLIENTS)
		return -EINVAL;
	return str_ok(m->msg, sizeof(m->msg)) ? 0 : -EINVAL;
}

static int check_profile(const struct ve_ctl_profile *m, size_t len)
{
	if ((m->h.flags & ~VE_CTL_F_LAST) || m->nbytes > VE_CTL_PROFILE_CHUNK ||
	    len != sizeof(*m) + m->nbytes || m->total < m->nbytes)
		return -EINVAL;
	return memchr(m + 1, 0, m->nbytes) ? -EINVAL : 0;
}

int ve_ctl_check(const void *buf, size_t len, int dir)
{
	struct ve_ctl_hdr h;
	if (!buf || len < sizeof(h) || len > VE_CTL_MAX_MSG)
		return -EINVAL;
	/* Messages are read in place: the caller's buffer must be aligned as
	 * the structs are (a recv buffer is; a fuzzer's bytes are copied first). */
	if ((uintptr_t)buf % 8)
		return -EINVAL;
	memcpy(&h, buf, sizeof(h));
	if (h.magic != VE_CTL_MAGIC)
		return -EINVAL;
	if (h.version != VE_CTL_VERSION)
		return -EPROTO;
	if (h.len != len)
		return -EINVAL;
	const void *m = buf;
	int to_ved = dir == VE_CTL_TO_VED;
	if (dir != VE_CTL_TO_VED && dir != VE_CTL_FROM_VED)
		return -EINVAL;
	switch (h.type) {
	case VE_CTL_HELLO:
		return to_ved && len == sizeof(struct ve_ctl_hello) ? check_hello(m) : -EINVAL;
	case VE_CTL_STATUS_REQ: {
		const struct ve_ctl_status_req *q = m;
		return to_ved && len == sizeof(*q) && !h.flags && ZERO(q->rsvd) ? 0 : -EINVAL;
	}
	case VE_CTL_TRACE_REQ: {
		const struct ve_ctl_trace_req *q = m;
		return to_ved && len == sizeof(*q) && !h.flags && ZERO(q->rsvd) ? 0 : -EINVAL;
	}
	case VE_CTL_PROFILE_REQ:
	case VE_CTL_METRICS_REQ: {
		const struct ve_ctl_profile_req *q = m;
		return to_ved && len == sizeof(*q) && !h.flags && ZERO(q->rsvd) ? 0 : -EINVAL;
	}
	case VE_CTL_ADMIN_REQ: {
		const struct ve_ctl_admin_req *q = m;
		return to_ved && len == sizeof(*q) && !h.flags && ZERO(q->rsvd) &&
			       q->op >= VE_ADMIN_DRAIN && q->op <= VE_ADMIN_RELOAD
			   ? 0
			   : -EINVAL;
	}
	case VE_CTL_ADMIN:
		return !to_ved && len == sizeof(struct ve_ctl_admin) ? check_admin(m) : -EINVAL;
	case VE_CTL_WELCOME:
		return !to_ved && len == sizeof(struct ve_ctl_welcome) ? check_welcome(m) : -EINVAL;
	case VE_CTL_DOORBELL: {
		const struct ve_ctl_doorbell *d = m;
		return !to_ved && len == sizeof(*d) && !h.flags && ZERO(d->rsvd) ? 0 : -EINVAL;
	}
	case VE_CTL_REFUSE:
		return !to_ved && len == sizeof(struct ve_ctl_refuse) ? check_refuse(m) : -EINVAL;
	case VE_CTL_STATUS:
		return !to_ved && len >= sizeof(struct ve_ctl_status) ? check_status(m, len)
								      : -EINVAL;
	case VE_CTL_TRACE:
		return !to_ved && len >= sizeof(struct ve_ctl_trace) ? check_trace(m, len)
								     : -EINVAL;
	case VE_CTL_PROFILE:
	case VE_CTL_METRICS:
		return !to_ved && len >= sizeof(struct ve_ctl_profile) ? check_profile(m, len)
								       : -EINVAL;
	}
	return -EINVAL;
}

const char *ve_ctl_type_name(unsigned type)
{
	static const char *const n[] = {"?",	      "HELLO",	"WELCOME",   "DOORBELL", "REFUSE",
					"STATUS_REQ", "STATUS", "TRACE_REQ", "TRACE",
					"PROFILE_REQ", "PROFILE", "METRICS_REQ", "METRICS",
					"ADMIN_REQ", "ADMIN"};
	return type < sizeof(n) / sizeof(n[0]) ? n[type] : "?";
}

void ve_ctl_hdr_init(struct ve_ctl_hdr *h, uint16_t type, uint32_t len)
{
	*h = (struct ve_ctl_hdr){
	    .magic = VE_CTL_MAGIC, .version = VE_CTL_VERSION, .type = type, .len = len};
}

/* ------------------------------------------------------------------ paths */

int ve_ctl_host_device(int ordinal)
{
	const char *v = getenv("CUDA_VISIBLE_DEVICES");
	if (!v || !*v || ordinal < 0)
		return ordinal;
	/* Indices only ("2,3"); UUIDs or MIG names leave the ordinal as it is. */
	int k = 0;
	for (const char *p = v; *p;) {
		char *end;
		long d = strtol(p, &end, 10);
		if (end == p || d < 0 || d > 1024 || (*end && *end != ','))
			return ordinal;
		if (k++ == ordinal)
			return (int)d;
		p = *end ? end + 1 : end;
	}
	return ordinal;
}

int ve_ctl_default_path(int device, char *buf, size_t len)
{
	device = ve_ctl_host_device(device);
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	const char *dir = getenv("VE_SOCKET_DIR");
	int n;
	if (dir && dir[0] == '/')
		n = snprintf(buf, len, "%s/ved-%d.sock", dir, device);
	else if (xdg && xdg[0] == '/')
		n = snprintf(buf, len, "%s/vitamin-e/ved-%d.sock", xdg, device);
	else
		n = snprintf(buf, len, "/tmp/vitamin-e-%u/ved-%d.sock", (unsigned)getuid(), device);
	struct sockaddr_un sa;
	if (n < 0 || (size_t)n >= len || (size_t)n >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	return 0;
}

int ve_ctl_lock_path(const char *sock, char *buf, size_t len)
{
	size_t n = strlen(sock);
	if (n > 5 && strcmp(sock + n - 5, ".sock") == 0)
		n -= 5;
	int k = snprintf(buf, len, "%.*s.lock", (int)n, sock);
	return k < 0 || (size_t)k >= len ? -ENAMETOOLONG : 0;
}

/* ------------------------------------------------------------------ socket */

/* Is the folder of 'path' one that only trusted users can write, so that
 * nobody else could have put (or swapped) a socket there? The default folder
 * must be the user's own (ved makes it 0700): another user who created
 * /tmp/vitamin-e-<uid> first would otherwise serve this user's processes
 * (as ssh-agent and tmux check their folders). A folder given explicitly
 * may belong to another user (ved's 'group' setting): its owner is then
 * trusted to run the ved. *trusted gets that uid. */
static int check_folder(const char *path, uid_t *trusted, char *err, size_t errlen)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)], def[sizeof(dir)];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (!slash) {
		snprintf(dir, sizeof(dir), ".");
	} else if (slash == dir) {
		dir[1] = 0;
	} else {
		*slash = 0;
	}
	bool is_default = false;
	if (ve_ctl_default_path(0, def, sizeof(def)) == 0) {
		char *ds = strrchr(def, '/');
		if (ds)
			*ds = 0;
		is_default = strcmp(def, dir) == 0;
	}
	struct stat st;
	if (stat(dir, &st) < 0)
		return -errno; /* no folder: no ved there (-ENOENT) */
	uid_t me = getuid();
	if (!S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "%s is not a folder", dir);
		return -ENOTDIR;
	}
	if (is_default && st.st_uid != me && st.st_uid != 0) {
		snprintf(err, errlen,
			 "%s belongs to uid %u, not to you (uid %u): another user may have made it "
			 "to serve your processes; not connecting (remove it, or set "
			 "XDG_RUNTIME_DIR)",
			 dir, (unsigned)st.st_uid, (unsigned)me);
		return -EPERM;
	}
	if ((st.st_mode & 022) && !(st.st_mode & S_ISVTX)) {
		snprintf(err, errlen,
			 "%s is writable by other users (mode %o): anyone could have put the socket "
			 "there; not connecting (ved makes it 0700)",
			 dir, (unsigned)(st.st_mode & 07777));
		return -EPERM;
	}
	if (st.st_mode & 022) {
		/* A shared sticky folder (/tmp): only the socket's owner could have
		 * made it, so trust goes to that owner if it is someone we trust. */
		struct stat ss;
		if (lstat(path, &ss) < 0)
			return -errno;
		if (ss.st_uid != me && ss.st_uid != 0) {
			snprintf(err, errlen,
				 "%s sits in the shared folder %s and belongs to uid %u, not to you; "
				 "not connecting",
				 path, dir, (unsigned)ss.st_uid);
			return -EPERM;
		}
		*trusted = ss.st_uid;
		return 0;
	}
	*trusted = st.st_uid;
	return 0;
}

int ve_ctl_connect_checked(const char *path, char *err, size_t errlen)
{
	char dummy[8];
	if (!err) {
		err = dummy;
		errlen = sizeof(dummy);
	}
	err[0] = 0;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (!path || strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	uid_t trusted = 0;
	int rc = check_folder(path, &trusted, err, errlen);
	if (rc)
		return rc;
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	do
		rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	while (rc < 0 && errno == EINTR);
	if (rc < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	/* The server too must be who it should be: this user, root, or the
	 * owner of the folder given explicitly (credentials as of its listen). */
	struct ucred cr;
	socklen_t len = sizeof(cr);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	if (cr.uid != getuid() && cr.uid != 0 && cr.uid != trusted) {
		snprintf(err, errlen,
			 "the process serving %s (pid %d) runs as uid %u, neither you nor root nor "
			 "the folder's owner; not using it",
			 path, (int)cr.pid, (unsigned)cr.uid);
		close(fd);
		return -EPERM;
	}
	return fd;
}

int ve_ctl_connect(const char *path)
{
	char err[512];
	int fd = ve_ctl_connect_checked(path, err, sizeof(err));
	if (fd == -EPERM || fd == -ENOTDIR)
		VE_WARN("%s", err);
	return fd;
}

int ve_ctl_send(int fd, const void *msg, size_t len)
{
	ssize_t n;
	do
		n = send(fd, msg, len, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EMSGSIZE;
}

int ve_ctl_recv(int fd, void *buf, size_t cap, int *fd_out, int timeout_ms)
{
	if (fd_out)
		*fd_out = -1;
	struct pollfd p = {.fd = fd, .events = POLLIN};
	int rc;
	do
		rc = poll(&p, 1, timeout_ms);
	while (rc < 0 && errno == EINTR);
	if (rc < 0)
		return -errno;
	if (rc == 0)
		return -ETIMEDOUT;
	int got = -1;
	rc = ve_fd_recv(fd, &got, buf, cap);
	if (rc == -ECONNRESET) {
		/* A peer that closed with our message unread resets the connection;
		 * what it sent before (a REFUSE saying why) is still queued, and the
		 * next read returns it (or 0, never blocking: the peer is gone). */
		int again = ve_fd_recv(fd, &got, buf, cap);
		if (again > 0)
			rc = again;
	}
	if (rc < 0)
		return rc;
	if (got >= 0) {
		if (fd_out)
			*fd_out = got;
		else
			close(got);
	}
	return rc;
}

/* ------------------------------------------------------------------ MPS */

/* True if a process whose argv[0] ends in 'nvidia-cuda-mps-control' or
 * '-server' runs (comm is cut at 15 characters: "nvidia-cuda-mps"). */
static int mps_process(char *which, size_t len)
{
	DIR *d = opendir("/proc");
	if (!d)
		return 0;
	int found = 0;
	struct dirent *de;
	while (!found && (de = readdir(d))) {
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		char path[64], comm[32];
		snprintf(path, sizeof(path), "/proc/%.20s/comm", de->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		int ok = fgets(comm, sizeof(comm), f) != NULL;
		fclose(f);
		if (!ok || strncmp(comm, "nvidia-cuda-mps", 15) != 0)
			continue;
		char cmd[256] = "";
		snprintf(path, sizeof(path), "/proc/%.20s/cmdline", de->d_name);
		f = fopen(path, "r");
		if (f) {
			size_t n = fread(cmd, 1, sizeof(cmd) - 1, f);
			cmd[n] = 0;
			fclose(f);
		}
		const char *base = strrchr(cmd, '/');
		base = base ? base + 1 : cmd;
		snprintf(which, len, "%s (pid %.20s)", *base ? base : "nvidia-cuda-mps",
			 de->d_name);
		found = 1;
	}
	closedir(d);
	return found;
}

bool ve__mps_control_present(const char *dir)
{
	char pipe[512];
	struct stat st;
	if (snprintf(pipe, sizeof(pipe), "%s/control", dir) >= (int)sizeof(pipe))
		return false;
	/* A FIFO with older drivers; a Unix socket with the H200's driver 580
	 * (seen 2026-12-03: every MPS run then warned that clients would not
	 * find a daemon they were in fact under). */
	return stat(pipe, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode));
}

int ve_mps_probe(char *detail, size_t len)
{
	char dummy[8];
	if (!detail) {
		detail = dummy;
		len = sizeof(dummy);
	}
	const char *dir = getenv("CUDA_MPS_PIPE_DIRECTORY");
	if (!dir || !*dir)
		dir = "/tmp/nvidia-mps";
	char pipe[512], which[300] = "";
	snprintf(pipe, sizeof(pipe), "%s/control", dir);
	int fifo = ve__mps_control_present(dir);
	int proc = mps_process(which, sizeof(which));
	if (proc && fifo) {
		snprintf(detail, len, "MPS is running: %s, control pipe %s", which, pipe);
		return VE_MPS_RUNNING;
	}
	if (proc) {
		snprintf(detail, len,
			 "%s runs, but its control pipe is not %s: set CUDA_MPS_PIPE_DIRECTORY to "
			 "the directory it was started with",
			 which, pipe);
		return VE_MPS_ELSEWHERE;
	}
	snprintf(detail, len, "no MPS control daemon or server runs%s%s",
		 fifo ? " (stale pipe " : "", fifo ? pipe : "");
	if (fifo && strlen(detail) + 2 < len)
		strcat(detail, ")");
	return VE_MPS_NONE;
}

const char *ve_mps_state_name(int state)
{
	switch (state) {
	case VE_MPS_NONE:
		return "none";
	case VE_MPS_RUNNING:
		return "running";
	case VE_MPS_ELSEWHERE:
		return "elsewhere";
	}
	return "unknown";
}
