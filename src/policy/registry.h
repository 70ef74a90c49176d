/* SPDX-License-Identifier: MIT */
/*
 * How a policy specification becomes a policy table: the built-ins by name,
 * or an external policy from a shared object by path (docs/policies.md). The
 * coordinator resolves VE_POLICY here once, at creation; nothing else loads
 * policies.
 */
#ifndef VE_POLICY_REGISTRY_H
#define VE_POLICY_REGISTRY_H

#include "ve/ve_policy.h"

#include <stddef.h>

const struct ve_policy_ops *ve_policy_builtin(const char *name);
/* name[:args] of a built-in, or a path to a .so exporting ve_policy_entry. */
int ve_policy_resolve(const char *spec, const struct ve_policy_ops **ops, const char **args,
		      void **dl_handle, char *err, size_t errlen);
/* Comma-separated built-in names (for --help). */
const char *ve_policy_builtin_names(void);
/* The key=value (or the text without '=') that made the calling thread's
 * last built-in policy init fail, "" if none: the coordinator names it in
 * its error. ve_policy_args_error_clear() before an init. */
const char *ve_policy_args_error(void);
void ve_policy_args_error_clear(void);

#endif
