/* SPDX-License-Identifier: MIT */
/*
 * The bind deadline (VE_WATCHDOG_MS; issue: a policy that always defers hung
 * the application forever and VE_WATCHDOG_MS did nothing). The policy here
 * (defer_policy.c) defers every op; every program must still finish, its
 * ops run on the whole GPU (the root entry, a green context of all SMs):
 *   watchdog_per_op      embedded coordinator, per-op binding
 *   watchdog_grant       embedded coordinator, grant mode (a grant() that
 *                        grants nothing): the dispatcher's wait queue
 *   watchdog_ved         ved's coordinator (per-op); ve-ctl status counts
 *                        the ops the deadline bound
 *   watchdog_stuck_lane  a kernel that runs longer than the deadline: its lane
 *                        is reported once with the dispatcher's state, and
 *                        the exit summary counts it
 *   watchdog_off_hangs   VE_WATCHDOG_MS=0 with that policy: nothing runs
 *                        (the program is killed at its time limit), which
 *                        is what the deadline is for
 */
#include "../harness.h"
#include "fault_util.h"

static char g_pol[PATH_MAX + 64], g_env_pol[PATH_MAX + 80];

static const char *policy(const char *name)
{
	sh_locate();
	snprintf(g_pol, sizeof(g_pol), "%s/fault/%s.so", sh_build, name);
	if (access(g_pol, R_OK))
		return NULL;
	snprintf(g_env_pol, sizeof(g_env_pol), "VE_POLICY=%s", g_pol);
	return g_pol;
}

static void run_deferred(const char *pol_name, const char *bind)
{
	SH_PROG(path, "prog_shim_streams");
	if (!policy(pol_name))
		VE_SKIP("the deferring policy is not built");
	const char *argv[] = {path, "chains", "events", NULL};
	struct sh_opts o = {.shim = true,
			    .expect_green = 1,
			    .policy = g_pol,
			    .seed = 5,
			    .timeout_s = 60,
			    .env = {"VE_WATCHDOG_MS=20", bind}};
	SH_RUN_OK(argv, &o);
}

VE_TEST(watchdog_per_op)
{
	run_deferred("defer_policy", "VE_BIND=op");
}

VE_TEST(watchdog_grant)
{
	run_deferred("nogrant_policy", "VE_BIND=grant");
}

VE_TEST(watchdog_ved)
{
	SH_PROG(path, "prog_shim_streams");
	if (!policy("defer_policy"))
		VE_SKIP("the deferring policy is not built");
	char vpol[PATH_MAX + 80];
	snprintf(vpol, sizeof(vpol), "VE_VED_POLICY=%s", g_pol);
	FU_VED("wd", vpol, "VE_VED_WATCHDOG_MS=20");
	char daemon[300];
	snprintf(daemon, sizeof(daemon), "VE_DAEMON=%s", fu_ved_sock);
	const char *argv[] = {path, "chains", NULL};
	struct sh_opts o = {.shim = true,
			    .expect_green = 1,
			    .seed = 6,
			    .timeout_s = 60,
			    .env = {daemon, "VE_BIND=op", "VE_LOG_LEVEL=info"}};
	SH_RUN_OK(argv, &o);
	const struct ve_ctl_status *m = fu_status(fu_ved_sock);
	VE_CHECK(m);
	printf("# ved: %llu bindings, %llu by the watchdog\n", (unsigned long long)m->bindings,
	       (unsigned long long)m->watchdog_binds);
	VE_CHECK(m->watchdog_binds > 0);
	VE_CHECK_EQ(m->watchdog_binds, m->bindings);
	int rc = fu_ved_stop();
	if (rc)
		fu_ved_dump_log();
	VE_CHECK_EQ(rc, 0);
}

VE_TEST(watchdog_stuck_lane)
{
	SH_PROG(path, "prog_fault_driver");
	const char *argv[] = {path, "slow", NULL};
	struct sh_opts o = {.shim = true,
			    .expect_green = 1,
			    .policy = "tput",
			    .seed = 8,
			    .timeout_s = 30,
			    .env = {"VE_WATCHDOG_MS=300"}};
	static struct sh_result r;
	sh_run(argv, &o, &r);
	bool dumped = strstr(r.out, "no completion for") && strstr(r.out, "dispatcher:");
	bool counted = strstr(r.out, "found 1 stuck lanes") != NULL;
	if (r.rc != 0 || !dumped || !counted)
		sh_dump(&r);
	VE_CHECK_EQ(r.rc, 0);
	VE_CHECK_MSG(dumped, "no dump of the stuck lane");
	VE_CHECK_MSG(counted, "the exit summary does not count it");
	VE_CHECK_EQ(sh_count(&r, "no completion for"), 1);
}

VE_TEST(watchdog_off_hangs)
{
	SH_PROG(path, "prog_shim_streams");
	if (!policy("defer_policy"))
		VE_SKIP("the deferring policy is not built");
	const char *argv[] = {path, "chains", NULL};
	struct sh_opts o = {.shim = true,
			    .expect_green = 1,
			    .policy = g_pol,
			    .seed = 5,
			    .timeout_s = 3,
			    .env = {"VE_WATCHDOG_MS=0", "VE_BIND=op"}};
	static struct sh_result r;
	sh_run(argv, &o, &r);
	VE_CHECK_MSG(r.rc == 124, "without the deadline the program ended (status %d)", r.rc);
}
