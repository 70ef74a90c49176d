/* SPDX-License-Identifier: MIT */
/*
 * Interposition: how programs reach the shim, and what it leaves alone.
 *   - prog_shim_cudart_style finds the driver the way libcudart does (dlsym of
 *     cuGetProcAddress_v2 and cuGetProcAddress, every entry point through
 *     them, legacy and per-thread flags): under libve.so every launch runs on
 *     a green context, natively none, results right under every policy;
 *   - calls the shim does not hook (cuDeviceGetName, cuMemGetInfo,
 *     cuFuncGetAttribute, cuStreamGetFlags, ...) reach the driver unchanged;
 *   - VE_DISABLE=1: a correct run on no green context and exactly one notice,
 *     for a program linked against libcuda and for a cudart-style one.
 * See test_shim_semantics.c for how to replay a run.
 */
#include "../harness.h"
#include "shim_harness.h"

VE_TEST(cudart_style_native)
{
	SH_PROG(path, "prog_shim_cudart_style");
	uint64_t s = ve_test_seed(0xc0da);
	printf("# VE_SEED=%llu\n", (unsigned long long)s);
	const char *argv[] = {path, NULL};
	for (int k = 0; k < 2; k++) {
		struct sh_opts o = {.jitter = k ? 500 : 0, .seed = ve_test_rand(&s) % 1000000 + 1};
		SH_RUN_OK(argv, &o);
	}
}

VE_TEST(cudart_style_shim)
{
	SH_PROG(path, "prog_shim_cudart_style");
	uint64_t s = ve_test_seed(0xc0db);
	printf("# VE_SEED=%llu\n", (unsigned long long)s);
	const char *argv[] = {path, NULL};
	static const unsigned jit[] = {0, 300, 1000, 100, 500};
	for (size_t k = 0; k < SH_NPOLICIES; k++) {
		struct sh_opts o = {.shim = true,
				    .expect_green = 1,
				    .policy = sh_policies[k],
				    .jitter = jit[k],
				    .seed = ve_test_rand(&s) % 1000000 + 1};
		SH_RUN_OK(argv, &o);
	}
}

/* The lookup functions handed out are the shim's, and per-thread pointers differ. */
VE_TEST(cudart_style_lookup_is_hooked)
{
	SH_PROG(path, "prog_shim_cudart_style");
	const char *argv[] = {path, NULL};
	static struct sh_result r;
	struct sh_opts o = {.shim = true, .expect_green = 1, .seed = 3};
	sh_run(argv, &o, &r);
	if (r.rc != 0)
		sh_dump(&r);
	VE_CHECK_EQ(r.rc, 0);
	VE_CHECK_MSG(strstr(r.out, "cuGetProcAddress_v2 from ") && strstr(r.out, "/libve.so\n"),
		     "dlsym(libcuda, cuGetProcAddress_v2) did not return the shim's");
	o = (struct sh_opts){.seed = 3};
	sh_run(argv, &o, &r);
	VE_CHECK_EQ(r.rc, 0);
	VE_CHECK(strstr(r.out, "/libve.so") == NULL);
}

/* Unhooked calls work unchanged under the shim (prog_shim_launch "passthrough" checks the
 * values and that each call reached the driver, through the fake's call counters). */
VE_TEST(passthrough_unhooked_calls)
{
	SH_PROG(path, "prog_shim_launch");
	const char *argv[] = {path, "passthrough", NULL};
	for (size_t k = 0; k < SH_NPOLICIES; k += 2) {
		struct sh_opts o = {
		    .shim = true, .expect_green = 1, .policy = sh_policies[k], .seed = 11};
		SH_RUN_OK(argv, &o);
	}
}

/* Runs a program under VE_DISABLE=1: correct, no green context, one notice. */
static void disabled_run(const char *prog, const char *test)
{
	SH_PROG(path, prog);
	const char *argv[] = {path, test, NULL};
	struct sh_opts o = {
	    .shim = true, .expect_green = 0, .jitter = 200, .seed = 5, .env = {"VE_DISABLE=1"}};
	SH_RUN_OK(argv, &o);
	static struct sh_result r;
	sh_run(argv, &o, &r);
	int notes = sh_count(&r, "vitamin-e[");
	int dis = sh_count(&r, "VE_DISABLE=1");
	if (notes != 1 || dis != 1)
		sh_dump(&r);
	VE_CHECK_MSG(notes == 1 && dis == 1,
		     "%s: %d vitamin-e lines, %d naming VE_DISABLE=1 (want exactly one)", prog,
		     notes, dis);
}

VE_TEST(disable_linked)
{
	disabled_run("prog_shim_streams", "chains");
}

VE_TEST(disable_cudart_style)
{
	disabled_run("prog_shim_cudart_style", NULL);
}

/* ve-run --disable says the same. */
VE_TEST(disable_ve_run)
{
	/* ve-run puts libve.so first in LD_PRELOAD; a sanitizer runtime must come first, and a
	 * process with libve.so ahead of it hangs in the runtime's start-up. */
	if (sh_sanitized())
		VE_SKIP(
		    "sanitizer build: ve-run cannot preload libve.so behind the sanitizer runtime");
	SH_PROG(path, "prog_shim_cudart_style");
	if (!sh_exists(sh_verun))
		VE_SKIP("ve-run is not built");
	const char *argv[] = {sh_verun, "--disable", "--", path, NULL};
	struct sh_opts o = {.shim = true, .no_preload = true, .expect_green = 0, .seed = 5};
	SH_RUN_OK(argv, &o);
}
