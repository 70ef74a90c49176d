/* SPDX-License-Identifier: MIT */
/*
 * The smallest safe HTTP/1.0 responder for ved's metrics endpoint
 * (docs/operations.md, "Metrics"): GET or HEAD of /metrics (the body comes
 * from the callback) and of / (a line pointing there); 404, 405 or 431 for
 * anything else. Nonblocking sockets in ved's own epoll, requests bounded to
 * 4 KiB, a 5 s deadline per connection, at most 16 at once, one response
 * and then close: a slow or hostile scraper costs ved a file descriptor for
 * 5 s, never a wait.
 *
 * Single owner (ved's loop). Epoll data of its descriptors is
 * (tag_kind << 32 | index): ved hands those events to ved_http_event.
 */
#ifndef VE_VED_HTTP_H
#define VE_VED_HTTP_H

#include <stddef.h>
#include <stdint.h>

struct ved_http;

/* The body of /metrics: malloc'd text and its length; 0 or -errno. */
typedef int (*ved_http_body_fn)(void *arg, char **body, size_t *len);

/* "HOST:PORT", "[V6]:PORT", "PORT" (= 127.0.0.1:PORT) or ":PORT" (every
 * interface), each maybe ending in '+' (ved adds its device index to the
 * port before ved_http_create). 0 if s is one of those, -EINVAL with err
 * filled otherwise. */
int ved_http_check_listen(const char *s, char *err, size_t errlen);

/* Binds and listens on addr; port 0 picks a free one (ved_http_address
 * says which). 0 or -errno with err filled. */
int ved_http_create(const char *addr, int epfd, uint32_t tag_kind, ved_http_body_fn fn,
		    void *arg, struct ved_http **out, char *err, size_t errlen);
/* Closes the listener and every connection (they leave epoll with it). */
void ved_http_destroy(struct ved_http *h);
void ved_http_event(struct ved_http *h, uint32_t idx, uint32_t events, uint64_t now);
/* Closes connections past their deadline. */
void ved_http_sweep(struct ved_http *h, uint64_t now);
/* "127.0.0.1:9400": where it listens. */
const char *ved_http_address(const struct ved_http *h);
uint64_t ved_http_requests(const struct ved_http *h);

#endif
