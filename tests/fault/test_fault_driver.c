/* SPDX-License-Identifier: MIT */
/*
 * A driver that returns errors (injected by the fake driver): out of memory,
 * a launch refused at the call, a launch that faults on the device (sticky
 * illegal address, launch failure). prog_fault_driver checks what it sees;
 * each run natively and under the shim (two policies, embedded, and through
 * ved), bounded in time: an error must reach the program, never hang it.
 *   driver_out_of_memory   FAKECUDA_FAIL_ALLOC_AT
 *   driver_launch_refused  FAKECUDA_FAIL_LAUNCH_AT
 *   driver_device_fault    FAKECUDA_FAULT_LAUNCH_AT, codes 700 and 719
 */
#include "../harness.h"
#include "fault_util.h"

static void runs(const char *mode, const char *inject, const char *want)
{
	SH_PROG(path, "prog_fault_driver");
	const char *argv[] = {path, mode, NULL};
	char daemon[200] = "VE_DAEMON=0";
	for (int k = 0; k < 4; k++) {
		if (k == 3) {
			FU_VED("drv", "VE_VED_POLICY=tput");
			snprintf(daemon, sizeof(daemon), "VE_DAEMON=%s", fu_ved_sock);
		}
		struct sh_opts o = {.shim = k > 0,
				    .expect_green = k > 0,
				    .policy = k == 2 ? "chaos" : k ? "tput" : NULL,
				    .jitter = k == 2 ? 200 : 0,
				    .seed = 31 + (uint64_t)k,
				    .timeout_s = 30,
				    .env = {inject, want, "FAKECUDA_FAULT_CODE=719", daemon}};
		if (strstr(want, "700"))
			o.env[2] = "FAKECUDA_FAULT_CODE=700";
		SH_RUN_OK(argv, &o);
	}
	if (fu_ved_pid)
		VE_CHECK_EQ(fu_ved_stop(), 0);
}

VE_TEST(driver_out_of_memory)
{
	runs("alloc", "FAKECUDA_FAIL_ALLOC_AT=3", "VETEST_WANT=2");
}

VE_TEST(driver_launch_refused)
{
	runs("launch", "FAKECUDA_FAIL_LAUNCH_AT=7", "VETEST_WANT=701");
}

VE_TEST(driver_device_fault)
{
	runs("fault", "FAKECUDA_FAULT_LAUNCH_AT=5", "VETEST_WANT=719");
	runs("fault", "FAKECUDA_FAULT_LAUNCH_AT=9", "VETEST_WANT=700");
}
