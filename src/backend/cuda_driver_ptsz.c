/* SPDX-License-Identifier: MIT */
/* Exported names of the per-thread-default-stream entry points: cuda_driver.h's
 * list expanded with cuda.h's per-thread macros (cuLaunchKernel_ptsz, ...). */
#define CUDA_API_PER_THREAD_DEFAULT_STREAM 1
#include "backend/cuda_driver.h"

#define VE_XSTR(x)  VE_XSTR2(x)
#define VE_XSTR2(x) #x
const char *const ve__real_ptsz_symbols[VE_REAL_COUNT] = {
#define VE_REAL_SYM(n) VE_XSTR(n),
	VE_REAL_FUNCS(VE_REAL_SYM)
#undef VE_REAL_SYM
};
