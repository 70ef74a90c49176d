/* SPDX-License-Identifier: MIT */
/*
 * Vitamin-E advisory API, for programs that want to help the scheduler.
 * Everything here is optional and never changes results: it only informs
 * policies (e.g. TPOT-First) about deadlines. Programs should resolve these
 * with dlsym(RTLD_DEFAULT, "ve_active") so they run unchanged without
 * Vitamin-E; under `ve-run` they come from libve.so.
 */
#ifndef VE_PUBLIC_H
#define VE_PUBLIC_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 1 if Vitamin-E virtualizes this process's CUDA work, 0 if it passes through. */
int ve_active(void);

/* Work launched from the calling thread from now on should complete within
 * 'ns' nanoseconds of this call (0 clears it). Latency-class clients only
 * (VE_CLASS=latency); a hint, not a guarantee. Returns 0 or -errno. */
int ve_advise_deadline(uint64_t ns);

/* A latency-class step (e.g. one decode token) starts now and should take
 * at most 'budget_ns': lets TPOT-First prepare SMs ahead of the step's first
 * kernel. Returns 0 or -errno. */
int ve_advise_step(uint64_t budget_ns);

#ifdef __cplusplus
}
#endif
#endif
