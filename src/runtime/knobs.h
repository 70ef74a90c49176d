/* SPDX-License-Identifier: MIT */
/*
 * Every VE_* environment variable a process under Vitamin-E reads
 * (docs/configuration.md), so that a misspelt one is reported instead of
 * silently ignored. ved's own VE_VED_<KEY> variables are ved's to check
 * (src/ved/config.c). tests/knobs.sh checks that every VE_* name the sources
 * read is listed here.
 */
#ifndef VE_RUNTIME_KNOBS_H
#define VE_RUNTIME_KNOBS_H

#include <stddef.h>

extern const char *const ve_knobs[];	     /* the user's knobs */
extern const size_t ve_nknobs;
extern const char *const ve_knobs_tooling[]; /* read by tests, benchmarks and scripts */
extern const size_t ve_nknobs_tooling;

/* Warns once per unknown VE_* variable in the environment, naming the
 * closest knob. Returns how many it warned about. */
int ve_knobs_check_env(void);

#endif
