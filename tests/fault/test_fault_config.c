/* SPDX-License-Identifier: MIT */
/*
 * Configuration mistakes are loud, and VE_STRICT=1 makes every fallback
 * fatal (issue: a bad configuration failed open with exit 0; unwritable
 * VE_TRACE / profile paths lost the data at exit; misspelt VE_* variables
 * were ignored silently; long config lines were split; ve-run broke on a
 * path with a space):
 *   strict_bad_config     VE_LANES=abc: an error and a pass-through, or
 *                         status 78 under VE_STRICT=1 (ve-run --strict too)
 *   strict_no_driver      no driver: status 78 under VE_STRICT=1
 *   strict_ved_absent     VE_DAEMON=path with no ved: safe mode with a
 *                         warning, or status 78 under VE_STRICT=1
 *   unwritable_outputs    VE_TRACE / VE_PROFILE_OUT that cannot be written:
 *                         refused at start (shim: error + pass-through;
 *                         ve-run and ve-profile -o: status 2 before the
 *                         program runs)
 *   misspelt_knob         VE_WINDWO=3: a warning naming VE_WINDOW
 *   ved_config_lines      a commented-out line over 1022 bytes no longer
 *                         turns a key on: refused with its line number; a
 *                         profile line too long likewise; VE_VED_POLCY warns
 *   verun_space_in_path   ve-run and libve.so in a folder whose name has a
 *                         space still virtualize the program
 */
#include "../harness.h"
#include "fault_util.h"

static struct sh_result R;

static void run_streams(const char *const *env, bool green, struct sh_result *r)
{
	SH_PROG(path, "prog_shim_streams");
	const char *argv[] = {path, "chains", NULL};
	struct sh_opts o = {.shim = true, .expect_green = green, .seed = 9, .timeout_s = 30};
	for (int i = 0; env[i] && i < 11; i++)
		o.env[i] = env[i];
	sh_run(argv, &o, r);
}

VE_TEST(strict_bad_config)
{
	const char *loose[] = {"VE_LANES=abc", NULL};
	run_streams(loose, false, &R);
	bool said = strstr(R.out, "VE_LANES") && strstr(R.out, "pass-through");
	if (R.rc != 0 || !said)
		sh_dump(&R);
	VE_CHECK_EQ(R.rc, 0);
	VE_CHECK(said);
	const char *strict[] = {"VE_LANES=abc", "VE_STRICT=1", NULL};
	run_streams(strict, false, &R);
	if (R.rc != 78)
		sh_dump(&R);
	VE_CHECK_EQ(R.rc, 78);
	VE_CHECK(strstr(R.out, "VE_STRICT=1") && !strstr(R.out, "launch-log"));
	/* ve-run --strict sets it. */
	if (sh_sanitized())
		return; /* ve-run cannot preload libve.so behind a sanitizer runtime */
	SH_PROG(path, "prog_shim_streams");
	const char *argv[] = {sh_verun, "--strict", "--", path, "chains", NULL};
	struct sh_opts o = {.shim = true, .no_preload = true, .seed = 9, .timeout_s = 30,
			    .env = {"VE_LANES=abc"}};
	sh_run(argv, &o, &R);
	VE_CHECK_EQ(R.rc, 78);
}

VE_TEST(strict_no_driver)
{
	SH_PROG(path, "prog_fault_nodriver");
	const char *argv[] = {path, NULL};
	struct sh_opts o = {.shim = true, .timeout_s = 20,
			    .env = {"VE_LIBCUDA=/nonexistent/libcuda.so.1", "VE_STRICT=1"}};
	sh_run(argv, &o, &R);
	if (R.rc != 78)
		sh_dump(&R);
	VE_CHECK_EQ(R.rc, 78);
	VE_CHECK(!strstr(R.out, "done"));
}

VE_TEST(strict_ved_absent)
{
	char dir[200], env[260];
	snprintf(dir, sizeof(dir), "%s/noved", fu_scratch());
	mkdir(dir, 0700);
	snprintf(env, sizeof(env), "VE_DAEMON=%s/ved-0.sock", dir);
	const char *loose[] = {env, "VE_LOG_LEVEL=info", NULL};
	run_streams(loose, true, &R);
	bool said = strstr(R.out, "safe mode") != NULL;
	/* The start-up line too: the local policy, not "ved's". */
	bool line = strstr(R.out, "policy whole (safe mode)\n") != NULL;
	if (R.rc != 0 || !said || !line)
		sh_dump(&R);
	VE_CHECK_EQ(R.rc, 0);
	VE_CHECK_MSG(said, "no warning about safe mode");
	VE_CHECK_MSG(line, "the start-up line does not name safe mode's policy");
	const char *strict[] = {env, "VE_STRICT=1", NULL};
	run_streams(strict, true, &R);
	if (R.rc != 78)
		sh_dump(&R);
	VE_CHECK_EQ(R.rc, 78);
	VE_CHECK(!strstr(R.out, "launch-log"));
}

VE_TEST(unwritable_outputs)
{
	static const char *const vars[] = {"VE_TRACE=/nonexistent-dir/trace.json",
					   "VE_PROFILE_OUT=/dev/null/profile.txt"};
	for (int i = 0; i < 2; i++) {
		const char *env[] = {vars[i], NULL};
		run_streams(env, false, &R);
		bool said = strstr(R.out, "cannot write there") != NULL;
		if (R.rc != 0 || !said)
			sh_dump(&R);
		VE_CHECK_EQ(R.rc, 0);
		VE_CHECK_MSG(said, "%s: no error at start", vars[i]);
		const char *strict[] = {vars[i], "VE_STRICT=1", NULL};
		run_streams(strict, false, &R);
		VE_CHECK_EQ(R.rc, 78);
	}
	/* ve-run refuses before the program starts. */
	SH_PROG(path, "prog_shim_streams");
	const char *argv[] = {sh_verun, "--trace", "/nonexistent-dir/t.json", "--", path, "chains",
			      NULL};
	struct sh_opts o = {.shim = true, .no_preload = true, .seed = 9, .timeout_s = 30};
	sh_run(argv, &o, &R);
	if (R.rc != 2)
		sh_dump(&R);
	VE_CHECK_EQ(R.rc, 2);
	VE_CHECK(strstr(R.out, "cannot write there") && !strstr(R.out, "launch-log"));
	const char *argv2[] = {sh_verun, "--profile-out", "/dev/null/p.txt", path, "chains", NULL};
	sh_run(argv2, &o, &R);
	VE_CHECK_EQ(R.rc, 2);
	/* ve-profile -o likewise, before the (long) profiling run. */
	FU_BIN(prof, "ve-profile");
	const char *argv3[] = {prof, "-o", "/nonexistent-dir/app.profile", "--", path, "chains",
			       NULL};
	sh_run(argv3, &o, &R);
	if (R.rc != 2)
		sh_dump(&R);
	VE_CHECK_EQ(R.rc, 2);
	VE_CHECK(strstr(R.out, "cannot write there") && !strstr(R.out, "launch-log"));
}

VE_TEST(misspelt_knob)
{
	const char *env[] = {"VE_WINDWO=3", "VE_POLCY=tput", NULL};
	run_streams(env, true, &R);
	bool a = strstr(R.out, "VE_WINDWO") && strstr(R.out, "did you mean VE_WINDOW");
	bool b = strstr(R.out, "VE_POLCY") && strstr(R.out, "did you mean VE_POLICY");
	if (R.rc != 0 || !a || !b)
		sh_dump(&R);
	VE_CHECK_EQ(R.rc, 0);
	VE_CHECK(a && b);
}

VE_TEST(ved_config_lines)
{
	FU_BIN(ved, "ved");
	char conf[PATH_MAX], text[2048];
	int n = snprintf(text, sizeof(text), "log_level = warn\n# ");
	memset(text + n, 'x', 1100);
	snprintf(text + n + 1100, sizeof(text) - (size_t)n - 1100, " policy = chaos\n");
	fu_file(conf, sizeof(conf), "long.conf", text);
	const char *argv[] = {ved, "--config", conf, "--check-config", NULL};
	fu_run(argv, NULL, 10, &R);
	if (R.rc != 2 || !strstr(R.out, "long.conf:2: line longer"))
		sh_dump(&R);
	VE_CHECK_EQ(R.rc, 2);
	VE_CHECK(strstr(R.out, "long.conf:2: line longer"));
	/* Up to the limit a comment is a comment. */
	n = snprintf(text, sizeof(text), "# ");
	memset(text + n, 'y', 1000);
	snprintf(text + n + 1000, sizeof(text) - (size_t)n - 1000, "\npolicy = whole\n");
	fu_file(conf, sizeof(conf), "ok.conf", text);
	fu_run(argv, NULL, 10, &R);
	VE_CHECK_EQ(R.rc, 0);
	/* A profile line cut by the reader's buffer: refused too. */
	char prof[PATH_MAX], ptext[12000], pconf[PATH_MAX], ctext[PATH_MAX + 32];
	n = snprintf(ptext, sizeof(ptext), "vitamin-e-profile 1\n# ");
	memset(ptext + n, 'z', 9000);
	snprintf(ptext + n + 9000, sizeof(ptext) - (size_t)n - 9000, "\n");
	fu_file(prof, sizeof(prof), "long.profile", ptext);
	snprintf(ctext, sizeof(ctext), "profile = %s\n", prof);
	fu_file(pconf, sizeof(pconf), "prof.conf", ctext);
	const char *pargv[] = {ved, "--config", pconf, "--check-config", NULL};
	fu_run(pargv, NULL, 10, &R);
	VE_CHECK_EQ(R.rc, 2);
	VE_CHECK(strstr(R.out, "line longer"));
	/* A misspelt VE_VED_ variable warns with the key it meant. */
	const char *dargv[] = {ved, "--config", "/dev/null", "--check-config", NULL};
	const char *denv[] = {"VE_VED_POLCY=chaos", NULL};
	fu_run(dargv, denv, 10, &R);
	VE_CHECK_EQ(R.rc, 0);
	VE_CHECK(strstr(R.out, "did you mean VE_VED_POLICY"));
	/* The check says where the keys came from: the file and the environment. */
	const char *venv[] = {"VE_VED_POLICY=fixed", "VE_VED_TICK_US=300", NULL};
	fu_run(dargv, venv, 10, &R);
	VE_CHECK_EQ(R.rc, 0);
	VE_CHECK_MSG(strstr(R.out, "configuration ok (/dev/null, with 2 VE_VED_* variables)"), "%s",
		     R.out);
}

static int copy_file(const char *from, const char *to)
{
	FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
	int rc = a && b ? 0 : -1;
	char buf[65536];
	size_t n;
	while (!rc && (n = fread(buf, 1, sizeof(buf), a)) > 0)
		rc = fwrite(buf, 1, n, b) == n ? 0 : -1;
	if (a)
		fclose(a);
	if (b && fclose(b))
		rc = -1;
	return rc ? rc : chmod(to, 0755);
}

VE_TEST(verun_space_in_path)
{
	if (sh_sanitized())
		VE_SKIP("sanitizer build: ve-run cannot preload libve.so behind the sanitizer runtime");
	SH_PROG(path, "prog_shim_cudart_style");
	char dir[300], run[400], lib[400];
	snprintf(dir, sizeof(dir), "%s/dir with space", fu_scratch());
	mkdir(dir, 0755);
	snprintf(run, sizeof(run), "%s/ve-run", dir);
	snprintf(lib, sizeof(lib), "%s/libve.so", dir);
	VE_CHECK(copy_file(sh_verun, run) == 0 && copy_file(sh_libve, lib) == 0);
	const char *argv[] = {run, "--policy", "tput", "--", path, NULL};
	struct sh_opts o = {.shim = true, .no_preload = true, .expect_green = 1, .seed = 4};
	SH_RUN_OK(argv, &o);
}
