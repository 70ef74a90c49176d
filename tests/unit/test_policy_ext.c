/* SPDX-License-Identifier: MIT */
/*
 * An external policy built from include/ alone runs the simulator.
 *
 * tests/policy/ext_policy.c is compiled by the Makefile with -Iinclude and no
 * other include path into ext_policy.so next to this binary. The test loads
 * it the way a user does, with VE_POLICY=/path/ext_policy.so (set here when
 * the environment does not name one), builds a runtime on the sim with that
 * policy, runs a few streams of kernels, and checks that every kernel was
 * bound by the external policy (its own counters, read through dlsym) and
 * that the policy name the runtime reports is the external one.
 */
#include "../harness.h"
#include "sim_drive.h"

#include "backend/sim.h"
#include "core/vctx.h"
#include "runtime/runtime.h"
#include "util/util.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <unistd.h>

static bool find_so(char *path, size_t len)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return false;
	exe[n] = 0;
	char *s = strrchr(exe, '/');
	if (s)
		*s = 0;
	snprintf(path, len, "%.3900s/ext_policy.so", exe);
	return access(path, R_OK) == 0;
}

VE_TEST(external_policy_runs_the_sim)
{
	char so[PATH_MAX];
	if (!getenv("VE_POLICY")) {
		if (!find_so(so, sizeof(so)))
			VE_SKIP("ext_policy.so is not built next to this test");
		setenv("VE_POLICY", so, 1);
	}
	const char *policy = getenv("VE_POLICY");

	struct ve_sim_config sc;
	ve_sim_config_default(&sc);
	sc.seed = 7;
	struct ve_backend *b;
	VE_CHECK_EQ(ve_sim_create(&sc, &b), 0);
	char err[512] = "";
	struct ve_runtime_config rcfg = {.daemon = "0",
					 .policy = policy,
					 .max_clients = 2,
					 .dispatch = {.host_inline = true}};
	struct ve_runtime *rt;
	VE_CHECK_MSG(ve_runtime_create(&rcfg, b, &rt, err, sizeof(err)) == 0, "%s", err);
	VE_CHECK_EQ(ve_runtime_mode(rt), VE_RUNTIME_EMBEDDED);

	/* The coordinator loaded the object: our handle is the same one. */
	void *h = dlopen(policy, RTLD_NOW | RTLD_NOLOAD);
	VE_CHECK_MSG(h != NULL, "%s is not loaded", policy);
	unsigned long *bound = dlsym(h, "ext_policy_bound");
	unsigned long *selects = dlsym(h, "ext_policy_selects");
	VE_CHECK(bound && selects);
	unsigned long bound0 = *bound;

	struct ve_vctx *v[2];
	ve_stream s[2][3];
	int nkernels = 0;
	for (int c = 0; c < 2; c++) {
		struct ve_vctx_config vc = {.client_id = (uint32_t)c, .max_ops = 1024};
		VE_CHECK_EQ(ve_vctx_create(&vc, &v[c]), 0);
		VE_CHECK_EQ(ve_runtime_attach(rt, v[c], (uint32_t)c, 0), 0);
		for (int k = 0; k < 3; k++)
			VE_CHECK_EQ(ve_vctx_stream_create(v[c], VE_STREAM_NON_BLOCKING, 0, &s[c][k]),
				    0);
	}
	for (int i = 0; i < 60; i++) {
		int c = i % 2;
		struct ve_desc k = {.kind = VE_OP_KERNEL};
		k.u.k.fn = 0x100 + (uint64_t)(i % 5);
		k.u.k.grid = (struct ve_dim3){(uint32_t)(16 << (i % 4)), 1, 1};
		k.u.k.block = (struct ve_dim3){256, 1, 1};
		VE_CHECK_EQ(ve_vctx_submit(v[c], s[c][i % 3], &k, 0, NULL), 0);
		nkernels++;
	}
	struct ve_dispatcher *d = ve_runtime_dispatcher(rt);
	sim_drive_until_done(d, b, v, 2);
	for (int c = 0; c < 2; c++)
		VE_CHECK_EQ(ve_vctx_ctx_query(v[c]), 0);

	struct ve_runtime_stats st;
	ve_runtime_stats(rt, &st);
	printf("# %s: %lu bindings, %lu selects, %llu kernels submitted\n", st.link.policy,
	       *bound - bound0, *selects, (unsigned long long)st.dispatch.submitted);
	VE_CHECK_EQ(strcmp(st.link.policy, "ext_first_fit"), 0);
	VE_CHECK_EQ(*bound - bound0, (unsigned long)nkernels);
	VE_CHECK_EQ(st.link.bindings, (uint64_t)nkernels);
	dlclose(h);
	ve_runtime_destroy(rt);
	for (int c = 0; c < 2; c++)
		ve_vctx_destroy(v[c]);
	b->ops->destroy(b);
}
