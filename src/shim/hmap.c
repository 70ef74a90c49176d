/* SPDX-License-Identifier: MIT */
/* The shim's handle maps (hmap.h). */
#include "shim/hmap.h"
#include "util/util.h"

#include <errno.h>

#include <string.h>

static uint32_t home(uintptr_t k, uint32_t cap)
{
	return (uint32_t)ve__mix64((uint64_t)k) & (cap - 1);
}

static uintptr_t key_at(const void *tab, size_t sz, uint32_t i)
{
	uintptr_t k;
	memcpy(&k, (const char *)tab + (size_t)i * sz, sizeof(k));
	return k;
}

uint32_t ve__probe_find(const void *tab, size_t sz, uint32_t cap, uintptr_t k, bool insert)
{
	uint32_t h = home(k, cap);
	for (uint32_t n = 0; n < cap; n++, h = (h + 1) & (cap - 1)) {
		uintptr_t at = key_at(tab, sz, h);
		if (at == k)
			return h;
		if (at == 0)
			return insert ? h : VE__PROBE_NONE;
	}
	return VE__PROBE_NONE; /* full, k absent */
}

void ve__probe_remove(void *tab, size_t sz, uint32_t cap, uint32_t hole)
{
	char *t = tab;
	static const uintptr_t empty = 0;
	/* The hole is always empty, so the scan ends, in a full table too. */
	memcpy(t + (size_t)hole * sz, &empty, sizeof(empty));
	for (uint32_t j = (hole + 1) & (cap - 1);; j = (j + 1) & (cap - 1)) {
		uintptr_t k = key_at(tab, sz, j);
		if (k == 0)
			return;
		uint32_t hm = home(k, cap);
		/* It stays where it is if its home lies cyclically in (hole, j]. */
		bool stays = hole <= j ? (hole < hm && hm <= j) : (hole < hm || hm <= j);
		if (stays)
			continue;
		memcpy(t + (size_t)hole * sz, t + (size_t)j * sz, sz);
		memcpy(t + (size_t)j * sz, &empty, sizeof(empty));
		hole = j;
	}
}

uint32_t ve__hmap_home(uintptr_t k)
{
	return home(k, VE__HMAP_CAP);
}

struct ve__hslot *ve__hmap_get_locked(struct ve__hmap *m, uintptr_t k, bool insert)
{
	if (k == 0)
		return NULL;
	pthread_mutex_lock(&m->lock);
	uint32_t i = ve__probe_find(m->tab, sizeof(m->tab[0]), VE__HMAP_CAP, k, insert);
	if (i == VE__PROBE_NONE) {
		pthread_mutex_unlock(&m->lock);
		return NULL;
	}
	m->tab[i].key = k;
	return &m->tab[i];
}

int ve__hmap_del(struct ve__hmap *m, uintptr_t k)
{
	struct ve__hslot *s = ve__hmap_get_locked(m, k, false);
	if (!s)
		return -ENOENT;
	ve__probe_remove(m->tab, sizeof(m->tab[0]), VE__HMAP_CAP, (uint32_t)(s - m->tab));
	pthread_mutex_unlock(&m->lock);
	return 0;
}
