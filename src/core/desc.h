/* SPDX-License-Identifier: MIT */
/*
 * Immutable operation descriptors.
 *
 * A descriptor is everything a backend needs to execute one logical operation
 * exactly as the application submitted it. The caller fills a struct ve_desc
 * whose payload points at its own memory; ve_vctx_submit() copies the struct
 * and the payload into vctx-owned storage and from then on only hands out
 * const pointers. Scheduling never writes a descriptor (paper section 4.2).
 *
 * No CUDA types here: handles are carried as integers and launch attributes
 * as opaque bytes, so the core builds and is tested without CUDA. The fields a
 * scheduler needs (geometry, cooperative, cluster, minimum SMs) are decoded
 * by whoever builds the descriptor (the shim) into plain fields.
 */
#ifndef VE_CORE_DESC_H
#define VE_CORE_DESC_H

#include <stddef.h>
#include <stdint.h>

enum ve_op_kind {
	VE_OP_NONE = 0,
	VE_OP_KERNEL,	    /* kernel launch: bound to a pool entry by the policy */
	VE_OP_MEMCPY,	    /* copy: runs on a copy lane, needs no SMs of its own */
	VE_OP_MEMSET,	    /* memset: copy lane */
	VE_OP_HOST_FN,	    /* host function: run by the dispatcher's host executor */
	VE_OP_EVENT_RECORD, /* event generation marker; timed ones reach a backend stream */
	VE_OP_EVENT_WAIT,   /* cross-stream wait marker: completed inside the vctx */
	VE_OP_CALL,	    /* opaque backend call on a lane (graph launch, stream mem op, ...) */
	VE_OP_KIND_MAX
};

/* Where an operation goes once it is ready. Derived from kind and flags. */
enum ve_op_class {
	VE_CLASS_INLINE = 0, /* completed by the vctx itself, never leaves it */
	VE_CLASS_COMPUTE,    /* policy-bound to a pool entry (SMs) */
	VE_CLASS_COPY,	     /* a copy lane */
	VE_CLASS_HOST,	     /* host executor */
};

/* Descriptor flags. */
/* Set by a backend in an op's completion status (a positive code) when the
 * op never ran because its submission was refused for a reason of its own,
 * a bad argument, with the context still usable (ve_vctx_complete). */
#define VE_STATUS_REFUSED (1 << 30)

#define VE_DESC_COOPERATIVE   (1u << 0) /* all blocks must be co-resident */
#define VE_DESC_SRC_SNAPSHOT  (1u << 1) /* memcpy source bytes live in the payload */
#define VE_DESC_DST_PAGEABLE  (1u << 2) /* memcpy into pageable memory: caller waits */
#define VE_DESC_TIMED	      (1u << 3) /* event record that must carry a timestamp */
#define VE_DESC_CALL_COMPUTE  (1u << 4) /* VE_OP_CALL that needs SMs (graph launch) */
#define VE_DESC_LATENCY	      (1u << 5) /* latency-class op (decode): policy input */
#define VE_DESC_FN_IS_KERNEL  (1u << 6) /* fn is a CUkernel (library), not a CUfunction */
#define VE_DESC_PARAMS_EXTRA  (1u << 7) /* params came from the 'extra' buffer form */
/* VE_OP_CALL polled on the host instead of submitted: fn(0, payload, len)
 * runs once per dispatcher pass until it returns something other than
 * -EBUSY (0 = done, else the op's error). For waits on work outside the
 * vctx (a pass-through call): a GPU-side wait would block its lane, and
 * with it unrelated streams queued behind on that lane. */
#define VE_DESC_HOST_POLL     (1u << 8)

/* Limits. A descriptor beyond them is refused with -E2BIG. */
#define VE_DESC_MAX_PAYLOAD (64u * 1024u)
#define VE_DESC_MAX_ATTRS   16u
#define VE_DESC_MAX_PARAMS  1024u

struct ve_dim3 {
	uint32_t x, y, z;
};

struct ve_kernel_desc {
	uint64_t fn;		/* CUfunction or CUkernel value */
	uint64_t name_id;	/* optional: stable id of the kernel name (debug, traces) */
	struct ve_dim3 grid;
	struct ve_dim3 block;
	uint32_t smem;		/* dynamic shared memory bytes */
	uint32_t cluster[3];	/* cluster dims from launch attributes, 0 = none */
	uint32_t min_sms;	/* smallest entry that can run it unchanged; 0 = any */
	uint32_t blocks_per_sm; /* occupancy if known (0 = unknown) */
	/* Payload layout: [attrs: nattrs * attr_size][params: param_bytes][offsets: nparams * 2 * u32] */
	uint16_t nattrs;
	uint16_t attr_size;
	uint32_t param_bytes;
	uint32_t nparams;
};

struct ve_memcpy_desc {
	uint64_t dst, src;
	uint64_t bytes;
	uint32_t dir;	   /* backend-defined direction/kind (CUmemorytype pair or cudaMemcpyKind) */
	uint32_t variant;  /* backend-defined: 1D, 2D, 3D, peer, batch; shape bytes in payload */
};

struct ve_memset_desc {
	uint64_t dst;
	uint64_t value;
	uint64_t width;	 /* elements per row */
	uint64_t height; /* rows (1 for 1D) */
	uint64_t pitch;
	uint32_t elem_size; /* 1, 2 or 4 */
};

struct ve_host_desc {
	void (*fn)(void *);
	void *arg;
	uint32_t style; /* 0 = cuLaunchHostFunc, 1 = cuStreamAddCallback (gets stream+status) */
	uint64_t stream_handle; /* app-visible stream handle for callback style */
};

struct ve_event_desc {
	uint32_t event_idx;  /* vctx event slot */
	uint64_t generation; /* generation this marker creates (record) or waits on (wait) */
	uint64_t app_event;  /* app-visible event handle (real CUDA event), 0 in the sim */
};

struct ve_call_desc {
	/* Runs on the lane's backend stream: fn(lane_stream, payload, payload_len). */
	int (*fn)(uint64_t lane_stream, const void *payload, uint32_t len);
	uint64_t handle; /* e.g. the graph exec handle for traces */
	/* With VE_DESC_CALL_COMPUTE (a graph launch): the shape policies size it
	 * by, as a kernel's. blocks/threads: its widest kernel node (0 = unknown);
	 * min_sms: smallest entry that runs every node unchanged (0 = any). */
	uint64_t blocks;
	uint32_t threads;
	uint32_t min_sms;
	uint32_t blocks_per_sm;
	uint32_t pad;
	uint64_t salt; /* part of the profile key besides handle (an instantiation number) */
};

struct ve_desc {
	uint8_t kind;	/* enum ve_op_kind */
	uint8_t pad0;
	uint16_t pad1;
	uint32_t flags; /* VE_DESC_* */
	uint64_t key;	/* profile key, set by ve_desc_finalize() */
	/* Scheduling metadata, never part of what is submitted: a deadline for
	 * latency-class ops (0 = none), from an advisory or the client. */
	uint64_t deadline_ns;
	uint32_t payload_len;
	uint32_t pad2;
	const uint8_t *payload;
	union {
		struct ve_kernel_desc k;
		struct ve_memcpy_desc cp;
		struct ve_memset_desc ms;
		struct ve_host_desc host;
		struct ve_event_desc ev;
		struct ve_call_desc call;
	} u;
};

/* Classify: which part of the runtime takes this op once it is ready. */
static inline enum ve_op_class ve_desc_class(const struct ve_desc *d)
{
	switch (d->kind) {
	case VE_OP_KERNEL:
		return VE_CLASS_COMPUTE;
	case VE_OP_MEMCPY:
	case VE_OP_MEMSET:
		return VE_CLASS_COPY;
	case VE_OP_HOST_FN:
		return VE_CLASS_HOST;
	case VE_OP_EVENT_RECORD:
		return (d->flags & VE_DESC_TIMED) ? VE_CLASS_COPY : VE_CLASS_INLINE;
	case VE_OP_CALL:
		if (d->flags & VE_DESC_HOST_POLL)
			return VE_CLASS_HOST;
		return (d->flags & VE_DESC_CALL_COMPUTE) ? VE_CLASS_COMPUTE : VE_CLASS_COPY;
	default:
		return VE_CLASS_INLINE;
	}
}

static inline int ve_desc_is_compute_call(const struct ve_desc *d)
{
	return d->kind == VE_OP_CALL && (d->flags & VE_DESC_CALL_COMPUTE) &&
	       !(d->flags & VE_DESC_HOST_POLL);
}

/* Blocks of a kernel; of a compute call, its widest kernel's (0 = unknown). */
static inline uint64_t ve_desc_blocks(const struct ve_desc *d)
{
	if (ve_desc_is_compute_call(d))
		return d->u.call.blocks;
	if (d->kind != VE_OP_KERNEL)
		return 0;
	return (uint64_t)d->u.k.grid.x * d->u.k.grid.y * d->u.k.grid.z;
}

static inline uint32_t ve_desc_threads(const struct ve_desc *d)
{
	if (ve_desc_is_compute_call(d))
		return d->u.call.threads;
	if (d->kind != VE_OP_KERNEL)
		return 0;
	return d->u.k.block.x * d->u.k.block.y * d->u.k.block.z;
}

/* The smallest entry (SMs) that can run a compute op unchanged; 0 = any. */
static inline uint32_t ve_desc_min_sms(const struct ve_desc *d)
{
	if (ve_desc_is_compute_call(d))
		return d->u.call.min_sms;
	return d->kind == VE_OP_KERNEL ? d->u.k.min_sms : 0;
}

static inline uint32_t ve_desc_blocks_per_sm(const struct ve_desc *d)
{
	if (ve_desc_is_compute_call(d))
		return d->u.call.blocks_per_sm;
	return d->kind == VE_OP_KERNEL ? d->u.k.blocks_per_sm : 0;
}

/* Stable profile key of a launch configuration: (function, grid, block, smem).
 * Same inputs give the same key in every process and run. */
uint64_t ve_desc_key(const struct ve_desc *d);

/* Validate a caller-built descriptor: -EINVAL for malformed fields, -E2BIG
 * beyond the limits above. Sets d->key. */
int ve_desc_finalize(struct ve_desc *d);

/* Payload accessors for kernels. */
static inline const uint8_t *ve_desc_attrs(const struct ve_desc *d)
{
	return d->payload;
}
static inline const uint8_t *ve_desc_params(const struct ve_desc *d)
{
	return d->payload + (size_t)d->u.k.nattrs * d->u.k.attr_size;
}
static inline const uint32_t *ve_desc_param_layout(const struct ve_desc *d)
{
	/* nparams pairs of (offset, size); may be absent (nparams == 0). */
	return (const uint32_t *)(const void *)(ve_desc_params(d) + d->u.k.param_bytes +
						((8 - (d->u.k.param_bytes & 7)) & 7));
}
/* Total payload size of a kernel descriptor with this layout (offset table 8-aligned). */
static inline uint32_t ve_desc_kernel_payload_len(uint32_t nattrs, uint32_t attr_size,
						  uint32_t param_bytes, uint32_t nparams)
{
	uint32_t n = nattrs * attr_size + param_bytes;
	if (nparams)
		n += ((8 - (param_bytes & 7)) & 7) + nparams * 2 * 4;
	return n;
}

const char *ve_op_kind_name(int kind);

#endif
