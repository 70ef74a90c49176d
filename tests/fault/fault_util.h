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
#include "../unit/ved_helper.h"

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

static char fu_dir[64];

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

/* ---- a ved of the test's own ---- */
static char fu_ved_sock[108], fu_ved_log[300];
static pid_t fu_ved_pid;

/* Starts ved on <scratch>/<name>/ved-0.sock with the "NAME=value" settings
 * in env (NULL-terminated; VE_VED_CHECK=1 always); its log goes to
 * <scratch>/<name>.log. The pid, or -1 (then the test skips if no ved is
 * built). */
static inline pid_t fu_ved_start_in(const char *name, const char *const *env)
{
	char bin[PATH_MAX];
	sh_locate();
	if (!vh_find(sh_build, bin, sizeof(bin)))
		return -1;
	char dir[96];
	snprintf(dir, sizeof(dir), "%.40s/%.40s", fu_scratch(), name);
	mkdir(dir, 0700);
	snprintf(fu_ved_sock, sizeof(fu_ved_sock), "%s/ved-0.sock", dir);
	snprintf(fu_ved_log, sizeof(fu_ved_log), "%s/%s.log", fu_scratch(), name);
	const char *all[24] = {"VE_VED_CHECK=1", "VE_VED_LOG_LEVEL=info", "VE_VED_STATS_INTERVAL=0"};
	int n = 3;
	for (int i = 0; env && env[i] && n < 23; i++)
		all[n++] = env[i];
	all[n] = NULL;
	fu_ved_pid = vh_start(bin, fu_ved_sock, fu_ved_log, all);
	return fu_ved_pid;
}

#define FU_VED(name, ...)                                                                          	do {                                                                                       		const char *fu_env_[] = {__VA_ARGS__, NULL};                                       		if (fu_ved_start_in(name, fu_env_) < 0)                                            			VE_SKIP("ved is not built, or did not start");                             	} while (0)

/* Stops the ved started last: its exit status (0 when it shut down cleanly). */
static inline int fu_ved_stop(void)
{
	int rc = fu_ved_pid > 0 ? vh_stop(fu_ved_pid) : 0;
	fu_ved_pid = 0;
	return rc;
}

static inline void fu_ved_dump_log(void)
{
	FILE *f = fopen(fu_ved_log, "r");
	if (!f)
		return;
	char line[1024];
	fprintf(stderr, "---- %s ----\n", fu_ved_log);
	while (fgets(line, sizeof(line), f))
		fputs(line, stderr);
	fclose(f);
}

static union {
	uint8_t b[VE_CTL_MAX_MSG];
	uint64_t align;
} fu_msg;

/* ved's STATUS, or NULL. */
static inline const struct ve_ctl_status *fu_status(const char *sock)
{
	int fd = ve_ctl_connect(sock);
	if (fd < 0)
		return NULL;
	struct ve_ctl_status_req q;
	memset(&q, 0, sizeof(q));
	ve_ctl_hdr_init(&q.h, VE_CTL_STATUS_REQ, sizeof(q));
	int n = -1;
	if (ve_ctl_send(fd, &q, sizeof(q)) == 0)
		n = ve_ctl_recv(fd, fu_msg.b, sizeof(fu_msg.b), NULL, 5000);
	close(fd);
	if (n <= 0 || ve_ctl_check(fu_msg.b, (size_t)n, VE_CTL_FROM_VED))
		return NULL;
	const struct ve_ctl_status *m = (const void *)fu_msg.b;
	return m->h.type == VE_CTL_STATUS ? m : NULL;
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
	if (fu_ved_pid > 0)
		fu_ved_stop(); /* a failed check must not leave a ved running */
	if (fu_dir[0] && !getenv("VE_FAULT_KEEP"))
		fu_rm_rf(fu_dir);
}

#endif
