/* SPDX-License-Identifier: MIT */
/*
 * The shim's handle maps: CUstream and CUevent pointers to what the shim
 * knows of them (shim.h, "handle maps"). Open addressing with linear probing
 * and one mutex per map (uncontended: about 20 ns); a fixed table, 2x the
 * vctx's events, so probes stay short at its limit.
 *
 * Deletion shifts the rest of the probe chain back (no tombstones): the
 * driver rarely reuses a handle, and tombstones left by an app that creates
 * and destroys events all run long would fill the table until every miss
 * scanned it whole. Slots move on deletion, so no slot pointer is kept past
 * the lock: callers copy under it.
 */
#ifndef VE_SHIM_HMAP_H
#define VE_SHIM_HMAP_H

#include "shim/shim.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define VE__HMAP_CAP 32768u /* power of two */

struct ve__hslot {
	uintptr_t key; /* 0: empty */
	union {
		struct ve_stream_info s;
		struct ve_event_info e;
	} v;
};

struct ve__hmap {
	pthread_mutex_t lock;
	struct ve__hslot tab[VE__HMAP_CAP];
};

#define VE__HMAP_INIT {.lock = PTHREAD_MUTEX_INITIALIZER}

/* Linear probing over any table of 'cap' (a power of two) slots of 'sz'
 * bytes whose first member is a uintptr_t key, 0 meaning empty (the graph
 * execs' map uses these too). The caller holds whatever lock guards 'tab'. */
#define VE__PROBE_NONE UINT32_MAX
/* k's slot, else (insert) the empty slot where k goes; VE__PROBE_NONE:
 * absent, or no room. */
uint32_t ve__probe_find(const void *tab, size_t sz, uint32_t cap, uintptr_t k, bool insert);
/* Empties slot i and shifts the rest of its probe chain back (Knuth's
 * algorithm R): every chain stays unbroken and no tombstone is left. */
void ve__probe_remove(void *tab, size_t sz, uint32_t cap, uint32_t i);

/* k's slot with the map locked (the caller unlocks m->lock), or NULL and
 * unlocked: k absent (insert false), the map full, or k == 0. With insert,
 * an absent k gets an empty slot keyed k whose value the caller fills. */
struct ve__hslot *ve__hmap_get_locked(struct ve__hmap *m, uintptr_t k, bool insert);

/* Removes k: 0, or -ENOENT. */
int ve__hmap_del(struct ve__hmap *m, uintptr_t k);

/* Where k's probe chain starts. */
uint32_t ve__hmap_home(uintptr_t k);

#endif
