/* SPDX-License-Identifier: MIT */
/*
 * Helpers of the fault-injection suite (tests/fault): tools run as child
 * processes with a bound on their run time (tests/shim/shim_harness.h's
 * runner), scratch files, and the build's binaries. Include after
 * ../harness.h.
 */
#ifndef VE_TESTS_FAULT_UTIL_H
#define VE_TESTS_FAULT_UTIL_H

#include "../shim/shim_harness.h"

#include <dirent.h>

/* $VE_BUILD/<name>, or a skip when it is not built. */
#define FU_BIN(var, name)                                                                          \
	char var[PATH_MAX + 64];                                                                   \
	do {                                                                                       \
		sh_locate();                                                                       \
		snprintf(var, sizeof(var), "%s/%s", sh_build, name);                               \
		if (access(var, X_OK) != 0)                                                        \
			VE_SKIP(name " is not built");                                             \
	} while (0)

static char fu_dir[256];

/* A scratch folder of this test process (mode 0700), made once. */
static inline const char *fu_scratch(void)
{
	if (!fu_dir[0]) {
		snprintf(fu_dir, sizeof(fu_dir), "/tmp/ve-fault-%d-XXXXXX", (int)getpid());
		if (!mkdtemp(fu_dir))
			fu_dir[0] = 0;
	}
	return fu_dir;
}

/* Writes text to <scratch>/name; returns the path in buf. */
static inline const char *fu_file(char *buf, size_t n, const char *name, const char *text)
{
	snprintf(buf, n, "%s/%s", fu_scratch(), name);
	FILE *f = fopen(buf, "w");
	if (f) {
		fputs(text, f);
		fclose(f);
	}
	return buf;
}

/* Runs argv with extra environment (NULL-terminated "NAME=value" list, at
 * most 12) and a time limit in seconds. */
static inline void fu_run(const char *const *argv, const char *const *env, unsigned timeout_s,
			  struct sh_result *r)
{
	struct sh_opts o = {.timeout_s = timeout_s};
	for (int i = 0; env && env[i] && i < 12; i++)
		o.env[i] = env[i];
	sh_run(argv, &o, r);
}

static inline void fu_rm_rf(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *e;
	char p[PATH_MAX + 512];
	size_t dl = strlen(dir);
	if (dl >= PATH_MAX)
		return;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		memcpy(p, dir, dl);
		p[dl] = '/';
		snprintf(p + dl + 1, sizeof(p) - dl - 1, "%s", e->d_name);
		struct stat st;
		if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
			fu_rm_rf(p);
		else
			unlink(p);
	}
	closedir(d);
	rmdir(dir);
}

__attribute__((destructor)) static void fu_cleanup(void)
{
	if (fu_dir[0])
		fu_rm_rf(fu_dir);
}

#endif
