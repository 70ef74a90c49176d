/* SPDX-License-Identifier: MIT */
/*
 * A warning repeated in a loop is rate-limited (issue: a repeated warning
 * printed 26,000 lines a second):
 *   log_rate_limited   100000 copies of one warning print at most a few
 *                      lines, then one line saying how many were dropped;
 *                      other messages are not held back by it; debug lines
 *                      (asked for) are never limited
 */
#include "../harness.h"
#include "util/util.h"

#include <unistd.h>

static int count(const char *path, const char *needle)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	char line[2048];
	int n = 0;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, needle) != NULL;
	fclose(f);
	return n;
}

VE_TEST(log_rate_limited)
{
	char path[] = "/tmp/ve-log-XXXXXX";
	int fd = mkstemp(path);
	VE_CHECK(fd >= 0);
	close(fd);
	setenv("VE_LOG_FILE", path, 1);
	setenv("VE_LOG_LEVEL", "debug", 1);
	ve__log_init();
	uint64_t t0 = ve__now_ns();
	for (int i = 0; i < 100000; i++)
		VE_WARN("the same warning again (%d)", i);
	VE_WARN("a different warning");
	for (int i = 0; i < 50; i++)
		VE_DEBUG("a debug line (%d)", i);
	double secs = (double)(ve__now_ns() - t0) / 1e9;
	int same = count(path, "the same warning again");
	printf("# %d of 100000 printed in %.2f s\n", same, secs);
	VE_CHECK_MSG(same >= 1 && same <= 10 * (int)(secs + 2), "%d lines", same);
	VE_CHECK_EQ(count(path, "a different warning"), 1);
	VE_CHECK_EQ(count(path, "a debug line"), 50);
	/* The next window reports what was dropped. */
	usleep(1100 * 1000);
	VE_WARN("the same warning again (%d)", -1);
	VE_CHECK_MSG(count(path, "were suppressed") == 1, "no line about the dropped ones");
	unlink(path);
}
