/* SPDX-License-Identifier: MIT */
/* The shim's handle maps (hmap.h). */
#include "shim/hmap.h"
#include "util/util.h"

#include <errno.h>

#define MASK (VE__HMAP_CAP - 1)

uint32_t ve__hmap_home(uintptr_t k)
{
	return (uint32_t)ve__mix64((uint64_t)k) & MASK;
}

static struct ve__hslot *find(struct ve__hmap *m, uintptr_t k, bool insert)
{
	uint32_t h = ve__hmap_home(k);
	for (uint32_t i = 0; i < VE__HMAP_CAP; i++, h = (h + 1) & MASK) {
		struct ve__hslot *s = &m->tab[h];
		if (s->key == k)
			return s;
		if (s->key == 0)
			return insert ? s : NULL;
	}
	return NULL; /* full, k absent */
}

struct ve__hslot *ve__hmap_get_locked(struct ve__hmap *m, uintptr_t k, bool insert)
{
	if (k == 0)
		return NULL;
	pthread_mutex_lock(&m->lock);
	struct ve__hslot *s = find(m, k, insert);
	if (!s)
		pthread_mutex_unlock(&m->lock);
	else if (insert)
		s->key = k;
	return s;
}

/* Knuth's algorithm R: the entries after the hole in its probe chain move
 * back into it where their own chain allows, so every chain stays unbroken
 * and no tombstone is left. */
int ve__hmap_del(struct ve__hmap *m, uintptr_t k)
{
	struct ve__hslot *s = ve__hmap_get_locked(m, k, false);
	if (!s)
		return -ENOENT;
	/* The hole is always empty, so the scan ends, in a full table too. */
	s->key = 0;
	uint32_t hole = (uint32_t)(s - m->tab);
	for (uint32_t j = (hole + 1) & MASK; m->tab[j].key != 0; j = (j + 1) & MASK) {
		uint32_t home = ve__hmap_home(m->tab[j].key);
		/* It stays where it is if its home lies cyclically in (hole, j]. */
		bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
		if (stays)
			continue;
		m->tab[hole] = m->tab[j];
		m->tab[j].key = 0;
		hole = j;
	}
	pthread_mutex_unlock(&m->lock);
	return 0;
}
