/* SPDX-License-Identifier: MIT */
/* ved's metrics endpoint: a minimal HTTP/1.0 responder in ved's epoll (http.h). */
#include "ved/http.h"
#include "util/util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_CONNS   16
#define REQ_MAX	    4096
#define DEADLINE_NS 5000000000ull

struct hconn {
	int fd; /* -1: free */
	bool writing;
	uint64_t deadline;
	size_t n;
	char req[REQ_MAX];
	char *out;
	size_t out_len, out_off;
};

struct ved_http {
	int lfd, epfd;
	uint32_t kind;
	ved_http_body_fn fn;
	void *arg;
	char addr[80];
	uint64_t requests;
	struct hconn c[MAX_CONNS];
};

/* ------------------------------------------------------------------ address */

/* Splits s into host and port; a bare port means the loopback address. */
static int split(const char *s, char *host, size_t hlen, char *port, size_t plen)
{
	const char *colon = NULL;
	if (s[0] == '[') {
		const char *end = strchr(s, ']');
		if (!end || end[1] != ':')
			return -EINVAL;
		snprintf(host, hlen, "%.*s", (int)(end - s - 1), s + 1);
		colon = end + 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon) {
			snprintf(host, hlen, "127.0.0.1");
			snprintf(port, plen, "%s", s);
			goto check_port;
		}
		if (memchr(s, ':', (size_t)(colon - s)))
			return -EINVAL; /* an IPv6 address must be bracketed */
		snprintf(host, hlen, "%.*s", (int)(colon - s), s);
	}
	snprintf(port, plen, "%s", colon + 1);
check_port:
	if (!*port || strlen(port) > 5 || strspn(port, "0123456789") != strlen(port) ||
	    atoi(port) > 65535 || strlen(host) >= hlen - 1)
		return -EINVAL;
	return 0;
}

int ved_http_check_listen(const char *s, char *err, size_t errlen)
{
	char host[64], port[16], buf[80];
	size_t n = s ? strlen(s) : 0;
	/* A trailing '+' (one port per GPU) is ved's to expand: the rest must hold. */
	if (n && n < sizeof(buf) && s[n - 1] == '+') {
		snprintf(buf, sizeof(buf), "%.*s", (int)(n - 1), s);
		s = buf;
	}
	if (!s || !*s || strlen(s) >= 70 || split(s, host, sizeof(host), port, sizeof(port))) {
		snprintf(err, errlen,
			 "'%s' is not HOST:PORT, [IPV6]:PORT, :PORT (every interface) or PORT "
			 "(127.0.0.1), with an optional '+' (port + device index)",
			 s ? s : "");
		return -EINVAL;
	}
	return 0;
}

/* ------------------------------------------------------------------ life */

int ved_http_create(const char *addr, int epfd, uint32_t tag_kind, ved_http_body_fn fn,
		    void *arg, struct ved_http **out, char *err, size_t errlen)
{
	char host[64], port[16];
	if (ved_http_check_listen(addr, err, errlen))
		return -EINVAL;
	split(addr, host, sizeof(host), port, sizeof(port));
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct addrinfo *ai = NULL;
	int rc = getaddrinfo(host[0] ? host : NULL, port, &hints, &ai);
	if (rc) {
		snprintf(err, errlen, "metrics address %s: %s", addr, gai_strerror(rc));
		return -EINVAL;
	}
	struct ved_http *h = calloc(1, sizeof(*h));
	if (!h) {
		freeaddrinfo(ai);
		return -ENOMEM;
	}
	h->lfd = -1;
	h->epfd = epfd;
	h->kind = tag_kind;
	h->fn = fn;
	h->arg = arg;
	for (int i = 0; i < MAX_CONNS; i++)
		h->c[i].fd = -1;
	rc = -EADDRNOTAVAIL;
	for (struct addrinfo *a = ai; a && h->lfd < 0; a = a->ai_next) {
		int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			rc = -errno;
			continue;
		}
		int one = 1;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, a->ai_addr, a->ai_addrlen) < 0 || listen(fd, 16) < 0) {
			rc = -errno;
			close(fd);
			continue;
		}
		h->lfd = fd;
	}
	freeaddrinfo(ai);
	if (h->lfd < 0) {
		snprintf(err, errlen, "cannot listen on %s for metrics: %s", addr, strerror(-rc));
		free(h);
		return rc;
	}
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char ip[INET6_ADDRSTRLEN] = "?";
	int bound_port = 0;
	if (getsockname(h->lfd, (struct sockaddr *)&ss, &sl) == 0) {
		if (ss.ss_family == AF_INET) {
			struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
			inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof(ip));
			bound_port = ntohs(s4->sin_port);
		} else if (ss.ss_family == AF_INET6) {
			struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
			inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof(ip));
			bound_port = ntohs(s6->sin6_port);
		}
	}
	snprintf(h->addr, sizeof(h->addr), ss.ss_family == AF_INET6 ? "[%s]:%d" : "%s:%d", ip,
		 bound_port);
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)tag_kind << 32};
	if (epoll_ctl(epfd, EPOLL_CTL_ADD, h->lfd, &ev) < 0) {
		rc = -errno;
		snprintf(err, errlen, "epoll: %s", strerror(-rc));
		close(h->lfd);
		free(h);
		return rc;
	}
	*out = h;
	return 0;
}

static void conn_close(struct ved_http *h, struct hconn *c)
{
	if (c->fd < 0)
		return;
	epoll_ctl(h->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	free(c->out);
	c->fd = -1;
	c->out = NULL;
	c->n = c->out_len = c->out_off = 0;
	c->writing = false;
}

void ved_http_destroy(struct ved_http *h)
{
	if (!h)
		return;
	for (int i = 0; i < MAX_CONNS; i++)
		conn_close(h, &h->c[i]);
	epoll_ctl(h->epfd, EPOLL_CTL_DEL, h->lfd, NULL);
	close(h->lfd);
	free(h);
}

const char *ved_http_address(const struct ved_http *h)
{
	return h->addr;
}

uint64_t ved_http_requests(const struct ved_http *h)
{
	return h->requests;
}

/* ------------------------------------------------------------------ requests */

static void respond(struct ved_http *h, struct hconn *c, int code, const char *reason,
		    const char *ctype, const char *extra, const char *body, size_t blen, bool head)
{
	char hdr[512];
	int n = snprintf(hdr, sizeof(hdr),
			 "HTTP/1.0 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s"
			 "Cache-Control: no-store\r\nConnection: close\r\n\r\n",
			 code, reason, ctype, blen, extra ? extra : "");
	size_t total = (size_t)n + (head ? 0 : blen);
	h->requests++;
	c->out = malloc(total);
	if (!c->out) {
		conn_close(h, c);
		return;
	}
	memcpy(c->out, hdr, (size_t)n);
	if (!head && blen)
		memcpy(c->out + n, body, blen);
	c->out_len = total;
	c->out_off = 0;
	c->writing = true;
	struct epoll_event ev = {.events = EPOLLOUT,
				 .data.u64 = (uint64_t)h->kind << 32 | (uint64_t)(c - h->c + 1)};
	epoll_ctl(h->epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

static void text(struct ved_http *h, struct hconn *c, int code, const char *reason,
		 const char *extra, const char *msg, bool head)
{
	respond(h, c, code, reason, "text/plain; charset=utf-8", extra, msg, strlen(msg), head);
}

static void handle(struct ved_http *h, struct hconn *c)
{
	c->req[c->n < REQ_MAX ? c->n : REQ_MAX - 1] = 0;
	char method[8], target[256], version[16];
	/* The request line only; headers are read and ignored. */
	if (sscanf(c->req, "%7s %255s %15s", method, target, version) != 3 ||
	    strncmp(version, "HTTP/1.", 7) != 0) {
		text(h, c, 400, "Bad Request", NULL, "bad request\n", false);
		return;
	}
	bool head = strcmp(method, "HEAD") == 0;
	if (!head && strcmp(method, "GET") != 0) {
		text(h, c, 405, "Method Not Allowed", "Allow: GET, HEAD\r\n",
		     "only GET and HEAD\n", false);
		return;
	}
	char *q = strchr(target, '?');
	if (q)
		*q = 0;
	if (strcmp(target, "/") == 0) {
		text(h, c, 200, "OK", NULL, "Vitamin-E ved: metrics at /metrics\n", head);
		return;
	}
	if (strcmp(target, "/metrics") != 0) {
		text(h, c, 404, "Not Found", NULL, "not found: try /metrics\n", head);
		return;
	}
	char *body = NULL;
	size_t blen = 0;
	if (h->fn(h->arg, &body, &blen)) {
		free(body);
		text(h, c, 500, "Internal Server Error", NULL, "cannot render the metrics\n", head);
		return;
	}
	respond(h, c, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", NULL, body, blen,
		head);
	free(body);
}

static bool complete(const struct hconn *c)
{
	for (size_t i = 0; i + 1 < c->n; i++) {
		if (c->req[i] == '\n' && c->req[i + 1] == '\n')
			return true;
		if (i + 3 < c->n && memcmp(c->req + i, "\r\n\r\n", 4) == 0)
			return true;
	}
	return false;
}

static void on_read(struct ved_http *h, struct hconn *c)
{
	for (;;) {
		if (c->n >= REQ_MAX - 1) {
			text(h, c, 431, "Request Header Fields Too Large", NULL,
			     "request too large\n", false);
			return;
		}
		ssize_t r = recv(c->fd, c->req + c->n, REQ_MAX - 1 - c->n, MSG_DONTWAIT);
		if (r > 0) {
			c->n += (size_t)r;
			if (complete(c)) {
				handle(h, c);
				return;
			}
			continue;
		}
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (r < 0 && errno == EINTR)
			continue;
		conn_close(h, c); /* EOF before a whole request, or an error */
		return;
	}
}

static void on_write(struct ved_http *h, struct hconn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t w = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
				 MSG_DONTWAIT | MSG_NOSIGNAL);
		if (w > 0) {
			c->out_off += (size_t)w;
			continue;
		}
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (w < 0 && errno == EINTR)
			continue;
		break;
	}
	shutdown(c->fd, SHUT_WR);
	conn_close(h, c);
}

static void on_accept(struct ved_http *h, uint64_t now)
{
	for (int k = 0; k < 64; k++) {
		int fd = accept4(h->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		int i;
		for (i = 0; i < MAX_CONNS && h->c[i].fd >= 0; i++)
			;
		if (i == MAX_CONNS) {
			close(fd); /* busy: the scraper retries */
			continue;
		}
		struct hconn *c = &h->c[i];
		c->fd = fd;
		c->n = 0;
		c->writing = false;
		c->deadline = now + DEADLINE_NS;
		struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP,
					 .data.u64 = (uint64_t)h->kind << 32 | (uint64_t)(i + 1)};
		if (epoll_ctl(h->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
			close(fd);
			c->fd = -1;
		}
	}
}

void ved_http_event(struct ved_http *h, uint32_t idx, uint32_t events, uint64_t now)
{
	if (!h)
		return;
	if (idx == 0) {
		on_accept(h, now);
		return;
	}
	if (idx > MAX_CONNS || h->c[idx - 1].fd < 0)
		return;
	struct hconn *c = &h->c[idx - 1];
	if (c->writing)
		on_write(h, c);
	else if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
		on_read(h, c);
}

void ved_http_sweep(struct ved_http *h, uint64_t now)
{
	if (!h)
		return;
	for (int i = 0; i < MAX_CONNS; i++)
		if (h->c[i].fd >= 0 && now > h->c[i].deadline)
			conn_close(h, &h->c[i]);
}
