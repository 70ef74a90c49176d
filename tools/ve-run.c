/* SPDX-License-Identifier: MIT */
/*
 * ve-run: run an unmodified CUDA program under Vitamin-E.
 *
 *   ve-run [options] [--] program [args...]
 *
 * Sets LD_PRELOAD to libve.so (found next to ve-run, or at $VE_LIB) and the
 * VE_* configuration from the options, then execs the program. Options map
 * one to one onto environment variables (docs/configuration.md); a variable
 * already set in the environment is kept unless an option overrides it.
 */
#include "coord/coord.h"
#include "util/version.h"
#include "util/util.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void usage(FILE *f)
{
	fprintf(f,
		"usage: ve-run [options] [--] program [args...]\n"
		"  Runs a CUDA program with every kernel launch late-bound to a green-context\n"
		"  partition chosen by a policy; results stay bitwise identical.\n"
		"options (each sets the VE_* variable in brackets):\n"
		"  --policy SPEC       scheduling policy: %s, or path/to/policy.so;\n"
		"                      SPEC may carry knobs: tput:min_gain=0.02 [VE_POLICY]\n"
		"  --class batch|latency  this program's class (latency = decode/inference) [VE_CLASS]\n"
		"  --trace FILE        write a Chrome/Perfetto trace at exit [VE_TRACE]\n"
		"  --profile FILE      load scaling profiles [VE_PROFILE]\n"
		"  --profile-out FILE  save refined profiles at exit [VE_PROFILE_OUT]\n"
		"  --pool-entries N    bound on pool entries, 0 = full hierarchy [VE_POOL_ENTRIES]\n"
		"  --device N          CUDA device to virtualize [VE_DEVICE]\n"
		"  --log LEVEL         error, warn, info, debug (one line per decision), trace\n"
		"                      [VE_LOG_LEVEL]\n"
		"  --disable           transparent pass-through [VE_DISABLE=1]\n"
		"  --strict            any fallback at start (bad configuration, no usable driver\n"
		"                      or pool, ved unusable or absent) stops the program with\n"
		"                      status 78 instead of running it un-virtualized [VE_STRICT=1]\n"
		"  --lib PATH          libve.so to preload [VE_LIB]\n"
		"  --version           release, commit, CUDA headers, driver found\n"
		"  -h, --help          this text\n",
		ve_policy_builtin_names());
}

static int exists(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* libve.so next to this executable (the build folder), or where make install
 * put it relative to bin/: ../lib or ../lib64, the development link or the
 * soname's (a runtime-only package may ship just libve.so.0). */
#define LIB_PATH_MAX (PATH_MAX + 64)

/* out must hold LIB_PATH_MAX bytes. */
static int find_lib(const char *argv0, char out[LIB_PATH_MAX])
{
	const char *env = getenv("VE_LIB");
	size_t len = LIB_PATH_MAX;
	if (env && *env) {
		snprintf(out, len, "%s", env);
		return exists(out) ? 0 : -ENOENT;
	}
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0) {
		snprintf(self, sizeof(self), "%s", argv0);
		n = (ssize_t)strlen(self);
	}
	self[n] = 0;
	char *slash = strrchr(self, '/');
	if (slash)
		*slash = 0;
	else
		snprintf(self, sizeof(self), ".");
	static const char *const where[] = {"",		"/../lib",	 "/../lib64",
					    "/../lib",	"/../lib64"};
	const char *const name[] = {"libve.so", "libve.so", "libve.so", ve_version_soname(),
				    ve_version_soname()};
	for (size_t k = 0; k < sizeof(where) / sizeof(where[0]); k++) {
		snprintf(out, len, "%s%s/%s", self, where[k], name[k]);
		if (exists(out))
			return 0;
	}
	return -ENOENT;
}

/* LD_PRELOAD separates its entries with spaces and colons, so a path with a
 * space cannot be listed there. The dynamic linker searches LD_LIBRARY_PATH
 * (separated by colons and semicolons only) for an entry without a slash:
 * then the folder goes there and the bare file name into LD_PRELOAD. */
static int preload(const char *lib)
{
	char entry[LIB_PATH_MAX], buf[3 * LIB_PATH_MAX];
	snprintf(entry, sizeof(entry), "%s", lib);
	if (strpbrk(lib, " \t")) {
		const char *slash = strrchr(lib, '/');
		char dir[LIB_PATH_MAX];
		snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - lib) : 1,
			 slash ? lib : ".");
		if (strpbrk(dir, ":;") || strpbrk(slash ? slash + 1 : lib, " \t:")) {
			fprintf(stderr,
				"ve-run: cannot preload %s: the dynamic linker cannot take a path "
				"with both spaces and ':' or ';' (move it, or set VE_LIB)\n",
				lib);
			return -1;
		}
		const char *old = getenv("LD_LIBRARY_PATH");
		snprintf(buf, sizeof(buf), "%s%s%s", dir, old && *old ? ":" : "", old ? old : "");
		setenv("LD_LIBRARY_PATH", buf, 1);
		snprintf(entry, sizeof(entry), "%s", slash ? slash + 1 : lib);
	} else if (strchr(lib, ':')) {
		fprintf(stderr, "ve-run: cannot preload %s: LD_PRELOAD cannot hold a ':' (move it, "
				"or set VE_LIB)\n",
			lib);
		return -1;
	}
	const char *old = getenv("LD_PRELOAD");
	if (old && *old)
		snprintf(buf, sizeof(buf), "%s:%s", entry, old);
	else
		snprintf(buf, sizeof(buf), "%s", entry);
	setenv("LD_PRELOAD", buf, 1);
	return 0;
}

int main(int argc, char **argv)
{
	int i = 1;
	const char *lib_opt = NULL;
	for (; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define OPT(flag, var)                                                                             \
	if (strcmp(a, flag) == 0) {                                                                \
		if (!v) {                                                                          \
			fprintf(stderr, "ve-run: %s needs a value\n", flag);                       \
			return 2;                                                                  \
		}                                                                                  \
		setenv(var, v, 1);                                                                 \
		i++;                                                                               \
		continue;                                                                          \
	}
		if (strcmp(a, "--") == 0) {
			i++;
			break;
		}
		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			usage(stdout);
			return 0;
		}
		if (strcmp(a, "--version") == 0) {
			ve_version_print(stdout, "ve-run");
			return 0;
		}
		if (strcmp(a, "--disable") == 0) {
			setenv("VE_DISABLE", "1", 1);
			continue;
		}
		if (strcmp(a, "--strict") == 0) {
			setenv("VE_STRICT", "1", 1);
			continue;
		}
		if (strcmp(a, "--lib") == 0 && v) {
			lib_opt = v;
			i++;
			continue;
		}
		OPT("--policy", "VE_POLICY")
		OPT("--class", "VE_CLASS")
		OPT("--trace", "VE_TRACE")
		OPT("--profile", "VE_PROFILE")
		OPT("--profile-out", "VE_PROFILE_OUT")
		OPT("--pool-entries", "VE_POOL_ENTRIES")
		OPT("--device", "VE_DEVICE")
		OPT("--log", "VE_LOG_LEVEL")
#undef OPT
		if (a[0] == '-') {
			fprintf(stderr, "ve-run: unknown option %s\n", a);
			usage(stderr);
			return 2;
		}
		break;
	}
	if (i >= argc) {
		usage(stderr);
		return 2;
	}
	/* Validate what can be validated here, so a typo fails before the
	 * program starts rather than as a pass-through notice inside it. */
	const char *pol = getenv("VE_POLICY");
	if (pol && *pol && !strchr(pol, '/')) {
		char name[128];
		snprintf(name, sizeof(name), "%s", pol);
		char *colon = strchr(name, ':');
		if (colon)
			*colon = 0;
		if (!ve_policy_builtin(name)) {
			fprintf(stderr, "ve-run: unknown policy '%s' (built-ins: %s)\n", name,
				ve_policy_builtin_names());
			return 2;
		}
	}
	const char *cls = getenv("VE_CLASS");
	if (cls && *cls && strcmp(cls, "batch") && strcmp(cls, "latency")) {
		fprintf(stderr, "ve-run: --class/VE_CLASS must be batch or latency, not '%s'\n", cls);
		return 2;
	}
	/* Files the program writes at exit: a path that cannot be written
	 * would lose the whole run's data at its end. */
	const char *outs[] = {"VE_TRACE", "VE_PROFILE_OUT"};
	for (size_t k = 0; k < sizeof(outs) / sizeof(outs[0]); k++) {
		const char *p = getenv(outs[k]);
		int wrc = p && *p ? ve__path_writable(p) : 0;
		if (wrc) {
			fprintf(stderr, "ve-run: %s=%s: cannot write there: %s\n", outs[k], p,
				strerror(-wrc));
			return 2;
		}
	}
	char lib[LIB_PATH_MAX];
	if (lib_opt)
		setenv("VE_LIB", lib_opt, 1);
	if (find_lib(argv[0], lib)) {
		fprintf(stderr, "ve-run: cannot find libve.so (next to ve-run, or set VE_LIB)\n");
		return 2;
	}
	if (preload(lib))
		return 2;
	execvp(argv[i], &argv[i]);
	fprintf(stderr, "ve-run: cannot run %s: %s\n", argv[i], strerror(errno));
	return 127;
}
