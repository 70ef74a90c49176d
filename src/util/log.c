/* SPDX-License-Identifier: MIT */
#include "util/util.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int ve__log_level = VE_LOG_WARN;
static FILE *log_file;
static pthread_once_t log_once = PTHREAD_ONCE_INIT;

int ve__log_parse_level(const char *s)
{
	static const char *names[] = {"error", "warn", "info", "debug", "trace"};
	for (int i = 0; i < (int)VE_ARRAY_SIZE(names); i++)
		if (strcmp(s, names[i]) == 0)
			return i;
	return -EINVAL;
}

static void log_init_once(void)
{
	const char *lvl = getenv("VE_LOG_LEVEL");
	if (lvl && *lvl) {
		int l = ve__log_parse_level(lvl);
		if (l >= 0)
			ve__log_level = l;
		else
			fprintf(stderr, "vitamin-e: VE_LOG_LEVEL=%s is not one of error, warn, info, "
					"debug, trace; using warn\n", lvl);
	}
	const char *path = getenv("VE_LOG_FILE");
	if (path && *path) {
		log_file = fopen(path, "a");
		if (!log_file)
			fprintf(stderr, "vitamin-e: cannot open VE_LOG_FILE=%s: %s\n", path,
				strerror(errno));
	}
}

void ve__log_init(void)
{
	pthread_once(&log_once, log_init_once);
}

/* Rate limit: a message (by its format string) prints at most LIMIT_BURST
 * times per LIMIT_WINDOW_NS; what it would have printed beyond that is
 * counted and reported in one line when its next window opens. A warning in
 * a loop (a peer that keeps misbehaving) must not flood the log or cost the
 * process its time. Debug and trace lines are what the user asked for:
 * never limited. */
#define LIMIT_SLOTS	64
#define LIMIT_BURST	10
#define LIMIT_WINDOW_NS 1000000000ull

struct limit_slot {
	const char *fmt;
	uint64_t window_ns;
	uint32_t printed;
	uint64_t suppressed;
};

static struct limit_slot limits[LIMIT_SLOTS];
static pthread_mutex_t limit_lock = PTHREAD_MUTEX_INITIALIZER;

static void emit(const char *buf)
{
	fputs(buf, log_file ? log_file : stderr);
	if (log_file)
		fflush(log_file);
}

/* True if this line may print; *held gets the count suppressed in the
 * slot's previous window (to report first). */
static bool limit_pass(const char *fmt, uint64_t *held)
{
	*held = 0;
	uint64_t now = ve__now_ns();
	uint32_t h = (uint32_t)(ve__mix64((uint64_t)(uintptr_t)fmt) % LIMIT_SLOTS);
	pthread_mutex_lock(&limit_lock);
	struct limit_slot *s = &limits[h];
	if (s->fmt != fmt) {
		/* A collision evicts the older message: it can only print more. */
		*held = s->suppressed;
		*s = (struct limit_slot){.fmt = fmt, .window_ns = now};
	} else if (now - s->window_ns >= LIMIT_WINDOW_NS) {
		*held = s->suppressed;
		s->window_ns = now;
		s->printed = 0;
		s->suppressed = 0;
	}
	bool pass = s->printed < LIMIT_BURST;
	if (pass)
		s->printed++;
	else
		s->suppressed++;
	pthread_mutex_unlock(&limit_lock);
	return pass;
}

void ve__log(int level, const char *fmt, ...)
{
	static const char *tags[] = {"error", "warn", "info", "debug", "trace"};
	char buf[1024];
	if (level <= VE_LOG_INFO) {
		uint64_t held;
		bool pass = limit_pass(fmt, &held);
		if (held) {
			snprintf(buf, sizeof(buf),
				 "vitamin-e[%d] %s: (%llu more lines like the next were suppressed: "
				 "at most %d a second)\n",
				 (int)getpid(), tags[level < 0 ? 0 : level], (unsigned long long)held,
				 LIMIT_BURST);
			emit(buf);
		}
		if (!pass)
			return;
	}
	int n = snprintf(buf, sizeof(buf), "vitamin-e[%d] %s: ", (int)getpid(),
			 tags[level < 0 ? 0 : level > 4 ? 4 : level]);
	va_list ap;
	va_start(ap, fmt);
	if (n >= 0 && n < (int)sizeof(buf))
		vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
	va_end(ap);
	size_t len = strlen(buf);
	if (len == 0 || buf[len - 1] != '\n') {
		if (len + 1 < sizeof(buf)) {
			buf[len++] = '\n';
			buf[len] = 0;
		} else {
			buf[sizeof(buf) - 2] = '\n';
		}
	}
	emit(buf);
}

int ve__parse_u64(const char *s, uint64_t *out)
{
	if (!s || !*s)
		return -EINVAL;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || *end || s[0] == '-')
		return -EINVAL;
	*out = v;
	return 0;
}

int ve__parse_double(const char *s, double *out)
{
	if (!s || !*s)
		return -EINVAL;
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || *end || !isfinite(v))
		return -EINVAL;
	*out = v;
	return 0;
}
