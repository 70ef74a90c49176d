/* SPDX-License-Identifier: MIT */
#include "dispatch/trace.h"
#include "core/desc.h"
#include "util/timeline.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NAMED_CLIENTS 64

#define MAX_GRANT_SPANS 65536

struct grant_span {
	uint64_t t0, t1;
	uint32_t client, entry, sms;
};

struct open_grant {
	bool on;
	uint16_t entry;
	uint32_t sms;
	uint64_t since;
};

struct ve_trace {
	uint32_t cap, n;
	uint64_t dropped;
	struct ve_trace_event *ev;
	char names[MAX_NAMED_CLIENTS][32];
	struct grant_span *g;
	uint32_t ng, gcap;
	struct open_grant open[MAX_NAMED_CLIENTS];
	const uint64_t *waits[MAX_NAMED_CLIENTS];
	uint32_t nwaits[MAX_NAMED_CLIENTS];
};

int ve_trace_create(uint32_t cap, struct ve_trace **out)
{
	struct ve_trace *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->cap = cap ? cap : 1u << 20;
	t->ev = malloc((size_t)t->cap * sizeof(*t->ev));
	t->gcap = MAX_GRANT_SPANS;
	t->g = malloc((size_t)t->gcap * sizeof(*t->g));
	if (!t->ev || !t->g) {
		free(t->ev);
		free(t->g);
		free(t);
		return -ENOMEM;
	}
	*out = t;
	return 0;
}

void ve_trace_destroy(struct ve_trace *t)
{
	if (!t)
		return;
	free(t->ev);
	free(t->g);
	free(t);
}

void ve_trace_add(struct ve_trace *t, const struct ve_trace_event *ev)
{
	if (t->n < t->cap)
		t->ev[t->n++] = *ev;
	else
		t->dropped++;
}

void ve_trace_set_client_name(struct ve_trace *t, uint32_t client, const char *name)
{
	if (client < MAX_NAMED_CLIENTS)
		snprintf(t->names[client], sizeof(t->names[client]), "%s", name);
}

void ve_trace_set_waits(struct ve_trace *t, uint32_t client, const uint64_t *pairs, uint32_t n)
{
	if (client < MAX_NAMED_CLIENTS) {
		t->waits[client] = pairs;
		t->nwaits[client] = pairs ? n : 0;
	}
}

uint64_t ve_trace_dropped(const struct ve_trace *t)
{
	return t->dropped;
}

uint32_t ve_trace_count(const struct ve_trace *t)
{
	return t->n;
}

/* A grant (grant mode) as a span: the dispatcher says which entry a client
 * may bind to whenever it changes; the previous one ends there. */
void ve_trace_grant(struct ve_trace *t, uint32_t client, uint16_t entry, uint32_t sms,
		    uint64_t now_ns)
{
	if (client >= MAX_NAMED_CLIENTS)
		return;
	struct open_grant *g = &t->open[client];
	if (g->on && g->entry == entry)
		return;
	if (g->on && g->entry != 0xffff) {
		if (t->ng < t->gcap)
			t->g[t->ng++] = (struct grant_span){.t0 = g->since,
							    .t1 = now_ns,
							    .client = client,
							    .entry = g->entry,
							    .sms = g->sms};
		else
			t->dropped++;
	}
	*g = (struct open_grant){.on = true, .entry = entry, .sms = sms, .since = now_ns};
}

/* Cookies say which record a slice's arguments come from. */
#define CK_GRANT (1ull << 63)
#define CK_WAIT (1ull << 62) /* client << 32 | index of the pair */

static void slice_args(void *arg, uint64_t cookie, FILE *f)
{
	const struct ve_trace *t = arg;
	if (cookie & CK_WAIT) {
		uint32_t c = (uint32_t)((cookie & ~CK_WAIT) >> 32), i = (uint32_t)cookie;
		fprintf(f, "\"client\":%u,\"wait_us\":%.3f", c,
			(double)(t->waits[c][2 * i + 1] - t->waits[c][2 * i]) / 1e3);
		return;
	}
	if (cookie & CK_GRANT) {
		const struct grant_span *g = &t->g[cookie & ~CK_GRANT];
		fprintf(f, "\"client\":%u,\"entry\":%u,\"sms\":%u", g->client, g->entry, g->sms);
		return;
	}
	const struct ve_trace_event *e = &t->ev[cookie];
	fprintf(f, "\"client\":%u,\"stream\":%u,\"lane\":%u,\"sms\":%u,\"key\":\"%016llx\"%s",
		e->client, e->stream, e->lane, e->sms, (unsigned long long)e->key,
		e->status_bad ? ",\"error\":true" : "");
	/* Where the time before the slice went: from the application's call
	 * to the driver submission (the hand-over to the dispatcher, a wait
	 * for predecessors or a grant), then on the lane behind earlier work. */
	if (e->t_call_ns && e->t_submit_ns >= e->t_call_ns)
		fprintf(f, ",\"call_to_submit_us\":%.3f",
			(double)(e->t_submit_ns - e->t_call_ns) / 1e3);
	if (e->t_submit_ns && e->t_start_ns >= e->t_submit_ns)
		fprintf(f, ",\"submit_to_start_us\":%.3f",
			(double)(e->t_start_ns - e->t_submit_ns) / 1e3);
}

static void client_track_name(const struct ve_trace *t, uint32_t c, char *b, size_t n)
{
	if (c < MAX_NAMED_CLIENTS && t->names[c][0])
		snprintf(b, n, "client %u: %s", c, t->names[c]);
	else
		snprintf(b, n, "client %u", c);
}

int ve_trace_write(struct ve_trace *t, const char *path)
{
	struct ve_tl *tl = ve_tl_create(slice_args, t);
	if (!tl)
		return -ENOMEM;
	uint64_t last = 0;
	char name[96], track[96];
	int rc = 0;
	/* Grants still held end with the last event. */
	for (uint32_t i = 0; i < t->n; i++)
		if (t->ev[i].t_end_ns > last)
			last = t->ev[i].t_end_ns;
	for (uint32_t c = 0; c < MAX_NAMED_CLIENTS; c++) {
		struct open_grant *g = &t->open[c];
		if (g->on && g->entry != 0xffff && t->ng < t->gcap)
			t->g[t->ng++] = (struct grant_span){.t0 = g->since,
							    .t1 = last > g->since ? last : g->since,
							    .client = c,
							    .entry = g->entry,
							    .sms = g->sms};
		g->on = false;
	}
	for (uint32_t i = 0; i < t->n && rc == 0; i++) {
		const struct ve_trace_event *e = &t->ev[i];
		const char *kind = ve_op_kind_name(e->kind);
		int et;
		if (e->entry == 0xffff)
			et = ve_tl_track(tl, "pool entries", 1, "copy lanes", 0x10000);
		else {
			snprintf(track, sizeof(track), "entry %u (%u SMs)", e->entry, e->sms);
			et = ve_tl_track(tl, "pool entries", 1, track, e->entry);
		}
		client_track_name(t, e->client, track, sizeof(track));
		int ct = ve_tl_track(tl, "clients", 2, track, 2 * (int)e->client);
		const char *cname = e->client < MAX_NAMED_CLIENTS && t->names[e->client][0]
					? t->names[e->client]
					: NULL;
		if (cname)
			snprintf(name, sizeof(name), "%s %s", cname, kind);
		else
			snprintf(name, sizeof(name), "c%u %s", e->client, kind);
		rc |= ve_tl_slice(tl, et, e->t_start_ns, e->t_end_ns, name, i);
		if (e->entry == 0xffff)
			snprintf(name, sizeof(name), "%s (copy lane)", kind);
		else
			snprintf(name, sizeof(name), "%s on entry %u (%u SMs)", kind, e->entry, e->sms);
		rc |= ve_tl_slice(tl, ct, e->t_start_ns, e->t_end_ns, name, i);
	}
	for (uint32_t i = 0; i < t->ng && rc == 0; i++) {
		const struct grant_span *g = &t->g[i];
		client_track_name(t, g->client, track, sizeof(track));
		size_t len = strlen(track);
		snprintf(track + len, sizeof(track) - len, " grants");
		int gt = ve_tl_track(tl, "clients", 2, track, 2 * (int)g->client + 1);
		snprintf(name, sizeof(name), "granted entry %u (%u SMs)", g->entry, g->sms);
		rc |= ve_tl_slice(tl, gt, g->t0, g->t1, name, CK_GRANT | i);
	}
	/* Where an application thread waited for the GPU (from its call to
	 * its return): the other half of a synchronized step. */
	for (uint32_t c = 0; c < MAX_NAMED_CLIENTS && rc == 0; c++) {
		if (!t->nwaits[c])
			continue;
		client_track_name(t, c, track, sizeof(track));
		size_t len = strlen(track);
		snprintf(track + len, sizeof(track) - len, " waits");
		int wt = ve_tl_track(tl, "clients", 2, track, 2 * (int)c + 1);
		for (uint32_t i = 0; i < t->nwaits[c] && rc == 0; i++)
			rc |= ve_tl_slice(tl, wt, t->waits[c][2 * i], t->waits[c][2 * i + 1], "wait",
					  CK_WAIT | (uint64_t)c << 32 | i);
	}
	if (rc) {
		ve_tl_destroy(tl);
		return -ENOMEM;
	}
	FILE *f = fopen(path, "w");
	if (!f) {
		rc = -errno;
		ve_tl_destroy(tl);
		return rc;
	}
	char other[96];
	snprintf(other, sizeof(other), "\"dropped_events\":%llu", (unsigned long long)t->dropped);
	rc = ve_tl_write(tl, f, other);
	if (fclose(f) && !rc)
		rc = -errno;
	ve_tl_destroy(tl);
	return rc;
}
