/* SPDX-License-Identifier: MIT */
/*
 * Raw IPC ring cost between two processes over a memfd segment (no daemon
 * logic): what the client <-> coordinator transport adds by itself.
 *
 *  1. round trip, both sides spinning: the client pushes a READY, the server
 *     pops it, checks it (ve_proto_check, as the coordinator must) and pushes
 *     a BIND; the client spins until the BIND arrives;
 *  2. the same with the server asleep on the ring's futex before each READY
 *     (the client waits a gap first, so every round trip pays a wake-up: the
 *     cost of an idle coordinator);
 *  3. one-direction throughput: a producer process pushes READY records in
 *     batches of 32, the consumer pops up to 64 at a time, checks each record
 *     and its sequence number.
 * Each is repeated; medians and p99 over all samples, spread (p10/p90) over
 * the repetitions' medians. Writes bench/results/ipc_ring.json (or $VE_BENCH_OUT).
 * Targets (for the full daemon path, issue): <= 5 us median round trip and
 * >= 1M records/s.
 */
#include "ipc/proto.h"
#include "ipc/ring.h"
#include "ipc/shm.h"
#include "util/util.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "bench_util.h"

#define RING_RECORDS 1024u
#define REPS	     7
#define RTT_ITERS    20000
#define RTT_WARMUP   2000
#define SLEEP_ITERS  1000
#define SLEEP_GAP_NS 200000u
#define TPUT_RECORDS 4000000u
#define TPUT_BATCH   32u

enum { MODE_SPIN, MODE_SLEEP, MODE_TPUT };

/* What the child reports back (in a MAP_SHARED page; read after waitpid). */
struct child_report {
	int fail;
	uint64_t sleeps, wakes, records;
};

static inline void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/* One failed poll of a spin loop. Every 1024th yields the CPU: on an
 * oversubscribed machine (2 shared cores here) the peer may be waiting for
 * this very CPU, and a pure spin would then last a whole time slice. */
static inline void spin_poll(uint32_t *polls)
{
	if ((++*polls & 1023) == 0)
		sched_yield();
	else
		relax();
}

static void spin_ns(uint64_t ns)
{
	uint64_t end = ve__now_ns() + ns;
	while (ve__now_ns() < end)
		relax();
}

static void mk_ready(struct ve_rec *r, uint32_t seq)
{
	ve_rec_init(r, VE_REC_READY);
	r->seq = seq;
	r->u.ready.tok = (uint64_t)seq + 1;
	r->u.ready.key = 0x1234;
	r->u.ready.ready_ns = 1;
	r->u.ready.blocks = 132;
	r->u.ready.threads_per_block = 256;
	r->u.ready.kind = 1;
}

/* Server side of the round trips: answer each READY with a BIND until BYE. */
static void serve(struct ve_shm *shm, int mode, struct child_report *rep)
{
	struct ve_ring_consumer c;
	struct ve_ring_producer p;
	if (ve_ring_consumer_init(&c, &shm->to_coord) ||
	    ve_ring_producer_init(&p, &shm->to_client)) {
		rep->fail = 1;
		return;
	}
	struct ve_rec in[16], out;
	uint32_t polls = 0;
	for (;;) {
		int n = ve_ring_pop(&c, in, 16);
		if (n < 0) {
			rep->fail = 2;
			return;
		}
		if (n == 0) {
			if (mode == MODE_SLEEP) {
				if (ve_ring_wait(&c, 10000000000ull) <= 0) {
					rep->fail = 3;
					return;
				}
			} else {
				spin_poll(&polls);
			}
			continue;
		}
		for (int i = 0; i < n; i++) {
			if (ve_proto_check(&in[i], VE_DIR_TO_COORD)) {
				rep->fail = 4;
				return;
			}
			if (in[i].type == VE_REC_BYE) {
				rep->sleeps = c.sleeps;
				rep->wakes = p.wakes;
				return;
			}
			ve_rec_init(&out, VE_REC_BIND);
			out.seq = p.seq++;
			out.u.bind.tok = in[i].u.ready.tok;
			out.u.bind.entry = 3;
			out.u.bind.lane_stream = 1;
			while (ve_ring_push(&p, &out, 1) == 0)
				spin_poll(&polls);
		}
	}
}

/* Producer side of the throughput run. */
static void produce(struct ve_shm *shm, uint32_t total, struct child_report *rep)
{
	struct ve_ring_producer p;
	if (ve_ring_producer_init(&p, &shm->to_coord)) {
		rep->fail = 1;
		return;
	}
	struct ve_rec buf[TPUT_BATCH];
	uint32_t seq = 0;
	while (seq < total) {
		uint32_t k = VE_MIN(TPUT_BATCH, total - seq);
		for (uint32_t i = 0; i < k; i++)
			mk_ready(&buf[i], seq + i);
		uint32_t done = 0;
		while (done < k) {
			int n = ve_ring_push(&p, buf + done, k - done);
			if (n < 0) {
				rep->fail = 2;
				return;
			}
			done += (uint32_t)n;
			if (n == 0) {
				/* Full: spin briefly, then sleep until a quarter of the
				 * ring is free, not just one batch: each sleep then buys
				 * many batches, and the consumer wakes us far less often. */
				for (int s = 0;
				     s < 256 && ve_ring_room(&p, k - done) < (int)(k - done); s++)
					relax();
				if (ve_ring_room(&p, k - done) < (int)(k - done) &&
				    ve_ring_wait_space(&p, VE_MAX(k - done, RING_RECORDS / 4),
						       10000000000ull) <= 0) {
					rep->fail = 3;
					return;
				}
			}
		}
		seq += k;
	}
	rep->records = seq;
	rep->sleeps = p.sleeps;
	rep->wakes = p.wakes;
}

struct child {
	pid_t pid;
	struct ve_shm shm;
	struct child_report *rep;
};

static int start_child(int mode, uint32_t tput_records, struct child *ch)
{
	int err = ve_shm_create(RING_RECORDS, &ch->shm);
	if (err)
		return err;
	ch->rep = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (ch->rep == MAP_FAILED) {
		ve_shm_fini(&ch->shm);
		return -errno;
	}
	memset(ch->rep, 0, sizeof(*ch->rep));
	fflush(NULL);
	ch->pid = fork();
	if (ch->pid < 0)
		return -errno;
	if (ch->pid == 0) {
		alarm(120);
		if (mode == MODE_TPUT)
			produce(&ch->shm, tput_records, ch->rep);
		else
			serve(&ch->shm, mode, ch->rep);
		_exit(ch->rep->fail ? 1 : 0);
	}
	return 0;
}

static int end_child(struct child *ch, struct child_report *out)
{
	int status = 0;
	waitpid(ch->pid, &status, 0);
	*out = *ch->rep;
	munmap(ch->rep, 4096);
	ve_shm_fini(&ch->shm);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || out->fail) {
		fprintf(stderr, "bench_ipc: child failed (status %d, code %d)\n", status,
			out->fail);
		return -1;
	}
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Percentile of sorted v[0..n) by linear interpolation. */
static double pct(const double *v, size_t n, double q)
{
	if (n == 0)
		return 0;
	double pos = q * (double)(n - 1);
	size_t i = (size_t)pos;
	if (i + 1 >= n)
		return v[n - 1];
	return v[i] + (pos - (double)i) * (v[i + 1] - v[i]);
}

struct rtt_result {
	double median, p99, rep_p10, rep_p90, slept_fraction;
	int reps; /* repetitions completed within the budget */
	size_t n; /* samples */
};

/* Round trips in 'mode'; samples in us. Stops early (fewer repetitions) if
 * the phase runs past budget_ns, so a loaded machine cannot stretch the run. */
static int run_rtt(int mode, uint64_t budget_ns, struct rtt_result *res)
{
	int iters = mode == MODE_SLEEP ? SLEEP_ITERS : RTT_ITERS;
	int warm = mode == MODE_SLEEP ? 50 : RTT_WARMUP;
	double *all = malloc(sizeof(double) * (size_t)iters * REPS);
	double *rep = malloc(sizeof(double) * (size_t)iters);
	double medians[REPS];
	struct child ch;
	if (!all || !rep || start_child(mode, 0, &ch)) {
		free(all);
		free(rep);
		return -1;
	}
	struct ve_ring_producer p;
	struct ve_ring_consumer c;
	int ok = ve_ring_producer_init(&p, &ch.shm.to_coord) == 0 &&
		 ve_ring_consumer_init(&c, &ch.shm.to_client) == 0;
	struct ve_rec r, back;
	size_t na = 0;
	int nrep = 0, sent = 0, over = 0;
	uint32_t seq = 0, polls = 0;
	uint64_t deadline = ve__now_ns() + budget_ns;
	for (int k = -1; k < REPS && ok && !over; k++) { /* k = -1: warm-up, not recorded */
		int n = k < 0 ? warm : iters, i;
		for (i = 0; i < n; i++) {
			if (mode == MODE_SLEEP)
				spin_ns(SLEEP_GAP_NS); /* the server falls asleep meanwhile */
			mk_ready(&r, seq++);
			uint64_t t0 = ve__now_ns();
			if (t0 > deadline) {
				over = 1;
				break;
			}
			if (ve_ring_push(&p, &r, 1) != 1) {
				ok = 0;
				break;
			}
			sent++;
			int got;
			while ((got = ve_ring_pop(&c, &back, 1)) == 0) {
				spin_poll(&polls);
				if ((polls & 0xffff) == 0 && ve__now_ns() - t0 > 10000000000ull)
					break;
			}
			uint64_t t1 = ve__now_ns();
			if (got != 1 || ve_proto_check(&back, VE_DIR_TO_CLIENT) ||
			    back.u.bind.tok != r.u.ready.tok) {
				ok = 0;
				break;
			}
			if (k >= 0)
				rep[i] = (double)(t1 - t0) / 1e3;
		}
		/* A repetition cut short by the budget counts if it got far enough. */
		if (k >= 0 && ok && i >= n / 4) {
			memcpy(all + na, rep, sizeof(double) * (size_t)i);
			na += (size_t)i;
			qsort(rep, (size_t)i, sizeof(double), cmp_double);
			medians[nrep++] = pct(rep, (size_t)i, 0.5);
		}
	}
	ve_rec_init(&r, VE_REC_BYE);
	while (ok && ve_ring_push(&p, &r, 1) == 0)
		relax();
	if (!ok)
		kill(ch.pid, SIGKILL);
	struct child_report cr;
	int err = end_child(&ch, &cr);
	if (err || !ok || nrep == 0) {
		free(all);
		free(rep);
		return -1;
	}
	qsort(all, na, sizeof(double), cmp_double);
	qsort(medians, (size_t)nrep, sizeof(double), cmp_double);
	res->median = pct(all, na, 0.5);
	res->p99 = pct(all, na, 0.99);
	res->rep_p10 = pct(medians, (size_t)nrep, 0.1);
	res->rep_p90 = pct(medians, (size_t)nrep, 0.9);
	res->reps = nrep;
	res->n = na;
	/* Server sleeps per round trip (the warm-up included). */
	res->slept_fraction = (double)cr.sleeps / (double)sent;
	free(all);
	free(rep);
	return 0;
}

struct tput_result {
	double median, p10, p90, consumer_sleeps_per_rep, producer_sleeps_per_rep;
	int reps;
};

static int run_tput(uint64_t budget_ns, struct tput_result *res)
{
	double rates[REPS];
	uint64_t csleeps = 0, psleeps = 0;
	struct ve_rec buf[64];
	uint64_t deadline = ve__now_ns() + budget_ns;
	int k;
	for (k = 0; k < REPS && (k == 0 || ve__now_ns() < deadline); k++) {
		struct child ch;
		if (start_child(MODE_TPUT, TPUT_RECORDS, &ch))
			return -1;
		struct ve_ring_consumer c;
		if (ve_ring_consumer_init(&c, &ch.shm.to_coord))
			return -1;
		uint32_t seq = 0;
		uint64_t t0 = 0;
		int ok = 1;
		while (seq < TPUT_RECORDS && ok) {
			int n = ve_ring_pop(&c, buf, 64);
			if (n < 0) {
				ok = 0;
				break;
			}
			if (n == 0) {
				if (ve_ring_wait_spin(&c, 50000, 10000000000ull) <= 0)
					ok = 0;
				continue;
			}
			if (seq == 0)
				t0 = ve__now_ns(); /* from the first record: not fork/startup */
			for (int i = 0; i < n; i++, seq++)
				if (buf[i].seq != seq || ve_proto_check(&buf[i], VE_DIR_TO_COORD))
					ok = 0;
		}
		uint64_t t1 = ve__now_ns();
		struct child_report cr;
		if (end_child(&ch, &cr) || !ok || cr.records != TPUT_RECORDS) {
			fprintf(stderr, "bench_ipc: throughput run %d failed at record %u\n", k,
				seq);
			return -1;
		}
		rates[k] = (double)(TPUT_RECORDS - 1) / ((double)(t1 - t0) / 1e9);
		csleeps += c.sleeps;
		psleeps += cr.sleeps;
	}
	qsort(rates, (size_t)k, sizeof(double), cmp_double);
	res->median = pct(rates, (size_t)k, 0.5);
	res->p10 = pct(rates, (size_t)k, 0.1);
	res->p90 = pct(rates, (size_t)k, 0.9);
	res->consumer_sleeps_per_rep = (double)csleeps / k;
	res->producer_sleeps_per_rep = (double)psleeps / k;
	res->reps = k;
	return 0;
}


int main(int argc, char **argv)
{
	ve__log_init();
	const char *path = getenv("VE_BENCH_OUT");
	if (!path || !*path)
		path = "bench/results/ipc_ring.json";
	if (argc > 1)
		path = argv[1];

	/* The machine is shared: record how busy it was when we started. */
	double load1 = -1;
	FILE *la = fopen("/proc/loadavg", "r");
	if (la) {
		if (fscanf(la, "%lf", &load1) != 1)
			load1 = -1;
		fclose(la);
	}
	struct rtt_result spin, sleep;
	struct tput_result tput;
	uint64_t t0 = ve__now_ns();
	/* Budgets keep the whole run under 30 s however loaded the machine is;
	 * a phase that hits its budget reports the repetitions it completed. */
	if (run_rtt(MODE_SPIN, 4000000000ull, &spin) ||
	    run_rtt(MODE_SLEEP, 5000000000ull, &sleep) || run_tput(8000000000ull, &tput)) {
		fprintf(stderr, "bench_ipc: failed\n");
		return 1;
	}
	double secs = (double)(ve__now_ns() - t0) / 1e9;

	char cpu[256], date[64];
	cpu_model(cpu, sizeof(cpu));
	for (char *q = cpu; *q; q++) /* printed with %s below: keep the JSON plain */
		if (*q == '"' || *q == '\\')
			*q = ' ';
	time_t now = time(NULL);
	struct tm tm;
	gmtime_r(&now, &tm);
	strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", &tm);
	long nproc = sysconf(_SC_NPROCESSORS_ONLN);

	printf("ipc ring (raw, two processes, memfd segment, %u-record rings), %s, %ld cpus\n",
	       RING_RECORDS, cpu, nproc);
	printf("  round trip, both spinning:   median %.2f us  p99 %.2f us  (rep medians p10 %.2f "
	       "p90 %.2f)\n",
	       spin.median, spin.p99, spin.rep_p10, spin.rep_p90);
	printf("  round trip, server sleeping: median %.2f us  p99 %.2f us  (rep medians p10 %.2f "
	       "p90 %.2f; server slept on %.0f%% of round trips)\n",
	       sleep.median, sleep.p99, sleep.rep_p10, sleep.rep_p90, 100 * sleep.slept_fraction);
	printf("  throughput, batches of %u:   %.2f M records/s  (p10 %.2f p90 %.2f)\n", TPUT_BATCH,
	       tput.median / 1e6, tput.p10 / 1e6, tput.p90 / 1e6);
	printf("  targets for the full daemon path: <= 5 us median round trip, >= 1M records/s\n");

	FILE *f = fopen(path, "w");
	if (!f && errno == ENOENT) {
		mkdir("bench", 0755);
		mkdir("bench/results", 0755);
		f = fopen(path, "w");
	}
	if (!f) {
		fprintf(stderr, "bench_ipc: cannot write %s: %s\n", path, strerror(errno));
		return 1;
	}
	fprintf(
	    f,
	    "{\n"
	    "  \"bench\": \"ipc_ring\",\n"
	    "  \"date\": \"%s\",\n"
	    "  \"machine\": {\"cpu\": \"%s\", \"nproc\": %ld, \"loadavg_1m_at_start\": %.2f},\n"
	    "  \"what\": \"raw SPSC rings between two processes over a memfd segment; no daemon "
	    "logic; each side checks records with ve_proto_check\",\n"
	    "  \"config\": {\"ring_records\": %u, \"reps\": %d, \"roundtrips_per_rep\": %d, "
	    "\"sleeping_roundtrips_per_rep\": %d, \"sleeping_gap_us\": %u, "
	    "\"throughput_records_per_rep\": %u, \"batch\": %u, \"reps_done\": {\"spinning\": %d, "
	    "\"sleeping\": %d, \"throughput\": %d}, \"samples\": {\"spinning\": %zu, "
	    "\"sleeping\": %zu}},\n"
	    "  \"ring_roundtrip_us_median\": %.3f,\n"
	    "  \"ring_roundtrip_us_p99\": %.3f,\n"
	    "  \"ring_roundtrip_sleeping_us_median\": %.3f,\n"
	    "  \"ring_roundtrip_sleeping_us_p99\": %.3f,\n"
	    "  \"sleeping_server_slept_fraction\": %.3f,\n"
	    "  \"records_per_s\": %.0f,\n"
	    "  \"spread\": {\n"
	    "    \"ring_roundtrip_us_median\": {\"p10\": %.3f, \"p90\": %.3f},\n"
	    "    \"ring_roundtrip_sleeping_us_median\": {\"p10\": %.3f, \"p90\": %.3f},\n"
	    "    \"records_per_s\": {\"p10\": %.0f, \"p90\": %.0f}\n"
	    "  },\n"
	    "  \"throughput_sleeps_per_rep\": {\"consumer\": %.1f, \"producer\": %.1f},\n"
	    "  \"targets\": {\"roundtrip_us_median_max\": 5, \"records_per_s_min\": 1000000, "
	    "\"note\": \"targets are for the full daemon path\"},\n"
	    "  \"meets_targets\": %s,\n"
	    "  \"run_s\": %.1f\n"
	    "}\n",
	    date, cpu, nproc, load1, RING_RECORDS, REPS, RTT_ITERS, SLEEP_ITERS,
	    SLEEP_GAP_NS / 1000, TPUT_RECORDS, TPUT_BATCH, spin.reps, sleep.reps, tput.reps, spin.n,
	    sleep.n, spin.median, spin.p99, sleep.median, sleep.p99, sleep.slept_fraction,
	    tput.median, spin.rep_p10, spin.rep_p90, sleep.rep_p10, sleep.rep_p90, tput.p10,
	    tput.p90, tput.consumer_sleeps_per_rep, tput.producer_sleeps_per_rep,
	    spin.median <= 5.0 && tput.median >= 1e6 ? "true" : "false", secs);
	fclose(f);
	printf("  wrote %s (%.1f s)\n", path, secs);
	return 0;
}
