/* SPDX-License-Identifier: MIT */
/* The coordinator serving remote clients over records (server.h). */
#include "ved/server.h"
#include "ved/toktab.h"
#include "util/util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCH 64
#define WAIT_SAMPLES 512 /* recent wait-for-bind samples per client (metrics) */

enum { OP_FREE = 0, OP_READY, OP_BOUND };

struct sop {
	struct ve_ready_op op; /* as handed to the coordinator (client = our id) */
	uint64_t t_bind;
	uint16_t entry;
	uint8_t state;
	uint8_t shared;
	uint8_t delivered; /* its BIND left the queue: the client may answer it */
	uint8_t pad[3];
	uint32_t next_free;
};

struct sclient {
	bool active;
	uint32_t flags;
	int32_t pid;
	char name[VE_CTL_NAME_MAX];
	uint64_t joined_ns;
	struct sop *ops;
	uint32_t free_head;
	uint32_t nlive, nready, nbound;
	struct ve_toktab tab;
	uint32_t *out; /* FIFO of sop indices whose BIND is not yet in the ring */
	uint32_t out_head, out_n;
	uint32_t in_seq, out_seq;
	uint64_t hint_tok, hint_deadline; /* deadline for the READY that follows */
	uint64_t bindings, completions, failed, records_in, records_out;
	uint64_t wait_n, wait_sum_ns; /* wait-for-bind: ready -> bound */
	uint64_t wait_ns[WAIT_SAMPLES];
	uint64_t local_binds, local_done; /* grant mode: what the client bound itself */
	uint64_t late;			  /* grant mode: its ops late for their deadline */
};

struct ve_serve {
	struct ve_serve_config cfg;
	struct ve_coord *co;
	const struct ve_pool *pool;
	uint32_t max_clients;
	struct sclient cl[VE_COORD_MAX_CLIENTS];
	uint32_t bound_on[VE_POOL_MAX_ENTRIES]; /* ops bound per entry, all clients */
	struct ve_binding bind[BATCH];
	bool dirty;
	char err[256];
	struct ve_ctl_tev *tr;
	uint32_t tr_cap, tr_next;
	uint64_t tr_n;
	struct ve_serve_stats st;
};

static int violation(struct ve_serve *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int violation(struct ve_serve *s, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s->err, sizeof(s->err), fmt, ap);
	va_end(ap);
	s->st.protocol_errors++;
	return -EPROTO;
}

static void trace_add(struct ve_serve *s, uint8_t kind, uint32_t client, uint64_t t0, uint64_t t1,
		      uint64_t key, uint64_t tok, uint16_t entry)
{
	if (!s->tr_cap)
		return;
	struct ve_ctl_tev *e = &s->tr[s->tr_next];
	*e = (struct ve_ctl_tev){.t0_ns = t0,
				 .t1_ns = t1 >= t0 ? t1 : t0,
				 .key = key,
				 .tok = tok,
				 .client = (int32_t)client,
				 .pid = client < s->max_clients ? s->cl[client].pid : 0,
				 .entry = entry,
				 .sms = entry < s->pool->nentries ? (uint16_t)s->pool->e[entry].sms
								  : 0,
				 .kind = kind};
	s->tr_next = (s->tr_next + 1) % s->tr_cap;
	s->tr_n++;
}

/* ------------------------------------------------------------------ create */

int ve_serve_create(const struct ve_serve_config *cfg, struct ve_serve **out, char *err,
		    size_t errlen)
{
	char dummy[8];
	if (!err) {
		err = dummy;
		errlen = sizeof(dummy);
	}
	err[0] = 0;
	if (!cfg || !out)
		return -EINVAL;
	struct ve_serve *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->cfg = *cfg;
	if (!s->cfg.client_ops)
		s->cfg.client_ops = 4096;
	s->max_clients = cfg->coord.max_clients ? cfg->coord.max_clients : 16;
	if (s->max_clients > VE_COORD_MAX_CLIENTS || s->cfg.client_ops > 65536 ||
	    (uint64_t)s->max_clients * s->cfg.client_ops > (1u << 20)) {
		snprintf(err, errlen,
			 "max_clients %u x client_ops %u is too large (at most %u x %u, "
			 "and 2^20 ops in all)",
			 s->max_clients, s->cfg.client_ops, VE_COORD_MAX_CLIENTS, 65536);
		free(s);
		return -EINVAL;
	}
	struct ve_coord_config cc = cfg->coord;
	cc.max_clients = s->max_clients;
	/* Every op a client may have at once fits: ve_coord_ready never refuses
	 * an op of a client within its limit. */
	cc.ready_cap = s->max_clients * s->cfg.client_ops;
	int rc = ve_coord_create(&cc, &s->co, err, errlen);
	if (rc) {
		free(s);
		return rc;
	}
	s->pool = ve_coord_pool(s->co);
	if (cfg->trace_events) {
		s->tr_cap = cfg->trace_events;
		s->tr = calloc(s->tr_cap, sizeof(*s->tr));
		if (!s->tr) {
			ve_serve_destroy(s);
			return -ENOMEM;
		}
	}
	*out = s;
	return 0;
}

static void client_free(struct sclient *c)
{
	free(c->ops);
	free(c->out);
	ve_toktab_fini(&c->tab);
	memset(c, 0, sizeof(*c));
}

void ve_serve_destroy(struct ve_serve *s)
{
	if (!s)
		return;
	for (uint32_t i = 0; i < VE_COORD_MAX_CLIENTS; i++)
		if (s->cl[i].ops)
			client_free(&s->cl[i]);
	ve_coord_destroy(s->co);
	free(s->tr);
	free(s);
}

struct ve_coord *ve_serve_coord(struct ve_serve *s)
{
	return s->co;
}

const struct ve_pool *ve_serve_pool(const struct ve_serve *s)
{
	return s->pool;
}

uint32_t ve_serve_client_ops(const struct ve_serve *s)
{
	return s->cfg.client_ops;
}

const char *ve_serve_error(const struct ve_serve *s)
{
	return s->err;
}

bool ve_serve_dirty(const struct ve_serve *s)
{
	return s->dirty;
}

/* ------------------------------------------------------------------ clients */

int ve_serve_client_add(struct ve_serve *s, uint32_t flags, int32_t pid, const char *name,
			uint32_t *id)
{
	uint32_t i;
	for (i = 0; i < s->max_clients; i++)
		if (!s->cl[i].active)
			break;
	if (i == s->max_clients)
		return -ENOSPC;
	struct sclient *c = &s->cl[i];
	memset(c, 0, sizeof(*c));
	uint32_t n = s->cfg.client_ops;
	c->ops = calloc(n, sizeof(*c->ops));
	c->out = calloc(n, sizeof(*c->out));
	if (!c->ops || !c->out || ve_toktab_init(&c->tab, n)) {
		client_free(c);
		return -ENOMEM;
	}
	for (uint32_t k = 0; k < n; k++)
		c->ops[k].next_free = k + 1 < n ? k + 1 : UINT32_MAX;
	c->free_head = 0;
	int rc = ve_coord_client_add(s->co, i, flags & VE_READY_LATENCY);
	if (rc) {
		client_free(c);
		return rc;
	}
	c->active = true;
	c->flags = flags & VE_READY_LATENCY;
	c->pid = pid;
	snprintf(c->name, sizeof(c->name), "%s", name ? name : "");
	c->joined_ns = ve__now_ns();
	s->st.joined++;
	trace_add(s, VE_TEV_JOIN, i, c->joined_ns, c->joined_ns, 0, 0, VE_PROTO_ENTRY_NONE);
	*id = i;
	return 0;
}

bool ve_serve_client_active(const struct ve_serve *s, uint32_t id)
{
	return id < s->max_clients && s->cl[id].active;
}

static void op_free(struct sclient *c, uint32_t k)
{
	ve_toktab_del(&c->tab, c->ops[k].op.tok);
	c->ops[k].state = OP_FREE;
	c->ops[k].next_free = c->free_head;
	c->free_head = k;
	c->nlive--;
}

static void check_or_die(struct ve_serve *s, const char *when)
{
	if (!s->cfg.check)
		return;
	char why[512];
	if (ve_serve_check(s, why, sizeof(why)) == 0)
		return;
	VE_ERR("ved self-check failed after %s: %s", when, why);
	if (s->cfg.check_abort) {
		ve_pool_dump(s->pool, stderr);
		abort();
	}
}

uint32_t ve_serve_client_remove(struct ve_serve *s, uint32_t id)
{
	if (id >= s->max_clients || !s->cl[id].active)
		return 0;
	struct sclient *c = &s->cl[id];
	uint32_t reclaimed = 0;
	/* Complete every op still bound (delivered or queued): its lease
	 * accounting goes back exactly as if it had finished. */
	for (uint32_t k = 0; k < s->cfg.client_ops; k++) {
		struct sop *o = &c->ops[k];
		if (o->state != OP_BOUND)
			continue;
		ve_coord_done(s->co, id, o->entry, o->op.key, 0);
		s->bound_on[o->entry]--;
		reclaimed++;
	}
	ve_coord_client_remove(s->co, id);
	/* Its process is leaving or gone: what it had running on the GPU ends
	 * with it, so its leaves are free for the others at once. */
	ve_coord_client_forget(s->co, id);
	uint64_t now = ve__now_ns();
	trace_add(s, VE_TEV_LEAVE, id, now, now, 0, reclaimed, VE_PROTO_ENTRY_NONE);
	client_free(c);
	s->st.left++;
	s->st.reclaimed_ops += reclaimed;
	s->dirty = true;
	check_or_die(s, "a client removal");
	return reclaimed;
}

/* ------------------------------------------------------------------ records */

static uint32_t lookup(struct sclient *c, uint64_t tok, uint8_t state)
{
	uint32_t k = ve_toktab_get(&c->tab, tok);
	return k != VE_TOKTAB_NONE && c->ops[k].state == state ? k : VE_TOKTAB_NONE;
}

static int apply_ready(struct ve_serve *s, uint32_t id, const struct ve_rec_ready *r)
{
	struct sclient *c = &s->cl[id];
	if (ve_toktab_get(&c->tab, r->tok) != VE_TOKTAB_NONE)
		return violation(s, "READY for token %#llx, which is already live",
				 (unsigned long long)r->tok);
	if (c->nlive >= s->cfg.client_ops || c->free_head == UINT32_MAX)
		return violation(s, "more than %u ops at once (client_ops)", s->cfg.client_ops);
	uint32_t k = c->free_head;
	struct sop *o = &c->ops[k];
	struct ve_ready_op op;
	/* Ages are ved's: clients' clocks need not agree (a sim's is virtual). */
	ve_proto_decode_ready(r, id, c->flags, ve__now_ns(), &op);
	if (c->hint_tok == r->tok)
		op.deadline_ns = c->hint_deadline;
	c->hint_tok = 0;
	int rc = ve_coord_ready(s->co, &op);
	if (rc)
		return violation(s, "the coordinator refused a ready op (%d)", rc);
	c->free_head = o->next_free;
	memset(o, 0, sizeof(*o));
	o->op = op;
	o->state = OP_READY;
	ve_toktab_put(&c->tab, r->tok, k);
	c->nlive++;
	c->nready++;
	s->dirty = true;
	return 0;
}

static int bound_op(struct ve_serve *s, uint32_t id, uint64_t tok, uint16_t entry, const char *what,
		    uint32_t *kout)
{
	struct sclient *c = &s->cl[id];
	uint32_t k = lookup(c, tok, OP_BOUND);
	if (k == VE_TOKTAB_NONE || !c->ops[k].delivered)
		return violation(s, "%s for token %#llx, which is not bound to it", what,
				 (unsigned long long)tok);
	if (c->ops[k].entry != entry)
		return violation(s, "%s for token %#llx names entry %u, it was bound to %u", what,
				 (unsigned long long)tok, entry, c->ops[k].entry);
	*kout = k;
	return 0;
}

static int apply_done(struct ve_serve *s, uint32_t id, const struct ve_rec_done *r)
{
	struct sclient *c = &s->cl[id];
	uint32_t k;
	int rc = bound_op(s, id, r->tok, r->entry, "DONE", &k);
	if (rc)
		return rc;
	struct sop *o = &c->ops[k];
	uint64_t now = ve__now_ns();
	rc = ve_coord_done(s->co, id, o->entry, o->op.key, ve_proto_decode_done(r));
	if (rc)
		VE_ERR("ved: coordinator refused the completion of client %u token %#llx (%d)", id,
		       (unsigned long long)r->tok, rc);
	trace_add(s, VE_TEV_OP, id, o->t_bind, now, o->op.key, o->op.tok, o->entry);
	s->bound_on[o->entry]--;
	c->nbound--;
	c->completions++;
	op_free(c, k);
	s->dirty = true;
	return 0;
}

static int apply_failed(struct ve_serve *s, uint32_t id, const struct ve_rec_submit_failed *r)
{
	struct sclient *c = &s->cl[id];
	uint32_t k;
	int rc = bound_op(s, id, r->tok, r->entry, "SUBMIT_FAILED", &k);
	if (rc)
		return rc;
	struct sop *o = &c->ops[k];
	struct ve_binding b = {
	    .op = o->op, .entry = o->entry, .flags = o->shared ? VE_BIND_SHARE : 0};
	/* The op goes back to the ready queue at its age: it has room, since
	 * the client's live ops never exceed its share of it. */
	rc = ve_coord_submit_failed(s->co, &b, r->status);
	uint64_t now = ve__now_ns();
	trace_add(s, VE_TEV_FAILED, id, now, now, o->op.key, o->op.tok, o->entry);
	s->bound_on[o->entry]--;
	c->nbound--;
	c->failed++;
	if (rc) {
		op_free(c, k);
		return violation(s, "the coordinator could not requeue token %#llx (%d)",
				 (unsigned long long)r->tok, rc);
	}
	o->state = OP_READY;
	o->delivered = 0;
	c->nready++;
	s->dirty = true;
	return 0;
}

/* PIPED: the client put an op behind one of its ops still bound on the
 * entry (docs/architecture.md, "Dispatch"; its DONE comes after this record on the same
 * ring, so the entry is still this client's). Count it as bound there. */
static int apply_piped(struct ve_serve *s, uint32_t id, const struct ve_rec_piped *r)
{
	struct sclient *c = &s->cl[id];
	if (ve_toktab_get(&c->tab, r->tok) != VE_TOKTAB_NONE)
		return violation(s, "PIPED for token %#llx, which is already live",
				 (unsigned long long)r->tok);
	if (c->nlive >= s->cfg.client_ops || c->free_head == UINT32_MAX)
		return violation(s, "more than %u ops at once (client_ops)", s->cfg.client_ops);
	if (r->entry >= s->pool->nentries || !s->bound_on[r->entry])
		return violation(s, "PIPED on entry %u, where it has nothing bound", r->entry);
	bool mine = false;
	for (uint32_t k = 0; k < s->cfg.client_ops && !mine; k++)
		mine = c->ops[k].state == OP_BOUND && c->ops[k].entry == r->entry;
	if (!mine || ve_coord_pipeline_join(s->co, id, r->entry))
		return violation(s, "PIPED on entry %u, where it has nothing bound", r->entry);
	uint32_t k = c->free_head;
	struct sop *o = &c->ops[k];
	c->free_head = o->next_free;
	memset(o, 0, sizeof(*o));
	ve_proto_decode_piped(r, id, ve__now_ns(), &o->op);
	o->state = OP_BOUND;
	o->entry = r->entry;
	o->delivered = 1; /* the client answers it with a DONE like any binding */
	o->t_bind = o->op.ready_ns;
	ve_toktab_put(&c->tab, r->tok, k);
	c->nlive++;
	c->nbound++;
	s->bound_on[r->entry]++;
	s->st.piped++;
	return 0;
}

static int apply_hint(struct ve_serve *s, uint32_t id, const struct ve_rec_hint *r)
{
	struct sclient *c = &s->cl[id];
	if (r->tok) {
		/* A hint about one op: its deadline (the READY record has no
		 * field for it), applied to the READY with this token that follows. */
		c->hint_tok = r->tok;
		c->hint_deadline = r->deadline_ns;
		return 0;
	}
	struct ve_hint h;
	ve_proto_decode_hint(r, id, &h);
	ve_coord_hint(s->co, &h);
	s->dirty = true;
	return 0;
}

int ve_serve_apply(struct ve_serve *s, uint32_t id, const struct ve_rec *r)
{
	if (id >= s->max_clients || !s->cl[id].active)
		return -ENOENT;
	struct sclient *c = &s->cl[id];
	c->records_in++;
	s->st.records_in++;
	if (ve_proto_check(r, VE_DIR_TO_COORD))
		return violation(s, "malformed record (type %u %s)", r->type,
				 ve_proto_type_name(r->type));
	if (r->seq != c->in_seq)
		return violation(s, "record %s out of sequence (seq %u, expected %u)",
				 ve_proto_type_name(r->type), r->seq, c->in_seq);
	int rc;
	switch (r->type) {
	case VE_REC_READY:
		rc = apply_ready(s, id, &r->u.ready);
		break;
	case VE_REC_DONE:
		rc = apply_done(s, id, &r->u.done);
		break;
	case VE_REC_SUBMIT_FAILED:
		rc = apply_failed(s, id, &r->u.submit_failed);
		break;
	case VE_REC_HINT:
		rc = apply_hint(s, id, &r->u.hint);
		break;
	case VE_REC_PIPED:
		rc = apply_piped(s, id, &r->u.piped);
		break;
	case VE_REC_SAMPLE:
		ve_coord_observe(s->co, id, r->u.sample.entry, r->u.sample.key, r->u.sample.ns);
		rc = 0;
		break;
	default: /* BYE */
		rc = 1;
		break;
	}
	if (rc >= 0)
		c->in_seq++;
	return rc;
}

/* ------------------------------------------------------------------ schedule */

static void take_binding(struct ve_serve *s, const struct ve_binding *b, uint64_t now)
{
	uint32_t id = b->op.client;
	struct sclient *c = id < s->max_clients ? &s->cl[id] : NULL;
	uint32_t k = c && c->active ? lookup(c, b->op.tok, OP_READY) : VE_TOKTAB_NONE;
	if (k == VE_TOKTAB_NONE) {
		/* Cannot happen (the coordinator binds only ops we gave it); undo
		 * the lease accounting rather than leak it. */
		VE_ERR("ved: binding of unknown op %u:%#llx on entry %u undone", id,
		       (unsigned long long)b->op.tok, b->entry);
		ve_coord_done(s->co, id, b->entry, b->op.key, 0);
		return;
	}
	struct sop *o = &c->ops[k];
	o->state = OP_BOUND;
	o->entry = b->entry;
	o->shared = (b->flags & VE_BIND_SHARE) != 0;
	o->delivered = 0;
	o->t_bind = now;
	uint64_t wait = now > o->op.ready_ns ? now - o->op.ready_ns : 0;
	c->wait_ns[c->wait_n++ % WAIT_SAMPLES] = wait;
	c->wait_sum_ns += wait;
	c->nready--;
	c->nbound++;
	c->bindings++;
	s->bound_on[b->entry]++;
	c->out[(c->out_head + c->out_n) % s->cfg.client_ops] = k;
	c->out_n++; /* <= nbound <= client_ops: never overflows */
}

int ve_serve_schedule(struct ve_serve *s)
{
	int total = 0;
	s->st.schedules++;
	for (;;) {
		int n = ve_coord_schedule(s->co, s->bind, BATCH);
		if (n <= 0)
			break;
		uint64_t now = ve__now_ns();
		for (int i = 0; i < n; i++)
			take_binding(s, &s->bind[i], now);
		total += n;
		if (n < BATCH)
			break;
	}
	s->st.bindings += (uint64_t)total;
	s->dirty = false;
	check_or_die(s, "a scheduling round");
	return total;
}

static void bind_rec(struct ve_serve *s, struct sclient *c, uint32_t k, uint32_t seq,
		     struct ve_rec *r)
{
	(void)s;
	const struct sop *o = &c->ops[k];
	ve_proto_encode_bind(o->op.tok, o->op.stream, o->entry, o->shared, seq, r);
}

static void out_advance(struct ve_serve *s, struct sclient *c, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		c->ops[c->out[(c->out_head + i) % s->cfg.client_ops]].delivered = 1;
	c->out_head = (c->out_head + n) % s->cfg.client_ops;
	c->out_n -= n;
	c->out_seq += n;
	c->records_out += n;
	s->st.records_out += n;
}

int ve_serve_flush(struct ve_serve *s, uint32_t id, struct ve_ring_producer *p)
{
	if (id >= s->max_clients || !s->cl[id].active)
		return 0;
	struct sclient *c = &s->cl[id];
	int total = 0;
	while (c->out_n) {
		struct ve_rec *slots = NULL;
		int room = ve_ring_reserve(p, &slots, c->out_n < BATCH ? c->out_n : BATCH);
		if (room < 0)
			return room;
		if (room == 0)
			break;
		for (int i = 0; i < room; i++)
			bind_rec(s, c, c->out[(c->out_head + (uint32_t)i) % s->cfg.client_ops],
				 c->out_seq + (uint32_t)i, &slots[i]);
		ve_ring_commit(p, (uint32_t)room);
		out_advance(s, c, (uint32_t)room);
		total += room;
	}
	return total;
}

int ve_serve_take(struct ve_serve *s, uint32_t id, struct ve_rec *out, int max)
{
	if (id >= s->max_clients || !s->cl[id].active || max <= 0)
		return 0;
	struct sclient *c = &s->cl[id];
	uint32_t n = c->out_n < (uint32_t)max ? c->out_n : (uint32_t)max;
	for (uint32_t i = 0; i < n; i++)
		bind_rec(s, c, c->out[(c->out_head + i) % s->cfg.client_ops], c->out_seq + i,
			 &out[i]);
	out_advance(s, c, n);
	return (int)n;
}

uint32_t ve_serve_queued(const struct ve_serve *s, uint32_t id)
{
	return id < s->max_clients && s->cl[id].active ? s->cl[id].out_n : 0;
}

/* ------------------------------------------------------------------ checks */

#define FAIL(...)                                                                                  \
	do {                                                                                       \
		snprintf(why, len, __VA_ARGS__);                                                   \
		return -EFAULT;                                                                    \
	} while (0)

static bool live_client(const struct ve_serve *s, int32_t id)
{
	return id >= 0 && (uint32_t)id < s->max_clients && s->cl[id].active;
}

int ve_serve_check(struct ve_serve *s, char *why, size_t len)
{
	const struct ve_pool *p = s->pool;
	s->st.check_runs++;
	uint64_t acc = 0;
	int16_t first[64];
	memset(first, -1, sizeof(first));
	for (uint32_t e = 0; e < p->nentries; e++) {
		const struct ve_pool_entry *pe = &p->e[e];
		if (pe->state == VE_ENTRY_IDLE) {
			if (pe->outstanding)
				FAIL("entry %u is idle with %u ops outstanding", e,
				     pe->outstanding);
			continue;
		}
		if (acc & pe->leaves) {
			int other = first[__builtin_ctzll(acc & pe->leaves)];
			FAIL("entries %d (%s) and %u (%s) are both non-idle and share leaves %#llx",
			     other, ve_entry_state_name(p->e[other].state), e,
			     ve_entry_state_name(pe->state),
			     (unsigned long long)(acc & pe->leaves));
		}
		acc |= pe->leaves;
		for (int l = 0; l < 64; l++)
			if (pe->leaves >> l & 1)
				first[l] = (int16_t)e;
		if (pe->state == VE_ENTRY_DRAINING && pe->outstanding == 0)
			FAIL("entry %u drains with no work left", e);
		/* A draining entry keeps the sharers it had (the pool does not
		 * rewrite them): its remaining work belongs to the live ones. */
		if (pe->state == VE_ENTRY_LEASED) {
			if (pe->holder == VE_HOLDER_SHARED) {
				for (unsigned i = 0; i < p->nsharers[e]; i++)
					if (!live_client(s, p->sharers[e][i]))
						FAIL("entry %u is shared by client %d, which is "
						     "gone",
						     e, p->sharers[e][i]);
			} else if (!live_client(s, pe->holder)) {
				FAIL("entry %u is leased to client %d, which is gone", e,
				     pe->holder);
			}
		}
		if (pe->reserve_for != VE_HOLDER_NONE && !live_client(s, pe->reserve_for))
			FAIL("entry %u is reserved for client %d, which is gone", e,
			     pe->reserve_for);
		if (pe->outstanding != s->bound_on[e])
			FAIL("entry %u: %u ops outstanding in the pool, %u bound in the client "
			     "tables",
			     e, pe->outstanding, s->bound_on[e]);
	}
	if (acc != p->busy)
		FAIL("pool busy mask %#llx, non-idle entries cover %#llx",
		     (unsigned long long)p->busy, (unsigned long long)acc);
	const struct ve_policy_view *v = ve_coord_view(s->co);
	for (uint32_t i = 0; i < s->max_clients; i++) {
		const struct sclient *c = &s->cl[i];
		if (!!v->clients[i].active != c->active)
			FAIL("client %u: active %d here, %d in the coordinator", i, c->active,
			     v->clients[i].active);
		if (c->active && v->clients[i].nready != c->nready)
			FAIL("client %u: %u ready here, %u in the coordinator", i, c->nready,
			     v->clients[i].nready);
		if (c->active && c->nready + c->nbound != c->nlive)
			FAIL("client %u: %u ready + %u bound != %u live", i, c->nready, c->nbound,
			     c->nlive);
	}
	/* A full recount now and then: the per-entry counters above are kept
	 * incrementally, this checks them against the tables themselves. */
	if (s->st.check_runs % 64 == 1) {
		uint32_t cnt[VE_POOL_MAX_ENTRIES] = {0};
		for (uint32_t i = 0; i < s->max_clients; i++) {
			const struct sclient *c = &s->cl[i];
			if (!c->active)
				continue;
			uint32_t nb = 0;
			for (uint32_t k = 0; k < s->cfg.client_ops; k++)
				if (c->ops[k].state == OP_BOUND) {
					cnt[c->ops[k].entry]++;
					nb++;
				}
			if (nb != c->nbound)
				FAIL("client %u: %u bound ops in its table, counter says %u", i, nb,
				     c->nbound);
		}
		for (uint32_t e = 0; e < p->nentries; e++)
			if (cnt[e] != s->bound_on[e])
				FAIL("entry %u: %u ops bound in the tables, counter says %u", e,
				     cnt[e], s->bound_on[e]);
	}
	return 0;
}

/* ------------------------------------------------------------------ info */

void ve_serve_client_info(const struct ve_serve *s, uint32_t id, struct ve_serve_client_info *o)
{
	memset(o, 0, sizeof(*o));
	if (id >= s->max_clients || !s->cl[id].active)
		return;
	const struct sclient *c = &s->cl[id];
	o->active = true;
	o->flags = c->flags;
	o->pid = c->pid;
	memcpy(o->name, c->name, sizeof(o->name));
	o->joined_ns = c->joined_ns;
	o->nready = c->nready;
	o->nbound = c->nbound;
	o->nqueued = c->out_n;
	o->bindings = c->bindings + c->local_binds;
	o->completions = c->completions + c->local_done;
	o->failed = c->failed;
	o->records_in = c->records_in;
	o->records_out = c->records_out;
	o->late = c->late;
}

void ve_serve_stats(const struct ve_serve *s, struct ve_serve_stats *st)
{
	*st = s->st;
}

uint32_t ve_serve_trace(const struct ve_serve *s, struct ve_ctl_tev *out, uint32_t max)
{
	if (!s->tr_cap)
		return 0;
	uint64_t have = s->tr_n < s->tr_cap ? s->tr_n : s->tr_cap;
	uint32_t n = have < max ? (uint32_t)have : max;
	/* The n most recent, oldest first. */
	uint32_t start = (s->tr_next + s->tr_cap - n) % s->tr_cap;
	for (uint32_t i = 0; i < n; i++)
		out[i] = s->tr[(start + i) % s->tr_cap];
	return n;
}

void ve_serve_grant_activity(struct ve_serve *s, uint32_t id, uint64_t binds, uint64_t done,
			     uint64_t late, uint64_t wait_ns)
{
	if (id >= s->max_clients || !s->cl[id].active)
		return;
	struct sclient *c = &s->cl[id];
	/* Counters the client reports are cumulative: keep the largest seen. */
	if (binds > c->local_binds)
		c->local_binds = binds;
	if (done > c->local_done)
		c->local_done = done;
	if (late > c->late)
		c->late = late;
	if (wait_ns) {
		c->wait_ns[c->wait_n++ % WAIT_SAMPLES] = wait_ns;
		c->wait_sum_ns += wait_ns;
	}
}

void ve_serve_trace_add(struct ve_serve *s, const struct ve_ctl_tev *ev)
{
	if (!s->tr_cap)
		return;
	s->tr[s->tr_next] = *ev;
	s->tr_next = (s->tr_next + 1) % s->tr_cap;
	s->tr_n++;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

void ve_serve_client_waits(const struct ve_serve *s, uint32_t id, struct ve_serve_waits *out)
{
	memset(out, 0, sizeof(*out));
	if (id >= s->max_clients || !s->cl[id].active)
		return;
	const struct sclient *c = &s->cl[id];
	out->count = c->wait_n;
	out->sum_ns = c->wait_sum_ns;
	uint32_t n = c->wait_n < WAIT_SAMPLES ? (uint32_t)c->wait_n : WAIT_SAMPLES;
	if (!n)
		return;
	/* Not a fast path (a scrape): a sorted copy of the recent samples. */
	uint64_t v[WAIT_SAMPLES];
	memcpy(v, c->wait_ns, n * sizeof(*v));
	qsort(v, n, sizeof(*v), cmp_u64);
	out->p50_ns = v[n / 2];
	out->p99_ns = v[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1];
}
