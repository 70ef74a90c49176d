/* SPDX-License-Identifier: MIT */
/*
 * How a process ends, natively and under the shim (test_shim_errors):
 *   wait_forever  queues a wait for a value nobody writes (a collective whose
 *                 peer died) and a kernel behind it, then returns from main
 *                 without syncing: the process must still exit;
 *   fork          forks after CUDA work; the child's CUDA calls fail as they do
 *                 after fork (no hang), it exits with exit() (atexit handlers run
 *                 in it), and the parent goes on working.
 */
#include "prog_shim.h"

#include <sys/wait.h>

static int wait_forever(void)
{
	CUstream s;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CUdeviceptr buf = dalloc(64), fd;
	(void)mapped_alloc(64, &fd);
	CK(cuStreamWaitValue32(s, fd, 1, CU_STREAM_WAIT_VALUE_GEQ));
	muladd(s, buf, 1, 3, 1);
	printf("exit: queued a wait that never ends, returning without a sync\n");
	return failures ? 1 : 0;
}

static int fork_child(void)
{
	CUstream s;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CUdeviceptr p = dalloc(4);
	muladd(s, p, 1, 1, 2); /* 2 */
	CK(cuStreamSynchronize(s));
	muladd(s, p, 1, 3, 0); /* 6, perhaps still queued at the fork */
	pid_t pid = fork();
	if (pid == 0) {
		/* CUDA does not survive fork: the call fails, and must not hang. */
		CUresult r = cuStreamSynchronize(s);
		exit(r == CUDA_SUCCESS ? 3 : 0);
	}
	CHECK(pid > 0);
	int st = 0;
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: status %#x", st);
	muladd(s, p, 1, 2, 1); /* 13 */
	CK(cuStreamSynchronize(s));
	CHECKF(read_u32(p) == 13, "parent after the child: %u", read_u32(p));
	CK(cuStreamDestroy(s));
	CK(cuMemFree(p));
	printf("exit: fork %s\n", failures ? "FAILED" : "ok");
	return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
	alarm(60);
	setup_common();
	const char *mode = argc > 1 ? argv[1] : "";
	if (!strcmp(mode, "wait_forever"))
		return wait_forever();
	if (!strcmp(mode, "fork"))
		return fork_child();
	fprintf(stderr, "usage: prog_shim_exit wait_forever|fork\n");
	return 2;
}
