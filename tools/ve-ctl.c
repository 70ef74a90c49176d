/* SPDX-License-Identifier: MIT */
/*
 * ve-ctl: talk to a running ved (docs/daemon.md, "ve-ctl").
 *   ve-ctl [--socket PATH | --device N] [--json] status [-a]
 *   ve-ctl [...] top [-n N]
 *   ve-ctl [...] trace [--seconds N] FILE
 *   ve-ctl [...] clients | metrics | drain [--wait [--timeout S]] | resume | reload
 */
#include "ipc/ctl.h"
#include "pool/pool.h"
#include "util/util.h"
#include "util/timeline.h"
#include "util/version.h"
#include "ve/ve_policy.h"

#include <errno.h>
#include <getopt.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static union {
	uint8_t b[VE_CTL_MAX_MSG];
	uint64_t align;
} g_msg;

static char g_path[108];
static bool g_json;
static volatile sig_atomic_t g_stop;

static void on_int(int sig)
{
	(void)sig;
	g_stop = 1;
}

static int connect_ved(void)
{
	char why[512];
	int fd = ve_ctl_connect_checked(g_path, why, sizeof(why));
	if (fd >= 0)
		return fd;
	if (why[0])
		fprintf(stderr, "ve-ctl: %s\n", why);
	else if (fd == -ENOENT)
		fprintf(stderr,
			"ve-ctl: no ved runs here: there is no socket at %s (start one with "
			"'ved', or pass --socket/--device)\n",
			g_path);
	else if (fd == -ECONNREFUSED)
		fprintf(stderr,
			"ve-ctl: ved is not running: %s is a stale socket (ved was killed; "
			"the next ved removes it)\n",
			g_path);
	else if (fd == -EACCES)
		fprintf(stderr,
			"ve-ctl: may not connect to %s (ved serves another user or group)\n",
			g_path);
	else
		fprintf(stderr, "ve-ctl: cannot connect to %s: %s\n", g_path, strerror(-fd));
	return -1;
}

static int request(int fd, uint16_t type, uint32_t arg)
{
	union {
		struct ve_ctl_status_req s;
		struct ve_ctl_trace_req t;
	} q;
	memset(&q, 0, sizeof(q));
	size_t len = type == VE_CTL_STATUS_REQ ? sizeof(q.s) : sizeof(q.t);
	ve_ctl_hdr_init(&q.s.h, type, (uint32_t)len);
	if (type == VE_CTL_TRACE_REQ)
		q.t.max_events = arg;
	int rc = ve_ctl_send(fd, &q, len);
	if (rc)
		fprintf(stderr, "ve-ctl: cannot send the request: %s\n", strerror(-rc));
	return rc;
}

/* Receives one reply of 'type'; returns its length or -1. */
static int reply(int fd, uint16_t type)
{
	int n = ve_ctl_recv(fd, g_msg.b, sizeof(g_msg.b), NULL, 5000);
	if (n <= 0) {
		fprintf(stderr, "ve-ctl: no answer from ved (%s)\n",
			n == 0 ? "it closed the connection" : strerror(-n));
		return -1;
	}
	int rc = ve_ctl_check(g_msg.b, (size_t)n, VE_CTL_FROM_VED);
	const struct ve_ctl_hdr *h = (const void *)g_msg.b;
	if (rc == 0 && h->type == VE_CTL_REFUSE) {
		fprintf(stderr, "ve-ctl: ved refused: %s\n",
			((const struct ve_ctl_refuse *)(const void *)g_msg.b)->msg);
		return -1;
	}
	if (rc || h->type != type) {
		fprintf(stderr, "ve-ctl: malformed reply from ved (%s)\n",
			rc == -EPROTO ? "another protocol version: use ve-ctl of ved's release"
				      : "bad message");
		return -1;
	}
	return n;
}

/* ------------------------------------------------------------------ status */

static void fmt_dur(uint64_t ns, char *b, size_t n)
{
	uint64_t s = ns / 1000000000ull;
	if (s >= 3600)
		snprintf(b, n, "%lluh%02llum", (unsigned long long)(s / 3600),
			 (unsigned long long)(s / 60 % 60));
	else if (s >= 60)
		snprintf(b, n, "%llum%02llus", (unsigned long long)(s / 60),
			 (unsigned long long)(s % 60));
	else
		snprintf(b, n, "%.1fs", (double)ns / 1e9);
}

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", *s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

static const char *holder_str(int32_t h, char *b, size_t n)
{
	if (h == VE_HOLDER_NONE)
		return "-";
	if (h == VE_HOLDER_SHARED)
		return "shared";
	snprintf(b, n, "%d", h);
	return b;
}

static void print_status_json(const struct ve_ctl_status *m)
{
	const struct ve_ctl_entry *e = (const void *)(m + 1);
	const struct ve_ctl_client *c = (const void *)(e + m->nentries);
	FILE *f = stdout;
	fprintf(f, "{\"ved_pid\":%d,\"device\":%d,\"uptime_s\":%.3f,\"draining\":%s,\"policy\":",
		m->ved_pid, m->device, (double)m->uptime_ns / 1e9,
		(m->h.flags & VE_CTL_F_DRAINING) ? "true" : "false");
	json_str(f, m->policy);
	fprintf(f,
		",\"mps\":\"%s\",\"max_clients\":%u,\"sm_count\":%u,\"fingerprint\":\"%016llx\","
		"\"leaf_sms\":[",
		ve_mps_state_name((int)m->mps), m->max_clients, m->sm_count,
		(unsigned long long)m->fingerprint);
	for (uint32_t i = 0; i < m->nleaves; i++)
		fprintf(f, "%s%u", i ? "," : "", m->leaf_sms[i]);
	fprintf(f,
		"],\"counters\":{\"rounds\":%llu,\"picks\":%llu,\"bindings\":%llu,\"rejects\":%llu,"
		"\"defers\":%llu,\"failed_submits\":%llu,\"completions\":%llu,\"drains\":%llu,"
		"\"reservations\":%llu,\"hints\":%llu,\"gate_closes\":%llu,\"decide_ns\":%llu,"
		"\"records_in\":%llu,\"records_out\":%llu,\"sleeps\":%llu,\"wakeups\":%llu,"
		"\"reclaimed_ops\":%llu,\"joined\":%llu,\"left\":%llu,\"protocol_errors\":%llu,"
		"\"refused\":%llu,\"watchdog_binds\":%llu,\"hello_timeouts\":%llu},"
		"\"records_per_s\":%.1f,\"entries\":[",
		(unsigned long long)m->rounds, (unsigned long long)m->picks,
		(unsigned long long)m->bindings, (unsigned long long)m->rejects,
		(unsigned long long)m->defers, (unsigned long long)m->failed_submits,
		(unsigned long long)m->completions, (unsigned long long)m->drains,
		(unsigned long long)m->reservations, (unsigned long long)m->hints,
		(unsigned long long)m->gate_closes, (unsigned long long)m->decide_ns,
		(unsigned long long)m->records_in, (unsigned long long)m->records_out,
		(unsigned long long)m->sleeps, (unsigned long long)m->wakeups,
		(unsigned long long)m->reclaimed_ops, (unsigned long long)m->joined,
		(unsigned long long)m->left, (unsigned long long)m->protocol_errors,
		(unsigned long long)m->refused, (unsigned long long)m->watchdog_binds,
		(unsigned long long)m->hello_timeouts, m->records_per_s);
	for (uint32_t i = 0; i < m->nentries; i++) {
		fprintf(f,
			"%s{\"index\":%u,\"kind\":\"%s\",\"sms\":%u,\"leaves\":\"%#llx\",\"state\":"
			"\"%s\","
			"\"holder\":%d,\"reserve_for\":%d,\"gate_open\":%u,\"outstanding\":%u,"
			"\"sharers\":[",
			i ? "," : "", i, ve_entry_kind_name(e[i].kind), e[i].sms,
			(unsigned long long)e[i].leaves, ve_entry_state_name(e[i].state),
			e[i].holder, e[i].reserve_for, e[i].gate_open, e[i].outstanding);
		for (int k = 0; k < e[i].nsharers; k++)
			fprintf(f, "%s%d", k ? "," : "", e[i].sharers[k]);
		fprintf(f, "]}");
	}
	fprintf(f, "],\"clients\":[");
	for (uint32_t i = 0; i < m->nclients; i++) {
		fprintf(f, "%s{\"id\":%d,\"pid\":%d,\"uid\":%u,\"name\":", i ? "," : "", c[i].id,
			c[i].pid, c[i].uid);
		json_str(f, c[i].name);
		fprintf(
		    f,
		    ",\"class\":\"%s\",\"ready\":%u,\"bound\":%u,\"ring_in\":%u,\"ring_out\":%u,"
		    "\"overflow\":%u,\"bindings\":%llu,\"completions\":%llu,\"failed\":%llu,"
		    "\"records_in\":%llu,\"records_out\":%llu,\"age_s\":%.3f,\"ops_per_s\":%.1f,"
		    "\"late\":%llu,\"why\":\"%s\"}",
		    (c[i].class_flags & VE_CTL_CLASS_LATENCY) ? "latency" : "batch", c[i].ready,
		    c[i].bound, c[i].ring_in, c[i].ring_out, c[i].overflow,
		    (unsigned long long)c[i].bindings, (unsigned long long)c[i].completions,
		    (unsigned long long)c[i].failed, (unsigned long long)c[i].records_in,
		    (unsigned long long)c[i].records_out, (double)c[i].age_ns / 1e9,
		    c[i].ops_per_s, (unsigned long long)c[i].late, ve_grant_why_name(c[i].why));
	}
	fprintf(f, "]}\n");
}

static void print_status_text(const struct ve_ctl_status *m, bool all)
{
	const struct ve_ctl_entry *e = (const void *)(m + 1);
	const struct ve_ctl_client *c = (const void *)(e + m->nentries);
	char up[32], b1[16];
	fmt_dur(m->uptime_ns, up, sizeof(up));
	printf("ved pid %d, device %d, up %s, policy %s, MPS %s%s\n", m->ved_pid, m->device, up,
	       m->policy[0] ? m->policy : "(no pool yet: waiting for the first client)",
	       ve_mps_state_name((int)m->mps),
	       (m->h.flags & VE_CTL_F_DRAINING) ? "; DRAINING (no new client admitted)" : "");
	if (m->nentries) {
		printf("pool: %u entries over %u leaves, %u SMs; fingerprint %016llx\n",
		       m->nentries, m->nleaves, m->sm_count, (unsigned long long)m->fingerprint);
	}
	printf("%.0f records/s; %llu in, %llu out; %llu bindings, %llu completions, %llu failed "
	       "submits, %llu rejects, %llu reservations, %llu gates closed, %llu ops reclaimed "
	       "from departed clients; %.2f us per decision round\n",
	       m->records_per_s, (unsigned long long)m->records_in,
	       (unsigned long long)m->records_out, (unsigned long long)m->bindings,
	       (unsigned long long)m->completions, (unsigned long long)m->failed_submits,
	       (unsigned long long)m->rejects, (unsigned long long)m->reservations,
	       (unsigned long long)m->gate_closes, (unsigned long long)m->reclaimed_ops,
	       m->rounds ? (double)m->decide_ns / 1e3 / (double)m->rounds : 0.0);
	printf("watchdog: %llu ops bound to the whole GPU past the bind deadline; connections: "
	       "%llu refused, %llu closed at the HELLO deadline, %llu protocol errors\n",
	       (unsigned long long)m->watchdog_binds, (unsigned long long)m->refused,
	       (unsigned long long)m->hello_timeouts, (unsigned long long)m->protocol_errors);
	uint32_t busy = 0;
	for (uint32_t i = 0; i < m->nentries; i++)
		busy += e[i].state != VE_ENTRY_IDLE;
	if (m->nentries) {
		printf("\nentries (%u busy%s):\n  %5s %-9s %4s %-9s %-7s %-8s %4s %11s\n", busy,
		       all ? "" : "; -a shows idle ones", "index", "kind", "SMs", "state", "holder",
		       "reserved", "gate", "outstanding");
		for (uint32_t i = 0; i < m->nentries; i++) {
			if (!all && e[i].state == VE_ENTRY_IDLE && e[i].reserve_for < 0)
				continue;
			char b2[16];
			printf("  %5u %-9s %4u %-9s %-7s %-8s %4s %11u", i,
			       ve_entry_kind_name(e[i].kind), e[i].sms,
			       ve_entry_state_name(e[i].state),
			       holder_str(e[i].holder, b1, sizeof(b1)),
			       holder_str(e[i].reserve_for, b2, sizeof(b2)),
			       e[i].gate_open ? "open" : "-", e[i].outstanding);
			if (e[i].nsharers > 1) {
				printf("  sharers");
				for (int k = 0; k < e[i].nsharers; k++)
					printf(" %d", e[i].sharers[k]);
			}
			printf("\n");
		}
	}
	printf("\nclients (%u of at most %u):\n", m->nclients, m->max_clients);
	if (m->nclients)
		printf("  %3s %8s %-16s %-7s %6s %6s %7s %8s %5s %10s %11s %10s %8s\n", "id",
		       "pid", "name", "class", "ready", "bound", "ring_in", "ring_out", "ovf",
		       "bindings", "completions", "ops/s", "late");
	for (uint32_t i = 0; i < m->nclients; i++)
		printf("  %3d %8d %-16.16s %-7s %6u %6u %7u %8u %5u %10llu %11llu %10.0f %8llu\n",
		       c[i].id, c[i].pid, c[i].name,
		       (c[i].class_flags & VE_CTL_CLASS_LATENCY) ? "latency" : "batch", c[i].ready,
		       c[i].bound, c[i].ring_in, c[i].ring_out, c[i].overflow,
		       (unsigned long long)c[i].bindings, (unsigned long long)c[i].completions,
		       c[i].ops_per_s, (unsigned long long)c[i].late);
}

static int cmd_status(int fd, bool all)
{
	if (request(fd, VE_CTL_STATUS_REQ, 0) || reply(fd, VE_CTL_STATUS) < 0)
		return 1;
	const struct ve_ctl_status *m = (const void *)g_msg.b;
	if (g_json)
		print_status_json(m);
	else
		print_status_text(m, all);
	return 0;
}

static int cmd_top(int fd, long iters, bool all)
{
	signal(SIGINT, on_int);
	signal(SIGTERM, on_int);
	bool tty = isatty(1) && !g_json;
	for (long i = 0; !g_stop && (iters <= 0 || i < iters); i++) {
		if (i)
			sleep(1);
		if (g_stop)
			break;
		if (request(fd, VE_CTL_STATUS_REQ, 0) || reply(fd, VE_CTL_STATUS) < 0)
			return 1;
		if (tty)
			printf("\033[H\033[J");
		const struct ve_ctl_status *m = (const void *)g_msg.b;
		if (g_json)
			print_status_json(m);
		else
			print_status_text(m, all);
		if (!tty && !g_json)
			printf("\n");
		fflush(stdout);
	}
	return 0;
}

/* ------------------------------------------------------------------ trace */

struct trace_buf {
	struct ve_ctl_tev *ev;
	size_t n, cap;
	uint64_t max_t1;	/* latest end among closed events kept */
	bool wrapped;		/* ved's ring overflowed between two polls */
	char names[VE_CTL_MAX_CLIENTS][VE_CTL_NAME_MAX + 32];
};

/* One TRACE reply (events that ended at or after since). Closed events go
 * to tb unless already kept; open spans (still going on) only if keep_open:
 * they come again, longer, in the next reply. */
static int trace_fetch(int fd, struct trace_buf *tb, uint64_t since, bool keep_open)
{
	struct ve_ctl_trace_req q;
	memset(&q, 0, sizeof(q));
	ve_ctl_hdr_init(&q.h, VE_CTL_TRACE_REQ, sizeof(q));
	q.since_ns = since;
	int rc = ve_ctl_send(fd, &q, sizeof(q));
	if (rc) {
		fprintf(stderr, "ve-ctl: cannot send the request: %s\n", strerror(-rc));
		return -1;
	}
	uint64_t old_max = tb->max_t1;
	for (;;) {
		if (reply(fd, VE_CTL_TRACE) < 0)
			return -1;
		const struct ve_ctl_trace *m = (const void *)g_msg.b;
		const struct ve_ctl_tev *ev = (const void *)(m + 1);
		if (tb->n + m->nevents > tb->cap) {
			size_t cap = (tb->n + m->nevents) * 2;
			struct ve_ctl_tev *nev = realloc(tb->ev, cap * sizeof(*nev));
			if (!nev) {
				fprintf(stderr, "ve-ctl: out of memory\n");
				return -1;
			}
			tb->ev = nev;
			tb->cap = cap;
		}
		tb->wrapped |= (m->h.flags & VE_CTL_F_GAP) != 0;
		for (uint32_t i = 0; i < m->nevents; i++) {
			const struct ve_ctl_tev *e = &ev[i];
			if (e->flags & VE_TEV_F_OPEN) {
				if (keep_open)
					tb->ev[tb->n++] = *e;
				continue;
			}
			/* Events ending exactly at 'since' were in the previous reply. */
			if (since && e->t1_ns <= old_max)
				continue;
			tb->ev[tb->n++] = *e;
			if (e->t1_ns > tb->max_t1)
				tb->max_t1 = e->t1_ns;
		}
		if (m->h.flags & VE_CTL_F_LAST)
			return 0;
	}
}

/* Client names from a STATUS (those still registered). */
static void trace_names(int fd, struct trace_buf *tb)
{
	if (request(fd, VE_CTL_STATUS_REQ, 0) || reply(fd, VE_CTL_STATUS) < 0)
		return;
	const struct ve_ctl_status *m = (const void *)g_msg.b;
	const struct ve_ctl_entry *e = (const void *)(m + 1);
	const struct ve_ctl_client *c = (const void *)(e + m->nentries);
	for (uint32_t i = 0; i < m->nclients; i++)
		if (c[i].id >= 0 && c[i].id < VE_CTL_MAX_CLIENTS)
			snprintf(tb->names[c[i].id], sizeof(tb->names[0]), "%s (pid %d)", c[i].name,
				 c[i].pid);
}

static void tev_args(void *arg, uint64_t cookie, FILE *f)
{
	const struct trace_buf *tb = arg;
	const struct ve_ctl_tev *e = &tb->ev[cookie];
	fprintf(f, "\"client\":%d,\"pid\":%d", e->client, e->pid);
	if (e->entry != VE_PROTO_ENTRY_NONE)
		fprintf(f, ",\"entry\":%u,\"sms\":%u", e->entry, e->sms);
	if (e->kind == VE_TEV_OP || e->kind == VE_TEV_FAILED)
		fprintf(f, ",\"tok\":\"%#llx\",\"key\":\"%016llx\"", (unsigned long long)e->tok,
			(unsigned long long)e->key);
	if (e->kind == VE_TEV_LEAVE)
		fprintf(f, ",\"reclaimed\":%llu", (unsigned long long)e->tok);
	if (e->flags & VE_TEV_F_OPEN)
		fprintf(f, ",\"still_open\":true");
}

static int client_track(struct ve_tl *tl, const struct trace_buf *tb, int32_t client, int32_t pid)
{
	char name[160];
	if (client < 0 || client >= VE_CTL_MAX_CLIENTS)
		snprintf(name, sizeof(name), "clients (shared)");
	else if (tb->names[client][0])
		snprintf(name, sizeof(name), "client %d: %s", client, tb->names[client]);
	else
		snprintf(name, sizeof(name), "client %d (pid %d)", client, pid);
	return ve_tl_track(tl, "clients", 2, name, client < 0 ? 0x10000 : 2 * client);
}

static const char *who(int32_t client, char *b, size_t n)
{
	if (client == VE_HOLDER_SHARED)
		snprintf(b, n, "shared");
	else
		snprintf(b, n, "client %d", client);
	return b;
}

/* Perfetto layout (docs/operations.md, "Reading a timeline"): group "pool
 * entries" with, per entry, its ops and a track of its leases and
 * reservations; group "clients" with, per client, its ops, joins and
 * departures, and a track of its grants. */
static int trace_write(struct trace_buf *tb, FILE *f, uint64_t since, double seconds)
{
	struct ve_tl *tl = ve_tl_create(tev_args, tb);
	if (!tl)
		return -1;
	int rc = 0;
	char track[160], name[160], b[32];
	for (size_t i = 0; i < tb->n && rc == 0; i++) {
		const struct ve_ctl_tev *e = &tb->ev[i];
		int et = -1, lt = -1;
		if (e->entry != VE_PROTO_ENTRY_NONE) {
			snprintf(track, sizeof(track), "entry %u (%u SMs)", e->entry, e->sms);
			et = ve_tl_track(tl, "pool entries", 1, track, 2 * e->entry);
			snprintf(track, sizeof(track), "entry %u leases", e->entry);
			lt = ve_tl_track(tl, "pool entries", 1, track, 2 * e->entry + 1);
		}
		int ct = client_track(tl, tb, e->client, e->pid);
		switch (e->kind) {
		case VE_TEV_OP:
			snprintf(name, sizeof(name), "client %d", e->client);
			rc |= ve_tl_slice(tl, et, e->t0_ns, e->t1_ns, name, i);
			snprintf(name, sizeof(name), "op on entry %u (%u SMs)", e->entry, e->sms);
			rc |= ve_tl_slice(tl, ct, e->t0_ns, e->t1_ns, name, i);
			break;
		case VE_TEV_FAILED:
			snprintf(name, sizeof(name), "submit failed (client %d)", e->client);
			rc |= ve_tl_instant(tl, et, e->t0_ns, name, i);
			break;
		case VE_TEV_JOIN:
		case VE_TEV_LEAVE:
			rc |= ve_tl_instant(tl, ct, e->t0_ns,
					    e->kind == VE_TEV_JOIN ? "joined" : "left", i);
			break;
		case VE_TEV_GRANT: {
			char gname[160];
			if (e->client >= 0 && e->client < VE_CTL_MAX_CLIENTS && tb->names[e->client][0])
				snprintf(gname, sizeof(gname), "client %d: %s grants", e->client,
					 tb->names[e->client]);
			else
				snprintf(gname, sizeof(gname), "client %d grants", e->client);
			int gt = ve_tl_track(tl, "clients", 2, gname, 2 * e->client + 1);
			snprintf(name, sizeof(name), "entry %u (%u SMs)", e->entry, e->sms);
			rc |= ve_tl_slice(tl, gt, e->t0_ns, e->t1_ns, name, i);
			snprintf(name, sizeof(name), "granted to client %d", e->client);
			rc |= ve_tl_slice(tl, lt, e->t0_ns, e->t1_ns, name, i);
			break;
		}
		case VE_TEV_LEASE:
			snprintf(name, sizeof(name), "leased by %s", who(e->client, b, sizeof(b)));
			rc |= ve_tl_slice(tl, lt, e->t0_ns, e->t1_ns, name, i);
			break;
		case VE_TEV_RESERVE:
			snprintf(name, sizeof(name), "reserved for client %d", e->client);
			rc |= ve_tl_slice(tl, lt, e->t0_ns, e->t1_ns, name, i);
			break;
		}
	}
	if (rc) {
		ve_tl_destroy(tl);
		fprintf(stderr, "ve-ctl: out of memory\n");
		return -1;
	}
	char other[256];
	snprintf(other, sizeof(other),
		 "\"source\":\"ved\",\"clock\":\"CLOCK_MONOTONIC\",\"since_ns\":%llu,\"seconds\":%.3f,"
		 "\"events_missing\":%s",
		 (unsigned long long)since, seconds, tb->wrapped ? "true" : "false");
	rc = ve_tl_write(tl, f, other);
	ve_tl_destroy(tl);
	return rc ? -1 : 0;
}

/* ved's recent events (seconds <= 0), or those of the next 'seconds'
 * seconds, polled every 200 ms so that ved's ring (trace_events) need only
 * hold 200 ms of them. */
static int cmd_trace(int fd, const char *file, double seconds)
{
	static struct trace_buf tb;
	uint64_t since = 0;
	if (seconds > 0) {
		signal(SIGINT, on_int);
		signal(SIGTERM, on_int);
		since = ve__now_ns(); /* ved's clock: the same CLOCK_MONOTONIC */
		uint64_t end = since + (uint64_t)(seconds * 1e9);
		if (!g_json && isatty(2))
			fprintf(stderr, "ve-ctl: tracing ved for %.1f s (Ctrl-C ends early)\n",
				seconds);
		while (!g_stop && ve__now_ns() < end) {
			uint64_t left = end - ve__now_ns();
			usleep((useconds_t)(left < 200000000ull ? left / 1000 : 200000));
			if (trace_fetch(fd, &tb, tb.max_t1 ? tb.max_t1 : since, false))
				return 1;
		}
		if (trace_fetch(fd, &tb, tb.max_t1 ? tb.max_t1 : since, true))
			return 1;
	} else if (trace_fetch(fd, &tb, 0, true)) {
		return 1;
	}
	trace_names(fd, &tb);
	FILE *f = strcmp(file, "-") == 0 ? stdout : fopen(file, "w");
	if (!f) {
		fprintf(stderr, "ve-ctl: cannot write %s: %s\n", file, strerror(errno));
		return 1;
	}
	int bad = trace_write(&tb, f, since, seconds) != 0;
	bad |= ferror(f);
	if (f != stdout)
		bad |= fclose(f) != 0;
	if (bad) {
		fprintf(stderr, "ve-ctl: writing %s failed\n", file);
		return 1;
	}
	if (tb.wrapped)
		fprintf(stderr,
			"ve-ctl: ved's trace ring turned over between two polls: some events are "
			"missing (raise trace_events)\n");
	if (g_json)
		printf("{\"file\":\"%s\",\"events\":%zu,\"missing\":%s}\n", file, tb.n,
		       tb.wrapped ? "true" : "false");
	else if (f != stdout)
		printf("ve-ctl: %zu events written to %s (open it in ui.perfetto.dev)\n", tb.n, file);
	free(tb.ev);
	return 0;
}

/* ------------------------------------------------------------------ clients, metrics */

static const char *user_name(uint32_t uid, char *b, size_t n)
{
	struct passwd pw, *res = NULL;
	char buf[1024];
	if (getpwuid_r((uid_t)uid, &pw, buf, sizeof(buf), &res) == 0 && res)
		snprintf(b, n, "%s", res->pw_name);
	else
		snprintf(b, n, "%u", uid);
	return b;
}

/* Clients with their grants: what `ve-ctl status` shows, one line each,
 * plus what each may use now. */
static int cmd_clients(int fd)
{
	if (request(fd, VE_CTL_STATUS_REQ, 0) || reply(fd, VE_CTL_STATUS) < 0)
		return 1;
	const struct ve_ctl_status *m = (const void *)g_msg.b;
	const struct ve_ctl_entry *e = (const void *)(m + 1);
	const struct ve_ctl_client *c = (const void *)(e + m->nentries);
	char u[64];
	if (g_json) {
		printf("{\"draining\":%s,\"clients\":[", (m->h.flags & VE_CTL_F_DRAINING) ? "true" : "false");
		for (uint32_t i = 0; i < m->nclients; i++) {
			uint32_t leases = 0;
			for (uint32_t k = 0; k < m->nentries; k++)
				leases += e[k].holder == c[i].id && e[k].state != VE_ENTRY_IDLE;
			printf("%s{\"id\":%d,\"pid\":%d,\"user\":", i ? "," : "", c[i].id, c[i].pid);
			json_str(stdout, user_name(c[i].uid, u, sizeof(u)));
			printf(",\"name\":");
			json_str(stdout, c[i].name);
			printf(",\"class\":\"%s\",\"grant_entry\":%d,\"sms\":%u,\"leases\":%u,"
			       "\"ready\":%u,\"bound\":%u,\"bindings\":%llu,\"completions\":%llu,"
			       "\"ops_per_s\":%.1f,\"late\":%llu,\"lend_entry\":%d,\"lent_sms\":%u,"
			       "\"why\":\"%s\"}",
			       (c[i].class_flags & VE_CTL_CLASS_LATENCY) ? "latency" : "batch",
			       c[i].grant_entry == 0xffff ? -1 : (int)c[i].grant_entry,
			       c[i].granted_sms, leases, c[i].ready, c[i].bound,
			       (unsigned long long)c[i].bindings, (unsigned long long)c[i].completions,
			       c[i].ops_per_s, (unsigned long long)c[i].late,
			       c[i].lend_entry == 0xffff ? -1 : (int)c[i].lend_entry, c[i].lent_sms,
			       ve_grant_why_name(c[i].why));
		}
		printf("]}\n");
		return 0;
	}
	printf("%u clients on device %d%s\n", m->nclients, m->device,
	       (m->h.flags & VE_CTL_F_DRAINING) ? " (draining: no new client is admitted)" : "");
	if (!m->nclients)
		return 0;
	printf("  %3s %8s %-10s %-16s %-7s %6s %5s %-8s %9s %6s %6s %6s %10s %10s %8s\n", "id",
	       "pid", "user", "name", "class", "grant", "SMs", "why", "lend", "leases", "ready",
	       "bound", "bindings", "ops/s", "late");
	for (uint32_t i = 0; i < m->nclients; i++) {
		uint32_t leases = 0;
		for (uint32_t k = 0; k < m->nentries; k++)
			leases += e[k].holder == c[i].id && e[k].state != VE_ENTRY_IDLE;
		char g[16];
		if (c[i].grant_entry == 0xffff)
			snprintf(g, sizeof(g), "-");
		else
			snprintf(g, sizeof(g), "%u", c[i].grant_entry);
		/* A lend: its entry and SMs (kernels up to VE_LEND_US go there). */
		char l[24];
		if (c[i].lend_entry == 0xffff)
			snprintf(l, sizeof(l), "-");
		else
			snprintf(l, sizeof(l), "%u/%u", c[i].lend_entry, c[i].lent_sms);
		printf("  %3d %8d %-10.10s %-16.16s %-7s %6s %5u %-8s %9s %6u %6u %6u %10llu %10.0f "
		       "%8llu\n",
		       c[i].id, c[i].pid, user_name(c[i].uid, u, sizeof(u)), c[i].name,
		       (c[i].class_flags & VE_CTL_CLASS_LATENCY) ? "latency" : "batch", g,
		       c[i].granted_sms, ve_grant_why_name(c[i].why), l, leases, c[i].ready, c[i].bound,
		       (unsigned long long)c[i].bindings, c[i].ops_per_s,
		       (unsigned long long)c[i].late);
	}
	return 0;
}

static int cmd_metrics(int fd)
{
	struct ve_ctl_profile_req q;
	memset(&q, 0, sizeof(q));
	ve_ctl_hdr_init(&q.h, VE_CTL_METRICS_REQ, sizeof(q));
	int rc = ve_ctl_send(fd, &q, sizeof(q));
	if (rc) {
		fprintf(stderr, "ve-ctl: cannot send the request: %s\n", strerror(-rc));
		return 1;
	}
	for (;;) {
		if (reply(fd, VE_CTL_METRICS) < 0)
			return 1;
		const struct ve_ctl_profile *m = (const void *)g_msg.b;
		if (m->nbytes && fwrite(m + 1, 1, m->nbytes, stdout) != m->nbytes)
			return 1;
		if (m->h.flags & VE_CTL_F_LAST)
			break;
	}
	return fflush(stdout) ? 1 : 0;
}

/* ------------------------------------------------------------------ drain, resume, reload */

static int admin(int fd, uint32_t op, struct ve_ctl_admin *out)
{
	struct ve_ctl_admin_req q;
	memset(&q, 0, sizeof(q));
	ve_ctl_hdr_init(&q.h, VE_CTL_ADMIN_REQ, sizeof(q));
	q.op = op;
	int rc = ve_ctl_send(fd, &q, sizeof(q));
	if (rc) {
		fprintf(stderr, "ve-ctl: cannot send the request: %s\n", strerror(-rc));
		return -1;
	}
	if (reply(fd, VE_CTL_ADMIN) < 0) {
		/* ved acts only on a request whose tool still waits for the
		 * answer (a stopped ved reads it later). */
		fprintf(stderr,
			"ve-ctl: no %s confirmed: ved drops a request it reads after this tool "
			"has gone ('ve-ctl status' shows the state)\n",
			op == VE_ADMIN_RELOAD ? "reload" : op == VE_ADMIN_DRAIN ? "drain" : "resume");
		return -1;
	}
	memcpy(out, g_msg.b, sizeof(*out));
	return 0;
}

static int cmd_admin(int fd, uint32_t op, bool wait, double timeout_s)
{
	struct ve_ctl_admin a;
	if (admin(fd, op, &a))
		return 1;
	if (g_json && !wait)
		printf("{\"status\":%d,\"draining\":%s,\"clients\":%u,\"message\":", a.status,
		       a.draining ? "true" : "false", a.nclients);
	if (g_json && !wait) {
		json_str(stdout, a.msg);
		printf("}\n");
	} else if (!g_json) {
		printf("ve-ctl: %s\n", a.msg);
	}
	if (a.status) {
		if (!g_json)
			fprintf(stderr, "ve-ctl: ved refused: %s\n", a.msg);
		return 1;
	}
	if (!wait)
		return 0;
	/* Drain and wait: the registered clients finish on their own. */
	signal(SIGINT, on_int);
	signal(SIGTERM, on_int);
	uint64_t end = ve__now_ns() + (uint64_t)(timeout_s * 1e9);
	uint32_t n = a.nclients, last = UINT32_MAX;
	while (n && !g_stop && (timeout_s <= 0 || ve__now_ns() < end)) {
		if (n != last && !g_json)
			printf("ve-ctl: waiting for %u clients to finish\n", n);
		fflush(stdout);
		last = n;
		usleep(500000);
		if (request(fd, VE_CTL_STATUS_REQ, 0) || reply(fd, VE_CTL_STATUS) < 0)
			return 1;
		n = ((const struct ve_ctl_status *)(const void *)g_msg.b)->nclients;
	}
	if (g_json)
		printf("{\"status\":0,\"draining\":true,\"clients\":%u,\"drained\":%s}\n", n,
		       n ? "false" : "true");
	else if (n)
		printf("ve-ctl: %u clients still registered%s\n", n,
		       g_stop ? "" : " after the timeout");
	else
		printf("ve-ctl: drained: no client left; stop ved now\n");
	return n ? 3 : 0;
}

/* ------------------------------------------------------------------ main */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: ve-ctl [--socket PATH | --device N] [--json] COMMAND\n"
		"  status [-a]       pool entries (busy ones; -a: all), clients, counters\n"
		"  top [-n N]        status every second until Ctrl-C (or N times)\n"
		"  clients           the clients, each with its grant, the SMs it may use and why\n"
		"  metrics           the Prometheus text ved's metrics endpoint serves\n"
		"  trace [--seconds N] FILE\n"
		"                    a Perfetto/Chrome trace ('-': stdout) of ved's recent\n"
		"                    events, or of the next N seconds\n"
		"  drain [--wait [--timeout S]]\n"
		"                    admit no new client (registered ones go on); --wait: until\n"
		"                    none is left (exit 3 if some still are after S seconds)\n"
		"  resume            admit clients again\n"
		"  reload            re-read ved's configuration (as SIGHUP does)\n"
		"options: -s, --socket PATH; -d, --device N; -j, --json; --version; -h, --help\n"
		"The socket defaults to ved's for the device (docs/daemon.md); operations:\n"
		"docs/operations.md.\n");
}

/* A whole number in [lo, hi], or a message and -1 (no atoi: "abc" is not 0). */
static long parse_count(const char *opt, const char *v, long lo, long hi)
{
	uint64_t u;
	if (ve__parse_u64(v, &u) || u < (uint64_t)lo || u > (uint64_t)hi) {
		fprintf(stderr, "ve-ctl: %s %s: must be a whole number in [%ld, %ld]\n", opt, v, lo,
			hi);
		return -1;
	}
	return (long)u;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"socket", required_argument, 0, 's'}, {"device", required_argument, 0, 'd'},
	    {"json", no_argument, 0, 'j'},	   {"all", no_argument, 0, 'a'},
	    {"help", no_argument, 0, 'h'},	   {"version", no_argument, 0, 'V'},
	    {"seconds", required_argument, 0, 'S'}, {"wait", no_argument, 0, 'w'},
	    {"timeout", required_argument, 0, 'T'}, {0, 0, 0, 0}};
	double seconds = 0, timeout_s = 0;
	bool wait = false;
	const char *sock = getenv("VE_DAEMON");
	int device = 0;
	long iters = 0;
	bool all = false;
	int o;
	if (sock && (strcmp(sock, "0") == 0 || strcmp(sock, "1") == 0 || !*sock))
		sock = NULL;
	while ((o = getopt_long(argc, argv, "+s:d:jahn:", opts, NULL)) != -1) {
		switch (o) {
		case 's':
			sock = optarg;
			break;
		case 'd':
			if ((device = (int)parse_count("--device", optarg, 0, 1024)) < 0)
				return 2;
			break;
		case 'j':
			g_json = true;
			break;
		case 'a':
			all = true;
			break;
		case 'n':
			if ((iters = parse_count("-n", optarg, 1, 1000000000)) < 0)
				return 2;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			ve_version_print(stdout, "ve-ctl");
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return 2;
	}
	const char *cmd = argv[optind++];
	/* Options may also follow the command (ve-ctl top -n 3). */
	while ((o = getopt_long(argc, argv, "s:d:jan:", opts, NULL)) != -1) {
		if (o == 'S' || o == 'T') {
			double v;
			if (ve__parse_double(optarg, &v) || !(v > 0 && v <= 86400)) {
				fprintf(stderr, "ve-ctl: --%s must be a number of seconds in (0, 86400]\n",
					o == 'S' ? "seconds" : "timeout");
				return 2;
			}
			*(o == 'S' ? &seconds : &timeout_s) = v;
		} else if (o == 'w')
			wait = true;
		else if (o == 's')
			sock = optarg;
		else if (o == 'd') {
			if ((device = (int)parse_count("--device", optarg, 0, 1024)) < 0)
				return 2;
		}
		else if (o == 'j')
			g_json = true;
		else if (o == 'a')
			all = true;
		else if (o == 'n') {
			if ((iters = parse_count("-n", optarg, 1, 1000000000)) < 0)
				return 2;
		}
		else {
			usage(stderr);
			return 2;
		}
	}
	if (sock)
		snprintf(g_path, sizeof(g_path), "%s", sock);
	else if (ve_ctl_default_path(device, g_path, sizeof(g_path))) {
		fprintf(stderr, "ve-ctl: the default socket path is too long; use --socket\n");
		return 2;
	}
	int fd;
	if (strcmp(cmd, "status") == 0) {
		if ((fd = connect_ved()) < 0)
			return 1;
		return cmd_status(fd, all);
	} else if (strcmp(cmd, "top") == 0) {
		if ((fd = connect_ved()) < 0)
			return 1;
		return cmd_top(fd, iters, all);
	} else if (strcmp(cmd, "trace") == 0) {
		if (optind >= argc) {
			fprintf(stderr, "ve-ctl: trace needs a FILE\n");
			return 2;
		}
		if ((fd = connect_ved()) < 0)
			return 1;
		return cmd_trace(fd, argv[optind], seconds);
	} else if (strcmp(cmd, "clients") == 0 || strcmp(cmd, "metrics") == 0 ||
		   strcmp(cmd, "drain") == 0 || strcmp(cmd, "resume") == 0 ||
		   strcmp(cmd, "reload") == 0) {
		if ((fd = connect_ved()) < 0)
			return 1;
		if (cmd[0] == 'c')
			return cmd_clients(fd);
		if (cmd[0] == 'm')
			return cmd_metrics(fd);
		if (cmd[0] == 'd')
			return cmd_admin(fd, VE_ADMIN_DRAIN, wait, timeout_s);
		return cmd_admin(fd, strcmp(cmd, "resume") == 0 ? VE_ADMIN_RESUME : VE_ADMIN_RELOAD,
				 false, 0);
	}
	fprintf(stderr, "ve-ctl: unknown command '%s'\n", cmd);
	usage(stderr);
	return 2;
}
