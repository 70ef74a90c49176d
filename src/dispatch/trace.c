/* SPDX-License-Identifier: MIT */
#include "dispatch/trace.h"
#include "core/desc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NAMED_CLIENTS 64

struct ve_trace {
	uint32_t cap, n;
	uint64_t dropped;
	struct ve_trace_event *ev;
	char names[MAX_NAMED_CLIENTS][32];
};

int ve_trace_create(uint32_t cap, struct ve_trace **out)
{
	struct ve_trace *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->cap = cap ? cap : 1u << 20;
	t->ev = malloc((size_t)t->cap * sizeof(*t->ev));
	if (!t->ev) {
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

uint64_t ve_trace_dropped(const struct ve_trace *t)
{
	return t->dropped;
}

uint32_t ve_trace_count(const struct ve_trace *t)
{
	return t->n;
}

int ve_trace_write(const struct ve_trace *t, const char *path)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return -errno;
	uint64_t t0 = UINT64_MAX;
	for (uint32_t i = 0; i < t->n; i++)
		if (t->ev[i].t_start_ns < t0)
			t0 = t->ev[i].t_start_ns;
	if (t0 == UINT64_MAX)
		t0 = 0;
	fprintf(f, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"dropped_events\":%llu},"
		   "\"traceEvents\":[\n",
		(unsigned long long)t->dropped);
	/* Track names: one per entry seen. */
	uint8_t seen[0x10000 / 8];
	memset(seen, 0, sizeof(seen));
	int first = 1;
	for (uint32_t i = 0; i < t->n; i++) {
		const struct ve_trace_event *e = &t->ev[i];
		if (seen[e->entry / 8] & (1u << (e->entry % 8)))
			continue;
		seen[e->entry / 8] |= (uint8_t)(1u << (e->entry % 8));
		if (e->entry == 0xffff)
			fprintf(f, "%s{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%u,"
				   "\"args\":{\"name\":\"copy lanes\"}}",
				first ? "" : ",\n", e->entry);
		else
			fprintf(f, "%s{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%u,"
				   "\"args\":{\"name\":\"entry %u (%u SMs)\"}}",
				first ? "" : ",\n", e->entry, e->entry, e->sms);
		first = 0;
	}
	for (uint32_t i = 0; i < t->n; i++) {
		const struct ve_trace_event *e = &t->ev[i];
		const char *cname = e->client < MAX_NAMED_CLIENTS && t->names[e->client][0]
					    ? t->names[e->client]
					    : NULL;
		char label[64];
		if (cname)
			snprintf(label, sizeof(label), "%s %s", cname, ve_op_kind_name(e->kind));
		else
			snprintf(label, sizeof(label), "c%u %s", e->client, ve_op_kind_name(e->kind));
		double ts = (double)(e->t_start_ns - t0) / 1e3;
		double dur = (double)(e->t_end_ns - e->t_start_ns) / 1e3;
		fprintf(f, "%s{\"ph\":\"X\",\"name\":\"%s\",\"pid\":%u,\"tid\":%u,\"ts\":%.3f,"
			   "\"dur\":%.3f,\"args\":{\"client\":%u,\"stream\":%u,\"sms\":%u,"
			   "\"key\":\"%016llx\"%s}}",
			first ? "" : ",\n", label, e->entry, e->lane & 0xff, ts, dur, e->client,
			e->stream, e->sms, (unsigned long long)e->key,
			e->status_bad ? ",\"error\":true" : "");
		first = 0;
	}
	fprintf(f, "\n]}\n");
	int rc = ferror(f) ? -EIO : 0;
	if (fclose(f) && !rc)
		rc = -errno;
	return rc;
}
