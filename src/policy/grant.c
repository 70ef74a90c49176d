/* SPDX-License-Identifier: MIT */
/* Grant-mode helpers shared by the built-in policies (grant.h). */
#include "policy/grant.h"
#include "util/util.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

int ve__grant_tables_init(struct ve_grant_tables *t, const struct ve_pool *p)
{
	t->nentries = p->nentries;
	t->sup_off = calloc(p->nentries, sizeof(*t->sup_off));
	t->sup_n = calloc(p->nentries, sizeof(*t->sup_n));
	t->sup = calloc((size_t)p->nentries * p->nentries, sizeof(*t->sup));
	if (!t->sup_off || !t->sup_n || !t->sup) {
		ve__grant_tables_fini(t);
		return -ENOMEM;
	}
	uint32_t off = 0;
	for (uint32_t e = 0; e < p->nentries; e++) {
		t->sup_off[e] = off;
		uint64_t le = p->e[e].leaves;
		for (uint32_t i = 0; i < p->nentries; i++) { /* by_size: ascending */
			uint16_t f = p->by_size[i];
			uint64_t lf = p->e[f].leaves;
			if (f != e && (lf & le) == le && lf != le)
				t->sup[off + t->sup_n[e]++] = f;
		}
		off += t->sup_n[e];
	}
	return 0;
}

void ve__grant_tables_fini(struct ve_grant_tables *t)
{
	free(t->sup_off);
	free(t->sup_n);
	free(t->sup);
	t->sup_off = t->sup_n = NULL;
	t->sup = NULL;
}

bool ve__grant_active(const struct ve_client_demand *d, uint64_t now, uint64_t idle_ns)
{
	if (d->ready || d->inflight)
		return true;
	return d->active_ns && now >= d->active_ns && now - d->active_ns < idle_ns;
}

uint32_t ve__grant_want(const struct ve_pool *p, const struct ve_client_demand *d)
{
	uint32_t smallest = p->e[p->by_size[0]].sms;
	uint32_t w = VE_MAX(d->want_sms, d->min_sms);
	w = VE_MAX(w, smallest);
	return VE_MIN(w, p->total_sms);
}

/* Largest tree ancestor of e (e included) whose leaves are all in avail. */
static uint32_t free_ancestor_sms(const struct ve_pool *p, uint16_t e, uint64_t avail)
{
	uint32_t best = p->e[e].sms;
	for (uint16_t a = p->e[e].parent; a != VE_POOL_NONE; a = p->e[a].parent) {
		if ((p->e[a].leaves & ~avail) != 0)
			break;
		best = p->e[a].sms;
	}
	return best;
}

/* A client's utility of m SMs: the square root of the share of its want it
 * gets. Concave, because kernels scale sublinearly (tails, memory bound):
 * two clients wanting the whole GPU are better off with half each than with
 * 8 and 124 SMs, while a client that wants 8 SMs gets no more from 64. */
static double utility(uint32_t sms, uint32_t want)
{
	return sqrt((double)VE_MIN(sms, want) / (double)want);
}

void ve__grant_plan(const struct ve_grant_tables *t, const struct ve_pool *p, uint64_t avail,
		    const uint32_t *clients, uint32_t n, const uint32_t *want, const uint32_t *min_sms,
		    const double *weight, uint16_t *out)
{
	(void)clients;
	/* 1. MinBind: in the given order (the caller puts urgent clients first). */
	for (uint32_t i = 0; i < n; i++) {
		out[i] = VE_POOL_NONE;
		uint32_t best_sms = 0, best_score = 0;
		for (uint32_t j = 0; j < p->nentries; j++) {
			uint16_t e = p->by_size[j];
			const struct ve_pool_entry *pe = &p->e[e];
			if (out[i] != VE_POOL_NONE && pe->sms > best_sms)
				break; /* only the smallest fitting size competes */
			if (pe->sms < min_sms[i] || (pe->leaves & ~avail))
				continue;
			uint32_t score = free_ancestor_sms(p, e, avail);
			if (out[i] == VE_POOL_NONE || score > best_score) {
				out[i] = e;
				best_sms = pe->sms;
				best_score = score;
			}
		}
		if (out[i] != VE_POOL_NONE)
			avail &= ~p->e[out[i]].leaves;
	}
	/* 2. Growth by marginal useful SMs per SM. */
	for (;;) {
		double best_g = 0, best_ratio = 0;
		uint32_t best_step = 0;
		int bi = -1;
		uint16_t be = VE_POOL_NONE;
		for (uint32_t i = 0; i < n; i++) {
			uint16_t ce = out[i];
			if (ce == VE_POOL_NONE)
				continue;
			uint64_t own = p->e[ce].leaves;
			double w = weight ? weight[i] : 1.0;
			double uc = w * utility(p->e[ce].sms, want[i]);
			double ratio = (double)p->e[ce].sms / (double)want[i];
			const uint16_t *sup = t->sup + t->sup_off[ce];
			for (uint32_t k = 0; k < t->sup_n[ce]; k++) {
				uint16_t f = sup[k];
				if (p->e[f].leaves & ~(avail | own))
					continue;
				uint32_t step = p->e[f].sms - p->e[ce].sms;
				double g = (w * utility(p->e[f].sms, want[i]) - uc) / (double)step;
				if (g <= 0)
					continue;
				bool better = bi < 0 || g > best_g + 1e-9 ||
					      (g > best_g - 1e-9 &&
					       (step < best_step ||
						(step == best_step && ratio < best_ratio)));
				if (better) {
					best_g = g;
					best_step = step;
					best_ratio = ratio;
					bi = (int)i;
					be = f;
				}
				break; /* supersets ascend: the first that fits is the smallest step */
			}
		}
		if (bi < 0)
			break;
		avail &= ~p->e[be].leaves;
		out[bi] = be;
	}
}

double ve__grant_utility(const struct ve_pool *p, uint32_t n, const uint32_t *want,
			 const double *weight, const uint16_t *entries)
{
	double u = 0;
	for (uint32_t i = 0; i < n; i++)
		if (entries[i] != VE_POOL_NONE && entries[i] < p->nentries)
			u += (weight ? weight[i] : 1.0) * utility(p->e[entries[i]].sms, want[i]);
	return u;
}

uint16_t ve__grant_find(const struct ve_pool *p, uint32_t sms, uint64_t inside, uint64_t outside)
{
	for (uint32_t i = 0; i < p->nentries; i++) {
		uint16_t e = p->by_size[i];
		const struct ve_pool_entry *pe = &p->e[e];
		if (pe->sms == sms && (pe->leaves & inside) == inside && !(pe->leaves & outside))
			return e;
	}
	return VE_POOL_NONE;
}
