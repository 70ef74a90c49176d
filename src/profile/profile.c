/* SPDX-License-Identifier: MIT */
#include "profile/profile.h"
#include "util/util.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct prof_entry {
	uint64_t key; /* 0 = empty */
	uint64_t seen; /* the store's clock at its last set or observation */
	float t[VE_PROF_MAX_SIZES];
	uint32_t n[VE_PROF_MAX_SIZES]; /* samples folded in; 0 = unknown */
};

struct ve_profile {
	uint32_t nsizes;
	uint32_t sizes[VE_PROF_MAX_SIZES]; /* ascending */
	uint32_t sm_count;
	uint32_t cap, nkeys; /* cap power of two */
	uint64_t clock;	     /* counts sets and observations (recency for eviction) */
	uint64_t evicted;    /* keys dropped to make room */
	struct prof_entry *tab;
};

int ve_profile_create(const uint32_t *sizes, uint32_t nsizes, uint32_t key_cap,
		      uint32_t sm_count, struct ve_profile **out)
{
	if (!out || (nsizes && !sizes))
		return -EINVAL;
	struct ve_profile *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	for (uint32_t i = 0; i < nsizes; i++) {
		uint32_t m = sizes[i], j;
		if (!m)
			continue;
		for (j = 0; j < p->nsizes && p->sizes[j] != m; j++)
			;
		if (j < p->nsizes)
			continue;
		if (p->nsizes == VE_PROF_MAX_SIZES) {
			free(p);
			return -E2BIG;
		}
		p->sizes[p->nsizes++] = m;
	}
	/* insertion sort: tiny */
	for (uint32_t i = 1; i < p->nsizes; i++)
		for (uint32_t j = i; j > 0 && p->sizes[j - 1] > p->sizes[j]; j--) {
			uint32_t t = p->sizes[j];
			p->sizes[j] = p->sizes[j - 1];
			p->sizes[j - 1] = t;
		}
	p->sm_count = sm_count;
	p->cap = 64;
	while (p->cap < 2 * (key_cap ? key_cap : 4096))
		p->cap <<= 1;
	p->tab = calloc(p->cap, sizeof(*p->tab));
	if (!p->tab) {
		free(p);
		return -ENOMEM;
	}
	*out = p;
	return 0;
}

void ve_profile_destroy(struct ve_profile *p)
{
	if (!p)
		return;
	free(p->tab);
	free(p);
}

uint32_t ve_profile_nkeys(const struct ve_profile *p)
{
	return p->nkeys;
}

static int size_index(const struct ve_profile *p, uint32_t m)
{
	for (uint32_t i = 0; i < p->nsizes; i++)
		if (p->sizes[i] == m)
			return (int)i;
	return -1;
}

static const struct prof_entry *find(const struct ve_profile *p, uint64_t key)
{
	if (!key)
		return NULL;
	uint32_t h = (uint32_t)ve__mix64(key) & (p->cap - 1);
	for (uint32_t probes = 0; probes < p->cap; probes++) {
		const struct prof_entry *e = &p->tab[h];
		if (e->key == key)
			return e;
		if (e->key == 0)
			return NULL;
		h = (h + 1) & (p->cap - 1);
	}
	return NULL;
}

static int by_seen_desc(const void *a, const void *b)
{
	uint64_t x = ((const struct prof_entry *)a)->seen, y = ((const struct prof_entry *)b)->seen;
	return x < y ? 1 : x > y ? -1 : 0;
}

static void insert_entry(struct ve_profile *p, const struct prof_entry *src)
{
	uint32_t h = (uint32_t)ve__mix64(src->key) & (p->cap - 1);
	while (p->tab[h].key)
		h = (h + 1) & (p->cap - 1);
	p->tab[h] = *src;
	p->nkeys++;
}

/* Full: the half of the keys observed longest ago go. Keys are exact shapes
 * (grids, copy sizes, graph instantiations), so a server that sees every
 * prompt length, or a job that recompiles per shape, makes new keys all its
 * life; refusing them once full left every later shape on the default model.
 * One sort per cap/4 new keys: amortized, off the hot path. */
static int evict_oldest_half(struct ve_profile *p)
{
	struct prof_entry *all = malloc((size_t)p->nkeys * sizeof(*all));
	if (!all)
		return -ENOMEM;
	uint32_t n = 0;
	for (uint32_t i = 0; i < p->cap; i++)
		if (p->tab[i].key)
			all[n++] = p->tab[i];
	qsort(all, n, sizeof(*all), by_seen_desc);
	memset(p->tab, 0, (size_t)p->cap * sizeof(*p->tab));
	p->nkeys = 0;
	uint32_t keep = n / 2;
	for (uint32_t i = 0; i < keep; i++)
		insert_entry(p, &all[i]);
	p->evicted += n - keep;
	free(all);
	return 0;
}

static struct prof_entry *find_or_add(struct ve_profile *p, uint64_t key)
{
	struct prof_entry *e = (struct prof_entry *)find(p, key);
	if (e || !key)
		return e;
	/* Keep the table at most half full so probes stay short. */
	if (2 * (p->nkeys + 1) > p->cap && (p->nkeys < 2 || evict_oldest_half(p)))
		return NULL;
	uint32_t h = (uint32_t)ve__mix64(key) & (p->cap - 1);
	while (p->tab[h].key)
		h = (h + 1) & (p->cap - 1);
	e = &p->tab[h];
	memset(e, 0, sizeof(*e));
	e->key = key;
	p->nkeys++;
	return e;
}

double ve_profile_default(const struct ve_ready_op *op, uint32_t m)
{
	if (!m)
		m = 1;
	uint64_t blocks = op->blocks ? op->blocks : 1;
	uint32_t bps = op->blocks_per_sm;
	if (!bps) {
		uint32_t thr = op->threads ? op->threads : 256;
		bps = 2048 / thr;
		bps = bps < 1 ? 1 : bps > 32 ? 32 : bps;
	}
	uint64_t per_wave = (uint64_t)m * bps;
	uint64_t waves = (blocks + per_wave - 1) / per_wave;
	return (double)waves * VE_PROF_WAVE_NS + VE_PROF_LAUNCH_NS;
}

int ve_profile_lookup(const struct ve_profile *p, uint64_t key, uint32_t m, double *ns)
{
	const struct prof_entry *e = find(p, key);
	int i = size_index(p, m);
	if (!e || i < 0 || !e->n[i])
		return -ENOENT;
	*ns = e->t[i];
	return 0;
}

double ve_profile_predict(const struct ve_profile *p, const struct ve_ready_op *op, uint32_t m)
{
	const struct prof_entry *e = find(p, op->key);
	if (!e)
		return ve_profile_default(op, m);
	int i = size_index(p, m);
	if (i >= 0 && e->n[i])
		return e->t[i];
	/* Scale the nearest measured size by the default model's ratio. */
	int best = -1;
	uint32_t bestd = UINT32_MAX;
	for (uint32_t j = 0; j < p->nsizes; j++) {
		if (!e->n[j])
			continue;
		uint32_t d = p->sizes[j] > m ? p->sizes[j] - m : m - p->sizes[j];
		if (d < bestd) {
			bestd = d;
			best = (int)j;
		}
	}
	if (best < 0)
		return ve_profile_default(op, m);
	return e->t[best] * ve_profile_default(op, m) / ve_profile_default(op, p->sizes[best]);
}

int ve_profile_set(struct ve_profile *p, uint64_t key, uint32_t m, double ns)
{
	int i = size_index(p, m);
	if (i < 0 || !(ns >= 0) || !isfinite(ns))
		return -EINVAL;
	struct prof_entry *e = find_or_add(p, key);
	if (!e)
		return key ? -ENOSPC : -EINVAL;
	e->t[i] = (float)ns;
	if (!e->n[i])
		e->n[i] = 1;
	e->seen = ++p->clock;
	return 0;
}

int ve_profile_observe(struct ve_profile *p, uint64_t key, uint32_t m, double ns)
{
	int i = size_index(p, m);
	if (i < 0 || !(ns >= 0) || !isfinite(ns))
		return -EINVAL;
	struct prof_entry *e = find_or_add(p, key);
	if (!e)
		return key ? -ENOSPC : -EINVAL;
	if (!e->n[i])
		e->t[i] = (float)ns;
	else
		e->t[i] = (float)((1.0 - VE_PROF_EWMA) * e->t[i] + VE_PROF_EWMA * ns);
	if (e->n[i] < UINT32_MAX)
		e->n[i]++;
	e->seen = ++p->clock;
	return 0;
}

uint64_t ve_profile_evicted(const struct ve_profile *p)
{
	return p->evicted;
}

int ve_profile_write(const struct ve_profile *p, FILE *f, const char *gpu_name)
{
	fprintf(f, "# Vitamin-E scaling profile: T(key, m) in ns per entry size m.\n");
	fprintf(f, "vitamin-e-profile 1\ngpu %u %s\nsizes", p->sm_count,
		gpu_name ? gpu_name : "unknown");
	for (uint32_t i = 0; i < p->nsizes; i++)
		fprintf(f, " %u", p->sizes[i]);
	fprintf(f, "\n");
	for (uint32_t h = 0; h < p->cap; h++) {
		const struct prof_entry *e = &p->tab[h];
		if (!e->key)
			continue;
		fprintf(f, "k %016llx", (unsigned long long)e->key);
		for (uint32_t i = 0; i < p->nsizes; i++) {
			if (e->n[i])
				fprintf(f, " %.0f", (double)e->t[i]);
			else
				fprintf(f, " -");
		}
		fprintf(f, "\n");
	}
	return ferror(f) ? -EIO : 0;
}

int ve_profile_save(const struct ve_profile *p, const char *path, const char *gpu_name)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return -errno;
	int rc = ve_profile_write(p, f, gpu_name);
	if (fclose(f) && !rc)
		rc = -errno;
	return rc;
}

int ve_profile_load(struct ve_profile *p, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		int rc = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return rc;
	}
	char line[8192];
	int lineno = 0, rc = 0, have_version = 0;
	uint32_t fsizes[VE_PROF_MAX_SIZES], nf = 0;
	int map[VE_PROF_MAX_SIZES];
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		size_t len = strlen(line);
		/* A line cut by the buffer would be read as two: refuse it. */
		if (len == sizeof(line) - 1 && line[len - 1] != '\n' && !feof(f)) {
			snprintf(err, errlen, "%s:%d: line longer than %zu bytes", path, lineno,
				 sizeof(line) - 2);
			rc = -EINVAL;
			break;
		}
		char *s = line;
		char *hash = strchr(s, '#');
		if (hash)
			*hash = 0;
		char *save = NULL, *tok = strtok_r(s, " \t\r\n", &save);
		if (!tok)
			continue;
		if (strcmp(tok, "vitamin-e-profile") == 0) {
			char *v = strtok_r(NULL, " \t\r\n", &save);
			if (!v || strcmp(v, "1") != 0) {
				snprintf(err, errlen, "%s:%d: profile version %s, this build reads 1",
					 path, lineno, v ? v : "(none)");
				rc = -EPROTO;
				break;
			}
			have_version = 1;
		} else if (!have_version) {
			snprintf(err, errlen, "%s:%d: missing 'vitamin-e-profile 1' header", path,
				 lineno);
			rc = -EINVAL;
			break;
		} else if (strcmp(tok, "gpu") == 0) {
			char *n = strtok_r(NULL, " \t\r\n", &save);
			uint64_t sms;
			if (!n || ve__parse_u64(n, &sms)) {
				snprintf(err, errlen, "%s:%d: 'gpu' needs an SM count", path, lineno);
				rc = -EINVAL;
				break;
			}
			if (p->sm_count && sms != p->sm_count) {
				snprintf(err, errlen, "%s:%d: profile is for %llu SMs, this GPU has %u",
					 path, lineno, (unsigned long long)sms, p->sm_count);
				rc = -EXDEV;
				break;
			}
		} else if (strcmp(tok, "sizes") == 0) {
			nf = 0;
			char *t;
			while ((t = strtok_r(NULL, " \t\r\n", &save))) {
				uint64_t m;
				if (nf == VE_PROF_MAX_SIZES || ve__parse_u64(t, &m) || !m) {
					snprintf(err, errlen, "%s:%d: bad size '%s'", path, lineno, t);
					rc = -EINVAL;
					goto out;
				}
				fsizes[nf] = (uint32_t)m;
				map[nf] = size_index(p, (uint32_t)m);
				nf++;
			}
		} else if (strcmp(tok, "k") == 0) {
			char *ks = strtok_r(NULL, " \t\r\n", &save);
			char *end;
			uint64_t key = ks ? strtoull(ks, &end, 16) : 0;
			if (!ks || *end || !key || !nf) {
				snprintf(err, errlen, "%s:%d: bad key line (need 'sizes' first)",
					 path, lineno);
				rc = -EINVAL;
				break;
			}
			for (uint32_t i = 0; i < nf; i++) {
				char *t = strtok_r(NULL, " \t\r\n", &save);
				double ns;
				if (!t) {
					snprintf(err, errlen, "%s:%d: %u values expected", path,
						 lineno, nf);
					rc = -EINVAL;
					goto out;
				}
				if (strcmp(t, "-") == 0)
					continue;
				if (ve__parse_double(t, &ns) || ns < 0) {
					snprintf(err, errlen, "%s:%d: bad time '%s'", path, lineno, t);
					rc = -EINVAL;
					goto out;
				}
				if (map[i] >= 0 && (rc = ve_profile_set(p, key, fsizes[i], ns))) {
					snprintf(err, errlen, "%s:%d: profile table full", path,
						 lineno);
					goto out;
				}
			}
		} else {
			snprintf(err, errlen, "%s:%d: unknown directive '%s'", path, lineno, tok);
			rc = -EINVAL;
			break;
		}
	}
out:
	fclose(f);
	return rc;
}
