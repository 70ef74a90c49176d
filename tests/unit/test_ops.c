/* SPDX-License-Identifier: MIT */
/*
 * What running Vitamin-E as a service rests on, in process (so the sanitizer
 * builds run it too; tests/ved_ops.sh drives the same through a real ved):
 *   timeline_rows        overlapping slices of one track go to extra rows,
 *                        each row strictly ordered, names and groups as given
 *   http_requests        the metrics endpoint: 200 with the body and its length,
 *                        HEAD, 404, 405, 400, 431 for an oversized request
 *   http_limits          a silent connection is closed at its deadline; past 16
 *                        connections, new ones are closed; ved never waits
 *   http_listen_syntax   which metrics_listen values are accepted
 *   metrics_render       the exposition of a served pool with two clients: every
 *                        family once, its samples together; SMs, leases, waits
 *   metrics_spans        leases and their end as trace spans, open ones flagged
 *   version_text         --version's four lines; a missing driver is "none"
 */
#include "../harness.h"

#include "ipc/proto.h"
#include "util/timeline.h"
#include "util/util.h"
#include "util/version.h"
#include "ved/http.h"
#include "ved/metrics.h"
#include "ved/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

/* ------------------------------------------------------------------ timeline */

static void no_args(void *arg, uint64_t cookie, FILE *f)
{
	(void)arg;
	fprintf(f, "\"i\":%llu", (unsigned long long)cookie);
}

VE_TEST(timeline_rows)
{
	struct ve_tl *tl = ve_tl_create(no_args, NULL);
	VE_CHECK(tl != NULL);
	int a = ve_tl_track(tl, "pool entries", 1, "entry 3 (16 SMs)", 3);
	int b = ve_tl_track(tl, "clients", 2, "client 0: x \"q\"", 0);
	VE_CHECK(a >= 0 && b >= 0 && a != b);
	VE_CHECK_EQ(ve_tl_track(tl, "pool entries", 1, "entry 3 (16 SMs)", 3), a);
	/* Three overlapping slices need three rows; a fourth after them reuses row 1. */
	VE_CHECK_EQ(ve_tl_slice(tl, a, 1000, 5000, "op", 0), 0);
	VE_CHECK_EQ(ve_tl_slice(tl, a, 2000, 3000, "op", 1), 0);
	VE_CHECK_EQ(ve_tl_slice(tl, a, 2500, 6000, "op", 2), 0);
	VE_CHECK_EQ(ve_tl_slice(tl, a, 7000, 8000, "op", 3), 0);
	VE_CHECK_EQ(ve_tl_instant(tl, b, 1500, "joined", 4), 0);
	char *text = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&text, &n);
	VE_CHECK_EQ(ve_tl_write(tl, f, "\"k\":1"), 0);
	fclose(f);
	/* ts 0 is the earliest slice; origin_ns says when that was. */
	VE_CHECK(strstr(text, "\"otherData\":{\"origin_ns\":1000,\"k\":1}") != NULL);
	VE_CHECK(strstr(text, "\"name\":\"entry 3 (16 SMs)\"") != NULL);
	VE_CHECK(strstr(text, "\"name\":\"entry 3 (16 SMs) #2\"") != NULL);
	VE_CHECK(strstr(text, "\"name\":\"entry 3 (16 SMs) #3\"") != NULL);
	VE_CHECK(strstr(text, "#4") == NULL);
	VE_CHECK(strstr(text, "client 0: x \\\"q\\\"") != NULL);
	VE_CHECK(strstr(text, "\"name\":\"pool entries\"") != NULL);
	/* Per tid: slices in time order never overlap. */
	uint64_t end[512] = {0};
	int slices = 0;
	for (const char *p = text; (p = strstr(p, "{\"ph\":\"X\"")) != NULL; p++) {
		unsigned pid, tid;
		double ts, dur;
		VE_CHECK(sscanf(p, "{\"ph\":\"X\",\"pid\":%u,\"tid\":%u,\"ts\":%lf,\"dur\":%lf", &pid,
				&tid, &ts, &dur) == 4);
		VE_CHECK(tid < 512);
		uint64_t t0 = (uint64_t)(ts * 1000 + 0.5), t1 = (uint64_t)((ts + dur) * 1000 + 0.5);
		VE_CHECK_MSG(t0 >= end[tid], "tid %u: slice at %llu before the last ended at %llu",
			     tid, (unsigned long long)t0, (unsigned long long)end[tid]);
		end[tid] = t1;
		slices++;
	}
	VE_CHECK_EQ(slices, 4);
	VE_CHECK(strstr(text, "\"ph\":\"i\"") != NULL && strstr(text, "\"s\":\"t\"") != NULL);
	free(text);
	ve_tl_destroy(tl);
}

/* ------------------------------------------------------------------ http */

#define BODY "# TYPE x gauge\nx 1\n"

static int body_fn(void *arg, char **body, size_t *len)
{
	(void)arg;
	*body = strdup(BODY);
	*len = strlen(BODY);
	return *body ? 0 : -ENOMEM;
}

static int g_ep;
static struct ved_http *g_h;

/* Serves events for up to ms. */
static void pump(int ms)
{
	uint64_t end = ve__now_ns() + (uint64_t)ms * 1000000ull;
	while (ve__now_ns() < end) {
		struct epoll_event ev[16];
		int n = epoll_wait(g_ep, ev, 16, 2);
		for (int i = 0; i < n; i++)
			ved_http_event(g_h, (uint32_t)ev[i].data.u64, ev[i].events, ve__now_ns());
		ved_http_sweep(g_h, ve__now_ns());
	}
}

static int dial(void)
{
	const char *a = ved_http_address(g_h);
	const char *colon = strrchr(a, ':');
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1))};
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -1;
	}
	fcntl(fd, F_SETFL, O_NONBLOCK);
	return fd;
}

/* Sends req and serves until the server closes; the reply in out. */
static size_t exchange(const char *req, size_t reqlen, char *out, size_t cap)
{
	int fd = dial();
	if (fd < 0)
		return 0;
	size_t off = 0, got = 0;
	uint64_t end = ve__now_ns() + 3000000000ull;
	bool eof = false;
	while (!eof && ve__now_ns() < end) {
		if (off < reqlen) {
			ssize_t w = send(fd, req + off, reqlen - off, MSG_NOSIGNAL);
			if (w > 0)
				off += (size_t)w;
		}
		pump(2);
		for (;;) {
			ssize_t r = recv(fd, out + got, cap - 1 - got, 0);
			if (r > 0) {
				got += (size_t)r;
				continue;
			}
			if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
				eof = true;
			break;
		}
	}
	out[got] = 0;
	close(fd);
	return got;
}

static bool start_http(void)
{
	g_ep = epoll_create1(EPOLL_CLOEXEC);
	char err[256];
	int rc = ved_http_create("127.0.0.1:0", g_ep, 5, body_fn, NULL, &g_h, err, sizeof(err));
	if (rc) {
		printf("# no loopback TCP here: %s\n", err);
		close(g_ep);
		return false;
	}
	return true;
}

static void stop_http(void)
{
	ved_http_destroy(g_h);
	close(g_ep);
	g_h = NULL;
}

VE_TEST(http_requests)
{
	if (!start_http())
		VE_SKIP("cannot listen on 127.0.0.1");
	static char out[16384];
	const char *q = "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n";
	size_t n = exchange(q, strlen(q), out, sizeof(out));
	VE_CHECK_MSG(strncmp(out, "HTTP/1.0 200 OK\r\n", 17) == 0, "got %zu bytes: %.60s", n, out);
	VE_CHECK(strstr(out, "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n") != NULL);
	char want[64];
	snprintf(want, sizeof(want), "Content-Length: %zu\r\n", strlen(BODY));
	VE_CHECK(strstr(out, want) != NULL);
	const char *body = strstr(out, "\r\n\r\n");
	VE_CHECK(body && strcmp(body + 4, BODY) == 0);
	q = "GET /metrics?x=1 HTTP/1.0\n\n"; /* bare newlines, a query: still fine */
	exchange(q, strlen(q), out, sizeof(out));
	VE_CHECK(strncmp(out, "HTTP/1.0 200 OK", 15) == 0);
	q = "HEAD /metrics HTTP/1.0\r\n\r\n";
	exchange(q, strlen(q), out, sizeof(out));
	VE_CHECK(strncmp(out, "HTTP/1.0 200 OK", 15) == 0 && strstr(out, want) != NULL);
	body = strstr(out, "\r\n\r\n");
	VE_CHECK(body && body[4] == 0);
	q = "GET /other HTTP/1.0\r\n\r\n";
	exchange(q, strlen(q), out, sizeof(out));
	VE_CHECK(strncmp(out, "HTTP/1.0 404", 12) == 0);
	q = "POST /metrics HTTP/1.0\r\nContent-Length: 0\r\n\r\n";
	exchange(q, strlen(q), out, sizeof(out));
	VE_CHECK(strncmp(out, "HTTP/1.0 405", 12) == 0 && strstr(out, "Allow: GET, HEAD") != NULL);
	q = "garbage\r\n\r\n";
	exchange(q, strlen(q), out, sizeof(out));
	VE_CHECK(strncmp(out, "HTTP/1.0 400", 12) == 0);
	static char big[8192];
	memset(big, 'a', sizeof(big));
	memcpy(big, "GET /metrics HTTP/1.0\r\nX: ", 26);
	exchange(big, sizeof(big), out, sizeof(out));
	VE_CHECK_MSG(strncmp(out, "HTTP/1.0 431", 12) == 0, "%.40s", out);
	VE_CHECK(ved_http_requests(g_h) >= 7);
	stop_http();
}

VE_TEST(http_limits)
{
	if (!start_http())
		VE_SKIP("cannot listen on 127.0.0.1");
	/* 16 silent connections are kept; two more are closed at once. */
	int fd[18];
	for (int i = 0; i < 16; i++)
		fd[i] = dial();
	pump(50);
	for (int i = 16; i < 18; i++)
		fd[i] = dial();
	pump(50);
	int closed = 0;
	for (int i = 0; i < 18; i++) {
		char c;
		ssize_t r = recv(fd[i], &c, 1, 0);
		VE_CHECK_MSG((r == 0) == (i >= 16), "connection %d: recv %zd", i, r);
		closed += r == 0;
	}
	VE_CHECK_MSG(closed == 2, "%d of 18 closed", closed);
	/* The deadline (5 s): sweep as if it had passed. */
	ved_http_sweep(g_h, ve__now_ns() + 6000000000ull);
	closed = 0;
	for (int i = 0; i < 18; i++) {
		char c;
		ssize_t r = recv(fd[i], &c, 1, 0);
		closed += r == 0;
		close(fd[i]);
	}
	VE_CHECK_MSG(closed == 18, "%d of 18 closed after the deadline", closed);
	/* And it still answers. */
	static char out[4096];
	const char *q = "GET /metrics HTTP/1.0\r\n\r\n";
	exchange(q, strlen(q), out, sizeof(out));
	VE_CHECK(strncmp(out, "HTTP/1.0 200 OK", 15) == 0);
	stop_http();
}

VE_TEST(http_listen_syntax)
{
	char err[256];
	const char *good[] = {"9400", "127.0.0.1:9400", ":9400", "[::1]:9400", "0.0.0.0:0",
			      "localhost:9400", "127.0.0.1:9400+", "9400+"};
	const char *bad[] = {"", "x", "127.0.0.1:", "127.0.0.1:99999", "::1:9400", "[::1]9400",
			     "1.2.3.4:94a0", "+"};
	for (size_t i = 0; i < VE_ARRAY_SIZE(good); i++)
		VE_CHECK_MSG(ved_http_check_listen(good[i], err, sizeof(err)) == 0, "%s: %s", good[i],
			     err);
	for (size_t i = 0; i < VE_ARRAY_SIZE(bad); i++)
		VE_CHECK_MSG(ved_http_check_listen(bad[i], err, sizeof(err)) == -EINVAL,
			     "%s accepted", bad[i]);
}

/* ------------------------------------------------------------------ metrics */

static struct ve_serve *g_srv;
static uint32_t g_seq[2];

static struct ve_serve *make_srv(void)
{
	static uint32_t leaves[16];
	for (int i = 0; i < 15; i++)
		leaves[i] = 8;
	leaves[15] = 12;
	struct ve_serve_config sc = {.coord = {.leaf_sms = leaves,
					       .nleaves = 16,
					       .max_clients = 4,
					       .policy = "tput",
					       .per_op = true,
					       .seed = 1},
				     .client_ops = 64,
				     .trace_events = 256};
	char err[256];
	struct ve_serve *s = NULL;
	if (ve_serve_create(&sc, &s, err, sizeof(err)))
		printf("# %s\n", err);
	return s;
}

static int ready(uint32_t id, uint64_t tok)
{
	struct ve_rec r;
	ve_rec_init(&r, VE_REC_READY);
	r.u.ready.tok = tok;
	r.u.ready.key = 7;
	r.u.ready.blocks = 64;
	r.u.ready.threads_per_block = 128;
	r.u.ready.kind = 1;
	r.seq = g_seq[id]++;
	return ve_serve_apply(g_srv, id, &r);
}

static int done(uint32_t id, uint64_t tok, uint16_t entry)
{
	struct ve_rec r;
	ve_proto_encode_done(tok, entry, 1000, 0, ve__now_ns(), &r);
	r.seq = g_seq[id]++;
	return ve_serve_apply(g_srv, id, &r);
}

/* Every "# TYPE name" once, and every sample of name right after it. */
static bool well_grouped(const char *text, char *why, size_t len)
{
	char seen[128][80];
	int nseen = 0;
	char cur[80] = "";
	const char *p = text;
	while (*p) {
		const char *e = strchr(p, '\n');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		char line[1024];
		snprintf(line, sizeof(line), "%.*s", (int)(n < 1023 ? n : 1023), p);
		if (strncmp(line, "# TYPE ", 7) == 0) {
			sscanf(line + 7, "%79s", cur);
			for (int i = 0; i < nseen; i++)
				if (strcmp(seen[i], cur) == 0) {
					snprintf(why, len, "family %s twice", cur);
					return false;
				}
			if (nseen < 128)
				snprintf(seen[nseen++], sizeof(seen[0]), "%s", cur);
		} else if (line[0] && line[0] != '#') {
			size_t k = strcspn(line, "{ ");
			bool ok = strncmp(line, cur, strlen(cur)) == 0 &&
				  (k == strlen(cur) || strcmp(line + strlen(cur), "") == 0 ||
				   (k > strlen(cur) && line[strlen(cur)] == '_'));
			if (!ok) {
				snprintf(why, len, "sample '%.60s' outside its family (in %.40s)", line,
					 cur);
				return false;
			}
		}
		p += n + (e != NULL);
	}
	return nseen > 10;
}

VE_TEST(metrics_render)
{
	g_srv = make_srv();
	VE_CHECK(g_srv != NULL);
	struct ved_metrics *m;
	VE_CHECK_EQ(ved_metrics_create(&m), 0);
	uint32_t id[2];
	VE_CHECK_EQ(ve_serve_client_add(g_srv, 0, 101, "train \"a\"", &id[0]), 0);
	VE_CHECK_EQ(ve_serve_client_add(g_srv, VE_READY_LATENCY, 102, "infer", &id[1]), 0);
	for (uint64_t t = 1; t <= 3; t++)
		for (int c = 0; c < 2; c++)
			VE_CHECK_EQ(ready(id[c], t), 0);
	VE_CHECK(ve_serve_schedule(g_srv) > 0);
	uint64_t t0 = ve__now_ns();
	ved_metrics_observe(m, g_srv, t0);
	struct ve_rec b[2][8];
	int nb[2];
	for (int c = 0; c < 2; c++)
		nb[c] = ve_serve_take(g_srv, id[c], b[c], 8);
	VE_CHECK(nb[0] > 0 && nb[1] > 0);
	for (int c = 0; c < 2; c++) {
		uint16_t g;
		uint32_t sms;
		ved_metrics_client_sms(m, id[c], &g, &sms);
		VE_CHECK_MSG(sms > 0, "client %d may use %u SMs", c, sms);
	}
	struct ved_metrics_daemon dm = {.device = 3, .max_clients = 4, .nclients = 2};
	dm.cl[0] = (struct ved_metrics_client){.id = id[0], .pid = 101, .uid = 0, .fallbacks = 2};
	dm.cl[1] = (struct ved_metrics_client){.id = id[1], .pid = 102, .uid = 0};
	char *text = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&text, &n);
	usleep(2000); /* time for the SM-seconds to grow */
	VE_CHECK_EQ(ved_metrics_render(m, g_srv, &dm, f), 0);
	fclose(f);
	char why[160] = "";
	VE_CHECK_MSG(well_grouped(text, why, sizeof(why)), "%s", why);
	VE_CHECK(strstr(text, "ve_clients{gpu=\"3\"} 2\n") != NULL);
	VE_CHECK(strstr(text, "name=\"train \\\"a\\\"\"") != NULL); /* escaped */
	VE_CHECK(strstr(text, "class=\"latency\",name=\"infer\"") != NULL);
	VE_CHECK(strstr(text, "ve_client_watchdog_fallbacks_total{gpu=\"3\",client=\"0\",pid=\"101\"") !=
		 NULL);
	const char *w = strstr(text, "ve_client_bind_wait_seconds_count{gpu=\"3\",client=\"0\"");
	VE_CHECK(w && strtoul(strchr(w, '}') + 2, NULL, 10) == (unsigned long)nb[0]);
	VE_CHECK(strstr(text, "ve_client_bind_wait_seconds{gpu=\"3\",client=\"1\"") != NULL);
	const char *s = strstr(text, "\nve_client_sm_seconds_total{gpu=\"3\",client=\"0\"");
	VE_CHECK(s && strtod(strchr(s, '}') + 2, NULL) > 0);
	s = strstr(text, "\nve_device_sms_busy{gpu=\"3\"} ");
	VE_CHECK(s && strtoul(strchr(s, '}') + 2, NULL, 10) > 0);
	VE_CHECK(strstr(text, "ve_policy_info{gpu=\"3\",policy=\"tput\",mode=\"per_op\"} 1") != NULL);
	free(text);

	/* Every op done: leases released, nothing in use. */
	for (int c = 0; c < 2; c++)
		for (int i = 0; i < nb[c]; i++)
			VE_CHECK_EQ(done(id[c], b[c][i].u.bind.tok, b[c][i].u.bind.entry), 0);
	ve_serve_schedule(g_srv);
	for (int c = 0; c < 2; c++)
		ve_serve_take(g_srv, id[c], b[c], 8); /* what the rest of the ops got */
	ved_metrics_observe(m, g_srv, ve__now_ns() + 1000000);
	struct ve_ctl_tev ev[256];
	uint32_t ne = ve_serve_trace(g_srv, ev, 256);
	uint32_t leases = 0;
	for (uint32_t i = 0; i < ne; i++)
		if (ev[i].kind == VE_TEV_LEASE) {
			leases++;
			VE_CHECK(ev[i].t1_ns >= ev[i].t0_ns && ev[i].entry < 256);
			VE_CHECK(ev[i].client == (int32_t)id[0] || ev[i].client == (int32_t)id[1] ||
				 ev[i].client == -2);
		}
	VE_CHECK_MSG(leases >= 2, "%u lease spans", leases);
	ve_serve_destroy(g_srv);
	ved_metrics_destroy(m);
}

VE_TEST(metrics_spans)
{
	g_srv = make_srv();
	VE_CHECK(g_srv != NULL);
	g_seq[0] = g_seq[1] = 0;
	struct ved_metrics *m;
	VE_CHECK_EQ(ved_metrics_create(&m), 0);
	uint32_t id;
	VE_CHECK_EQ(ve_serve_client_add(g_srv, 0, 7, "one", &id), 0);
	VE_CHECK_EQ(ready(id, 1), 0);
	VE_CHECK(ve_serve_schedule(g_srv) > 0);
	ved_metrics_observe(m, g_srv, ve__now_ns());
	struct ve_ctl_tev open[64];
	uint32_t n = ved_metrics_open_spans(m, g_srv, open, 64, ve__now_ns());
	VE_CHECK_MSG(n >= 1, "%u open spans", n);
	for (uint32_t i = 0; i < n; i++)
		VE_CHECK(open[i].flags == VE_TEV_F_OPEN && open[i].client == (int32_t)id &&
			 open[i].pid == 7);
	/* The client leaves with its op bound: its lease ends, as a closed span. */
	ve_serve_client_remove(g_srv, id);
	ved_metrics_observe(m, g_srv, ve__now_ns() + 1000000);
	VE_CHECK_EQ(ved_metrics_open_spans(m, g_srv, open, 64, ve__now_ns()), 0u);
	struct ve_ctl_tev ev[256];
	uint32_t ne = ve_serve_trace(g_srv, ev, 256), closed = 0;
	for (uint32_t i = 0; i < ne; i++)
		closed += ev[i].kind == VE_TEV_LEASE && !ev[i].flags;
	VE_CHECK(closed >= 1);
	ve_serve_destroy(g_srv);
	ved_metrics_destroy(m);
}

/* ------------------------------------------------------------------ version */

VE_TEST(version_text)
{
	setenv("VE_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
	char *text = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&text, &n);
	ve_version_print(f, "ve-x");
	fclose(f);
	char want[64];
	snprintf(want, sizeof(want), "ve-x (Vitamin-E) %s\ncommit: ", ve_version());
	VE_CHECK(strncmp(text, want, strlen(want)) == 0);
	VE_CHECK(strstr(text, "\nbuilt against CUDA headers: ") != NULL);
	VE_CHECK(strstr(text, "\ndriver: none (/nonexistent/libcuda.so.1 not found") != NULL);
	VE_CHECK(strncmp(ve_version_soname(), "libve.so.", 9) == 0);
	free(text);
	unsetenv("VE_LIBCUDA");
}
