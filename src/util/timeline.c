/* SPDX-License-Identifier: MIT */
/* Chrome trace JSON with overlap-free rows per track (timeline.h). */
#include "util/timeline.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct tl_ev {
	uint64_t t0, t1, cookie;
	uint32_t track, name;
	uint32_t row; /* assigned at write time */
	uint32_t instant;
};

struct tl_track {
	uint32_t group, name; /* string ids */
	int sort;
	uint32_t nrows;
};

struct tl_group {
	uint32_t name;
	int sort;
};

struct ve_tl {
	ve_tl_args_fn args;
	void *arg;
	struct tl_ev *ev;
	uint32_t nev, cap;
	struct tl_track *tr;
	uint32_t ntr, trcap;
	struct tl_group *gr;
	uint32_t ngr, grcap;
	/* Interned strings: offsets into one arena, found through a hash table. */
	char *arena;
	size_t alen, acap;
	uint32_t *soff;
	uint32_t nstr, scap;
	uint32_t *hash; /* string id + 1, 0 = empty */
	uint32_t hcap;
};

static uint64_t str_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static bool grow(void **p, uint32_t *cap, uint32_t need, size_t size)
{
	if (need <= *cap)
		return true;
	uint32_t n = *cap ? *cap * 2 : 64;
	while (n < need)
		n *= 2;
	void *q = realloc(*p, (size_t)n * size);
	if (!q)
		return false;
	*p = q;
	*cap = n;
	return true;
}

static const char *str_at(const struct ve_tl *t, uint32_t id)
{
	return t->arena + t->soff[id];
}

static bool rehash(struct ve_tl *t, uint32_t cap)
{
	uint32_t *h = calloc(cap, sizeof(*h));
	if (!h)
		return false;
	for (uint32_t i = 0; i < t->nstr; i++) {
		uint32_t k = (uint32_t)str_hash(str_at(t, i)) & (cap - 1);
		while (h[k])
			k = (k + 1) & (cap - 1);
		h[k] = i + 1;
	}
	free(t->hash);
	t->hash = h;
	t->hcap = cap;
	return true;
}

/* The id of s, added if new; UINT32_MAX without memory. */
static uint32_t intern(struct ve_tl *t, const char *s)
{
	if ((t->nstr + 1) * 2 > t->hcap && !rehash(t, t->hcap ? t->hcap * 2 : 256))
		return UINT32_MAX;
	uint32_t k = (uint32_t)str_hash(s) & (t->hcap - 1);
	while (t->hash[k]) {
		if (strcmp(str_at(t, t->hash[k] - 1), s) == 0)
			return t->hash[k] - 1;
		k = (k + 1) & (t->hcap - 1);
	}
	size_t n = strlen(s) + 1;
	if (t->alen + n > t->acap) {
		size_t c = t->acap ? t->acap * 2 : 4096;
		while (c < t->alen + n)
			c *= 2;
		char *a = realloc(t->arena, c);
		if (!a)
			return UINT32_MAX;
		t->arena = a;
		t->acap = c;
	}
	if (!grow((void **)&t->soff, &t->scap, t->nstr + 1, sizeof(*t->soff)))
		return UINT32_MAX;
	memcpy(t->arena + t->alen, s, n);
	t->soff[t->nstr] = (uint32_t)t->alen;
	t->alen += n;
	t->hash[k] = ++t->nstr;
	return t->nstr - 1;
}

struct ve_tl *ve_tl_create(ve_tl_args_fn args, void *arg)
{
	struct ve_tl *t = calloc(1, sizeof(*t));
	if (t) {
		t->args = args;
		t->arg = arg;
	}
	return t;
}

void ve_tl_destroy(struct ve_tl *t)
{
	if (!t)
		return;
	free(t->ev);
	free(t->tr);
	free(t->gr);
	free(t->arena);
	free(t->soff);
	free(t->hash);
	free(t);
}

int ve_tl_track(struct ve_tl *t, const char *group, int group_sort, const char *name, int sort)
{
	uint32_t g = intern(t, group), n = intern(t, name);
	if (g == UINT32_MAX || n == UINT32_MAX)
		return -1;
	uint32_t gi;
	for (gi = 0; gi < t->ngr && t->gr[gi].name != g; gi++)
		;
	if (gi == t->ngr) {
		if (!grow((void **)&t->gr, &t->grcap, t->ngr + 1, sizeof(*t->gr)))
			return -1;
		t->gr[t->ngr++] = (struct tl_group){.name = g, .sort = group_sort};
	}
	/* Few tracks (entries and clients): a linear search is enough. */
	for (uint32_t i = 0; i < t->ntr; i++)
		if (t->tr[i].group == gi && t->tr[i].name == n)
			return (int)i;
	if (!grow((void **)&t->tr, &t->trcap, t->ntr + 1, sizeof(*t->tr)))
		return -1;
	t->tr[t->ntr] = (struct tl_track){.group = gi, .name = n, .sort = sort};
	return (int)t->ntr++;
}

static int add(struct ve_tl *t, int track, uint64_t t0, uint64_t t1, const char *name,
	       uint64_t cookie, bool instant)
{
	if (track < 0 || (uint32_t)track >= t->ntr)
		return -1;
	uint32_t n = intern(t, name);
	if (n == UINT32_MAX || !grow((void **)&t->ev, &t->cap, t->nev + 1, sizeof(*t->ev)))
		return -1;
	t->ev[t->nev++] = (struct tl_ev){.t0 = t0,
					 .t1 = t1 >= t0 ? t1 : t0,
					 .cookie = cookie,
					 .track = (uint32_t)track,
					 .name = n,
					 .instant = instant};
	return 0;
}

int ve_tl_slice(struct ve_tl *t, int track, uint64_t t0_ns, uint64_t t1_ns, const char *name,
		uint64_t cookie)
{
	return add(t, track, t0_ns, t1_ns, name, cookie, false);
}

int ve_tl_instant(struct ve_tl *t, int track, uint64_t t_ns, const char *name, uint64_t cookie)
{
	return add(t, track, t_ns, t_ns, name, cookie, true);
}

uint32_t ve_tl_count(const struct ve_tl *t)
{
	return t->nev;
}

void ve_tl_json_str(FILE *f, const char *s)
{
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch < 0x20)
			fprintf(f, "\\u%04x", ch);
		else
			fputc(ch, f);
	}
}

static int cmp_ev(const void *a, const void *b)
{
	const struct tl_ev *x = a, *y = b;
	if (x->track != y->track)
		return x->track < y->track ? -1 : 1;
	if (x->t0 != y->t0)
		return x->t0 < y->t0 ? -1 : 1;
	/* The longer first: a slice that starts with another and outlasts it
	 * takes the row, the other goes next to it. */
	if (x->t1 != y->t1)
		return x->t1 > y->t1 ? -1 : 1;
	return 0;
}

/* Rows: each slice on the first row of its track that is free at its start
 * (interval partitioning: as few rows as the deepest overlap). */
static int assign_rows(struct ve_tl *t)
{
	uint64_t *end = NULL;
	uint32_t ecap = 0;
	for (uint32_t i = 0; i < t->nev;) {
		uint32_t tr = t->ev[i].track, nrows = 1;
		if (!grow((void **)&end, &ecap, 1, sizeof(*end))) {
			free(end);
			return -ENOMEM;
		}
		end[0] = 0;
		for (; i < t->nev && t->ev[i].track == tr; i++) {
			struct tl_ev *e = &t->ev[i];
			if (e->instant) {
				e->row = 0;
				continue;
			}
			uint32_t r;
			for (r = 0; r < nrows && end[r] > e->t0; r++)
				;
			if (r == nrows) {
				if (!grow((void **)&end, &ecap, nrows + 1, sizeof(*end))) {
					free(end);
					return -ENOMEM;
				}
				nrows++;
			}
			end[r] = e->t1;
			e->row = r;
		}
		t->tr[tr].nrows = nrows;
	}
	free(end);
	return 0;
}

/* Chrome pid of a group, tid of a track's row: small numbers, unique. */
#define TID(track, row) ((track) * 64u + ((row) < 63 ? (row) : 63) + 1)

int ve_tl_write(struct ve_tl *t, FILE *f, const char *other)
{
	qsort(t->ev, t->nev, sizeof(*t->ev), cmp_ev);
	for (uint32_t i = 0; i < t->ntr; i++)
		t->tr[i].nrows = 1;
	if (assign_rows(t))
		return -ENOMEM;
	uint64_t t0 = UINT64_MAX;
	for (uint32_t i = 0; i < t->nev; i++)
		if (t->ev[i].t0 < t0)
			t0 = t->ev[i].t0;
	if (t0 == UINT64_MAX)
		t0 = 0;
	/* origin_ns: the clock reading of ts 0, so a trace lines up with
	 * stamps an application took on the same clock. */
	fprintf(f,
		"{\"displayTimeUnit\":\"ns\",\"otherData\":{\"origin_ns\":%llu%s%s},"
		"\"traceEvents\":[\n",
		(unsigned long long)t0, other && *other ? "," : "", other ? other : "");
	bool first = true;
	for (uint32_t g = 0; g < t->ngr; g++) {
		fprintf(f,
			"%s{\"ph\":\"M\",\"pid\":%u,\"name\":\"process_name\",\"args\":{\"name\":\"",
			first ? "" : ",\n", g + 1);
		ve_tl_json_str(f, str_at(t, t->gr[g].name));
		fprintf(f,
			"\"}},\n{\"ph\":\"M\",\"pid\":%u,\"name\":\"process_sort_index\","
			"\"args\":{\"sort_index\":%d}}",
			g + 1, t->gr[g].sort);
		first = false;
	}
	for (uint32_t i = 0; i < t->ntr; i++) {
		const struct tl_track *tr = &t->tr[i];
		/* Rows past 64 share the last one: deeper overlap than that is
		 * not something to read off a timeline anyway. */
		uint32_t rows = tr->nrows < 64 ? tr->nrows : 64;
		for (uint32_t r = 0; r < rows; r++) {
			fprintf(f,
				",\n{\"ph\":\"M\",\"pid\":%u,\"tid\":%u,\"name\":\"thread_name\","
				"\"args\":{\"name\":\"",
				tr->group + 1, TID(i, r));
			ve_tl_json_str(f, str_at(t, tr->name));
			if (r)
				fprintf(f, " #%u", r + 1);
			fprintf(f,
				"\"}},\n{\"ph\":\"M\",\"pid\":%u,\"tid\":%u,\"name\":"
				"\"thread_sort_index\",\"args\":{\"sort_index\":%d}}",
				tr->group + 1, TID(i, r), tr->sort * 64 + (int)r);
		}
	}
	for (uint32_t i = 0; i < t->nev; i++) {
		const struct tl_ev *e = &t->ev[i];
		const struct tl_track *tr = &t->tr[e->track];
		fprintf(f, ",\n{\"ph\":\"%s\",\"pid\":%u,\"tid\":%u,\"ts\":%.3f,", e->instant ? "i" : "X",
			tr->group + 1, TID(e->track, e->row), (double)(e->t0 - t0) / 1e3);
		if (e->instant)
			fprintf(f, "\"s\":\"t\",");
		else
			fprintf(f, "\"dur\":%.3f,", (double)(e->t1 - e->t0) / 1e3);
		fprintf(f, "\"name\":\"");
		ve_tl_json_str(f, str_at(t, e->name));
		fprintf(f, "\",\"args\":{");
		if (t->args)
			t->args(t->arg, e->cookie, f);
		fprintf(f, "}}");
	}
	fprintf(f, "\n]}\n");
	return ferror(f) ? -EIO : 0;
}
