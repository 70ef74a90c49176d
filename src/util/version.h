/* SPDX-License-Identifier: MIT */
/*
 * What every tool prints for --version: the release (the VERSION file), the
 * commit it was built from (baked in at build time; "unknown" outside git),
 * the CUDA headers it was built against, and the driver found now.
 */
#ifndef VE_UTIL_VERSION_H
#define VE_UTIL_VERSION_H

#include <stdio.h>

/* "0.2.0" */
const char *ve_version(void);
/* libve.so's soname, "libve.so.0" */
const char *ve_version_soname(void);
/* "9f5ee2e1a2b3", "9f5ee2e1a2b3-dirty" or "unknown" */
const char *ve_version_commit(void);
/* CUDA_VERSION of the cuda.h the build saw (13000 = 13.0), 0 if none. */
int ve_version_cuda_headers(void);
/*
 * The driver this process would load: cuDriverGetVersion of libcuda.so.1
 * (or $VE_LIBCUDA) through dlopen, and the kernel module's version from
 * /proc/driver/nvidia/version. Writes "none (...why...)" where there is no
 * driver; never fails. Returns the driver API version, 0 if none.
 */
int ve_version_driver(char *buf, size_t len);
/* The --version text of tool: four lines on f. */
void ve_version_print(FILE *f, const char *tool);

#endif
