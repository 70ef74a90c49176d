/* SPDX-License-Identifier: MIT */
/* Policy registry: built-ins by name, external policies from a .so by path. */
#include "policy/registry.h"
#include "policy/policies.h"
#include "util/util.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct ve_policy_ops *const builtins[] = {
	&ve_policy_tput, &ve_policy_tpot, &ve_policy_fixed, &ve_policy_whole, &ve_policy_chaos,
	&ve_policy_sweep,
};

const struct ve_policy_ops *ve_policy_builtin(const char *name)
{
	for (size_t i = 0; i < sizeof(builtins) / sizeof(builtins[0]); i++)
		if (strcmp(builtins[i]->name, name) == 0)
			return builtins[i];
	return NULL;
}

const char *ve_policy_builtin_names(void)
{
	return "tput, tpot, fixed, whole, chaos, sweep";
}

int ve_policy_resolve(const char *spec, const struct ve_policy_ops **ops, const char **args,
		      void **dl_handle, char *err, size_t errlen)
{
	*dl_handle = NULL;
	*args = "";
	if (!spec || !*spec) {
		snprintf(err, errlen, "empty policy name (built-ins: %s)", ve_policy_builtin_names());
		return -EINVAL;
	}
	const char *colon = strchr(spec, ':');
	size_t nlen = colon ? (size_t)(colon - spec) : strlen(spec);
	char name[256];
	if (nlen >= sizeof(name)) {
		snprintf(err, errlen, "policy name too long");
		return -EINVAL;
	}
	memcpy(name, spec, nlen);
	name[nlen] = 0;
	if (colon)
		*args = colon + 1;
	if (!strchr(name, '/') && !strstr(name, ".so")) {
		*ops = ve_policy_builtin(name);
		if (!*ops) {
			snprintf(err, errlen, "unknown policy '%s' (built-ins: %s; or a path to a .so)",
				 name, ve_policy_builtin_names());
			return -ENOENT;
		}
		return 0;
	}
	void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(err, errlen, "cannot load policy %s: %s", name, dlerror());
		return -ENOENT;
	}
	ve_policy_entry_fn entry;
	*(void **)&entry = dlsym(h, "ve_policy_entry");
	if (!entry) {
		snprintf(err, errlen, "policy %s does not export ve_policy_entry()", name);
		dlclose(h);
		return -ENOENT;
	}
	const struct ve_policy_ops *p = entry();
	/* ABI 2 only appended grant(): a policy built for 1 still works, op by
	 * op (the coordinator copies the members that version has). */
	if (!p || p->abi_version < 1 || p->abi_version > VE_POLICY_ABI_VERSION) {
		snprintf(err, errlen,
			 "policy %s was built for policy ABI version %u; this Vitamin-E speaks "
			 "version %u: rebuild it against this ve_policy.h",
			 name, p ? p->abi_version : 0, VE_POLICY_ABI_VERSION);
		dlclose(h);
		return -EPROTO;
	}
	if (!p->name || !p->pick || !p->select) {
		snprintf(err, errlen, "policy %s lacks a name, pick or select", name);
		dlclose(h);
		return -EINVAL;
	}
	*ops = p;
	*dl_handle = h;
	return 0;
}

/* Per thread: policies are created on the thread that resolves them, and
 * two coordinators may be created at once (tests, several devices). */
static _Thread_local char args_error[96];

const char *ve_policy_args_error(void)
{
	return args_error;
}

void ve_policy_args_error_clear(void)
{
	args_error[0] = 0;
}

int ve__policy_parse_args(const char *args, int (*fn)(const char *k, const char *v, void *arg),
			  void *arg)
{
	if (!args || !*args)
		return 0;
	char buf[512];
	if (strlen(args) >= sizeof(buf)) {
		snprintf(args_error, sizeof(args_error), "%zu characters, at most %zu",
			 strlen(args), sizeof(buf) - 1);
		return -E2BIG;
	}
	strcpy(buf, args);
	char *save = NULL;
	const char *seen[64]; /* keys so far: one given twice is a mistake, not an override */
	uint32_t nseen = 0;
	for (char *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(kv, '=');
		if (!eq) {
			snprintf(args_error, sizeof(args_error), "%s (not key=value)", kv);
			return -EINVAL;
		}
		*eq = 0;
		for (uint32_t i = 0; i < nseen; i++)
			if (strcmp(seen[i], kv) == 0) {
				snprintf(args_error, sizeof(args_error), "%s (given twice)", kv);
				return -EINVAL;
			}
		if (nseen < VE_ARRAY_SIZE(seen))
			seen[nseen++] = kv;
		int rc = fn(kv, eq + 1, arg);
		if (rc) {
			snprintf(args_error, sizeof(args_error), "%s=%s", kv, eq + 1);
			return rc;
		}
	}
	return 0;
}

int32_t ve__policy_oldest(const struct ve_policy_view *v)
{
	int32_t best = -1;
	uint64_t age = UINT64_MAX;
	for (uint32_t c = 0; c < v->nclients; c++) {
		uint32_t h = v->clients[c].head;
		if (h != VE_READY_NIL && v->ops[h].ready_ns < age) {
			age = v->ops[h].ready_ns;
			best = (int32_t)h;
		}
	}
	return best;
}
