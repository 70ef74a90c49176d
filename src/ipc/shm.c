/* SPDX-License-Identifier: MIT */
/* Per-client IPC segment: create, attach, validate (shm.h). */
#include "ipc/shm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/util.h"

#define PAGE 4096u

/* The layout both sides derive from ring_records alone. */
struct layout {
	uint64_t ring_bytes;	/* exact bytes of one ring */
	uint64_t to_coord_off;	/* page-aligned */
	uint64_t to_client_off; /* page-aligned */
	uint64_t seg_size;
};

static uint64_t page_up(uint64_t x)
{
	return (x + PAGE - 1) & ~(uint64_t)(PAGE - 1);
}

static int layout_of(uint32_t recs, struct layout *l)
{
	if (recs < VE_RING_MIN_RECORDS || recs > VE_RING_MAX_RECORDS || (recs & (recs - 1)))
		return -EINVAL;
	l->ring_bytes = ve_ring_bytes(recs);
	l->to_coord_off = VE_IPC_HDR_SIZE;
	l->to_client_off = l->to_coord_off + page_up(l->ring_bytes);
	l->seg_size = l->to_client_off + page_up(l->ring_bytes);
	return 0;
}

size_t ve_shm_size(uint32_t ring_records)
{
	struct layout l;
	return layout_of(ring_records, &l) ? 0 : (size_t)l.seg_size;
}

static int name_ok(const char *name)
{
	size_t n = strnlen(name, VE_SHM_NAME_MAX);
	return name[0] == '/' && n > 1 && n < VE_SHM_NAME_MAX && !strchr(name + 1, '/');
}

/* Maps the segment and builds the process-local ring views from l. */
static int map_segment(int fd, const struct layout *l, uint32_t recs, int fresh, struct ve_shm *out)
{
	void *base = mmap(NULL, l->seg_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED)
		return -errno;
	struct ve_shm s = {
	    .base = base, .size = l->seg_size, .fd = fd, .ring_records = recs, .hdr = base};
	char *b = base;
	if (!fresh) {
		/* A6 (pairs with R6 in ve_shm_create_ex): the ring headers read
		 * below were written before the magic. (An fd passed over a socket
		 * is ordered by sendmsg/recvmsg already; a segment opened by name
		 * is not.) */
		uint32_t magic = atomic_load_explicit(&s.hdr->magic, memory_order_acquire);
		if (magic != VE_IPC_MAGIC) {
			munmap(base, l->seg_size);
			return -EAGAIN;
		}
	}
	int (*setup)(struct ve_ring *, void *, size_t) = fresh ? ve_ring_init : ve_ring_attach;
	int err = setup(&s.to_coord, b + l->to_coord_off, l->ring_bytes);
	if (!err)
		err = setup(&s.to_client, b + l->to_client_off, l->ring_bytes);
	if (!err && (s.to_coord.cap != recs || s.to_client.cap != recs))
		err = -EINVAL;
	if (err) {
		if (!fresh)
			VE_ERR("ipc: segment rings do not match its header; refusing it");
		munmap(base, l->seg_size);
		return err;
	}
	*out = s;
	return 0;
}

int ve_shm_create(size_t ring_records, struct ve_shm *out)
{
	struct ve_shm_opts o = {.ring_records = ring_records, .client_id = -1, .gid = -1};
	return ve_shm_create_ex(&o, out);
}

int ve_shm_create_ex(const struct ve_shm_opts *o, struct ve_shm *out)
{
	if (!o || !out || o->ring_records == 0 || o->ring_records > VE_RING_MAX_RECORDS ||
	    (o->flags & ~VE_IPC_F_MASK) || (o->name && !name_ok(o->name)))
		return -EINVAL;
	uint32_t recs = VE_RING_MIN_RECORDS;
	while (recs < o->ring_records)
		recs <<= 1;
	struct layout l;
	layout_of(recs, &l);

	int fd, err;
	if (o->name)
		fd = shm_open(o->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	else
		fd = memfd_create("vitamin-e-ipc", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	/* fchmod after creation: the mode given to shm_open is filtered by umask,
	 * and a memfd starts out 0777. */
	if (fchmod(fd, o->gid >= 0 ? 0660 : 0600) < 0 ||
	    (o->gid >= 0 && fchown(fd, (uid_t)-1, (gid_t)o->gid) < 0) ||
	    ftruncate(fd, (off_t)l.seg_size) < 0)
		goto fail_errno;
	/* Sealed so no peer can shrink it under our mappings (SIGBUS) or grow it,
	 * and F_SEAL_SEAL so nobody can add a write seal either (memfd_create(2)). */
	if (!o->name && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
		goto fail_errno;
	err = map_segment(fd, &l, recs, 1, out);
	if (err)
		goto fail;

	struct ve_ipc_hdr *h = out->hdr;
	h->version = VE_IPC_VERSION;
	h->rec_size = VE_REC_SIZE;
	h->hdr_size = VE_IPC_HDR_SIZE;
	h->ring_records = recs;
	h->seg_size = l.seg_size;
	h->ring_bytes = l.ring_bytes;
	h->to_coord_off = l.to_coord_off;
	h->to_client_off = l.to_client_off;
	h->client_id = o->client_id;
	h->flags = o->flags;
	/* R6 (pairs with A6 in map_segment): everything above and the ring
	 * headers are written before a peer can see the magic. */
	atomic_store_explicit(&h->magic, VE_IPC_MAGIC, memory_order_release);
	if (o->name)
		snprintf(out->name, sizeof(out->name), "%s", o->name);
	return 0;

fail_errno:
	err = -errno;
fail:
	close(fd);
	if (o->name)
		shm_unlink(o->name);
	return err;
}

static int attach(int fd, int need_seal, struct ve_shm *out)
{
	if (fd < 0 || !out)
		return -EINVAL;
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(struct ve_ipc_hdr)) {
		VE_ERR("ipc: fd %d is not a segment (%lld bytes)", fd, (long long)st.st_size);
		return -EINVAL;
	}
	/* A segment that can shrink under our mapping makes our next access
	 * fault (SIGBUS); ve_shm_create seals every memfd it makes. */
	int seals = fcntl(fd, F_GET_SEALS);
	if (need_seal && (seals < 0 || !(seals & F_SEAL_SHRINK))) {
		VE_ERR("ipc: segment memfd is not sealed against shrinking; refusing it");
		return -EPERM;
	}

	/* Validate a private copy of the header before mapping anything: the
	 * peer can rewrite the shared one at any time. */
	struct ve_ipc_hdr h;
	ssize_t got = pread(fd, &h, sizeof(h), 0);
	if (got < 0)
		return -errno;
	if (got != (ssize_t)sizeof(h))
		return -EINVAL;
	uint32_t magic = atomic_load_explicit(&h.magic, memory_order_relaxed);
	if (magic == 0)
		return -EAGAIN;
	if (magic != VE_IPC_MAGIC) {
		VE_ERR("ipc: not a Vitamin-E IPC segment (magic 0x%08x, want 0x%08x)", magic,
		       VE_IPC_MAGIC);
		return -EINVAL;
	}
	if (h.version != VE_IPC_VERSION) {
		VE_ERR("ipc: segment speaks protocol version %u, this build speaks %u; refusing it "
		       "(run ved and its clients from the same release)",
		       h.version, VE_IPC_VERSION);
		return -EPROTO;
	}
	struct layout l;
	if (h.rec_size != VE_REC_SIZE || h.hdr_size != VE_IPC_HDR_SIZE ||
	    layout_of(h.ring_records, &l) || h.ring_bytes != l.ring_bytes ||
	    h.to_coord_off != l.to_coord_off || h.to_client_off != l.to_client_off ||
	    h.seg_size != l.seg_size || (uint64_t)st.st_size < l.seg_size ||
	    (h.flags & ~VE_IPC_F_MASK)) {
		VE_ERR("ipc: segment geometry is inconsistent (records %u, size %llu, file %lld); "
		       "refusing it",
		       h.ring_records, (unsigned long long)h.seg_size, (long long)st.st_size);
		return -EINVAL;
	}
	return map_segment(fd, &l, h.ring_records, 0, out);
}

int ve_shm_attach_fd(int fd, struct ve_shm *out)
{
	return attach(fd, 1, out);
}

int ve_shm_attach_name(const char *name, struct ve_shm *out)
{
	if (!name || !out || !name_ok(name))
		return -EINVAL;
	int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* A named segment cannot be sealed (shm_open files start with F_SEAL_SEAL):
	 * whoever can open the name is trusted not to truncate it. */
	int err = attach(fd, 0, out);
	if (err) {
		close(fd);
		return err;
	}
	snprintf(out->name, sizeof(out->name), "%s", name);
	return 0;
}

int ve_shm_unlink(const char *name)
{
	if (!name || !name_ok(name))
		return -EINVAL;
	return shm_unlink(name) < 0 ? -errno : 0;
}

void ve_shm_fini(struct ve_shm *s)
{
	if (!s)
		return;
	if (s->base)
		munmap(s->base, s->size);
	if (s->fd >= 0)
		close(s->fd);
	*s = (struct ve_shm){.fd = -1};
}

void ve_shm_announce(struct ve_shm *s, int side)
{
	struct ve_ipc_side *me = ve_shm_side(s, side);
	me->pid = (int32_t)getpid();
	atomic_store_explicit(&me->heartbeat, 1, memory_order_relaxed);
	ve_shm_set_state(s, side, VE_IPC_S_ATTACHED);
}
