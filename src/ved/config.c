/* SPDX-License-Identifier: MIT */
/* ved configuration: file, VE_VED_* environment, validation (ved.h, docs/daemon.md). */
#include "ved/ved.h"
#include "coord/coord.h"
#include "ved/http.h"
#include "util/util.h"

#include <ctype.h>
#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

enum kind { K_STR, K_U32, K_BOOL, K_LEVEL, K_LEAVES, K_GROUP };

struct key {
	const char *name;
	enum kind kind;
	uint32_t lo, hi; /* K_U32 */
	const char *help;
};

static const struct key keys[] = {
    {"policy", K_STR, 0, 0,
     "scheduling policy: tput, tpot, fixed, whole, chaos, name:args, or a .so"},
    {"device", K_U32, 0, 1024, "CUDA device this ved serves"},
    {"leaves", K_LEAVES, 0, 0, "leaf split, e.g. 15x8,12 (default: the first client's)"},
    {"pool_entries", K_U32, 0, 256, "pool bound, 0 = full hierarchy (default: the first client's)"},
    {"max_clients", K_U32, 1, VE_COORD_MAX_CLIENTS, "processes served at once"},
    {"client_ops", K_U32, 64, 65536, "ops one client may have at ved at once (ready + bound)"},
    {"ring_records", K_U32, 64, 65536, "records per ring of a client's segment"},
    {"log_level", K_LEVEL, 0, 0, "error, warn, info, debug (every decision), trace"},
    {"socket", K_STR, 0, 0, "control socket path"},
    {"group", K_GROUP, 0, 0, "group whose members may connect besides ved's user"},
    {"profile", K_STR, 0, 0, "scaling profiles to load"},
    {"spin_us", K_U32, 0, 100000, "spin this long after the last record before sleeping"},
    {"heartbeat_ms", K_U32, 10, 10000, "heartbeat period in every segment"},
    {"stale_ms", K_U32, 0, 3600000,
     "grant mode: a client silent this long (stopped) loses its grant until it answers; 0 = never"},
    {"tick_us", K_U32, 10, 1000000, "grant mode: the policy decides grants at most this often"},
    {"per_op", K_BOOL, 0, 0, "bind op by op (the paper's strict mode) instead of granting entries"},
    {"share_contended", K_BOOL, 0, 0,
     "grant mode: clients sharing one entry keep the short submit-ahead of contention"},
    {"stats_interval", K_U32, 0, 86400, "seconds between statistics lines at info, 0 = off"},
    {"trace_events", K_U32, 0, 1u << 20, "recent events kept for ve-ctl trace"},
    {"check", K_BOOL, 0, 0, "self-check after every decision; abort on a violation"},
    {"metrics_listen", K_STR, 0, 0,
     "serve Prometheus metrics over HTTP: HOST:PORT, PORT (127.0.0.1) or :PORT (all); "
     "empty = off"},
    {"hello_timeout_ms", K_U32, 100, 60000,
     "a connection that sends nothing this long (no HELLO, no request) is closed"},
    {"max_conns_per_uid", K_U32, 0, 160,
     "connections one user may hold open, 0 = max_clients + 8"},
    {"watchdog_ms", K_U32, 0, 86400000,
     "bind deadline: an op ready this long runs on the whole GPU, 0 = off"},
};

void ved_config_usage(FILE *f)
{
	fprintf(f, "configuration keys (file: key = value; environment: VE_VED_<KEY>):\n");
	for (size_t i = 0; i < VE_ARRAY_SIZE(keys); i++)
		fprintf(f, "  %-15s %s\n", keys[i].name, keys[i].help);
}

int ved_parse_leaves(const char *s, uint32_t *leaf_sms, uint32_t *nleaves)
{
	uint32_t n = 0;
	const char *p = s;
	while (*p) {
		char *end;
		errno = 0;
		unsigned long a = strtoul(p, &end, 10), b = 1;
		if (end == p || errno)
			return -EINVAL;
		if (*end == 'x' || *end == 'X') {
			const char *q = end + 1;
			b = strtoul(q, &end, 10);
			if (end == q || errno)
				return -EINVAL;
		} else {
			b = a;
			a = 1;
		}
		if (a == 0 || b == 0 || b > 1024 || a > VE_CTL_MAX_LEAVES - n)
			return -EINVAL;
		for (unsigned long i = 0; i < a; i++)
			leaf_sms[n++] = (uint32_t)b;
		if (*end == ',')
			end++;
		else if (*end)
			return -EINVAL;
		p = end;
	}
	if (n == 0)
		return -EINVAL;
	*nleaves = n;
	return 0;
}

void ved_format_leaves(const uint32_t *leaf_sms, uint32_t n, char *buf, size_t len)
{
	size_t o = 0;
	buf[0] = 0;
	for (uint32_t i = 0; i < n && o < len;) {
		uint32_t j = i;
		while (j < n && leaf_sms[j] == leaf_sms[i])
			j++;
		int k = j - i > 1 ? snprintf(buf + o, len - o, "%s%ux%u", i ? "," : "", j - i,
					     leaf_sms[i])
				  : snprintf(buf + o, len - o, "%s%u", i ? "," : "", leaf_sms[i]);
		if (k < 0)
			break;
		o += (size_t)k;
		i = j;
	}
}

static int set_key(struct ved_config *c, const struct key *k, const char *v, const char *where)
{
	uint64_t u;
	switch (k->kind) {
	case K_STR:
		if (strcmp(k->name, "policy") == 0) {
			if (!*v || strlen(v) >= sizeof(c->policy))
				goto bad;
			snprintf(c->policy, sizeof(c->policy), "%s", v);
		} else if (strcmp(k->name, "socket") == 0) {
			struct sockaddr_un sa;
			if (v[0] != '/' || strlen(v) >= sizeof(sa.sun_path)) {
				fprintf(
				    stderr,
				    "ved: %s: socket = %s: must be an absolute path shorter than "
				    "%zu bytes\n",
				    where, v, sizeof(sa.sun_path));
				return -EINVAL;
			}
			snprintf(c->socket, sizeof(c->socket), "%s", v);
		} else if (strcmp(k->name, "metrics_listen") == 0) {
			char err[160];
			if (*v && ved_http_check_listen(v, err, sizeof(err))) {
				fprintf(stderr, "ved: %s: metrics_listen = %s\n", where, err);
				return -EINVAL;
			}
			snprintf(c->metrics_listen, sizeof(c->metrics_listen), "%s", v);
		} else {
			if (strlen(v) >= sizeof(c->profile))
				goto bad;
			snprintf(c->profile, sizeof(c->profile), "%s", v);
		}
		return 0;
	case K_U32:
		if (ve__parse_u64(v, &u) || u < k->lo || u > k->hi) {
			fprintf(stderr, "ved: %s: %s = %s: must be a number in [%u, %u]\n", where,
				k->name, v, k->lo, k->hi);
			return -EINVAL;
		}
		if (strcmp(k->name, "device") == 0)
			c->device = (int)u;
		else if (strcmp(k->name, "pool_entries") == 0) {
			c->pool_entries = (uint32_t)u;
			c->pool_entries_set = true;
		} else if (strcmp(k->name, "max_clients") == 0)
			c->max_clients = (uint32_t)u;
		else if (strcmp(k->name, "client_ops") == 0)
			c->client_ops = (uint32_t)u;
		else if (strcmp(k->name, "ring_records") == 0)
			c->ring_records = (uint32_t)u;
		else if (strcmp(k->name, "spin_us") == 0)
			c->spin_us = (uint32_t)u;
		else if (strcmp(k->name, "heartbeat_ms") == 0)
			c->heartbeat_ms = (uint32_t)u;
		else if (strcmp(k->name, "stale_ms") == 0)
			c->stale_ms = (uint32_t)u;
		else if (strcmp(k->name, "tick_us") == 0)
			c->tick_us = (uint32_t)u;
		else if (strcmp(k->name, "stats_interval") == 0)
			c->stats_interval_s = (uint32_t)u;
		else if (strcmp(k->name, "hello_timeout_ms") == 0)
			c->hello_timeout_ms = (uint32_t)u;
		else if (strcmp(k->name, "max_conns_per_uid") == 0)
			c->max_conns_per_uid = (uint32_t)u;
		else if (strcmp(k->name, "watchdog_ms") == 0)
			c->watchdog_ms = (uint32_t)u;
		else
			c->trace_events = (uint32_t)u;
		return 0;
	case K_BOOL: {
		bool *dst = strcmp(k->name, "per_op") == 0	      ? &c->per_op
			    : strcmp(k->name, "share_contended") == 0 ? &c->share_contended
								      : &c->check;
		if (strcmp(v, "1") == 0 || strcmp(v, "yes") == 0 || strcmp(v, "true") == 0)
			*dst = true;
		else if (strcmp(v, "0") == 0 || strcmp(v, "no") == 0 || strcmp(v, "false") == 0)
			*dst = false;
		else {
			fprintf(stderr, "ved: %s: %s = %s: must be 0 or 1\n", where, k->name, v);
			return -EINVAL;
		}
		return 0;
	}
	case K_LEVEL: {
		int l = ve__log_parse_level(v);
		if (l < 0) {
			fprintf(
			    stderr,
			    "ved: %s: log_level = %s: must be error, warn, info, debug or trace\n",
			    where, v);
			return -EINVAL;
		}
		c->log_level = l;
		return 0;
	}
	case K_LEAVES:
		if (ved_parse_leaves(v, c->leaf_sms, &c->nleaves)) {
			fprintf(stderr,
				"ved: %s: leaves = %s: must list leaf SM counts, e.g. 15x8,12 "
				"(at most %d leaves of 1..1024 SMs)\n",
				where, v, VE_CTL_MAX_LEAVES);
			return -EINVAL;
		}
		return 0;
	case K_GROUP: {
		if (!*v) {
			c->group[0] = 0;
			return 0;
		}
		struct group *g = getgrnam(v);
		if (!g && ve__parse_u64(v, &u) == 0 && u < (1ull << 31))
			g = getgrgid((gid_t)u);
		if (!g || strlen(v) >= sizeof(c->group)) {
			fprintf(stderr, "ved: %s: group = %s: no such group\n", where, v);
			return -EINVAL;
		}
		snprintf(c->group, sizeof(c->group), "%s", v);
		c->gid = g->gr_gid;
		return 0;
	}
	}
bad:
	fprintf(stderr, "ved: %s: %s = %s: bad value\n", where, k->name, v);
	return -EINVAL;
}

static const struct key *find_key(const char *name)
{
	for (size_t i = 0; i < VE_ARRAY_SIZE(keys); i++)
		if (strcmp(keys[i].name, name) == 0)
			return &keys[i];
	return NULL;
}

static char *trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	size_t n = strlen(s);
	while (n && isspace((unsigned char)s[n - 1]))
		s[--n] = 0;
	return s;
}

static int load_file(struct ved_config *c, const char *path, bool must)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		if (!must && errno == ENOENT)
			return 0;
		fprintf(stderr, "ved: cannot read config file %s: %s\n", path, strerror(errno));
		return -EINVAL;
	}
	snprintf(c->config_path, sizeof(c->config_path), "%s", path);
	char line[1024], where[600];
	int bad = 0, ln = 0;
	while (fgets(line, sizeof(line), f)) {
		ln++;
		snprintf(where, sizeof(where), "%s:%d", path, ln);
		size_t len = strlen(line);
		if (len == sizeof(line) - 1 && line[len - 1] != '\n' && !feof(f)) {
			/* Its tail would be read as a line of its own (a commented-out
			 * long line could turn a key on): refuse it, and skip the rest. */
			fprintf(stderr, "ved: %s: line longer than %zu bytes\n", where,
				sizeof(line) - 2);
			bad = 1;
			int ch;
			while ((ch = fgetc(f)) != EOF && ch != '\n')
				;
			continue;
		}
		char *hash = strchr(line, '#');
		if (hash)
			*hash = 0;
		char *s = trim(line);
		if (!*s)
			continue;
		char *eq = strchr(s, '=');
		if (!eq) {
			fprintf(stderr, "ved: %s: expected 'key = value', got '%s'\n", where, s);
			bad = 1;
			continue;
		}
		*eq = 0;
		char *k = trim(s), *v = trim(eq + 1);
		const struct key *key = find_key(k);
		if (!key) {
			fprintf(stderr, "ved: %s: unknown key '%s' (ved --help lists them)\n",
				where, k);
			bad = 1;
			continue;
		}
		bad |= set_key(c, key, v, where) != 0;
	}
	fclose(f);
	return bad ? -EINVAL : 0;
}

extern char **environ;

/* A VE_VED_<KEY> that names no key would be ignored: say so, with the key
 * it probably meant. (VE_VED_TEST_* belong to the test suite.) */
static void warn_unknown_env(void)
{
	const char *names[VE_ARRAY_SIZE(keys)];
	char envs[VE_ARRAY_SIZE(keys)][48];
	for (size_t i = 0; i < VE_ARRAY_SIZE(keys); i++) {
		snprintf(envs[i], sizeof(envs[i]), "VE_VED_%s", keys[i].name);
		for (char *p = envs[i]; *p; p++)
			*p = (char)toupper((unsigned char)*p);
		names[i] = envs[i];
	}
	for (char **e = environ; e && *e; e++) {
		if (strncmp(*e, "VE_VED_", 7) != 0 || strncmp(*e, "VE_VED_TEST_", 12) == 0)
			continue;
		char name[64];
		size_t len = strcspn(*e, "=");
		snprintf(name, sizeof(name), "%.*s", (int)VE_MIN(len, sizeof(name) - 1), *e);
		bool known = false;
		for (size_t i = 0; i < VE_ARRAY_SIZE(keys) && !known; i++)
			known = strcmp(name, names[i]) == 0;
		if (known)
			continue;
		const char *near = ve__closest(name, names, VE_ARRAY_SIZE(keys), 3);
		fprintf(stderr, "ved: warning: environment %s is not a ved key and is ignored%s%s%s\n",
			name, near ? "; did you mean " : " (ved --help lists them)",
			near ? near : "", near ? "?" : "");
	}
}

int ved_config_load(struct ved_config *c, const struct ved_overrides *o)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->policy, sizeof(c->policy), "tput");
	c->max_clients = 16;
	c->client_ops = 4096;
	c->ring_records = 1024;
	c->log_level = VE_LOG_INFO;
	c->spin_us = 50;
	c->heartbeat_ms = 100;
	c->stale_ms = 1000;
	c->tick_us = 200;
	c->stats_interval_s = 60;
	c->trace_events = 16384;
	c->hello_timeout_ms = 2000;
	c->watchdog_ms = 10000;
	int bad = 0;
	if (o && o->config)
		bad |= load_file(c, o->config, true) != 0;
	else
		bad |= load_file(c, VED_DEFAULT_CONFIG, false) != 0;
	/* VE_VED_<KEY> overrides the file. */
	for (size_t i = 0; i < VE_ARRAY_SIZE(keys); i++) {
		char env[64], where[80];
		snprintf(env, sizeof(env), "VE_VED_%s", keys[i].name);
		for (char *p = env; *p; p++)
			*p = (char)toupper((unsigned char)*p);
		const char *v = getenv(env);
		if (!v)
			continue;
		snprintf(where, sizeof(where), "environment %s", env);
		bad |= set_key(c, &keys[i], v, where) != 0;
	}
	warn_unknown_env();
	if (o && o->socket)
		bad |= set_key(c, find_key("socket"), o->socket, "--socket") != 0;
	if (o && o->device_set) {
		if (o->device < 0 || o->device > 1024) {
			fprintf(stderr, "ved: --device %d: must be in [0, 1024]\n", o->device);
			bad = 1;
		} else {
			c->device = o->device;
		}
	}
	if (!bad && (uint64_t)c->max_clients * c->client_ops > (1u << 20)) {
		fprintf(stderr,
			"ved: max_clients (%u) x client_ops (%u) exceeds 2^20 ops; lower one of "
			"them\n",
			c->max_clients, c->client_ops);
		bad = 1;
	}
	if (!bad && !c->socket[0] && ve_ctl_default_path(c->device, c->socket, sizeof(c->socket))) {
		fprintf(stderr, "ved: the default socket path is too long; set socket = PATH\n");
		bad = 1;
	}
	return bad ? -EINVAL : 0;
}
