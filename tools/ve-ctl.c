/* SPDX-License-Identifier: MIT */
/*
 * ve-ctl: talk to a running ved (docs/daemon.md, "ve-ctl").
 *   ve-ctl [--socket PATH | --device N] [--json] status [-a]
 *   ve-ctl [...] top [-n N]
 *   ve-ctl [...] trace FILE
 */
#include "ipc/ctl.h"
#include "pool/pool.h"
#include "util/util.h"

#include <errno.h>
#include <getopt.h>
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
	fprintf(f, "{\"ved_pid\":%d,\"device\":%d,\"uptime_s\":%.3f,\"policy\":", m->ved_pid,
		m->device, (double)m->uptime_ns / 1e9);
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
		    "\"records_in\":%llu,\"records_out\":%llu,\"age_s\":%.3f,\"ops_per_s\":%.1f}",
		    (c[i].class_flags & VE_CTL_CLASS_LATENCY) ? "latency" : "batch", c[i].ready,
		    c[i].bound, c[i].ring_in, c[i].ring_out, c[i].overflow,
		    (unsigned long long)c[i].bindings, (unsigned long long)c[i].completions,
		    (unsigned long long)c[i].failed, (unsigned long long)c[i].records_in,
		    (unsigned long long)c[i].records_out, (double)c[i].age_ns / 1e9,
		    c[i].ops_per_s);
	}
	fprintf(f, "]}\n");
}

static void print_status_text(const struct ve_ctl_status *m, bool all)
{
	const struct ve_ctl_entry *e = (const void *)(m + 1);
	const struct ve_ctl_client *c = (const void *)(e + m->nentries);
	char up[32], b1[16];
	fmt_dur(m->uptime_ns, up, sizeof(up));
	printf("ved pid %d, device %d, up %s, policy %s, MPS %s\n", m->ved_pid, m->device, up,
	       m->policy[0] ? m->policy : "(no pool yet: waiting for the first client)",
	       ve_mps_state_name((int)m->mps));
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
		printf("  %3s %8s %-16s %-7s %6s %6s %7s %8s %5s %10s %11s %10s\n", "id", "pid",
		       "name", "class", "ready", "bound", "ring_in", "ring_out", "ovf", "bindings",
		       "completions", "ops/s");
	for (uint32_t i = 0; i < m->nclients; i++)
		printf("  %3d %8d %-16.16s %-7s %6u %6u %7u %8u %5u %10llu %11llu %10.0f\n",
		       c[i].id, c[i].pid, c[i].name,
		       (c[i].class_flags & VE_CTL_CLASS_LATENCY) ? "latency" : "batch", c[i].ready,
		       c[i].bound, c[i].ring_in, c[i].ring_out, c[i].overflow,
		       (unsigned long long)c[i].bindings, (unsigned long long)c[i].completions,
		       c[i].ops_per_s);
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

static int cmd_trace(int fd, const char *file)
{
	if (request(fd, VE_CTL_TRACE_REQ, 0))
		return 1;
	size_t cap = 0, n = 0;
	struct ve_ctl_tev *ev = NULL;
	for (;;) {
		if (reply(fd, VE_CTL_TRACE) < 0) {
			free(ev);
			return 1;
		}
		const struct ve_ctl_trace *m = (const void *)g_msg.b;
		if (n + m->nevents > cap) {
			cap = (n + m->nevents) * 2;
			struct ve_ctl_tev *nev = realloc(ev, cap * sizeof(*ev));
			if (!nev) {
				free(ev);
				fprintf(stderr, "ve-ctl: out of memory\n");
				return 1;
			}
			ev = nev;
		}
		memcpy(ev + n, m + 1, m->nevents * sizeof(*ev));
		n += m->nevents;
		if (m->h.flags & VE_CTL_F_LAST)
			break;
	}
	FILE *f = strcmp(file, "-") == 0 ? stdout : fopen(file, "w");
	if (!f) {
		fprintf(stderr, "ve-ctl: cannot write %s: %s\n", file, strerror(errno));
		free(ev);
		return 1;
	}
	uint64_t t0 = n ? ev[0].t0_ns : 0;
	for (size_t i = 0; i < n; i++)
		if (ev[i].t0_ns < t0)
			t0 = ev[i].t0_ns;
	/* Chrome trace format: one process (ved), one track per pool entry,
	 * client events on track "clients". */
	fprintf(f, "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
	fprintf(f,
		"{\"ph\":\"M\",\"pid\":1,\"name\":\"process_name\",\"args\":{\"name\":\"ved\"}}");
	bool named[VE_CTL_MAX_ENTRIES + 1] = {0};
	for (size_t i = 0; i < n; i++) {
		const struct ve_ctl_tev *e = &ev[i];
		uint32_t tid = e->entry < VE_CTL_MAX_ENTRIES ? e->entry : VE_CTL_MAX_ENTRIES;
		if (!named[tid]) {
			named[tid] = true;
			if (tid < VE_CTL_MAX_ENTRIES)
				fprintf(f,
					",\n{\"ph\":\"M\",\"pid\":1,\"tid\":%u,\"name\":\"thread_"
					"name\","
					"\"args\":{\"name\":\"entry %u (%u SMs)\"}}",
					tid, tid, e->sms);
			else
				fprintf(f,
					",\n{\"ph\":\"M\",\"pid\":1,\"tid\":%u,\"name\":\"thread_"
					"name\","
					"\"args\":{\"name\":\"clients\"}}",
					tid);
		}
		double ts = (double)(e->t0_ns - t0) / 1e3;
		switch (e->kind) {
		case VE_TEV_OP:
			fprintf(f,
				",\n{\"ph\":\"X\",\"pid\":1,\"tid\":%u,\"ts\":%.3f,\"dur\":%.3f,"
				"\"name\":\"client %d\",\"args\":{\"pid\":%d,\"tok\":\"%#llx\","
				"\"key\":\"%016llx\",\"sms\":%u}}",
				tid, ts, (double)(e->t1_ns - e->t0_ns) / 1e3, e->client, e->pid,
				(unsigned long long)e->tok, (unsigned long long)e->key, e->sms);
			break;
		case VE_TEV_FAILED:
			fprintf(
			    f,
			    ",\n{\"ph\":\"i\",\"s\":\"t\",\"pid\":1,\"tid\":%u,\"ts\":%.3f,"
			    "\"name\":\"submit failed (client %d)\",\"args\":{\"tok\":\"%#llx\"}}",
			    tid, ts, e->client, (unsigned long long)e->tok);
			break;
		default:
			fprintf(f,
				",\n{\"ph\":\"i\",\"s\":\"p\",\"pid\":1,\"tid\":%u,\"ts\":%.3f,"
				"\"name\":\"client %d (pid %d) %s\",\"args\":{\"reclaimed\":%llu}}",
				tid, ts, e->client, e->pid,
				e->kind == VE_TEV_JOIN ? "joined" : "left",
				(unsigned long long)(e->kind == VE_TEV_LEAVE ? e->tok : 0));
			break;
		}
	}
	fprintf(f, "\n]}\n");
	int bad = ferror(f);
	if (f != stdout)
		bad |= fclose(f) != 0;
	free(ev);
	if (bad) {
		fprintf(stderr, "ve-ctl: writing %s failed\n", file);
		return 1;
	}
	if (g_json)
		printf("{\"file\":\"%s\",\"events\":%zu}\n", file, n);
	else if (f != stdout)
		printf("ve-ctl: %zu events written to %s (open in chrome://tracing or Perfetto)\n",
		       n, file);
	return 0;
}

/* ------------------------------------------------------------------ main */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: ve-ctl [--socket PATH | --device N] [--json] COMMAND\n"
		"  status [-a]     pool entries (busy ones; -a: all), clients, counters\n"
		"  top [-n N]      status every second until Ctrl-C (or N times)\n"
		"  trace FILE      write a Chrome trace of ved's recent decisions ('-': stdout)\n"
		"The socket defaults to ved's for the device (docs/daemon.md).\n");
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
	    {"help", no_argument, 0, 'h'},	   {0, 0, 0, 0}};
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
		if (o == 's')
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
		return cmd_trace(fd, argv[optind]);
	}
	fprintf(stderr, "ve-ctl: unknown command '%s'\n", cmd);
	usage(stderr);
	return 2;
}
