/* SPDX-License-Identifier: MIT */
/*
 * How the shim encodes CUDA copies and memsets into struct ve_desc, and how
 * the CUDA backend (cuda.c) executes them: the contract between the two.
 *
 * Memcpy (VE_OP_MEMCPY): u.cp.variant says which driver call the app made
 * and the backend replays (always the Async form, on the bound lane);
 * u.cp.dir is unused by the backend (the sim's copy model may read it):
 *   VE_CP_HTOD    cuMemcpyHtoDAsync(dst, (void *)src, bytes)
 *   VE_CP_DTOH    cuMemcpyDtoHAsync((void *)dst, src, bytes)
 *   VE_CP_DTOD    cuMemcpyDtoDAsync(dst, src, bytes)
 *   VE_CP_DEFAULT cuMemcpyAsync(dst, src, bytes)            (unified addressing)
 *   VE_CP_PEER    cuMemcpyPeerAsync(dst, dstCtx, src, srcCtx, bytes);
 *                 payload = struct ve_cp_peer
 *   VE_CP_2D      cuMemcpy2DAsync(payload as CUDA_MEMCPY2D)
 *   VE_CP_3D      cuMemcpy3DAsync(payload as CUDA_MEMCPY3D)
 * Payload structs are read with memcpy, so the payload needs no alignment.
 * u.cp.bytes for 2D/3D is the number of bytes moved (informative only).
 *
 * VE_DESC_SRC_SNAPSHOT (VE_CP_HTOD or VE_CP_DEFAULT): the source bytes were
 * copied into the payload at call time (payload_len == bytes, u.cp.src
 * unused); the copy reads them from there. The payload is pageable memory,
 * and for an async copy from pageable memory the driver "may synchronize
 * with the stream and stage the copy into pinned memory" (CUDA driver API,
 * "API synchronization behavior"): the dispatcher thread could block until
 * the lane drains. So a lane with pinned staging memory (every copy lane,
 * unless ve_cuda_config.no_staging) first copies the snapshot into its
 * staging ring (a memcpy, no allocation) and enqueues a true async copy from
 * pinned memory; staging space is reclaimed in lane FIFO order when the copy
 * completes. A snapshot larger than the ring, or on a lane without one, goes
 * to the driver as pageable memory. A full ring is transient (-EAGAIN).
 *
 * The shim only virtualizes copies whose host side is pinned (or absent), or
 * small snapshots; copies touching other pageable memory take the
 * pass-through path. VE_DESC_DST_PAGEABLE, if ever set, changes nothing here:
 * the driver's DtoH into pageable memory returns only once the copy is done,
 * blocking the dispatcher thread meanwhile.
 *
 * Memset (VE_OP_MEMSET): u.ms.elem_size 1, 2 or 4 selects D8/D16/D32 and the
 * low 8/16/32 bits of u.ms.value are the value; height <= 1 and pitch == 0
 * is the 1D form cuMemsetD{8,16,32}Async(dst, value, width); otherwise
 * cuMemsetD2D{8,16,32}Async(dst, pitch, value, width, height).
 */
#ifndef VE_BACKEND_CUDA_DESC_H
#define VE_BACKEND_CUDA_DESC_H

#include <cuda.h>
#include <stdint.h>

enum ve_cp_variant {
	VE_CP_HTOD = 1,
	VE_CP_DTOH,
	VE_CP_DTOD,
	VE_CP_DEFAULT,
	VE_CP_PEER,
	VE_CP_2D,
	VE_CP_3D,
};

struct ve_cp_peer {
	CUcontext dst_ctx;
	CUcontext src_ctx;
};

/* Payload bytes a variant's shape takes (0: none; the whole payload for a snapshot). */
static inline uint32_t ve_cp_shape_len(uint32_t variant)
{
	switch (variant) {
	case VE_CP_PEER:
		return sizeof(struct ve_cp_peer);
	case VE_CP_2D:
		return sizeof(CUDA_MEMCPY2D);
	case VE_CP_3D:
		return sizeof(CUDA_MEMCPY3D);
	default:
		return 0;
	}
}

#endif
