/* SPDX-License-Identifier: MIT */
#include "runtime/knobs.h"
#include "util/util.h"

#include <string.h>

extern char **environ;

const char *const ve_knobs[] = {
    "VE_DISABLE",     "VE_STRICT",	"VE_DEVICE",	  "VE_POLICY",	     "VE_CLASS",
    "VE_LEAF_SMS",    "VE_POOL_ENTRIES", "VE_LANES",	  "VE_COPY_LANES",   "VE_MAX_OPS",
    "VE_WINDOW",      "VE_PIPE_BUDGET",	"VE_BIND",	  "VE_TICK_US",	     "VE_AHEAD_US", "VE_LEND_US",
    "VE_MARK_EVERY",  "VE_MARK_LONG_TAIL", "VE_PHASE", "VE_SYNC_SPIN_US", "VE_POLL_US", "VE_IDLE_SPIN_US", "VE_WANT", "VE_WATCHDOG_MS", "VE_TRACE",	     "VE_PROFILE",
    "VE_PROFILE_OUT", "VE_LOG_LEVEL",	"VE_LOG_FILE",	  "VE_LIBCUDA",	     "VE_COMPLETION",
    "VE_LIB",	      "VE_DAEMON",	"VE_SOCKET_DIR",  "VE_GRAPHS",	     "VE_PRELOAD",
    "VE_BOUNCE_KB",   "VE_READ_SELF",  "VE_TPOT_MS",	"VE_EXIT_DRAIN_MS",
};
const size_t ve_nknobs = VE_ARRAY_SIZE(ve_knobs);

const char *const ve_knobs_tooling[] = {
    "VE_BUILD",	       "VE_SEED",	 "VE_TSAN",	  "VE_SRCDIR",	      "VE_TEST_TIMEOUT",
    "VE_PROP_N",       "VE_PROP_VERBOSE", "VE_FUZZ_N",	  "VE_FUZZ_S",	      "VE_MULTIDEV_N",
    "VE_DISPATCH_N",   "VE_POOL_STEPS",	 "VE_SIM_SPEED_OPS", "VE_RING_RECORDS", "VE_DT_POLICY",
    "VE_DT_LOG",       "VE_GPU_STRICT_PAGEABLE", "VE_WHOLE_KERNELS", "VE_OK",     "VE_SOAK_SECS", "VE_FAULT_KEEP",
};
const size_t ve_nknobs_tooling = VE_ARRAY_SIZE(ve_knobs_tooling);

static bool listed(const char *name, const char *const *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(name, list[i]) == 0)
			return true;
	return false;
}

int ve_knobs_check_env(void)
{
	int n = 0;
	for (char **e = environ; e && *e; e++) {
		if (strncmp(*e, "VE_", 3) != 0)
			continue;
		char name[64];
		size_t len = strcspn(*e, "=");
		if (len >= sizeof(name))
			len = sizeof(name) - 1;
		memcpy(name, *e, len);
		name[len] = 0;
		/* ved's keys are ved's to check; the benchmarks own VE_BENCH_*. */
		if (strncmp(name, "VE_VED_", 7) == 0 || strncmp(name, "VE_BENCH_", 9) == 0 ||
		    listed(name, ve_knobs, ve_nknobs) ||
		    listed(name, ve_knobs_tooling, ve_nknobs_tooling))
			continue;
		const char *near = ve__closest(name, ve_knobs, ve_nknobs, 3);
		if (near)
			VE_WARN("%s is not a Vitamin-E variable and is ignored; did you mean %s? "
				"(docs/configuration.md)",
				name, near);
		else
			VE_WARN("%s is not a Vitamin-E variable and is ignored (docs/configuration.md)",
				name);
		n++;
	}
	return n;
}
