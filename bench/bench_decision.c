/* SPDX-License-Identifier: MIT */
/*
 * Decision cost of the coordinator: how long ve_coord_schedule() takes per
 * binding and per round, under each built-in policy.
 *
 * Setup (docs/policies.md, paper Algorithm 1): the H200 pool (15 x 8 SMs
 * + 12, 59 entries), 16 clients with 64 ready ops each (1024 ready ops),
 * profiles for five kernel shapes that scale differently, set at every pool
 * size as ve-profile would measure them:
 *   gemm    scales to the whole GPU (compute bound, 1056 blocks)
 *   stream  memory bound: stops scaling at about 48 SMs
 *   attn    wave quantised: 264 blocks, 2 per SM
 *   reduce  sublinear (square root)
 *   tiny    16 blocks: flat, gains nothing from SMs
 * Under tpot client 0 is a latency-class client (decode ops).
 *
 * One round = one timed ve_coord_schedule() call with room for 64 bindings
 * (the dispatcher's batch). Between rounds, untimed, every binding is
 * completed (ve_coord_done, which releases its lease) and its op made ready
 * again, so every round starts from an idle GPU and 1024 ready ops: every
 * round binds. Virtual time advances 5 us per round (ready ages, deadlines).
 *
 *   bench_decision [--rounds N] [--out FILE]
 *
 * Reports, per policy, the median and p10/p90 over rounds of the round time
 * and of the time per binding (round time / bindings of that round), and
 * writes JSON (default bench/results/decision.json) whose us_per_binding is
 * the tput median (target <= 2 us). With 1024 ready ops tput's MinBind fills
 * all 16 leaves and nothing can widen, so tput is also measured with 4
 * clients of 1 ready op each, where the expansion phase does the work
 * (tput_4_ready_ops).
 */
#include "core/desc.h"
#include "coord/coord.h"
#include "pool/pool.h"
#include "profile/profile.h"
#include "util/util.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#include "bench_util.h"

#define NCLIENTS   16
#define PER_CLIENT 64
#define MAX_BIND   64
#define ROUND_NS   5000ull

static const uint32_t h200[16] = {8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 12};

struct shape {
	const char *name;
	uint64_t key;
	uint64_t blocks;
	uint32_t threads;
};

static const struct shape shapes[] = {
    {"gemm", 0xa11ull, 1056, 256},  {"stream", 0xa12ull, 4096, 256}, {"attn", 0xa13ull, 264, 128},
    {"reduce", 0xa14ull, 512, 512}, {"tiny", 0xa15ull, 16, 64},
};
#define NSHAPES ((int)(sizeof(shapes) / sizeof(shapes[0])))

/* T(shape, m) in ns. */
static double model(int s, uint32_t m)
{
	double x = m;
	switch (s) {
	case 0:
		return 5000.0 + 20000.0 * 132.0 / x;
	case 1:
		return fmax(60000.0 * 32.0 / x, 40000.0);
	case 2:
		return 3000.0 + 10000.0 * ceil(264.0 / (2.0 * x));
	case 3:
		return 30000.0 * sqrt(16.0 / x) + 2000.0;
	default:
		return 8000.0;
	}
}

static const char *const policies[] = {"tput", "chaos", "fixed", "whole", "tpot"};
#define NPOL ((int)(sizeof(policies) / sizeof(policies[0])))

struct stats {
	double med, p10, p90, min, max;
};

struct result {
	struct stats round_us, bind_us;
	double bindings_per_round;
	int rounds;
	uint64_t bindings;
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double pct(const double *s, int n, double p)
{
	double idx = p * (n - 1);
	int lo = (int)idx;
	int hi = lo + 1 < n ? lo + 1 : lo;
	return s[lo] + (s[hi] - s[lo]) * (idx - lo);
}

static struct stats summarize(double *x, int n)
{
	qsort(x, (size_t)n, sizeof(*x), cmp_double);
	return (struct stats){pct(x, n, 0.5), pct(x, n, 0.1), pct(x, n, 0.9), x[0], x[n - 1]};
}

static void die(const char *what, int rc)
{
	fprintf(stderr, "bench_decision: %s: %d\n", what, rc);
	exit(1);
}

static void make_op(struct ve_ready_op *o, uint32_t client, uint64_t tok, uint64_t now)
{
	int s = (int)((tok * 7 + client) % NSHAPES);
	memset(o, 0, sizeof(*o));
	o->tok = tok;
	o->key = shapes[s].key;
	o->blocks = shapes[s].blocks;
	o->threads = shapes[s].threads;
	o->ready_ns = now;
	o->client = client;
	o->stream = (uint32_t)(tok % 4);
	o->kind = VE_OP_KERNEL;
	if (client == 0)
		o->flags = VE_READY_LATENCY; /* only tpot treats the client as such */
}

static struct result run_policy(const char *policy, uint32_t nclients, int per_client, int rounds,
				int warmup)
{
	struct ve_coord_config cfg = {.leaf_sms = h200,
				      .nleaves = 16,
				      .max_clients = NCLIENTS,
				      .ready_cap = 4096,
				      .policy = policy,
				      .seed = 7};
	struct ve_coord *c;
	char err[256];
	int rc = ve_coord_create(&cfg, &c, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "bench_decision: %s: %s\n", policy, err);
		exit(1);
	}
	const struct ve_pool *p = ve_coord_pool(c);
	struct ve_profile *pr = ve_coord_profile(c);
	for (uint32_t e = 0; e < p->nentries; e++)
		for (int s = 0; s < NSHAPES; s++)
			if ((rc = ve_profile_set(pr, shapes[s].key, p->e[e].sms,
						 model(s, p->e[e].sms))))
				die("profile_set", rc);
	bool tpot = strncmp(policy, "tpot", 4) == 0;
	for (uint32_t k = 0; k < nclients; k++)
		if ((rc = ve_coord_client_add(c, k, tpot && k == 0 ? VE_READY_LATENCY : 0)))
			die("client_add", rc);
	uint64_t now = 1000000, tok = 1;
	ve_coord_set_now(c, now);
	struct ve_ready_op o;
	/* Interleaved ages: client k's i-th op is the (i * 16 + k)-th oldest. */
	for (int i = 0; i < per_client; i++)
		for (uint32_t k = 0; k < nclients; k++) {
			make_op(&o, k, tok++,
				now - 1000000 + (uint64_t)(i * (int)nclients + (int)k));
			if ((rc = ve_coord_ready(c, &o)))
				die("ready", rc);
		}
	double *ru = calloc((size_t)rounds, sizeof(double));
	double *bu = calloc((size_t)rounds, sizeof(double));
	if (!ru || !bu)
		die("calloc", -ENOMEM);
	struct ve_binding b[MAX_BIND];
	struct result res = {.rounds = rounds};
	for (int r = -warmup; r < rounds; r++) {
		now += ROUND_NS;
		ve_coord_set_now(c, now);
		uint64_t t0 = ve__now_ns();
		int n = ve_coord_schedule(c, b, MAX_BIND);
		uint64_t t1 = ve__now_ns();
		if (n <= 0) {
			fprintf(stderr, "bench_decision: %s: round %d bound nothing (%d)\n", policy,
				r, n);
			exit(1);
		}
		if (r >= 0) {
			ru[r] = (double)(t1 - t0) / 1e3;
			bu[r] = ru[r] / n;
			res.bindings += (uint64_t)n;
		}
		/* Untimed: complete everything (leases released) and refill. */
		for (int i = 0; i < n; i++) {
			if ((rc = ve_coord_done(c, b[i].op.client, b[i].entry, b[i].op.key, 0)))
				die("done", rc);
			make_op(&o, b[i].op.client, tok++, now);
			if ((rc = ve_coord_ready(c, &o)))
				die("ready", rc);
		}
	}
	if (ve_coord_view(c)->nready != nclients * (uint32_t)per_client)
		die("ready queue drifted", (int)ve_coord_view(c)->nready);
	res.round_us = summarize(ru, rounds);
	res.bind_us = summarize(bu, rounds);
	res.bindings_per_round = (double)res.bindings / rounds;
	free(ru);
	free(bu);
	ve_coord_destroy(c);
	return res;
}




static void json_stats(FILE *f, const char *name, const struct stats *s, const char *tail)
{
	fprintf(f,
		"      \"%s\": {\"median\": %.3f, \"p10\": %.3f, \"p90\": %.3f, \"min\": %.3f, "
		"\"max\": %.3f}%s\n",
		name, s->med, s->p10, s->p90, s->min, s->max, tail);
}

int main(int argc, char **argv)
{
	int rounds = 20000;
	const char *out = "bench/results/decision.json";
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
			rounds = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--out") && i + 1 < argc)
			out = argv[++i];
		else {
			fprintf(stderr, "usage: %s [--rounds N] [--out FILE]\n", argv[0]);
			return 2;
		}
	}
	if (rounds < 10)
		return 2;
	char cpu[256], commit[80], date[64], machine[512];
	cpu_model(cpu, sizeof(cpu));
	git_commit(commit, sizeof(commit));
	long nproc = sysconf(_SC_NPROCESSORS_ONLN);
	struct utsname u;
	if (uname(&u) == 0)
		snprintf(machine, sizeof(machine), "%s %s %s, %ld cpus, %s", u.sysname, u.release,
			 u.machine, nproc, cpu);
	else
		snprintf(machine, sizeof(machine), "%ld cpus, %s", nproc, cpu);
	time_t tnow = time(NULL);
	strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", gmtime(&tnow));

	printf("bench_decision: %s\n", machine);
	printf(
	    "  %d clients x %d ready ops, H200 pool (59 entries), %d rounds per policy, up to %d "
	    "bindings per round\n",
	    NCLIENTS, PER_CLIENT, rounds, MAX_BIND);
	struct result res[NPOL];
	for (int i = 0; i < NPOL; i++) {
		res[i] = run_policy(policies[i], NCLIENTS, PER_CLIENT, rounds, rounds / 10);
		printf("  %-6s %6.3f us/binding (p10 %.3f, p90 %.3f), %7.2f us/round (p10 %.2f, "
		       "p90 %.2f), %.1f bindings/round\n",
		       policies[i], res[i].bind_us.med, res[i].bind_us.p10, res[i].bind_us.p90,
		       res[i].round_us.med, res[i].round_us.p10, res[i].round_us.p90,
		       res[i].bindings_per_round);
	}
	/* Few ready ops: min-binding leaves most of the GPU free, so the
	 * expansion phase of Algorithm 1 does the work. */
	struct result light = run_policy("tput", 4, 1, rounds, rounds / 10);
	printf("  tput with 4 ready ops (expansion phase): %.3f us/binding (p10 %.3f, p90 %.3f), "
	       "%.2f us/round\n",
	       light.bind_us.med, light.bind_us.p10, light.bind_us.p90, light.round_us.med);
	printf("  tput: %.3f us per binding, target <= 2 us: %s\n", res[0].bind_us.med,
	       res[0].bind_us.med <= 2.0 ? "met" : "MISSED");

	char dir[512];
	snprintf(dir, sizeof(dir), "%s", out);
	char *slash = strrchr(dir, '/');
	if (slash) {
		*slash = 0;
		mkdir(dir, 0777); /* best effort: usually exists */
	}
	FILE *f = fopen(out, "w");
	if (!f) {
		fprintf(stderr, "bench_decision: cannot write %s: %s\n", out, strerror(errno));
		return 1;
	}
	fprintf(f, "{\n  \"bench\": \"decision\",\n");
	fprintf(f,
		"  \"what\": \"wall time of ve_coord_schedule rounds that bind: %d clients x %d "
		"ready ops, H200 pool (15x8+12 SMs, 59 entries), 5 kernel shapes with "
		"different scaling profiles, up to %d bindings per round; bindings completed "
		"and ops re-readied between rounds (untimed)\",\n",
		NCLIENTS, PER_CLIENT, MAX_BIND);
	fprintf(f, "  \"us_per_binding\": %.3f,\n  \"target_us_per_binding\": 2,\n",
		res[0].bind_us.med);
	fprintf(f, "  \"rounds\": %d,\n  \"clients\": %d,\n  \"ready_per_client\": %d,\n", rounds,
		NCLIENTS, PER_CLIENT);
	fprintf(f, "  \"policies\": {\n");
	for (int i = 0; i < NPOL; i++) {
		fprintf(f, "    \"%s\": {\n", policies[i]);
		json_stats(f, "us_per_binding", &res[i].bind_us, ",");
		json_stats(f, "us_per_round", &res[i].round_us, ",");
		fprintf(f, "      \"bindings_per_round\": %.2f\n    }%s\n",
			res[i].bindings_per_round, i + 1 < NPOL ? "," : "");
	}
	fprintf(f, "  },\n  \"tput_4_ready_ops\": {\n");
	json_stats(f, "us_per_binding", &light.bind_us, ",");
	json_stats(f, "us_per_round", &light.round_us, ",");
	fprintf(f, "      \"bindings_per_round\": %.2f\n  },\n", light.bindings_per_round);
	fprintf(f, "  \"machine\": ");
	json_str(f, machine);
	fprintf(f, ",\n  \"cpu\": ");
	json_str(f, cpu);
	fprintf(f, ",\n  \"nproc\": %ld,\n  \"date\": \"%s\",\n  \"commit\": ", nproc, date);
	json_str(f, commit);
	fprintf(f, "\n}\n");
	fclose(f);
	printf("  wrote %s\n", out);
	return 0;
}
