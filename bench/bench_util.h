/* SPDX-License-Identifier: MIT */
/* What every benchmark records with its numbers: the CPU, the commit, and
 * JSON strings written safely. Header-only; each bench is one binary. */
#ifndef VE_BENCH_UTIL_H
#define VE_BENCH_UTIL_H

#include <stdio.h>
#include <string.h>

static inline void cpu_model(char *out, size_t len)
{
	snprintf(out, len, "unknown");
	FILE *f = fopen("/proc/cpuinfo", "r");
	if (!f)
		return;
	char line[512];
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "model name", 10) == 0) {
			char *p = strchr(line, ':');
			if (p) {
				p++;
				while (*p == ' ' || *p == '\t')
					p++;
				p[strcspn(p, "\n")] = 0;
				snprintf(out, len, "%s", p);
			}
			break;
		}
	}
	fclose(f);
}
static inline void git_commit(char *out, size_t len)
{
	snprintf(out, len, "unknown");
	FILE *p = popen("git rev-parse --short=12 HEAD 2>/dev/null", "r");
	if (!p)
		return;
	char buf[64];
	if (fgets(buf, sizeof(buf), p)) {
		buf[strcspn(buf, "\n")] = 0;
		if (buf[0])
			snprintf(out, len, "%s", buf);
	}
	pclose(p);
	p = popen("git status --porcelain --untracked-files=no 2>/dev/null | head -1", "r");
	if (p) {
		if (fgets(buf, sizeof(buf), p) && buf[0])
			strncat(out, "-dirty", len - strlen(out) - 1);
		pclose(p);
	}
}
static inline void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', f);
		if ((unsigned char)*s >= 0x20)
			fputc(*s, f);
	}
	fputc('"', f);
}

#endif
