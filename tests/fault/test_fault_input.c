/* SPDX-License-Identifier: MIT */
/*
 * Hostile or careless input to the tools ends with a clear error, never a
 * spin (issue: ve-sim spun forever on 'loop sync', 'loop host=0' and
 * 'arrivals rate=1e12'; 've-ctl top -n 0', '-n -1', '-n abc' never ended):
 *   sim_body_no_time     loop bodies that take no virtual time: refused
 *   sim_arrivals_huge    arrival rates that would make too many requests
 *   sim_kernel_no_time   kernels of zero duration, absurd sizes: refused
 *   sim_progress_bound   a scenario too large stops at --max-ops with an error
 *   sim_bad_options      --seeds abc, --window -1, --horizon-ms 1e300
 *   sim_unwritable_out   --json/--trace into a place that cannot be written:
 *                        refused at start, before the run
 *   ctl_top_count        ve-ctl top -n 0 / -1 / abc: refused at once
 */
#include "../harness.h"
#include "fault_util.h"

static struct sh_result R;

/* ve-sim on a scenario text: must end within 30 s with status want, and
 * say 'needle' when given. */
static void sim(const char *text, const char *const *extra, int want, const char *needle)
{
	FU_BIN(bin, "ve-sim");
	char path[PATH_MAX];
	fu_file(path, sizeof(path), "scenario.txt", text);
	const char *argv[16] = {bin, path, "--quiet", "--policies", "whole"};
	int n = 5;
	for (int i = 0; extra && extra[i] && n < 15; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	fu_run(argv, NULL, 30, &R);
	if (R.rc != want || (needle && !strstr(R.out, needle)))
		sh_dump(&R);
	VE_CHECK_MSG(R.rc != 124, "ve-sim did not finish within 30 s");
	VE_CHECK_EQ(R.rc, want);
	if (needle)
		VE_CHECK_MSG(strstr(R.out, needle), "no '%s' in the output", needle);
}

#define KERNEL "kernel k blocks=264 wave_us=20\n"

VE_TEST(sim_body_no_time)
{
	sim(KERNEL "job a\n  loop sync\n", NULL, 2, "takes no virtual time");
	sim(KERNEL "job a\n  loop host=0\n", NULL, 2, "takes no virtual time");
	sim(KERNEL "job a\n  loop host=0 sync ( sync )*100\n", NULL, 2, "takes no virtual time");
	sim(KERNEL "job a latency\n  request sync\n  arrivals rate=100\n", NULL, 2,
	    "takes no virtual time");
	/* The same bodies with work in them run. */
	sim(KERNEL "horizon_ms 20\njob a\n  loop k sync host=0\n", NULL, 0, "aggregate");
}

VE_TEST(sim_arrivals_huge)
{
	sim(KERNEL "job a latency\n  request k\n  arrivals rate=1e12\n", NULL, 2, "rate");
	sim(KERNEL "horizon_ms 100000\njob a latency\n  request k\n  arrivals rate=1e6\n", NULL, 2,
	    "at most 1e7");
	sim(KERNEL "job a latency\n  request k\n  arrivals rate=1e6 burst=1e9\n", NULL, 2, "burst");
}

VE_TEST(sim_kernel_no_time)
{
	sim("kernel k blocks=264 wave_us=0\njob a\n  loop k\n", NULL, 2, "wave_us");
	sim("kernel k blocks=264 wave_us=1e-300\njob a\n  loop k\n", NULL, 2, "wave_us");
	sim("kernel k blocks=1e30 wave_us=5\njob a\n  loop k\n", NULL, 2, "blocks");
	sim(KERNEL "job a\n  loop k host=1e300\n", NULL, 2, "host");
	sim(KERNEL "horizon_ms 1e300\njob a\n  loop k\n", NULL, 2, "horizon_ms");
}

VE_TEST(sim_progress_bound)
{
	const char *extra[] = {"--max-ops", "20000", NULL};
	sim("kernel k blocks=1 wave_us=0.001 launch_us=0\ndispatch_us 0\nlaunch_us 0\njob a\n"
	    "  loop k\n",
	    extra, 1, "too large to simulate");
}

VE_TEST(sim_bad_options)
{
	const char *a[][3] = {{"--seeds", "abc", NULL},	     {"--seeds", "0", NULL},
			      {"--window", "-1", NULL},	     {"--pipe-budget", "x", NULL},
			      {"--horizon-ms", "1e300", NULL}, {"--max-ops", "0", NULL}};
	for (size_t i = 0; i < sizeof(a) / sizeof(a[0]); i++)
		sim(KERNEL "job a\n  loop k\n", a[i], 2, a[i][0]);
}

VE_TEST(sim_unwritable_out)
{
	const char *j[] = {"--json", "/nonexistent-dir/out.json", NULL};
	const char *t[] = {"--trace", "/dev/null/trace.json", NULL};
	sim(KERNEL "horizon_ms 10000\njob a\n  loop k\n", j, 2, "cannot write");
	VE_CHECK_MSG(R.secs < 5, "refused only after %.1f s (after the run?)", R.secs);
	sim(KERNEL "horizon_ms 10000\njob a\n  loop k\n", t, 2, "cannot write");
	VE_CHECK_MSG(R.secs < 5, "refused only after %.1f s (after the run?)", R.secs);
}

VE_TEST(ctl_top_count)
{
	FU_BIN(bin, "ve-ctl");
	const char *counts[] = {"0", "-1", "abc", "3x", "99999999999999999999"};
	char sock[PATH_MAX];
	snprintf(sock, sizeof(sock), "%s/none.sock", fu_scratch());
	for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
		const char *argv[] = {bin, "--socket", sock, "top", "-n", counts[i], NULL};
		fu_run(argv, NULL, 10, &R);
		if (R.rc != 2)
			sh_dump(&R);
		VE_CHECK_MSG(R.rc == 2, "top -n %s: status %d", counts[i], R.rc);
		VE_CHECK(strstr(R.out, "-n"));
	}
	/* A valid count against no ved: an error at once, not a wait. */
	const char *argv[] = {bin, "--socket", sock, "top", "-n", "1", NULL};
	fu_run(argv, NULL, 10, &R);
	VE_CHECK_EQ(R.rc, 1);
	VE_CHECK(strstr(R.out, "no ved"));
}
