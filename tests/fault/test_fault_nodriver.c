/* SPDX-License-Identifier: MIT */
/*
 * libve.so without a usable driver (issue: a NULL call crashed the program,
 * VE_DISABLE=1 included). prog_fault_nodriver is linked against libve.so
 * itself and calls hooked entry points:
 *   nodriver_missing   no libcuda at all: every call returns
 *                      CUDA_ERROR_NOT_INITIALIZED, with VE_DISABLE=0 and 1
 *   nodriver_too_old   a driver without cuGetProcAddress_v2: the calls it
 *                      has answer with its own codes, the others with
 *                      CUDA_ERROR_NOT_FOUND; a pass-through, few warnings
 */
#include "../harness.h"
#include "../shim/shim_harness.h"

static void run_prog(const char *libcuda, const char *disable, struct sh_result *r)
{
	SH_PROG(path, "prog_fault_nodriver");
	const char *argv[] = {path, NULL};
	char lib[PATH_MAX + 32], dis[32];
	snprintf(lib, sizeof(lib), "VE_LIBCUDA=%s", libcuda);
	snprintf(dis, sizeof(dis), "VE_DISABLE=%s", disable);
	struct sh_opts o = {.shim = true, .timeout_s = 20, .env = {lib, dis}};
	sh_run(argv, &o, r);
	if (r->rc != 0 || !strstr(r->out, "done\n"))
		sh_dump(r);
}

static int code_of(const struct sh_result *r, const char *name)
{
	char key[64];
	snprintf(key, sizeof(key), "%s=", name);
	const char *p = strstr(r->out, key);
	return p ? atoi(p + strlen(key)) : -1;
}

static const char *const calls[] = {"cuCtxSynchronize", "cuStreamSynchronize", "cuStreamCreate",
				    "cuEventCreate",	"cuEventQuery",	       "cuMemcpyHtoD",
				    "cuMemsetD8Async",	"cuLaunchKernel",      "cuMemFree"};

static struct sh_result R;

VE_TEST(nodriver_missing)
{
	for (int k = 0; k < 2; k++) {
		run_prog("/nonexistent/libcuda.so.1", k ? "1" : "0", &R);
		VE_CHECK_MSG(R.rc == 0, "VE_DISABLE=%d: exit status %d", k, R.rc);
		VE_CHECK(strstr(R.out, "done\n"));
		for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++)
			VE_CHECK_MSG(code_of(&R, calls[i]) == 3, "%s returned %d (want 3)", calls[i],
				     code_of(&R, calls[i]));
		VE_CHECK_MSG(sh_count(&R, "vitamin-e[") <= 2, "%d log lines",
			     sh_count(&R, "vitamin-e["));
	}
}

VE_TEST(nodriver_too_old)
{
	char old[PATH_MAX + 32];
	if (!sh_locate())
		VE_SKIP("libve.so is not built");
	snprintf(old, sizeof(old), "%s/fault/libcuda_old.so", sh_build);
	if (access(old, R_OK))
		VE_SKIP("the old-driver stub is not built");
	for (int k = 0; k < 2; k++) {
		run_prog(old, k ? "1" : "0", &R);
		VE_CHECK_MSG(R.rc == 0, "VE_DISABLE=%d: exit status %d", k, R.rc);
		VE_CHECK_EQ(code_of(&R, "cuCtxSynchronize"), 201);
		VE_CHECK_EQ(code_of(&R, "cuStreamSynchronize"), 201);
		for (size_t i = 2; i < sizeof(calls) / sizeof(calls[0]); i++)
			VE_CHECK_MSG(code_of(&R, calls[i]) == 500, "%s returned %d (want 500)",
				     calls[i], code_of(&R, calls[i]));
		VE_CHECK_MSG(sh_count(&R, "vitamin-e[") <= 3, "%d log lines",
			     sh_count(&R, "vitamin-e["));
	}
}
