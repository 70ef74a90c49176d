/* SPDX-License-Identifier: MIT */
/* Public read-only view of the pool for policies (layout versioned by
 * VE_POLICY_ABI_VERSION). The definitions live with the pool module. */
#ifndef VE_PUBLIC_POOL_H
#define VE_PUBLIC_POOL_H
#include "pool/pool.h"
#endif
