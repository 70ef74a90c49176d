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

static int check_sample(const struct ve_rec_sample *r)
{
	if (!r->key || !r->ns || r->ns > (1ull << 40) || r->entry >= VE_PROTO_MAX_ENTRIES ||
	    r->rsvd0 || r->rsvd1 || r->rsvd2[0] || r->rsvd2[1] || r->rsvd2[2] || r->rsvd2[3])
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
		case VE_REC_SAMPLE:
			return check_sample(&r->u.sample);
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
	case VE_REC_SAMPLE:
		return "SAMPLE";
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

/* ------------------------------------------------------------------ codec */

static uint32_t clamp_u32(uint32_t v, uint32_t lo, uint32_t hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

static uint8_t op_flags_of(uint32_t ready_flags)
{
	return (uint8_t)(((ready_flags & VE_READY_LATENCY) ? VE_OPF_LATENCY : 0) |
			 ((ready_flags & VE_READY_COOPERATIVE) ? VE_OPF_COOPERATIVE : 0));
}

static uint32_t ready_flags_of(uint8_t op_flags)
{
	return ((op_flags & VE_OPF_LATENCY) ? VE_READY_LATENCY : 0) |
	       ((op_flags & VE_OPF_COOPERATIVE) ? VE_READY_COOPERATIVE : 0);
}

static uint32_t stream_idx_of(uint32_t stream)
{
	return stream < VE_PROTO_MAX_STREAMS ? stream : VE_PROTO_MAX_STREAMS - 1;
}

uint32_t ve_proto_encode_ready(const struct ve_ready_op *op, struct ve_rec rec[2])
{
	uint32_t n = 0;
	if (op->deadline_ns) {
		ve_rec_init(&rec[n], VE_REC_HINT);
		rec[n].u.hint.tok = op->tok;
		rec[n].u.hint.key = op->key;
		rec[n].u.hint.deadline_ns = op->deadline_ns;
		n++;
	}
	struct ve_rec *rr = &rec[n++];
	ve_rec_init(rr, VE_REC_READY);
	struct ve_rec_ready *p = &rr->u.ready;
	p->tok = op->tok;
	p->key = op->key;
	p->ready_ns = op->ready_ns;
	p->blocks = op->blocks ? op->blocks : 1;
	p->threads_per_block = clamp_u32(op->threads, 1, VE_PROTO_MAX_TPB);
	p->min_sms = op->min_sms > VE_PROTO_MAX_SMS ? VE_PROTO_MAX_SMS : op->min_sms;
	p->stream_idx = stream_idx_of(op->stream);
	p->priority = op->priority < -VE_PROTO_PRIO_MAX	 ? -VE_PROTO_PRIO_MAX
		      : op->priority > VE_PROTO_PRIO_MAX ? VE_PROTO_PRIO_MAX
							 : op->priority;
	p->kind = (uint8_t)clamp_u32(op->kind, 1, VE_PROTO_KIND_MAX - 1);
	p->op_flags = op_flags_of(op->flags);
	return n;
}

void ve_proto_decode_ready(const struct ve_rec_ready *r, uint32_t client, uint32_t client_flags,
			   uint64_t now_ns, struct ve_ready_op *op)
{
	*op = (struct ve_ready_op){
	    .tok = r->tok,
	    .key = r->key,
	    /* Ages are the receiver's: clients' clocks need not agree (a sim's is virtual). */
	    .ready_ns = now_ns,
	    .blocks = r->blocks,
	    .threads = r->threads_per_block,
	    .min_sms = r->min_sms,
	    .client = client,
	    .stream = r->stream_idx,
	    .priority = r->priority,
	    .kind = r->kind,
	    .flags = (uint8_t)(ready_flags_of(r->op_flags) | (client_flags & VE_READY_LATENCY)),
	};
}

void ve_proto_encode_done(uint64_t tok, uint16_t entry, uint64_t ns, int32_t status,
			  uint64_t now_ns, struct ve_rec *rec)
{
	ve_rec_init(rec, VE_REC_DONE);
	rec->u.done.tok = tok;
	rec->u.done.t_end_ns = now_ns;
	rec->u.done.t_start_ns = ns < now_ns ? now_ns - ns : 0;
	rec->u.done.status = status;
	rec->u.done.entry = entry;
}

uint64_t ve_proto_decode_done(const struct ve_rec_done *r)
{
	return r->t_end_ns - r->t_start_ns;
}

void ve_proto_encode_submit_failed(uint64_t tok, uint16_t entry, int status, struct ve_rec *rec)
{
	ve_rec_init(rec, VE_REC_SUBMIT_FAILED);
	rec->u.submit_failed.tok = tok;
	rec->u.submit_failed.status = status == 0		     ? -EIO
				      : status < VE_PROTO_STATUS_MIN ? VE_PROTO_STATUS_MIN
				      : status > VE_PROTO_STATUS_MAX ? VE_PROTO_STATUS_MAX
								     : status;
	rec->u.submit_failed.entry = entry;
}

void ve_proto_encode_hint(const struct ve_hint *h, struct ve_rec *rec)
{
	ve_rec_init(rec, VE_REC_HINT);
	struct ve_rec_hint *p = &rec->u.hint;
	p->key = h->key;
	p->deadline_ns = h->deadline_ns;
	p->expect_ready_ns = h->expect_ready_ns;
	p->blocks = h->blocks;
	p->min_sms = h->min_sms > VE_PROTO_MAX_SMS ? VE_PROTO_MAX_SMS : h->min_sms;
	p->threads_per_block = h->threads > VE_PROTO_MAX_TPB ? 0 : h->threads;
	p->op_flags = op_flags_of(h->flags);
}

void ve_proto_decode_hint(const struct ve_rec_hint *r, uint32_t client, struct ve_hint *h)
{
	*h = (struct ve_hint){.client = client,
			      .min_sms = r->min_sms,
			      .key = r->key,
			      .blocks = r->blocks,
			      .threads = r->threads_per_block,
			      .flags = ready_flags_of(r->op_flags),
			      .expect_ready_ns = r->expect_ready_ns,
			      .deadline_ns = r->deadline_ns};
}

void ve_proto_encode_piped(const struct ve_ready_op *op, uint16_t entry, struct ve_rec *rec)
{
	ve_rec_init(rec, VE_REC_PIPED);
	rec->u.piped.tok = op->tok;
	rec->u.piped.key = op->key;
	rec->u.piped.entry = entry;
	rec->u.piped.stream_idx = stream_idx_of(op->stream);
	rec->u.piped.kind = (uint8_t)clamp_u32(op->kind, 1, VE_PROTO_KIND_MAX - 1);
}

void ve_proto_decode_piped(const struct ve_rec_piped *r, uint32_t client, uint64_t now_ns,
			   struct ve_ready_op *op)
{
	*op = (struct ve_ready_op){.tok = r->tok,
				   .key = r->key,
				   .ready_ns = now_ns,
				   .client = client,
				   .stream = r->stream_idx,
				   .kind = r->kind};
}

void ve_proto_encode_bind(uint64_t tok, uint32_t stream, uint16_t entry, bool share,
			  uint32_t seq, struct ve_rec *rec)
{
	ve_rec_init(rec, VE_REC_BIND);
	rec->seq = seq;
	rec->u.bind.tok = tok;
	rec->u.bind.entry = entry;
	rec->u.bind.lane_stream = (uint16_t)(stream % VE_PROTO_MAX_LANES);
	rec->u.bind.flags = share ? VE_BINDF_SHARE : 0;
}

void ve_proto_decode_bind(const struct ve_rec_bind *r, uint16_t *entry, uint32_t *flags)
{
	*entry = r->entry;
	*flags = (r->flags & VE_BINDF_SHARE) ? VE_BIND_SHARE : 0;
}
