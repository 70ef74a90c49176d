/* SPDX-License-Identifier: MIT */
/*
 * Starting and stopping a real ved for a test (test_ved, test_shim_ved): find
 * the binary of this build, fork and exec it on a socket of the test's own
 * with the environment the test asks for, wait until it accepts, and stop it
 * with SIGTERM and a bounded wait, so that its exit status (a failed
 * self-check aborts it, a sanitizer report fails it) is part of the test.
 * Header-only, static functions.
 */
#ifndef VE_TESTS_VED_HELPER_H
#define VE_TESTS_VED_HELPER_H

#include "ipc/ctl.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The ved of this build: build/ved for build (NULL: $VE_BUILD, else the
 * folder above the one this binary is in, i.e. $(BUILD) of build/tests/x).
 * False if there is no executable there. */
static inline bool vh_find(const char *build, char *bin, size_t len)
{
	const char *b = build && *build ? build : getenv("VE_BUILD");
	if (b && *b) {
		snprintf(bin, len, "%.4000s/ved", b);
	} else {
		char exe[PATH_MAX];
		ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		if (n <= 0)
			return false;
		exe[n] = 0;
		char *s = strrchr(exe, '/');
		if (s)
			*s = 0; /* .../tests */
		s = strrchr(exe, '/');
		if (s)
			*s = 0; /* $(BUILD) */
		snprintf(bin, len, "%.4000s/ved", exe);
	}
	return access(bin, X_OK) == 0;
}

/* A folder for sockets: $TMPDIR unless it is too long for a socket path
 * below it (sockaddr_un holds 108 bytes). */
static inline const char *vh_tmpdir(void)
{
	const char *tmp = getenv("TMPDIR");
	return tmp && tmp[0] == '/' && strlen(tmp) <= 60 ? tmp : "/tmp";
}

/* Sets XDG_RUNTIME_DIR for a ved on 'sock' so that its per-device lock
 * (next to the device's default socket, docs/daemon.md) is the test's own,
 * not that of a ved the machine may run: the socket's folder, or its parent
 * when the folder is itself a default one (".../vitamin-e"). */
static inline void vh_isolate(const char *sock)
{
	char dir[256];
	snprintf(dir, sizeof(dir), "%s", sock);
	char *s = strrchr(dir, '/');
	if (!s || s == dir)
		return;
	*s = 0;
	s = strrchr(dir, '/');
	if (s && strcmp(s, "/vitamin-e") == 0 && s != dir)
		*s = 0;
	setenv("XDG_RUNTIME_DIR", dir, 1);
}

/* Starts bin on socket sock with the "NAME=value" strings of env (NULL
 * terminated, may be NULL) set, its output appended to log (NULL: discarded),
 * and waits up to 5 s until the socket accepts. Returns its pid, or -1 (it
 * exited, or never answered: then it is killed). */
static inline pid_t vh_start(const char *bin, const char *sock, const char *log,
			     const char *const *env)
{
	pid_t pid = fork();
	if (pid == 0) {
		int fd = log ? open(log, O_WRONLY | O_CREAT | O_APPEND, 0600)
			     : open("/dev/null", O_WRONLY);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
			close(fd);
		}
		for (int i = 0; env && env[i]; i++) {
			char kv[512];
			snprintf(kv, sizeof(kv), "%s", env[i]);
			char *eq = strchr(kv, '=');
			if (eq) {
				*eq = 0;
				setenv(kv, eq + 1, 1);
			}
		}
		vh_isolate(sock);
		execl(bin, "ved", "--socket", sock, "--config", "/dev/null", (char *)NULL);
		_exit(127);
	}
	if (pid < 0)
		return -1;
	for (int i = 0; i < 500; i++) {
		int fd = ve_ctl_connect(sock);
		if (fd >= 0) {
			close(fd);
			return pid;
		}
		int st;
		if (waitpid(pid, &st, WNOHANG) == pid)
			return -1;
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return -1;
}

/* SIGTERM and up to 5 s for it to exit: its exit status (128 + signal for a
 * signal), or -1 if it had to be killed. */
static inline int vh_stop(pid_t pid)
{
	kill(pid, SIGTERM);
	for (int i = 0; i < 500; i++) {
		int st;
		if (waitpid(pid, &st, WNOHANG) == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return -1;
}

#endif
