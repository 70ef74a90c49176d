/* SPDX-License-Identifier: MIT */
/* The per-thread-default-stream entry points (_ptsz/_ptds): hooks_body.h
 * compiled with cuda.h's per-thread names. See hooks_body.h. */
#define CUDA_API_PER_THREAD_DEFAULT_STREAM 1
#define VE_PTSZ 1
#include "shim/hooks_body.h"
