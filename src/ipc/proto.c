/* SPDX-License-Identifier: MIT */
#include "ipc/proto.h"

#include <errno.h>

#include "core/desc.h"

_Static_assert(VE_PROTO_KIND_MAX == VE_OP_KIND_MAX, "op kinds changed: bump VE_IPC_VERSION");

/* True if every byte of [p, p + n) is zero. */
static int zero(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint8_t acc = 0;
	for (size_t i = 0; i < n; i++)
		acc |= b[i];
	return acc == 0;
}

#define ZERO(field) zero(&(field), sizeof(field))

static int status_ok(int32_t s)
{
	return s >= VE_PROTO_STATUS_MIN && s <= VE_PROTO_STATUS_MAX;
}

static int check_ready(const struct ve_rec_ready *p)
{
	if (p->tok == 0 || p->blocks == 0)
		return -EINVAL;
	if (p->threads_per_block == 0 || p->threads_per_block > VE_PROTO_MAX_TPB)
		return -EINVAL;
	if (p->min_sms > VE_PROTO_MAX_SMS || p->stream_idx >= VE_PROTO_MAX_STREAMS)
		return -EINVAL;
	if (p->priority < -VE_PROTO_PRIO_MAX || p->priority > VE_PROTO_PRIO_MAX)
		return -EINVAL;
	if (p->kind == 0 || p->kind >= VE_PROTO_KIND_MAX || (p->op_flags & ~VE_OPF_MASK))
		return -EINVAL;
	if (!ZERO(p->rsvd0) || !ZERO(p->rsvd1))
		return -EINVAL;
	return 0;
}

static int check_done(const struct ve_rec_done *p)
{
	if (p->tok == 0 || p->t_end_ns < p->t_start_ns || !status_ok(p->status))
		return -EINVAL;
	if (p->entry >= VE_PROTO_MAX_ENTRIES && p->entry != VE_PROTO_ENTRY_NONE)
		return -EINVAL;
	if (!ZERO(p->rsvd0) || !ZERO(p->rsvd1))
		return -EINVAL;
	return 0;
}

static int check_submit_failed(const struct ve_rec_submit_failed *p)
{
	if (p->tok == 0 || p->status == 0 || !status_ok(p->status))
		return -EINVAL;
	if (p->entry >= VE_PROTO_MAX_ENTRIES)
		return -EINVAL;
	if (!ZERO(p->rsvd0) || !ZERO(p->rsvd1))
		return -EINVAL;
	return 0;
}

static int check_hint(const struct ve_rec_hint *p)
{
	if (p->min_sms > VE_PROTO_MAX_SMS || p->threads_per_block > VE_PROTO_MAX_TPB)
		return -EINVAL;
	if (p->stream_idx >= VE_PROTO_MAX_STREAMS || (p->op_flags & ~VE_OPF_MASK))
		return -EINVAL;
	if (!ZERO(p->rsvd0) || !ZERO(p->rsvd1))
		return -EINVAL;
	return 0;
}

static int check_piped(const struct ve_rec_piped *p)
{
	if (p->tok == 0 || p->entry >= VE_PROTO_MAX_ENTRIES || p->stream_idx >= VE_PROTO_MAX_STREAMS)
		return -EINVAL;
	if (p->kind < 1 || p->kind >= VE_PROTO_KIND_MAX)
		return -EINVAL;
	if (!ZERO(p->rsvd0) || !ZERO(p->rsvd1))
		return -EINVAL;
	return 0;
}

static int check_bye(const struct ve_rec_bye *p)
{
	if (p->reason > 0 || p->reason < VE_PROTO_STATUS_MIN)
		return -EINVAL;
	if (!ZERO(p->rsvd0) || !ZERO(p->rsvd1))
		return -EINVAL;
	return 0;
}

static int check_bind(const struct ve_rec_bind *p)
{
	if (p->tok == 0 || p->entry >= VE_PROTO_MAX_ENTRIES || p->lane_stream >= VE_PROTO_MAX_LANES)
		return -EINVAL;
	if ((p->flags & ~VE_BINDF_MASK) || !ZERO(p->rsvd0))
		return -EINVAL;
	return 0;
}

static int check_gate(const struct ve_rec_gate *p)
{
	if (p->entry >= VE_PROTO_MAX_ENTRIES || p->state > VE_GATE_OPEN)
		return -EINVAL;
	if (!ZERO(p->rsvd0) || !ZERO(p->rsvd1) || !ZERO(p->rsvd2))
		return -EINVAL;
	return 0;
}

static int check_reserve(const struct ve_rec_reserve *p)
{
	if (p->entry >= VE_PROTO_MAX_ENTRIES || p->holder < VE_PROTO_HOLDER_MIN)
		return -EINVAL;
	if (!ZERO(p->rsvd0) || !ZERO(p->rsvd1))
		return -EINVAL;
	return 0;
}

static int check_shutdown(const struct ve_rec_shutdown *p)
{
	if (p->reason > 0 || p->reason < VE_PROTO_STATUS_MIN)
		return -EINVAL;
	if (!ZERO(p->rsvd0) || !ZERO(p->rsvd1))
		return -EINVAL;
	return 0;
}

int ve_proto_check(const struct ve_rec *r, int dir)
{
	if (!r || (r->flags & ~VE_RECF_MASK))
		return -EINVAL;
	if (dir == VE_DIR_TO_COORD) {
		switch (r->type) {
		case VE_REC_READY:
			return check_ready(&r->u.ready);
		case VE_REC_DONE:
			return check_done(&r->u.done);
		case VE_REC_SUBMIT_FAILED:
			return check_submit_failed(&r->u.submit_failed);
		case VE_REC_HINT:
			return check_hint(&r->u.hint);
		case VE_REC_BYE:
			return check_bye(&r->u.bye);
		case VE_REC_PIPED:
			return check_piped(&r->u.piped);
		}
	} else if (dir == VE_DIR_TO_CLIENT) {
		switch (r->type) {
		case VE_REC_BIND:
			return check_bind(&r->u.bind);
		case VE_REC_GATE:
			return check_gate(&r->u.gate);
		case VE_REC_RESERVE:
			return check_reserve(&r->u.reserve);
		case VE_REC_SHUTDOWN:
			return check_shutdown(&r->u.shutdown);
		}
	}
	return -EINVAL;
}

const char *ve_proto_type_name(unsigned type)
{
	switch (type) {
	case VE_REC_READY:
		return "READY";
	case VE_REC_DONE:
		return "DONE";
	case VE_REC_SUBMIT_FAILED:
		return "SUBMIT_FAILED";
	case VE_REC_HINT:
		return "HINT";
	case VE_REC_BYE:
		return "BYE";
	case VE_REC_PIPED:
		return "PIPED";
	case VE_REC_BIND:
		return "BIND";
	case VE_REC_GATE:
		return "GATE";
	case VE_REC_RESERVE:
		return "RESERVE";
	case VE_REC_SHUTDOWN:
		return "SHUTDOWN";
	}
	return "?";
}
