/* SPDX-License-Identifier: MIT */
/*
 * A short soak (tests/soak/ve_soak.c) in every CI run: simulated-GPU and
 * fake-driver clients through one ved while clients and ved are killed,
 * stopped and restarted and rogue connections come and go. Every goal must
 * hold: no lease leaked, no client hung, no result lost or wrong, ved never
 * failing by itself. bench/results/soak.json is the long run.
 *   soak_short   15 s (longer under sanitizers: everything is slower)
 */
#include "../harness.h"
#include "fault_util.h"

static struct sh_result R;

VE_TEST(soak_short)
{
	FU_BIN(bin, "tests/ve_soak");
	/* Its logs next to the test's own log, kept for a look when it fails. */
	char out[PATH_MAX + 32], json[320];
	snprintf(out, sizeof(out), "%s/tests/soak_short-logs", sh_build);
	snprintf(json, sizeof(json), "%s/soak.json", fu_scratch());
	char seed[32];
	snprintf(seed, sizeof(seed), "%llu", (unsigned long long)ve_test_seed(11));
	printf("# VE_SEED=%s\n", seed);
	const char *argv[] = {bin,	     "--seconds", "15",	     "--sim-clients", "3",
			      "--fake-clients", "2",	     "--fault-ms", "300",	      "--seed",
			      seed,	     "--out",	   out,	     "--json",	      json,
			      "--quiet",	     NULL};
	fu_run(argv, NULL, sh_sanitized() ? 600 : 240, &R);
	printf("%s", R.out);
	VE_CHECK_MSG(R.rc == 0, "the soak's goals did not hold (status %d); logs in %s", R.rc, out);
	FILE *f = fopen(json, "r");
	VE_CHECK(f);
	char text[4096];
	size_t n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = 0;
	VE_CHECK(strstr(text, "\"leases_leaked\": 0,"));
	VE_CHECK(strstr(text, "\"clients_hung\": 0,"));
	VE_CHECK(strstr(text, "\"results_lost\": 0,"));
}
