/* SPDX-License-Identifier: MIT */
/*
 * Wire format between a client and the coordinator (docs/ipc.md).
 *
 * A per-client shared segment holds one struct ve_ipc_hdr and two SPSC rings
 * of 64-byte struct ve_rec (ring.h): client->coordinator (READY, DONE,
 * SUBMIT_FAILED, HINT, BYE) and coordinator->client (BIND, GATE, RESERVE,
 * SHUTDOWN). Both ends run on one host, so fields are in host byte order;
 * the build refuses anything but little-endian, so the order is also fixed
 * (what docs/ipc.md documents and what a debugger dump shows).
 *
 * Fixed-width fields only, explicit reserved fields, every offset checked at
 * compile time: the layout is the contract between binaries built apart (a
 * daemon and the clients of another release), guarded by VE_IPC_VERSION.
 * Any change to a layout or to the meaning of a field bumps the version.
 *
 * Trust: each side treats what it reads from the segment as hostile input.
 * A record is copied out of shared memory first (ve_ring_pop) and the copy is
 * then checked with ve_proto_check: checking in place would let the peer
 * change it between check and use. Reserved fields and flag bits must be
 * zero so that a future version can give them meaning without an old reader
 * misreading them.
 */
#ifndef VE_IPC_PROTO_H
#define VE_IPC_PROTO_H

#include "ve/ve_policy.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the IPC format is little-endian");

#define VE_IPC_MAGIC   0x50494556u /* bytes 'V' 'E' 'I' 'P' in memory order */
#define VE_IPC_VERSION 1u
#define VE_REC_SIZE    64u

/* Bounds a well-formed record stays within. They are sanity limits for
 * hostile input (an index a reader may use to address an array), not
 * configuration: each reader still checks against its own tables. */
#define VE_PROTO_MAX_ENTRIES 256u    /* pool entries (VE_POOL_MAX_ENTRIES) */
#define VE_PROTO_ENTRY_NONE  0xffffu /* op ran on no pool entry (copy lane, host) */
#define VE_PROTO_MAX_SMS     1024u   /* min_sms bound */
#define VE_PROTO_MAX_TPB     1024u   /* CUDA's maximum threads per block */
#define VE_PROTO_MAX_STREAMS 65536u  /* client stream index bound */
#define VE_PROTO_MAX_LANES   256u    /* streams per pool entry (BIND lane_stream) */
#define VE_PROTO_PRIO_MAX    255     /* |priority| bound (CUDA ranges are a few steps) */
#define VE_PROTO_KIND_MAX    8u	     /* enum ve_op_kind's VE_OP_KIND_MAX (checked in proto.c) */
#define VE_PROTO_STATUS_MIN  (-4095) /* status: 0, -errno, or a positive backend code */
#define VE_PROTO_STATUS_MAX  65535
#define VE_PROTO_HOLDER_MIN  (-2) /* VE_HOLDER_SHARED; VE_HOLDER_NONE is -1 */

/* Directions: which ring a record travels on. */
enum ve_proto_dir {
	VE_DIR_TO_COORD = 0,  /* client -> coordinator */
	VE_DIR_TO_CLIENT = 1, /* coordinator -> client */
};

/* Record types. 0 is never valid, so a slot that was never written (zeroed
 * memory) does not decode. The two directions use disjoint ranges so a
 * record on the wrong ring is refused. */
enum ve_rec_type {
	VE_REC_INVALID = 0,
	/* client -> coordinator */
	VE_REC_READY = 1,	  /* an op whose predecessors are satisfied asks for a binding */
	VE_REC_DONE = 2,	  /* an op completed (timestamps for profiles and accounting) */
	VE_REC_SUBMIT_FAILED = 3, /* the backend refused the bound submission */
	VE_REC_HINT = 4,	  /* an op is coming (deadline, expected ready time) */
	VE_REC_BYE = 5,		  /* the client detaches; no record follows */
	VE_REC_PIPED = 6,	  /* an op was submitted behind its in-flight predecessor */
	VE_REC_SAMPLE = 7,	  /* grant mode: a measured run time, for profiles */
	/* coordinator -> client */
	VE_REC_BIND = 0x81,	/* op tok runs on pool entry 'entry', lane 'lane_stream' */
	VE_REC_GATE = 0x82,	/* an entry's gate opened or closed (drain notice) */
	VE_REC_RESERVE = 0x83,	/* an entry is reserved for 'holder' (or released: -1) */
	VE_REC_SHUTDOWN = 0x84, /* the coordinator goes away; fail over to safe mode */
};

/* READY/HINT op_flags. */
#define VE_OPF_LATENCY	   (1u << 0) /* latency class (decode): policy input */
#define VE_OPF_COOPERATIVE (1u << 1) /* all blocks must be co-resident */
#define VE_OPF_MASK	   (VE_OPF_LATENCY | VE_OPF_COOPERATIVE)

/* BIND flags. */
#define VE_BINDF_SHARE (1u << 0) /* the entry is shared with other clients */
#define VE_BINDF_MASK  VE_BINDF_SHARE

/* GATE state. */
enum ve_gate_state {
	VE_GATE_CLOSED = 0, /* submit nothing new on the entry; in-flight ops drain */
	VE_GATE_OPEN = 1,   /* the entry admits new submissions */
};

/* Record header flags: none defined in version 1 (all bits reserved). */
#define VE_RECF_MASK 0u

struct ve_rec_ready {
	uint64_t tok;		    /* client-local op token (never 0) */
	uint64_t key;		    /* profile key */
	uint64_t ready_ns;	    /* CLOCK_MONOTONIC time the op became ready */
	uint64_t blocks;	    /* grid size in blocks (x * y * z), >= 1 */
	uint32_t threads_per_block; /* 1 .. VE_PROTO_MAX_TPB */
	uint32_t min_sms;	    /* smallest SM count the op may run on; 0: any */
	uint32_t stream_idx;	    /* client's logical stream index */
	int32_t priority;	    /* stream priority (lower is more urgent, as in CUDA) */
	uint8_t kind;		    /* enum ve_op_kind, 1 .. VE_PROTO_KIND_MAX - 1 */
	uint8_t op_flags;	    /* VE_OPF_* */
	uint16_t rsvd0;
	uint32_t rsvd1;
};

struct ve_rec_done {
	uint64_t tok;
	uint64_t t_start_ns; /* backend start/end of the op (CLOCK_MONOTONIC); 0 if unknown */
	uint64_t t_end_ns;   /* >= t_start_ns */
	int32_t status;	     /* 0, -errno or a positive backend error code */
	uint16_t entry;	     /* entry it ran on, or VE_PROTO_ENTRY_NONE */
	uint16_t rsvd0;
	uint64_t rsvd1[3];
};

struct ve_rec_submit_failed {
	uint64_t tok;
	int32_t status; /* non-zero: why the submission failed */
	uint16_t entry; /* the entry it was bound to */
	uint16_t rsvd0;
	uint64_t rsvd1[5];
};

struct ve_rec_hint {
	uint64_t tok;		    /* the op it is about, or 0 for one not yet recorded */
	uint64_t key;		    /* profile key */
	uint64_t deadline_ns;	    /* 0: none */
	uint64_t expect_ready_ns;   /* 0: unknown */
	uint64_t blocks;	    /* 0: unknown */
	uint32_t min_sms;	    /* 0: any */
	uint32_t threads_per_block; /* 0: unknown */
	uint32_t stream_idx;
	uint8_t op_flags; /* VE_OPF_* */
	uint8_t rsvd0;
	uint16_t rsvd1;
};

/* PIPED: bounded pipelining (docs/architecture.md, "Dispatch"). The client submitted op
 * 'tok' on 'entry' right behind one of its own ops still in flight there
 * (bound by ved, its DONE not yet sent: ved processes this record first, so
 * the entry is still this client's). ved counts it as bound there; its DONE
 * (or a DONE with status -ECANCELED if it was not submitted after all)
 * follows like any other. */
struct ve_rec_piped {
	uint64_t tok;
	uint64_t key;
	uint32_t stream_idx;
	uint16_t entry;
	uint8_t kind;
	uint8_t rsvd0;
	uint64_t rsvd1[4];
};

/* SAMPLE (grant mode: ops the client bound itself send no DONE): op 'key'
 * ran alone for ns on 'entry'; the coordinator refines T(key, SMs of entry). */
struct ve_rec_sample {
	uint64_t key; /* profile key, never 0 */
	uint64_t ns;  /* measured run time, 1 .. 2^40 */
	uint16_t entry;
	uint16_t rsvd0;
	uint32_t rsvd1;
	uint64_t rsvd2[4];
};

struct ve_rec_bye {
	int32_t reason; /* 0: normal detach; -errno otherwise */
	uint32_t rsvd0;
	uint64_t rsvd1[6];
};

struct ve_rec_bind {
	uint64_t tok;
	uint16_t entry;	      /* pool entry, < VE_PROTO_MAX_ENTRIES */
	uint16_t lane_stream; /* stream of that entry's pCtx, < VE_PROTO_MAX_LANES */
	uint32_t flags;	      /* VE_BINDF_* */
	uint64_t rsvd0[5];
};

struct ve_rec_gate {
	uint16_t entry;
	uint8_t state; /* enum ve_gate_state */
	uint8_t rsvd0;
	uint32_t rsvd1;
	uint64_t rsvd2[6];
};

struct ve_rec_reserve {
	uint16_t entry;
	uint16_t rsvd0;
	int32_t holder; /* client id, -1 (released) or -2 (shared) */
	uint64_t rsvd1[6];
};

struct ve_rec_shutdown {
	int32_t reason; /* 0: orderly; -errno otherwise */
	uint32_t rsvd0;
	uint64_t rsvd1[6];
};

struct ve_rec {
	uint16_t type;	/* enum ve_rec_type */
	uint16_t flags; /* VE_RECF_*; none defined, must be 0 */
	uint32_t seq;	/* sender's count of records on this ring, from 0, wrapping */
	union {
		struct ve_rec_ready ready;
		struct ve_rec_done done;
		struct ve_rec_submit_failed submit_failed;
		struct ve_rec_hint hint;
		struct ve_rec_bye bye;
		struct ve_rec_piped piped;
		struct ve_rec_sample sample;
		struct ve_rec_bind bind;
		struct ve_rec_gate gate;
		struct ve_rec_reserve reserve;
		struct ve_rec_shutdown shutdown;
		uint8_t raw[56];
	} u;
};

#define VE__OFF(type, field, off) _Static_assert(offsetof(type, field) == (off), #type "." #field)
_Static_assert(sizeof(struct ve_rec) == VE_REC_SIZE, "records are 64 bytes");
_Static_assert(_Alignof(struct ve_rec) == 8, "record alignment");
VE__OFF(struct ve_rec, type, 0);
VE__OFF(struct ve_rec, flags, 2);
VE__OFF(struct ve_rec, seq, 4);
VE__OFF(struct ve_rec, u, 8);
_Static_assert(sizeof(struct ve_rec_ready) == 56, "ready payload");
VE__OFF(struct ve_rec_ready, tok, 0);
VE__OFF(struct ve_rec_ready, key, 8);
VE__OFF(struct ve_rec_ready, ready_ns, 16);
VE__OFF(struct ve_rec_ready, blocks, 24);
VE__OFF(struct ve_rec_ready, threads_per_block, 32);
VE__OFF(struct ve_rec_ready, min_sms, 36);
VE__OFF(struct ve_rec_ready, stream_idx, 40);
VE__OFF(struct ve_rec_ready, priority, 44);
VE__OFF(struct ve_rec_ready, kind, 48);
VE__OFF(struct ve_rec_ready, op_flags, 49);
VE__OFF(struct ve_rec_ready, rsvd0, 50);
VE__OFF(struct ve_rec_ready, rsvd1, 52);
_Static_assert(sizeof(struct ve_rec_done) == 56, "done payload");
VE__OFF(struct ve_rec_done, tok, 0);
VE__OFF(struct ve_rec_done, t_start_ns, 8);
VE__OFF(struct ve_rec_done, t_end_ns, 16);
VE__OFF(struct ve_rec_done, status, 24);
VE__OFF(struct ve_rec_done, entry, 28);
VE__OFF(struct ve_rec_done, rsvd0, 30);
VE__OFF(struct ve_rec_done, rsvd1, 32);
_Static_assert(sizeof(struct ve_rec_submit_failed) == 56, "submit_failed payload");
VE__OFF(struct ve_rec_submit_failed, tok, 0);
VE__OFF(struct ve_rec_submit_failed, status, 8);
VE__OFF(struct ve_rec_submit_failed, entry, 12);
VE__OFF(struct ve_rec_submit_failed, rsvd0, 14);
VE__OFF(struct ve_rec_submit_failed, rsvd1, 16);
_Static_assert(sizeof(struct ve_rec_hint) == 56, "hint payload");
VE__OFF(struct ve_rec_hint, tok, 0);
VE__OFF(struct ve_rec_hint, key, 8);
VE__OFF(struct ve_rec_hint, deadline_ns, 16);
VE__OFF(struct ve_rec_hint, expect_ready_ns, 24);
VE__OFF(struct ve_rec_hint, blocks, 32);
VE__OFF(struct ve_rec_hint, min_sms, 40);
VE__OFF(struct ve_rec_hint, threads_per_block, 44);
VE__OFF(struct ve_rec_hint, stream_idx, 48);
VE__OFF(struct ve_rec_hint, op_flags, 52);
VE__OFF(struct ve_rec_hint, rsvd0, 53);
VE__OFF(struct ve_rec_hint, rsvd1, 54);
_Static_assert(sizeof(struct ve_rec_bye) == 56, "bye payload");
VE__OFF(struct ve_rec_piped, tok, 0);
VE__OFF(struct ve_rec_piped, key, 8);
VE__OFF(struct ve_rec_piped, stream_idx, 16);
VE__OFF(struct ve_rec_piped, entry, 20);
VE__OFF(struct ve_rec_piped, kind, 22);
_Static_assert(sizeof(struct ve_rec_piped) == 56, "PIPED payload");
_Static_assert(sizeof(struct ve_rec_sample) == 56, "SAMPLE payload");
VE__OFF(struct ve_rec_sample, key, 0);
VE__OFF(struct ve_rec_sample, ns, 8);
VE__OFF(struct ve_rec_sample, entry, 16);
VE__OFF(struct ve_rec_bye, reason, 0);
_Static_assert(sizeof(struct ve_rec_bind) == 56, "bind payload");
VE__OFF(struct ve_rec_bind, tok, 0);
VE__OFF(struct ve_rec_bind, entry, 8);
VE__OFF(struct ve_rec_bind, lane_stream, 10);
VE__OFF(struct ve_rec_bind, flags, 12);
VE__OFF(struct ve_rec_bind, rsvd0, 16);
_Static_assert(sizeof(struct ve_rec_gate) == 56, "gate payload");
VE__OFF(struct ve_rec_gate, entry, 0);
VE__OFF(struct ve_rec_gate, state, 2);
VE__OFF(struct ve_rec_gate, rsvd0, 3);
VE__OFF(struct ve_rec_gate, rsvd1, 4);
VE__OFF(struct ve_rec_gate, rsvd2, 8);
_Static_assert(sizeof(struct ve_rec_reserve) == 56, "reserve payload");
VE__OFF(struct ve_rec_reserve, entry, 0);
VE__OFF(struct ve_rec_reserve, rsvd0, 2);
VE__OFF(struct ve_rec_reserve, holder, 4);
VE__OFF(struct ve_rec_reserve, rsvd1, 8);
_Static_assert(sizeof(struct ve_rec_shutdown) == 56, "shutdown payload");
VE__OFF(struct ve_rec_shutdown, reason, 0);

/*
 * Segment header, at offset 0 of the segment (shm.h). The first cache-line
 * pair is written once by the creator before the segment is handed over and
 * is immutable afterwards; each side then writes only its own line (its pid,
 * heartbeat and state), so neither side's stores bounce the other's line.
 * A reader never trusts the geometry here after attach: it recomputes the
 * layout from ring_records and refuses a header that disagrees (shm.c).
 */
#define VE_IPC_HDR_SIZE 4096u /* the header owns the first page; rings follow */

/* Per-side state word (ve_ipc_side.state). */
enum ve_ipc_state {
	VE_IPC_S_NONE = 0,     /* not attached yet */
	VE_IPC_S_ATTACHED = 1, /* attached and serving its rings */
	VE_IPC_S_DETACHED = 2, /* left in order (after BYE / SHUTDOWN) */
};

/* Header flags (immutable after creation). */
#define VE_IPC_F_EMBEDDED (1u << 0) /* coordinator is a thread of the client process */
#define VE_IPC_F_MASK	  VE_IPC_F_EMBEDDED

struct ve_ipc_side {
	_Atomic uint64_t heartbeat; /* bumped by this side while alive (liveness hint) */
	_Atomic uint32_t state;	    /* enum ve_ipc_state */
	int32_t pid;		    /* as the side reported it: a hint, SO_PEERCRED is truth */
	uint8_t pad[112];
};

struct ve_ipc_hdr {
	_Atomic uint32_t magic; /* VE_IPC_MAGIC, stored last (release) by the creator */
	uint16_t version;	/* VE_IPC_VERSION */
	uint16_t rec_size;	/* VE_REC_SIZE */
	uint32_t hdr_size;	/* VE_IPC_HDR_SIZE */
	uint32_t ring_records;	/* capacity of each ring, a power of two */
	uint64_t seg_size;	/* bytes of the whole segment */
	uint64_t ring_bytes;	/* bytes of each ring area (ring header + records) */
	uint64_t to_coord_off;	/* offset of the client -> coordinator ring */
	uint64_t to_client_off; /* offset of the coordinator -> client ring */
	int32_t client_id;	/* coordinator's id for the client; -1 until assigned */
	uint32_t flags;		/* VE_IPC_F_* */
	uint8_t pad0[200];
	struct ve_ipc_side client; /* written by the client only */
	struct ve_ipc_side coord;  /* written by the coordinator only */
};

_Static_assert(sizeof(_Atomic uint32_t) == 4 && sizeof(_Atomic uint64_t) == 8, "atomic sizes");
_Static_assert(ATOMIC_INT_LOCK_FREE == 2 && ATOMIC_LLONG_LOCK_FREE == 2,
	       "cross-process atomics must be lock-free");
_Static_assert(sizeof(struct ve_ipc_side) == 128, "one side per cache-line pair");
VE__OFF(struct ve_ipc_side, heartbeat, 0);
VE__OFF(struct ve_ipc_side, state, 8);
VE__OFF(struct ve_ipc_side, pid, 12);
VE__OFF(struct ve_ipc_hdr, magic, 0);
VE__OFF(struct ve_ipc_hdr, version, 4);
VE__OFF(struct ve_ipc_hdr, rec_size, 6);
VE__OFF(struct ve_ipc_hdr, hdr_size, 8);
VE__OFF(struct ve_ipc_hdr, ring_records, 12);
VE__OFF(struct ve_ipc_hdr, seg_size, 16);
VE__OFF(struct ve_ipc_hdr, ring_bytes, 24);
VE__OFF(struct ve_ipc_hdr, to_coord_off, 32);
VE__OFF(struct ve_ipc_hdr, to_client_off, 40);
VE__OFF(struct ve_ipc_hdr, client_id, 48);
VE__OFF(struct ve_ipc_hdr, flags, 52);
VE__OFF(struct ve_ipc_hdr, client, 256);
VE__OFF(struct ve_ipc_hdr, coord, 384);
_Static_assert(sizeof(struct ve_ipc_hdr) == 512, "segment header");
_Static_assert(sizeof(struct ve_ipc_hdr) <= VE_IPC_HDR_SIZE, "header fits its page");

/* Zeroes a record and sets its type: every field not set stays a valid 0. */
static inline void ve_rec_init(struct ve_rec *r, uint16_t type)
{
	memset(r, 0, sizeof(*r));
	r->type = type;
}

/* Returns 0 if r is a well-formed record for direction dir (enum
 * ve_proto_dir), -EINVAL otherwise: unknown type or one of the other
 * direction, reserved bits or fields not zero, any field out of range.
 * Pure and stateless (no logging): safe on any 64 bytes, the fuzz target. */
int ve_proto_check(const struct ve_rec *r, int dir);

/* Name of a record type for logs ("READY", ..., "?" if unknown). */
const char *ve_proto_type_name(unsigned type);

/*
 * The codec: one encoder and one decoder per record, between the record and
 * what each side works with (struct ve_ready_op and struct ve_hint of
 * ve_policy.h), used by the ved client (src/ved/client.c) and by ved's
 * server (src/ved/server.c). Encoders clamp every field into the range
 * ve_proto_check accepts, so a record they make is always well formed.
 * Decoders take a record that passed ve_proto_check; what the record does
 * not carry comes from the receiver (its id for the client, its clock).
 */
/* READY, and the HINT that carries the op's deadline (the READY record has no
 * field for it) when op->deadline_ns is set: returns the records written to
 * rec[] (1 or 2, the HINT first). */
uint32_t ve_proto_encode_ready(const struct ve_ready_op *op, struct ve_rec rec[2]);
/* The op as the coordinator takes it: client id, ready time and the client's
 * class (client_flags, VE_READY_LATENCY) are the receiver's; deadline_ns is 0
 * (the HINT before it carries it). */
void ve_proto_decode_ready(const struct ve_rec_ready *r, uint32_t client, uint32_t client_flags,
			   uint64_t now_ns, struct ve_ready_op *op);
/* DONE of op tok on entry, ran 'ns' ns (0: unknown) and ended now. */
void ve_proto_encode_done(uint64_t tok, uint16_t entry, uint64_t ns, int32_t status,
			  uint64_t now_ns, struct ve_rec *rec);
/* The op's run time in ns (0: unknown). */
uint64_t ve_proto_decode_done(const struct ve_rec_done *r);
/* SUBMIT_FAILED (status 0 becomes -EIO: a failure always says why). */
void ve_proto_encode_submit_failed(uint64_t tok, uint16_t entry, int status, struct ve_rec *rec);
/* HINT: an advisory about ops to come (tok 0). */
void ve_proto_encode_hint(const struct ve_hint *h, struct ve_rec *rec);
void ve_proto_decode_hint(const struct ve_rec_hint *r, uint32_t client, struct ve_hint *h);
/* PIPED: op put behind our in-flight work on entry. */
void ve_proto_encode_piped(const struct ve_ready_op *op, uint16_t entry, struct ve_rec *rec);
void ve_proto_decode_piped(const struct ve_rec_piped *r, uint32_t client, uint64_t now_ns,
			   struct ve_ready_op *op);
/* BIND of op (tok, stream) to entry; share: VE_BIND_SHARE was asked for. */
void ve_proto_encode_bind(uint64_t tok, uint32_t stream, uint16_t entry, bool share,
			  uint32_t seq, struct ve_rec *rec);
/* The binding's entry and VE_BIND_* flags (the op itself is the client's). */
void ve_proto_decode_bind(const struct ve_rec_bind *r, uint16_t *entry, uint32_t *flags);

#endif
