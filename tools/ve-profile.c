/* SPDX-License-Identifier: MIT */
/*
 * ve-profile: build scaling profiles T(key, m) offline by running a program
 * under Vitamin-E with the `sweep` policy (one op at a time, each launch
 * configuration bound to every entry size in turn) and saving what the
 * coordinator measured.
 *
 *   ve-profile [-o FILE] [--reps N] [--] program [args...]
 *
 * Equivalent to: VE_POLICY=sweep:reps=N VE_WINDOW=0 VE_PROFILE_OUT=FILE
 * ve-run -- program. Use a program that repeats its kernels (a few training
 * steps): each configuration needs (number of sizes x reps) launches to be
 * measured at every size. Load the result with VE_PROFILE=FILE.
 */
#include "util/version.h"
#include "util/util.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f)
{
	fprintf(f, "usage: ve-profile [-o FILE] [--reps N] [--] program [args...]\n"
		   "  Runs the program one kernel at a time, each launch configuration on every\n"
		   "  pool entry size in turn, and writes the measured profile to FILE\n"
		   "  (default vitamin-e.profile); use it with VE_PROFILE=FILE.\n"
		   "options:\n"
		   "  -o FILE     where to write the profile\n"
		   "  --reps N    measurements per configuration and size (1..1000, default 1)\n"
		   "  --version   release, commit, CUDA headers, driver found\n"
		   "  -h, --help  this text\n");
}

int main(int argc, char **argv)
{
	const char *out = "vitamin-e.profile", *reps = "1";
	int i = 1;
	for (; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0) {
			i++;
			break;
		} else if ((strcmp(argv[i], "-o") == 0) && i + 1 < argc) {
			out = argv[++i];
		} else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
			reps = argv[++i];
			char *end;
			long r = strtol(reps, &end, 10);
			if (*end || r < 1 || r > 1000) {
				fprintf(stderr, "ve-profile: --reps must be 1..1000\n");
				return 2;
			}
		} else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			usage(stdout);
			return 0;
		} else if (strcmp(argv[i], "--version") == 0) {
			ve_version_print(stdout, "ve-profile");
			return 0;
		} else if (argv[i][0] == '-') {
			fprintf(stderr, "ve-profile: unknown option %s\n", argv[i]);
			usage(stderr);
			return 2;
		} else {
			break;
		}
	}
	if (i >= argc) {
		usage(stderr);
		return 2;
	}
	/* The profile is written when the program ends: a path that cannot be
	 * written would lose the whole run's measurements then. */
	int wrc = ve__path_writable(out);
	if (wrc) {
		fprintf(stderr, "ve-profile: -o %s: cannot write there: %s\n", out, strerror(-wrc));
		return 2;
	}
	char pol[64], self[PATH_MAX], verun[PATH_MAX + 16];
	snprintf(pol, sizeof(pol), "sweep:reps=%s", reps);
	setenv("VE_POLICY", pol, 1);
	setenv("VE_WINDOW", "0", 1);
	setenv("VE_PROFILE_OUT", out, 1);
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0) {
		fprintf(stderr, "ve-profile: cannot find my own path\n");
		return 2;
	}
	self[n] = 0;
	char *slash = strrchr(self, '/');
	if (slash)
		*slash = 0;
	snprintf(verun, sizeof(verun), "%s/ve-run", self);
	char **args = calloc((size_t)(argc - i + 3), sizeof(*args));
	if (!args)
		return 2;
	args[0] = verun;
	args[1] = "--";
	for (int k = i; k < argc; k++)
		args[2 + k - i] = argv[k];
	execv(verun, args);
	fprintf(stderr, "ve-profile: cannot run %s: %s\n", verun, strerror(errno));
	return 127;
}
