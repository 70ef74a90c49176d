/* SPDX-License-Identifier: MIT */
/*
 * A timeline in the Chrome trace JSON format, laid out for Perfetto
 * (ui.perfetto.dev opens it as it is; chrome://tracing too): named tracks in
 * named groups, slices and instants on them. Both traces Vitamin-E writes go
 * through here: the in-process one (VE_TRACE, src/dispatch/trace.c) and ved's
 * (ve-ctl trace).
 *
 * A group is a Perfetto "process" (a collapsible block: "pool entries",
 * "clients"), a track a "thread" in it ("entry 3 (16 SMs)"). The format
 * wants the slices of one thread strictly nested, and Perfetto drops those
 * that are not; ops on one entry overlap freely, so a track whose slices
 * overlap is given extra rows at write time ("entry 3 (16 SMs) #2"), each
 * slice on the first row free at its start.
 *
 * Slices are kept as 40 bytes each; their arguments are written by the
 * caller's callback at write time from the caller's own records (cookie), so
 * a million-op trace does not hold a million argument strings.
 */
#ifndef VE_UTIL_TIMELINE_H
#define VE_UTIL_TIMELINE_H

#include <stdint.h>
#include <stdio.h>

struct ve_tl;

/* Writes the members of a slice's "args" object (no braces, "" for none) for
 * the slice added with this cookie. */
typedef void (*ve_tl_args_fn)(void *arg, uint64_t cookie, FILE *f);

struct ve_tl *ve_tl_create(ve_tl_args_fn args, void *arg);
void ve_tl_destroy(struct ve_tl *t);
/* The track (group, name), created on first use; sort orders groups among
 * groups and tracks within their group. Returns its id, or -1 (no memory). */
int ve_tl_track(struct ve_tl *t, const char *group, int group_sort, const char *name, int sort);
/* A slice [t0_ns, t1_ns] named name on track. -1 if out of memory. */
int ve_tl_slice(struct ve_tl *t, int track, uint64_t t0_ns, uint64_t t1_ns, const char *name,
		uint64_t cookie);
/* A point in time on track (a marker across the track). */
int ve_tl_instant(struct ve_tl *t, int track, uint64_t t_ns, const char *name, uint64_t cookie);
/* The JSON document. Times are relative to the earliest event, in us; its
 * time in ns on the slices' clock is otherData's "origin_ns" (the runtime's
 * traces use CLOCK_MONOTONIC, ve-sim its simulated clock). other (may be
 * NULL) are further members of "otherData". 0 or -EIO. */
int ve_tl_write(struct ve_tl *t, FILE *f, const char *other);
uint32_t ve_tl_count(const struct ve_tl *t);

/* s as a JSON string body (quotes and control characters escaped). */
void ve_tl_json_str(FILE *f, const char *s);

#endif
