/* SPDX-License-Identifier: MIT */
/*
 * Per-client shared segment: a struct ve_ipc_hdr page, then the client ->
 * coordinator ring, then the coordinator -> client ring, each ring starting
 * on a page boundary (docs/ipc.md has the picture).
 *
 * Created with memfd_create by default: the segment has no name anyone could
 * open, and reaches the peer as an fd over the control socket (SCM_RIGHTS,
 * fdpass.h). It is sealed against shrinking, so a peer cannot truncate it and
 * make our accesses fault (SIGBUS). A name (shm_open) is optional, for tools
 * that attach by name; such a segment cannot be sealed, so only attach by name
 * to segments whose creator you trust. Mode 0600, or 0660 with a group.
 *
 * Who creates: the coordinator should (it sizes and seals the memory it must
 * keep reading); the client attaches. Attach validates magic, version and the
 * whole geometry before mapping more than the header, and afterwards uses
 * only the geometry it recomputed itself.
 */
#ifndef VE_IPC_SHM_H
#define VE_IPC_SHM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "ipc/proto.h"
#include "ipc/ring.h"

#define VE_SHM_NAME_MAX 64

enum ve_ipc_side_id { VE_SIDE_CLIENT = 0, VE_SIDE_COORD = 1 };

struct ve_shm_opts {
	size_t ring_records; /* records per ring, rounded up to a power of two */
	int32_t client_id;   /* written into the header; -1: not assigned */
	uint32_t flags;	     /* VE_IPC_F_* */
	const char *name;    /* NULL: anonymous memfd; else a shm_open name "/..." */
	long gid;	     /* >= 0: mode 0660 and this group; < 0: mode 0600 */
};

struct ve_shm {
	void *base;
	size_t size;
	int fd;
	uint32_t ring_records;
	struct ve_ipc_hdr *hdr;
	struct ve_ring to_coord;    /* client -> coordinator */
	struct ve_ring to_client;   /* coordinator -> client */
	char name[VE_SHM_NAME_MAX]; /* shm_open name if created or attached by name */
};

/* Bytes of a segment whose rings hold ring_records records each (a power of
 * two in [VE_RING_MIN_RECORDS, VE_RING_MAX_RECORDS]); 0 if out of range. */
size_t ve_shm_size(uint32_t ring_records);

/* Creates an anonymous (memfd) segment, mode 0600, client id -1. */
int ve_shm_create(size_t ring_records, struct ve_shm *out);
/* -EINVAL (bad options), -EEXIST (name taken), or the failing call's -errno. */
int ve_shm_create_ex(const struct ve_shm_opts *opts, struct ve_shm *out);
/* Maps a memfd segment made by ve_shm_create. On success out owns fd (closed
 * by ve_shm_fini); on failure the caller still does. -EAGAIN: not initialised
 * yet (magic 0); -EINVAL: not a segment or malformed; -EPROTO: another
 * protocol version (logged); -EPERM: not sealed against shrinking (any fd
 * that is not such a memfd, a named segment's included). */
int ve_shm_attach_fd(int fd, struct ve_shm *out);
/* Maps a named segment (ve_shm_create_ex with a name). It cannot be sealed,
 * so its creator and everyone who may open the name must be trusted. */
int ve_shm_attach_name(const char *name, struct ve_shm *out);
int ve_shm_unlink(const char *name);
void ve_shm_fini(struct ve_shm *s);

/* Liveness words: each side writes only its own (hdr->client / hdr->coord)
 * and reads the peer's as an untrusted hint (a pid from here is a hint;
 * SO_PEERCRED on the control socket is the truth). */
static inline struct ve_ipc_side *ve_shm_side(struct ve_shm *s, int side)
{
	return side == VE_SIDE_CLIENT ? &s->hdr->client : &s->hdr->coord;
}

void ve_shm_announce(struct ve_shm *s, int side);

static inline void ve_shm_beat(struct ve_shm *s, int side)
{
	struct ve_ipc_side *me = ve_shm_side(s, side);
	/* Only we write it: a relaxed load + store is enough and avoids a locked RMW. */
	uint64_t b = atomic_load_explicit(&me->heartbeat, memory_order_relaxed);
	atomic_store_explicit(&me->heartbeat, b + 1, memory_order_relaxed);
}

static inline uint64_t ve_shm_peer_beat(struct ve_shm *s, int side)
{
	return atomic_load_explicit(&ve_shm_side(s, !side)->heartbeat, memory_order_relaxed);
}

static inline void ve_shm_set_state(struct ve_shm *s, int side, uint32_t state)
{
	/* R5 (pairs with A5 in ve_shm_peer_state): what we wrote before (a BYE on
	 * the ring, say) is visible to a peer that sees the new state. */
	atomic_store_explicit(&ve_shm_side(s, side)->state, state, memory_order_release);
}

static inline uint32_t ve_shm_peer_state(struct ve_shm *s, int side)
{
	/* A5 (pairs with R5 in ve_shm_set_state). */
	return atomic_load_explicit(&ve_shm_side(s, !side)->state, memory_order_acquire);
}

#endif
