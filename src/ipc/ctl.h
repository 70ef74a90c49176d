/* SPDX-License-Identifier: MIT */
/*
 * The ved control socket (docs/daemon.md, "Control protocol").
 *
 * One AF_UNIX SOCK_SEQPACKET socket per device: every message is one
 * datagram, so there is no framing to get wrong, a hang-up is seen as EOF by
 * the peer (liveness) and SO_PEERCRED names who connected. Messages are
 * fixed-layout structs in host order behind a common header; the variable
 * ones (STATUS, TRACE) end in arrays whose counts the header's length must
 * match exactly.
 *
 *   client -> ved   HELLO       register: versions, pid, device, pool shape
 *                               and fingerprint, class, name
 *   ved -> client   WELCOME     accepted: client id, limits, policy; carries
 *                               the segment's memfd (SCM_RIGHTS)
 *                   DOORBELL    carries the client's eventfd (second message:
 *                               fdpass.h takes one fd per message)
 *                   REFUSE      refused: -errno and a message for the user
 *   tool -> ved     STATUS_REQ  / TRACE_REQ / PROFILE_REQ / METRICS_REQ / ADMIN_REQ
 *   ved -> tool     STATUS      pool entries and clients (with their grants);
 *                               VE_CTL_F_DRAINING while ved admits no new client
 *                   TRACE       recent events, in chunks; the last is flagged
 *                   PROFILE     the scaling profiles ved refined online (the
 *                               text of docs/profiles.md), in chunks; the last
 *                               is flagged. A client saving VE_PROFILE_OUT asks
 *                               on a connection of its own, as a tool does.
 *                   METRICS     the Prometheus text ved's HTTP endpoint serves
 *                               (docs/operations.md), in chunks like PROFILE
 *                   ADMIN       the answer to ADMIN_REQ (drain, resume, reload):
 *                               a status and a sentence
 *
 * A registered client's connection carries nothing after DOORBELL: it stays
 * open as the liveness signal in both directions (EOF or error = peer gone).
 *
 * ve_ctl_check() validates any received bytes (pure, the fuzz target's second
 * half): magic, version, exact length, direction, every count, every string
 * NUL-terminated within its array, reserved fields zero.
 */
#ifndef VE_IPC_CTL_H
#define VE_IPC_CTL_H

#include "ipc/proto.h"
#include "ipc/shm.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define VE_CTL_MAGIC	   0x43444556u /* bytes 'V' 'E' 'D' 'C' */
#define VE_CTL_VERSION	   4u /* 2: grant words in the segment; 3: late ops per client; 4: lends (grant word, status) */
#define VE_CTL_MAX_MSG	   65536u /* the largest message either side accepts */
#define VE_CTL_NAME_MAX	   64
#define VE_CTL_TEXT_MAX	   256
#define VE_CTL_MAX_LEAVES  64
#define VE_CTL_MAX_ENTRIES 256
#define VE_CTL_MAX_CLIENTS 64
#define VE_CTL_MAX_SHARERS 8
#define VE_CTL_TRACE_CHUNK 512 /* events per TRACE message */
#define VE_CTL_PROFILE_CHUNK 60000 /* text bytes per PROFILE message */

enum ve_ctl_type {
	VE_CTL_HELLO = 1,
	VE_CTL_WELCOME = 2,
	VE_CTL_DOORBELL = 3,
	VE_CTL_REFUSE = 4,
	VE_CTL_STATUS_REQ = 5,
	VE_CTL_STATUS = 6,
	VE_CTL_TRACE_REQ = 7,
	VE_CTL_TRACE = 8,
	VE_CTL_PROFILE_REQ = 9,
	VE_CTL_PROFILE = 10,
	VE_CTL_METRICS_REQ = 11,
	VE_CTL_METRICS = 12,
	VE_CTL_ADMIN_REQ = 13,
	VE_CTL_ADMIN = 14,
};

/* Who sends: messages to ved and messages from ved are disjoint sets. */
enum ve_ctl_dir { VE_CTL_TO_VED = 0, VE_CTL_FROM_VED = 1 };

/* HELLO class_flags. */
#define VE_CTL_CLASS_LATENCY (1u << 0)
#define VE_CTL_CLASS_MASK    VE_CTL_CLASS_LATENCY

/* TRACE, PROFILE and METRICS header flags. */
#define VE_CTL_F_LAST (1u << 0) /* last chunk of a reply */
/* TRACE header flag: ved's ring had turned over past since_ns: events are missing. */
#define VE_CTL_F_GAP (1u << 2)
/* STATUS header flag: ved is draining (admits no new client). */
#define VE_CTL_F_DRAINING (1u << 1)

/* MPS state as probed on the host (ve_mps_probe). */
enum ve_mps_state {
	VE_MPS_UNKNOWN = 0,   /* not probed */
	VE_MPS_NONE = 1,      /* no MPS control daemon or server runs */
	VE_MPS_RUNNING = 2,   /* a control daemon or server runs, its pipe is where clients look */
	VE_MPS_ELSEWHERE = 3, /* one runs, but clients here would not find its pipe */
};

struct ve_ctl_hdr {
	uint32_t magic;	  /* VE_CTL_MAGIC */
	uint16_t version; /* VE_CTL_VERSION */
	uint16_t type;	  /* enum ve_ctl_type */
	uint32_t len;	  /* bytes of the whole message, header included */
	uint32_t flags;	  /* per type; 0 unless said otherwise */
};

struct ve_ctl_hello {
	struct ve_ctl_hdr h;
	uint32_t ipc_version; /* VE_IPC_VERSION of the client */
	int32_t pid;	      /* a hint: SO_PEERCRED is the truth */
	int32_t device;
	uint32_t class_flags; /* VE_CTL_CLASS_* */
	uint32_t nleaves;     /* 1 .. VE_CTL_MAX_LEAVES */
	uint32_t max_entries; /* the pool bound the client built (0 = full hierarchy) */
	uint64_t fingerprint; /* struct ve_pool.fingerprint of the client's pool */
	uint32_t sm_count;
	uint32_t ring_records;		      /* 0: the daemon's choice */
	uint32_t leaf_sms[VE_CTL_MAX_LEAVES]; /* 1 .. 1024 below nleaves, 0 above */
	char name[VE_CTL_NAME_MAX];	      /* program name, NUL-terminated */
	uint32_t failovers; /* times this process fell back to safe mode so far */
	uint32_t rsvd[3];
};

struct ve_ctl_welcome {
	struct ve_ctl_hdr h;
	int32_t client_id;     /* the coordinator's id for this client */
	uint32_t client_ops;   /* most ops the client may have at the daemon (ready + bound) */
	uint32_t ring_records; /* of each ring of the segment */
	uint32_t heartbeat_ms; /* ved bumps its heartbeat in the segment this often */
	int32_t ved_pid;
	uint32_t nprocs;   /* registered processes, this one included */
	uint32_t mps;	   /* enum ve_mps_state as ved sees it */
	uint32_t nentries; /* pool entries */
	uint64_t fingerprint;
	char policy[VE_CTL_NAME_MAX];
	uint32_t rsvd[4];
};

struct ve_ctl_doorbell {
	struct ve_ctl_hdr h;
	uint32_t rsvd[4];
};

struct ve_ctl_refuse {
	struct ve_ctl_hdr h;
	int32_t status; /* -errno, < 0 */
	uint32_t rsvd;
	char msg[VE_CTL_TEXT_MAX]; /* for the user, NUL-terminated */
};

struct ve_ctl_status_req {
	struct ve_ctl_hdr h;
	uint32_t rsvd[4];
};

struct ve_ctl_entry {
	uint64_t leaves;
	uint32_t sms;
	uint32_t outstanding;
	int32_t holder;	     /* client id, -1 none, -2 shared */
	int32_t reserve_for; /* client id or -1 */
	uint8_t state;	     /* enum ve_entry_state */
	uint8_t kind;	     /* enum ve_entry_kind */
	uint8_t gate_open;
	uint8_t nsharers; /* <= VE_CTL_MAX_SHARERS */
	int32_t sharers[VE_CTL_MAX_SHARERS];
	uint32_t rsvd;
};

struct ve_ctl_client {
	int32_t id;
	int32_t pid; /* SO_PEERCRED */
	uint32_t uid;
	uint32_t class_flags;
	uint32_t ready;	   /* ops in the coordinator's ready queue */
	uint32_t bound;	   /* ops bound, not yet done */
	uint32_t ring_in;  /* records waiting in its client -> ved ring */
	uint32_t ring_out; /* records waiting in its ved -> client ring */
	uint32_t overflow;     /* bindings waiting for room in that ring */
	uint16_t grant_entry;  /* the entry granted now (grant mode), 0xffff: none */
	uint16_t granted_sms;  /* SMs it may use now: its grant's, else its leases' */
	uint16_t lend_entry;   /* the entry lent to it for short kernels, 0xffff: none */
	uint16_t lent_sms;     /* that entry's SMs (0: none) */
	uint8_t why;	       /* the policy's reason for its grant (VE_WHY_*, 0: none given) */
	uint8_t pad0[3];
	uint64_t bindings;
	uint64_t completions;
	uint64_t failed; /* failed submissions */
	uint64_t records_in;
	uint64_t records_out;
	uint64_t age_ns;  /* since it registered */
	double ops_per_s; /* completions per second, last interval */
	uint64_t late;	  /* its ops that finished after their deadline (grant mode) */
	char name[VE_CTL_NAME_MAX];
};

struct ve_ctl_status {
	struct ve_ctl_hdr h;
	int32_t ved_pid;
	int32_t device;
	uint64_t uptime_ns;
	char policy[VE_CTL_NAME_MAX]; /* "" until the pool exists */
	uint32_t nentries;	      /* entries that follow */
	uint32_t nclients;	      /* clients that follow the entries */
	uint32_t max_clients;
	uint32_t mps; /* enum ve_mps_state */
	uint32_t nleaves;
	uint32_t sm_count;
	uint64_t fingerprint;
	uint32_t leaf_sms[VE_CTL_MAX_LEAVES];
	/* coordinator counters (struct ve_coord_stats) */
	uint64_t rounds, picks, bindings, rejects, defers, failed_submits, completions;
	uint64_t drains, reservations, hints, gate_closes, decide_ns;
	/* daemon counters */
	uint64_t records_in, records_out, sleeps, wakeups, reclaimed_ops, joined, left;
	uint64_t protocol_errors, refused;
	uint64_t watchdog_binds; /* ops the bind deadline bound to the whole GPU */
	uint64_t hello_timeouts; /* connections closed at the HELLO deadline */
	double records_per_s;	 /* in + out, last interval */
	/* struct ve_ctl_entry[nentries], then struct ve_ctl_client[nclients] */
};

struct ve_ctl_trace_req {
	struct ve_ctl_hdr h;
	uint32_t max_events; /* 0: all the daemon keeps */
	uint32_t rsvd;
	uint64_t since_ns; /* only events that ended at or after (ved's CLOCK_MONOTONIC); 0: all */
};

enum ve_ctl_tev_kind {
	VE_TEV_OP = 1,	   /* an op: bound at t0, its DONE arrived at t1 */
	VE_TEV_FAILED = 2, /* a submission failed (instant) */
	VE_TEV_JOIN = 3,   /* a client registered (instant) */
	VE_TEV_LEAVE = 4,  /* a client left; tok = ops reclaimed (instant) */
	VE_TEV_GRANT = 5,  /* the client was granted entry over [t0, t1] (grant mode) */
	VE_TEV_LEASE = 6,  /* entry was leased to client over [t0, t1] (-2: shared) */
	VE_TEV_RESERVE = 7, /* entry was reserved for client over [t0, t1] */
};

#define VE_TEV_F_OPEN (1u << 0) /* a span still going on: t1 is when ved answered */

struct ve_ctl_tev {
	uint64_t t0_ns; /* CLOCK_MONOTONIC of ved */
	uint64_t t1_ns; /* >= t0_ns */
	uint64_t key;
	uint64_t tok;
	int32_t client;
	int32_t pid;
	uint16_t entry; /* VE_PROTO_ENTRY_NONE for client events */
	uint16_t sms;
	uint8_t kind;  /* enum ve_ctl_tev_kind */
	uint8_t flags; /* VE_TEV_F_* */
	uint8_t rsvd[2];
};

struct ve_ctl_trace {
	struct ve_ctl_hdr h; /* flags: VE_CTL_F_LAST on the last chunk */
	uint32_t nevents;    /* <= VE_CTL_TRACE_CHUNK events follow */
	uint32_t chunk;	     /* 0, 1, ... */
	uint64_t total;	     /* events in the whole reply */
			     /* struct ve_ctl_tev[nevents] */
};

struct ve_ctl_profile_req {
	struct ve_ctl_hdr h;
	uint32_t rsvd[4];
};

/* METRICS_REQ has this layout too; METRICS answers with struct ve_ctl_profile's. */
#define ve_ctl_metrics_req ve_ctl_profile_req

enum ve_ctl_admin_op {
	VE_ADMIN_DRAIN = 1,  /* admit no new client; the registered ones go on */
	VE_ADMIN_RESUME = 2, /* admit clients again */
	VE_ADMIN_RELOAD = 3, /* re-read the configuration, as SIGHUP does */
};

struct ve_ctl_admin_req {
	struct ve_ctl_hdr h;
	uint32_t op; /* enum ve_ctl_admin_op */
	uint32_t rsvd[3];
};

struct ve_ctl_admin {
	struct ve_ctl_hdr h;
	int32_t status;	   /* 0, or -errno: the operation failed (msg says why) */
	uint32_t nclients; /* registered clients now */
	uint32_t draining; /* 0 or 1, after the operation */
	uint32_t rsvd;
	char msg[VE_CTL_TEXT_MAX]; /* for the user, NUL-terminated */
};

struct ve_ctl_profile {
	struct ve_ctl_hdr h; /* flags: VE_CTL_F_LAST on the last chunk */
	uint32_t nbytes;     /* <= VE_CTL_PROFILE_CHUNK bytes of text follow (no NUL) */
	uint32_t chunk;	     /* 0, 1, ... */
	uint64_t total;	     /* bytes of the whole text */
			     /* char text[nbytes] */
};

_Static_assert(sizeof(struct ve_ctl_hdr) == 16, "ctl header");
_Static_assert(sizeof(struct ve_ctl_hello) == 392, "hello");
_Static_assert(sizeof(struct ve_ctl_entry) == 64, "status entry");
_Static_assert(sizeof(struct ve_ctl_client) == 176, "status client");
_Static_assert(sizeof(struct ve_ctl_tev) == 48, "trace event");
_Static_assert(sizeof(struct ve_ctl_status) + VE_CTL_MAX_ENTRIES * sizeof(struct ve_ctl_entry) +
		       VE_CTL_MAX_CLIENTS * sizeof(struct ve_ctl_client) <=
		   VE_CTL_MAX_MSG,
	       "a full status fits one message");
_Static_assert(sizeof(struct ve_ctl_trace) + VE_CTL_TRACE_CHUNK * sizeof(struct ve_ctl_tev) <=
		   VE_CTL_MAX_MSG,
	       "a trace chunk fits one message");
_Static_assert(sizeof(struct ve_ctl_profile) == 32, "profile chunk header");
_Static_assert(sizeof(struct ve_ctl_trace_req) == 32, "trace request");
_Static_assert(sizeof(struct ve_ctl_admin) == 288, "admin reply");
_Static_assert(sizeof(struct ve_ctl_profile) + VE_CTL_PROFILE_CHUNK <= VE_CTL_MAX_MSG,
	       "a profile chunk fits one message");

/* 0 if buf[0, len) (8-byte aligned) is a well-formed message of direction dir, -EINVAL (or
 * -EPROTO for another protocol version) otherwise. Pure: no state, no log. */
int ve_ctl_check(const void *buf, size_t len, int dir);
const char *ve_ctl_type_name(unsigned type);

void ve_ctl_hdr_init(struct ve_ctl_hdr *h, uint16_t type, uint32_t len);

/*
 * Where ved listens for a device unless configured otherwise:
 * $VE_SOCKET_DIR/ved-<device>.sock when VE_SOCKET_DIR is an absolute path (a
 * system-wide ved per GPU: docs/operations.md), else
 * $XDG_RUNTIME_DIR/vitamin-e/ved-<device>.sock when XDG_RUNTIME_DIR is an
 * absolute path, else /tmp/vitamin-e-<uid>/ved-<device>.sock. -ENAMETOOLONG
 * if it does not fit in a sockaddr_un.
 */
int ve_ctl_default_path(int device, char *buf, size_t len);
/* The host's index of CUDA device 'ordinal' of this process: the ordinal-th
 * entry of CUDA_VISIBLE_DEVICES when that lists indices (a batch system's
 * per-job GPUs: Slurm's "2,3"), else the ordinal itself. ved is started per
 * host GPU, so a client names its GPU by this index (socket path, HELLO). */
int ve_ctl_host_device(int ordinal);
/* The lock file next to a socket path ("<path minus .sock>.lock"). */
int ve_ctl_lock_path(const char *sock, char *buf, size_t len);

/* Connects to a ved socket (SOCK_SEQPACKET, close-on-exec, blocking).
 * Returns the fd or -errno (-ENOENT: no socket, -ECONNREFUSED: stale).
 * Only where nobody else can have put the socket (docs/security.md): the
 * default folder must be the user's own; any folder must be writable by
 * its owner only (or be sticky, with the socket this user's or root's);
 * the server must run as this user, root, or the owner of the folder given.
 * Else -EPERM (or -ENOTDIR) with the reason in err. */
int ve_ctl_connect_checked(const char *path, char *err, size_t errlen);
/* The same, logging a refusal's reason as a warning. */
int ve_ctl_connect(const char *path);
/* One message; never raises SIGPIPE. 0 or -errno. */
int ve_ctl_send(int fd, const void *msg, size_t len);
/* Waits up to timeout_ms (-1: forever) for one message of at most cap bytes;
 * *fd_out (may be NULL: any fd received is closed) gets a passed fd or -1.
 * Returns the bytes received, 0 on EOF, -ETIMEDOUT or -errno. A longer message
 * is cut to cap bytes (its header then disagrees with its length: refused). */
int ve_ctl_recv(int fd, void *buf, size_t cap, int *fd_out, int timeout_ms);

/* MPS (docs/daemon.md, "MPS"): looks for the control pipe in
 * CUDA_MPS_PIPE_DIRECTORY (or /tmp/nvidia-mps) and for a running
 * nvidia-cuda-mps-control or nvidia-cuda-mps-server process. Reads only;
 * starts nothing, changes nothing. detail (may be NULL) gets a sentence. */
int ve_mps_probe(char *detail, size_t len);
/* True if dir holds an MPS control endpoint named "control" (a FIFO or a
 * Unix socket, as drivers differ). */
bool ve__mps_control_present(const char *dir);
const char *ve_mps_state_name(int state);

/*
 * ved's words in a client's segment: bytes [1024, 1408) of the header page,
 * which docs/ipc.md reserves (the first 512 bytes are struct ve_ipc_hdr). The
 * memfd starts zeroed. Guarded by VE_CTL_VERSION: only ved and its clients
 * read or write them.
 *
 * daemon_sleeping: ved stores 1 (seq_cst) before it re-checks the client's
 * ring a last time and sleeps in epoll_wait; a client that published records
 * (its tail store is seq_cst) then loads it (seq_cst), and if it flips it
 * 1 -> 0 (exchange) it writes its eventfd, which ved's epoll watches. Either
 * ved's re-check sees the new tail or the client sees the 1 (Dekker, as in
 * docs/ipc.md "Wake-ups"); only the side that flips it pays the syscall.
 */
#define VE_VED_WORDS_OFF 1024u

struct ve_ved_words {
	_Atomic uint32_t daemon_sleeping;
	/* Written by ved before WELCOME: 1 when its coordinator grants entries
	 * (grant mode, ve_policy.h); the client then binds its own ops. */
	_Atomic uint32_t grant_mode;
	uint32_t rsvd0[30];

	/* ved -> client, one cache-line pair of its own. grant: the client's
	 * grant, (generation << 32) | (lend << 16) | entry (0xffff: none; lend:
	 * the entry lent for short kernels, ve_grant_plan.lend; the generation's
	 * low 32 bits), one word so they never tear; stored with release after the coordinator decided.
	 * contended: another process is registered (keep little work ahead),
	 * unless this client settled in a grant it shares with every other
	 * (ve_coord_share_settled: nothing would be taken back). */
	_Atomic uint64_t grant;
	_Atomic uint32_t contended;
	/* Other processes registered with ved now (VE_PHASE: whether there is
	 * another client's step to line up against). 0 from an older ved. */
	_Atomic uint32_t others;
	uint32_t rsvd1[28];

	/* client -> ved: the client's report (struct ve_grant_report), under a
	 * sequence lock: rep_seq is odd while the client writes the fields
	 * (relaxed atomics), even once they are whole; ved reads the fields
	 * between two equal even loads of rep_seq. urgent: set by the client
	 * (with the doorbell if ved sleeps) when it waits for a grant; ved
	 * clears it and ticks at once. */
	_Atomic uint32_t rep_seq;
	_Atomic uint32_t urgent;
	_Atomic uint32_t ready, inflight, want_sms, min_sms, flags, entry;
	_Atomic uint64_t active_ns, deadline_ns, ack_gen, busy_leaves;
	_Atomic uint32_t op_us; /* struct ve_client_demand.op_us */
	uint32_t rsvd2;
	_Atomic uint64_t binds, done; /* cumulative ops bound to grants / completed */
	/* 1 while the client's dispatcher sleeps with nothing in flight. It
	 * stores 0 (seq_cst) before it reads the grant again; ved loads it
	 * (seq_cst) after it stored a grant that takes SMs away: either ved sees
	 * 0 and waits for the report as usual, or the client sees the new grant
	 * (Dekker, as daemon_sleeping). Seeing 1, ved frees those SMs at once. */
	_Atomic uint32_t client_idle;
	uint32_t rsvd3;
	/* client -> ved, cumulative: its latency ops that finished after their
	 * deadline (ve_advise_deadline, VE_TPOT_MS), for status and metrics.
	 * Written with the report; read on its own (a count, no decision). */
	_Atomic uint64_t late;
	uint32_t rsvd4[6];
};
_Static_assert(sizeof(struct ve_ved_words) == 384, "ved words");

/* ve_ved_words.grant: the generation's low 32 bits, the lend, the entry. */
#define VE_VED_GRANT_WORD(gen, lend, entry)                                                        \
	(((uint64_t)(gen) << 32) | ((uint64_t)(uint16_t)(lend) << 16) | (uint16_t)(entry))
/* The full generation a client acknowledged from the 32 bits it saw: the
 * latest generation up to 'now' with those low bits (an acknowledgement is
 * never ahead of the coordinator). */
static inline uint64_t ve_ved_gen_from32(uint64_t now, uint64_t ack)
{
	uint64_t d = (now - (ack & 0xffffffffull)) & 0xffffffffull;
	return d > now ? 0 : now - d; /* an acknowledgement ahead of now: none */
}
_Static_assert(offsetof(struct ve_ved_words, late) % 8 == 0, "ved words: late aligned");

_Static_assert(VE_VED_WORDS_OFF >= sizeof(struct ve_ipc_hdr) &&
		   VE_VED_WORDS_OFF + sizeof(struct ve_ved_words) <= VE_IPC_HDR_SIZE,
	       "ved words live in the reserved part of the header page");

static inline struct ve_ved_words *ve_ved_words_of(struct ve_shm *s)
{
	return (struct ve_ved_words *)((char *)s->base + VE_VED_WORDS_OFF);
}

#endif
