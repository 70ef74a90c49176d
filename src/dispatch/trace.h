/* SPDX-License-Identifier: MIT */
/*
 * Chrome/Perfetto trace (docs/architecture.md, "Traces"; docs/operations.md,
 * "Reading a timeline"): a track per pool entry and one per client, each op
 * a slice on both (client, stream, lane, kind, SMs in its arguments), and in
 * grant mode a track per client of the entries it was granted, as spans.
 * Events go to preallocated arrays (no allocation while running); when one
 * is full further events are counted and dropped, and the file says so.
 * Written once, at the end (ve_trace_write, through util/timeline.h).
 * Single writer.
 */
#ifndef VE_DISPATCH_TRACE_H
#define VE_DISPATCH_TRACE_H

#include <stdint.h>

struct ve_trace_event {
	uint64_t t_start_ns, t_end_ns;
	uint64_t t_submit_ns; /* handed to the driver (0: unknown) */
	uint64_t t_call_ns;   /* recorded by the application (0: unknown) */
	uint64_t key;
	uint32_t lane;
	uint32_t client;
	uint32_t stream;
	uint32_t sms;
	uint16_t entry; /* 0xffff: copy lane */
	uint8_t kind;	/* enum ve_op_kind */
	uint8_t status_bad;
};

struct ve_trace;

int ve_trace_create(uint32_t cap, struct ve_trace **out);
void ve_trace_destroy(struct ve_trace *t);
void ve_trace_add(struct ve_trace *t, const struct ve_trace_event *ev);
/* Client names for the slices (optional); index = client id. */
void ve_trace_set_client_name(struct ve_trace *t, uint32_t client, const char *name);
/* The client's grant is now entry (0xffff: none), of sms SMs: ends the span
 * of the previous grant, if it differs. */
void ve_trace_grant(struct ve_trace *t, uint32_t client, uint16_t entry, uint32_t sms,
		    uint64_t now_ns);
/* The application threads' waits of a client (begin, end ns pairs; the
 * vctx's ve_vctx_wait_log), drawn as slices on a track of their own by
 * ve_trace_write: the memory must stay valid until then. */
void ve_trace_set_waits(struct ve_trace *t, uint32_t client, const uint64_t *pairs, uint32_t n);
int ve_trace_write(struct ve_trace *t, const char *path);
uint64_t ve_trace_dropped(const struct ve_trace *t);
uint32_t ve_trace_count(const struct ve_trace *t);

#endif
