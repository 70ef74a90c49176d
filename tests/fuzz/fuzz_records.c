/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: everything ved reads from a client, and what it does with it.
 *
 * The input is a little program of commands for one long-lived ved engine
 * (struct ve_serve over a real coordinator, H200 pool: 15 x 8 + 12 SMs, 59
 * entries) with up to four clients:
 *
 *   add a client / remove one (the daemon reclaiming a dead client)
 *   64 raw bytes as a record of client k          (ve_serve_apply)
 *   a structured record of client k: READY, DONE, SUBMIT_FAILED, HINT or BYE
 *     with fields drawn from the input, tokens from the ones it has in play,
 *     sequence numbers right unless the input says otherwise
 *   a scheduling round / client k consuming its BIND records
 *   raw bytes as a control message, both directions (ve_ctl_check)
 *   a valid control message of each type (HELLO, the requests, WELCOME,
 *     DOORBELL, REFUSE, STATUS with entries and clients, TRACE, PROFILE),
 *     which must pass, then mutated or truncated at input-chosen places
 *   raw bytes as a record, both directions       (ve_proto_check)
 *
 * A record refused as a violation disconnects its client (as ved does). After
 * every step the engine's invariants must hold (ve_serve_check: non-idle
 * entries disjoint, outstanding counts equal to the ops bound in the client
 * tables, holders and reservations live), and at the start of each input,
 * once every client is removed, the whole pool must be idle: refused input
 * never corrupts lease state. A bound op sent by the engine must name a live
 * op of its client and an entry large enough for it.
 *
 * ve_fuzz_records_one() returns 0, or -1 with ve_fuzz_why() set. libFuzzer's
 * entry point aborts on -1; tests/unit/test_fuzz_records.c drives the same
 * function without libFuzzer (define VE_FUZZ_NO_ENTRY before including this).
 */
#include "ved/server.h"
#include "ipc/ctl.h"
#include "ipc/proto.h"
#include "pool/pool.h"
#include "util/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FZ_CLIENTS 4
#define FZ_TOKS	   24

int ve_fuzz_records_one(const uint8_t *data, size_t size);
const char *ve_fuzz_why(void);
void ve_fuzz_stats(uint64_t *steps, uint64_t *accepted, uint64_t *violations, uint64_t *binds);

struct fz_tok {
	uint64_t tok;
	uint8_t state; /* 0 none, 1 ready sent, 2 bound (BIND taken) */
	uint16_t entry;
	uint32_t min_sms;
};

struct fz_client {
	bool on, untracked;
	uint32_t id, seq;
	struct fz_tok t[FZ_TOKS];
};

static struct ve_serve *fz_srv;
static struct fz_client fz_cl[FZ_CLIENTS];
static char fz_why[512];
static uint64_t fz_steps, fz_accepted, fz_violations, fz_binds;

const char *ve_fuzz_why(void)
{
	return fz_why;
}

void ve_fuzz_stats(uint64_t *steps, uint64_t *accepted, uint64_t *violations, uint64_t *binds)
{
	*steps = fz_steps;
	*accepted = fz_accepted;
	*violations = fz_violations;
	*binds = fz_binds;
}

struct fz_in {
	const uint8_t *p;
	size_t n, i;
};

static uint8_t u8(struct fz_in *in)
{
	return in->i < in->n ? in->p[in->i++] : 0;
}

static uint32_t u32(struct fz_in *in)
{
	uint32_t v = 0;
	for (int k = 0; k < 4; k++)
		v |= (uint32_t)u8(in) << (8 * k);
	return v;
}

/* A valid control message of type-kind t (fields drawn from the input)
 * into b; its length, and the direction that sends it. */
static size_t ctl_template(struct fz_in *in, uint8_t *b, size_t cap, int *dir)
{
	uint32_t t = u8(in) % 10;
	cap = VE_MIN(cap, (size_t)8192); /* every template fits: clearing more costs time */
	memset(b, 0, cap);
	*dir = VE_CTL_TO_VED;
	switch (t) {
	case 0: {
		struct ve_ctl_hello *m = (void *)b;
		ve_ctl_hdr_init(&m->h, VE_CTL_HELLO, sizeof(*m));
		m->ipc_version = 1 + u8(in) % 4;
		m->device = u8(in) % 8;
		m->nleaves = 1 + u8(in) % VE_CTL_MAX_LEAVES;
		for (uint32_t i = 0; i < m->nleaves; i++)
			m->leaf_sms[i] = 1 + u8(in) % 16;
		m->class_flags = u8(in) & VE_CTL_CLASS_MASK;
		snprintf(m->name, sizeof(m->name), "fz%u", u8(in));
		return sizeof(*m);
	}
	case 1:
	case 2:
	case 3: {
		static const uint16_t req[] = {VE_CTL_STATUS_REQ, VE_CTL_TRACE_REQ, VE_CTL_PROFILE_REQ};
		struct ve_ctl_status_req *m = (void *)b; /* the three share one layout */
		_Static_assert(sizeof(struct ve_ctl_status_req) == sizeof(struct ve_ctl_trace_req) &&
				   sizeof(struct ve_ctl_status_req) == sizeof(struct ve_ctl_profile_req),
			       "request layouts");
		ve_ctl_hdr_init(&m->h, req[t - 1], sizeof(*m));
		if (t == 2)
			((struct ve_ctl_trace_req *)(void *)b)->max_events = u32(in);
		return sizeof(*m);
	}
	case 4: {
		struct ve_ctl_welcome *m = (void *)b;
		*dir = VE_CTL_FROM_VED;
		ve_ctl_hdr_init(&m->h, VE_CTL_WELCOME, sizeof(*m));
		m->client_id = u8(in) % VE_CTL_MAX_CLIENTS;
		m->client_ops = 1 + u8(in);
		m->ring_records = 64;
		m->heartbeat_ms = 100;
		m->nentries = 1 + u8(in) % VE_CTL_MAX_ENTRIES;
		snprintf(m->policy, sizeof(m->policy), "tput");
		return sizeof(*m);
	}
	case 5: {
		struct ve_ctl_doorbell *m = (void *)b;
		*dir = VE_CTL_FROM_VED;
		ve_ctl_hdr_init(&m->h, VE_CTL_DOORBELL, sizeof(*m));
		return sizeof(*m);
	}
	case 6: {
		struct ve_ctl_refuse *m = (void *)b;
		*dir = VE_CTL_FROM_VED;
		ve_ctl_hdr_init(&m->h, VE_CTL_REFUSE, sizeof(*m));
		m->status = -(1 + (int32_t)(u8(in) % 100));
		snprintf(m->msg, sizeof(m->msg), "refused %u", u8(in));
		return sizeof(*m);
	}
	case 7: {
		struct ve_ctl_status *m = (void *)b;
		*dir = VE_CTL_FROM_VED;
		uint32_t ne = u8(in) % 8, nc = u8(in) % 4;
		size_t len = sizeof(*m) + ne * sizeof(struct ve_ctl_entry) +
			     nc * sizeof(struct ve_ctl_client);
		if (len > cap)
			return 0;
		ve_ctl_hdr_init(&m->h, VE_CTL_STATUS, (uint32_t)len);
		m->nentries = ne;
		m->nclients = nc;
		m->max_clients = 16;
		struct ve_ctl_entry *e = (void *)(m + 1);
		for (uint32_t i = 0; i < ne; i++) {
			e[i].holder = -1;
			e[i].reserve_for = -1;
			for (int k = 0; k < VE_CTL_MAX_SHARERS; k++)
				e[i].sharers[k] = -1;
		}
		struct ve_ctl_client *c = (void *)(e + ne);
		for (uint32_t i = 0; i < nc; i++)
			c[i].id = (int32_t)i;
		return len;
	}
	case 8: {
		struct ve_ctl_trace *m = (void *)b;
		*dir = VE_CTL_FROM_VED;
		uint32_t n = u8(in) % 4;
		size_t len = sizeof(*m) + n * sizeof(struct ve_ctl_tev);
		ve_ctl_hdr_init(&m->h, VE_CTL_TRACE, (uint32_t)len);
		m->nevents = n;
		m->total = n;
		struct ve_ctl_tev *ev = (void *)(m + 1);
		for (uint32_t i = 0; i < n; i++)
			ev[i].kind = VE_TEV_OP;
		return len;
	}
	default: {
		struct ve_ctl_profile *m = (void *)b;
		*dir = VE_CTL_FROM_VED;
		uint32_t n = u8(in) % 32;
		ve_ctl_hdr_init(&m->h, VE_CTL_PROFILE, (uint32_t)(sizeof(*m) + n));
		m->nbytes = n;
		m->total = n;
		memset(m + 1, 'p', n);
		return sizeof(*m) + n;
	}
	}
}

static int check(const char *after)
{
	char why[400];
	if (ve_serve_check(fz_srv, why, sizeof(why)) == 0)
		return 0;
	snprintf(fz_why, sizeof(fz_why), "after %s: %s", after, why);
	return -1;
}

static int setup(void)
{
	if (fz_srv)
		return 0;
	static uint32_t leaves[16];
	for (int i = 0; i < 15; i++)
		leaves[i] = 8;
	leaves[15] = 12;
	/* check runs inside apply/schedule/remove too; it only logs there: the
	 * verdict is ours, after every step. */
	struct ve_serve_config sc = {.coord = {.leaf_sms = leaves,
					       .nleaves = 16,
					       .max_clients = FZ_CLIENTS,
					       .policy = "chaos",
					       .seed = 1,
					       /* the per-op record protocol is what
						* this fuzzes; grants travel in shared
						* words, checked in ved's grants() */
					       .per_op = true},
				     .client_ops = 64,
				     .trace_events = 64};
	char err[256];
	if (ve_serve_create(&sc, &fz_srv, err, sizeof(err))) {
		snprintf(fz_why, sizeof(fz_why), "cannot create the engine: %s", err);
		return -1;
	}
	return 0;
}

static void drop(int k)
{
	if (!fz_cl[k].on)
		return;
	ve_serve_client_remove(fz_srv, fz_cl[k].id);
	memset(&fz_cl[k], 0, sizeof(fz_cl[k]));
}

/* Applies r for client k the way ved does: a violation disconnects it.
 * *accepted says whether the engine took the record. -1 on a broken invariant. */
static int apply(int k, struct ve_rec *r, bool *accepted)
{
	struct fz_client *c = &fz_cl[k];
	int rc = ve_serve_apply(fz_srv, c->id, r);
	*accepted = rc == 0;
	if (rc < 0) {
		fz_violations++;
		drop(k);
	} else if (rc == 1) {
		drop(k);
	} else {
		fz_accepted++;
		c->seq++;
	}
	return check("a record");
}

static struct fz_tok *pick_tok(struct fz_client *c, struct fz_in *in, int want_state)
{
	int start = u8(in) % FZ_TOKS;
	for (int j = 0; j < FZ_TOKS; j++) {
		struct fz_tok *t = &c->t[(start + j) % FZ_TOKS];
		if (want_state < 0 || t->state == want_state)
			return t;
	}
	return &c->t[start];
}

static int structured(int k, struct fz_in *in)
{
	struct fz_client *c = &fz_cl[k];
	uint8_t sel = u8(in), twist = u8(in);
	struct ve_rec r;
	struct fz_tok *t = NULL;
	int what = sel % 7;
	if ((what == 2 || what == 3) && !(twist & 0x20)) {
		/* Answers only for ops that are bound, unless the input insists:
		 * deeper states than a stream of refused records reaches. */
		bool any = false;
		for (int j = 0; j < FZ_TOKS; j++)
			any |= c->t[j].state == 2;
		if (!any)
			what = 0;
	}
	switch (what) {
	case 0:
	case 1: /* READY: a fresh token usually, a live one sometimes */
		t = pick_tok(c, in, (twist & 7) ? 0 : -1);
		if (!t->state)
			t->tok = 1 + (uint64_t)(t - c->t) + ((uint64_t)u8(in) << 40);
		ve_rec_init(&r, VE_REC_READY);
		r.u.ready.tok = t->tok;
		r.u.ready.key = u8(in);
		r.u.ready.blocks = 1 + u32(in) % 8192;
		r.u.ready.threads_per_block = 1 + u32(in) % 1024;
		r.u.ready.min_sms = (twist & 8) ? (uint32_t)(u8(in) % 140) : 0;
		r.u.ready.stream_idx = u8(in);
		r.u.ready.priority = (int8_t)u8(in) % 4;
		r.u.ready.kind = 1;
		r.u.ready.op_flags = u8(in) & 3;
		t->min_sms = r.u.ready.min_sms;
		break;
	case 2: /* DONE for a bound op (its entry, or a wrong one) */
		t = pick_tok(c, in, 2);
		ve_rec_init(&r, VE_REC_DONE);
		r.u.done.tok = t->tok ? t->tok : 1;
		r.u.done.t_start_ns = u8(in);
		r.u.done.t_end_ns = r.u.done.t_start_ns + u32(in);
		r.u.done.entry = (twist & 16) ? (uint16_t)(u8(in) % 64) : t->entry;
		break;
	case 3: /* SUBMIT_FAILED: back to ready */
		t = pick_tok(c, in, 2);
		ve_rec_init(&r, VE_REC_SUBMIT_FAILED);
		r.u.submit_failed.tok = t->tok ? t->tok : 1;
		r.u.submit_failed.status = -(int32_t)(1 + u8(in) % 100);
		r.u.submit_failed.entry = (twist & 16) ? (uint16_t)(u8(in) % 64) : t->entry;
		break;
	case 4: /* HINT: an advisory, or a deadline for a READY to come */
		ve_rec_init(&r, VE_REC_HINT);
		r.u.hint.tok = (twist & 1) ? c->t[u8(in) % FZ_TOKS].tok : 0;
		r.u.hint.key = u8(in);
		r.u.hint.deadline_ns = (twist & 2) ? ve__now_ns() + u32(in) : 0;
		r.u.hint.expect_ready_ns = (twist & 4) ? ve__now_ns() + u32(in) : 0;
		r.u.hint.blocks = u32(in) % 10000;
		r.u.hint.min_sms = u8(in) % 64;
		r.u.hint.op_flags = u8(in) & 3;
		break;
	case 5: /* SAMPLE: a run time for the profiles (grant mode), valid or not */
		ve_rec_init(&r, VE_REC_SAMPLE);
		r.u.sample.key = u8(in);
		r.u.sample.ns = (twist & 16) ? u32(in) : (uint64_t)u32(in) << 16;
		r.u.sample.entry = (uint16_t)(u8(in) % 80);
		break;
	default:
		ve_rec_init(&r, VE_REC_BYE);
		r.u.bye.reason = -(int32_t)(u8(in) % 3);
		break;
	}
	r.seq = (twist & 0x80) ? u32(in) : c->seq;
	bool mutated = false;
	if (twist & 0x40) { /* one flipped bit: mostly malformed, sometimes still valid */
		((uint8_t *)&r)[u8(in) % sizeof(r)] ^= (uint8_t)(1u << (u8(in) % 8));
		mutated = true;
	}
	bool ok;
	int rc = apply(k, &r, &ok);
	if (!ok || !fz_cl[k].on)
		return rc;
	if (mutated) {
		c->untracked = true; /* the shadow may no longer match the engine */
		return rc;
	}
	if (r.type == VE_REC_READY)
		t->state = 1;
	else if (r.type == VE_REC_DONE)
		t->state = 0, t->tok = 0;
	else if (r.type == VE_REC_SUBMIT_FAILED)
		t->state = 1;
	return rc;
}

static int take(int k)
{
	struct fz_client *c = &fz_cl[k];
	struct ve_rec b[16];
	int n = ve_serve_take(fz_srv, c->id, b, 16);
	const struct ve_pool *p = ve_serve_pool(fz_srv);
	for (int i = 0; i < n; i++) {
		fz_binds++;
		if (ve_proto_check(&b[i], VE_DIR_TO_CLIENT) || b[i].type != VE_REC_BIND) {
			snprintf(fz_why, sizeof(fz_why), "the engine sent a malformed record");
			return -1;
		}
		struct fz_tok *t = NULL;
		for (int j = 0; j < FZ_TOKS; j++)
			if (c->t[j].tok == b[i].u.bind.tok && c->t[j].state == 1)
				t = &c->t[j];
		bool bad = !t || b[i].u.bind.entry >= p->nentries ||
			   p->e[b[i].u.bind.entry].sms < t->min_sms;
		/* A mutated record the engine accepted (a flipped bit can turn
		 * one type into another that is still valid) leaves the shadow
		 * unsure of this client's ops: only the engine's own invariants
		 * (check()) hold it then. */
		if (bad && c->untracked)
			continue;
		if (bad) {
			snprintf(
			    fz_why, sizeof(fz_why),
			    "BIND of token %#llx to entry %u: not a ready op of the client, or "
			    "too small",
			    (unsigned long long)b[i].u.bind.tok, b[i].u.bind.entry);
			return -1;
		}
		t->state = 2;
		t->entry = b[i].u.bind.entry;
	}
	return 0;
}

int ve_fuzz_records_one(const uint8_t *data, size_t size)
{
	if (setup())
		return -1;
	/* Everyone left: the pool must be idle, whatever the last input did. */
	for (int k = 0; k < FZ_CLIENTS; k++)
		drop(k);
	if (check("removing every client"))
		return -1;
	const struct ve_pool *p = ve_serve_pool(fz_srv);
	for (uint32_t e = 0; e < p->nentries; e++)
		if (p->e[e].state != VE_ENTRY_IDLE || p->e[e].outstanding) {
			snprintf(fz_why, sizeof(fz_why),
				 "entry %u %s with %u outstanding after every "
				 "client left",
				 e, ve_entry_state_name(p->e[e].state), p->e[e].outstanding);
			return -1;
		}
	struct fz_in in = {.p = data, .n = size};
	static union {
		uint8_t b[VE_CTL_MAX_MSG];
		uint64_t align;
	} msg;
	while (in.i < in.n) {
		fz_steps++;
		uint8_t op = u8(&in);
		int k = (op >> 4) % FZ_CLIENTS;
		struct fz_client *c = &fz_cl[k];
		int rc = 0;
		switch (op & 15) {
		case 0:
		case 1:
			if (!c->on) {
				uint32_t id;
				if (ve_serve_client_add(fz_srv, (op & 1) ? VE_READY_LATENCY : 0,
							100 + k, "fuzz", &id) == 0) {
					memset(c, 0, sizeof(*c));
					c->on = true;
					c->id = id;
				}
			}
			break;
		case 2:
			drop(k);
			rc = check("a removal");
			break;
		case 3: { /* raw record */
			struct ve_rec r;
			memset(&r, 0, sizeof(r));
			size_t n = in.n - in.i < sizeof(r) ? in.n - in.i : sizeof(r);
			memcpy(&r, in.p + in.i, n);
			in.i += n;
			bool ok;
			if (c->on) {
				rc = apply(k, &r, &ok);
				if (ok)
					c->untracked = true;
			}
			break;
		}
		case 4:
		case 5:
		case 6:
		case 7:
			if (c->on)
				rc = structured(k, &in);
			break;
		case 8:
		case 9:
			ve_serve_schedule(fz_srv);
			rc = check("a scheduling round");
			break;
		case 10:
		case 11:
			if (c->on)
				rc = take(k);
			break;
		case 12: { /* control message, both directions */
			size_t n = (size_t)u8(&in) | (size_t)u8(&in) << 8;
			if (n > in.n - in.i)
				n = in.n - in.i;
			memcpy(msg.b, in.p + in.i, n);
			/* Often make the header plausible so the body gets checked. */
			if (op & 0x40) {
				/* A valid message must pass; then mutations and cuts. Its
				 * fields come from the bytes after the length. */
				int dir;
				size_t len = ctl_template(&in, msg.b, sizeof(msg.b), &dir);
				if (len && ve_ctl_check(msg.b, len, dir)) {
					snprintf(fz_why, sizeof(fz_why),
						 "a valid %s message was refused",
						 ve_ctl_type_name(((struct ve_ctl_hdr *)(void *)msg.b)->type));
					return -1;
				}
				for (int m = u8(&in) % 4; m > 0 && len; m--) {
					size_t at = u32(&in) % len;
					if (u8(&in) & 1)
						len = at; /* truncated there */
					else
						msg.b[at] ^= (uint8_t)(1u << (u8(&in) % 8));
				}
				ve_ctl_check(msg.b, len, VE_CTL_TO_VED);
				ve_ctl_check(msg.b, len, VE_CTL_FROM_VED);
				break;
			}
			if (n >= sizeof(struct ve_ctl_hdr) && (op & 0x10)) {
				struct ve_ctl_hdr h;
				memcpy(&h, msg.b, sizeof(h));
				h.magic = VE_CTL_MAGIC;
				h.version = VE_CTL_VERSION;
				h.len = (uint32_t)n;
				memcpy(msg.b, &h, sizeof(h));
			}
			in.i += n;
			ve_ctl_check(msg.b, n, VE_CTL_TO_VED);
			ve_ctl_check(msg.b, n, VE_CTL_FROM_VED);
			break;
		}
		default: { /* raw record, pure decoder, both directions */
			struct ve_rec r;
			memset(&r, 0, sizeof(r));
			size_t n = in.n - in.i < sizeof(r) ? in.n - in.i : sizeof(r);
			memcpy(&r, in.p + in.i, n);
			in.i += n;
			ve_proto_check(&r, VE_DIR_TO_COORD);
			ve_proto_check(&r, VE_DIR_TO_CLIENT);
			break;
		}
		}
		if (rc)
			return -1;
	}
	return 0;
}

#ifndef VE_FUZZ_NO_ENTRY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (ve_fuzz_records_one(data, size)) {
		fprintf(stderr, "fuzz_records: %s\n", ve_fuzz_why());
		abort();
	}
	return 0;
}
#endif
