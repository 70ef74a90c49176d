/* SPDX-License-Identifier: MIT */
/* One device's stack from its configuration (runtime.h). */
#include "runtime/runtime.h"
#include "dispatch/trace.h"
#include "ipc/ctl.h"
#include "util/util.h"
#include "ved/client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct ve_runtime {
	enum ve_runtime_mode mode;
	struct ve_backend *b;
	struct ve_link link; /* owns the embedded coordinator or the ved client */
	struct ve_remote *remote;
	struct ve_dispatcher *d;
	struct ve_trace *trace;
};

enum ve_runtime_mode ve_runtime_choose(const struct ve_runtime_config *cfg, char *path,
				       size_t len, bool *start_safe, const char **why)
{
	const char *v = cfg->daemon;
	const char *dummy;
	struct stat st;
	if (!why)
		why = &dummy;
	*why = NULL;
	*start_safe = false;
	if (cfg->disabled) {
		*why = "VE_DISABLE=1";
		return VE_RUNTIME_PASSTHROUGH;
	}
	if (v && strcmp(v, "0") == 0) {
		*why = "VE_DAEMON=0";
		return VE_RUNTIME_EMBEDDED;
	}
	if (v && *v && strcmp(v, "1") != 0) {
		snprintf(path, len, "%s", v);
		*start_safe = true;
		return VE_RUNTIME_VED;
	}
	*why = "no ved for this device";
	if (ve_ctl_default_path(cfg->device, path, len))
		return VE_RUNTIME_EMBEDDED;
	if (v && strcmp(v, "1") == 0) {
		*start_safe = true;
		return VE_RUNTIME_VED;
	}
	return stat(path, &st) == 0 && S_ISSOCK(st.st_mode) ? VE_RUNTIME_VED : VE_RUNTIME_EMBEDDED;
}

/* The ved client as the link, or 0 and no link when ved is unusable and
 * was only found by itself (then embedded, logged). Under VE_STRICT=1 an
 * unusable or absent ved is an error instead (err filled in). */
static int ved_link(struct ve_runtime *rt, const struct ve_runtime_config *cfg,
		    const struct ve_gpu_info *gi, const char *path, bool start_safe, char *ferr,
		    size_t ferrlen)
{
	char err[512];
	struct ve_remote_config rc = {.socket_path = path,
				      .device = cfg->device,
				      .leaf_sms = gi->leaf_sms,
				      .nleaves = gi->nleaves,
				      .max_entries = cfg->pool_entries,
				      .sm_count = gi->sm_count,
				      .name = cfg->name,
				      .class_flags = cfg->class_flags,
				      .max_ops = cfg->max_ops,
				      .profile_path = cfg->profile_path,
				      .spin_ns = cfg->ved_spin_ns,
				      .heartbeat_timeout_ms = cfg->ved_heartbeat_timeout_ms,
				      .reconnect_ms = cfg->ved_reconnect_ms,
				      .start_safe = start_safe && !cfg->strict};
	int rcode = ve_remote_create(&rc, &rt->remote, err, sizeof(err));
	if (rcode) {
		rt->remote = NULL;
		if (cfg->strict) {
			snprintf(ferr, ferrlen, "VE_STRICT=1 and ved at %s is unusable: %s", path,
				 err);
			return rcode;
		}
		VE_WARN("coordinator: embedded, ved at %s is unusable: %s", path, err);
		return 0;
	}
	ve_remote_link(rt->remote, &rt->link);
	rt->mode = VE_RUNTIME_VED;
	return 0;
}

int ve_runtime_create(const struct ve_runtime_config *cfg, struct ve_backend *b,
		      struct ve_runtime **out, char *err, size_t errlen)
{
	char dummy[8], path[108];
	bool start_safe;
	const char *why;
	if (!err) {
		err = dummy;
		errlen = sizeof(dummy);
	}
	err[0] = 0;
	if (!cfg || !b || !out)
		return -EINVAL;
	enum ve_runtime_mode want = ve_runtime_choose(cfg, path, sizeof(path), &start_safe, &why);
	if (want == VE_RUNTIME_PASSTHROUGH) {
		snprintf(err, errlen, "%s: nothing to build (pass-through)", why);
		return -ECANCELED;
	}
	struct ve_runtime *rt = calloc(1, sizeof(*rt));
	if (!rt)
		return -ENOMEM;
	rt->b = b;
	struct ve_gpu_info gi;
	b->ops->info(b, &gi);
	struct ve_coord_config cc = {.leaf_sms = gi.leaf_sms,
				     .nleaves = gi.nleaves,
				     .max_entries = cfg->pool_entries,
				     .max_clients = cfg->max_clients ? cfg->max_clients : 1,
				     .policy = cfg->policy,
				     .profile_path = cfg->profile_path,
				     .sm_count = gi.sm_count,
				     .seed = cfg->seed,
				     .log_decisions = cfg->log_decisions,
				     .per_op = cfg->per_op,
				     .tick_ns = cfg->tick_ns,
				     .watchdog_ns = cfg->watchdog_ns};
	/* The embedded link, which ved replaces below: the configuration is
	 * checked the same way in every placement. */
	int rc = ve_link_embedded_create(&cc, &rt->link, err, errlen);
	if (rc)
		goto fail;
	rt->mode = VE_RUNTIME_EMBEDDED;
	if (want == VE_RUNTIME_VED) {
		struct ve_link embedded = rt->link;
		rc = ved_link(rt, cfg, &gi, path, start_safe, err, errlen);
		if (rt->mode == VE_RUNTIME_VED)
			ve_link_destroy(&embedded);
		if (rc)
			goto fail;
	} else {
		VE_INFO("coordinator: embedded (%s)", why);
	}
	/* Until its dispatcher runs, this process submits nothing: say so, so
	 * that SMs ved takes from it are free at once. Creating the pool below
	 * takes ~130 ms on the H200 (59 green contexts, 240 streams), and a
	 * process that joined first held a grant through it: a second process
	 * joining then waited 80-110 ms for SMs no one used. The dispatcher
	 * clears this before its first pass (dispatcher_main). */
	if (rt->link.ops->idle)
		rt->link.ops->idle(rt->link.impl, true);
	if (cfg->trace && ve_trace_create(0, &rt->trace))
		rt->trace = NULL;
	struct ve_dispatcher_config dc = cfg->dispatch;
	if (!dc.watchdog_ns)
		dc.watchdog_ns = cfg->watchdog_ns;
	dc.backend = b;
	dc.link = &rt->link;
	dc.trace = rt->trace;
	rc = ve_dispatcher_create(&dc, &rt->d);
	if (rc) {
		snprintf(err, errlen, VE_RUNTIME_POOL_ERR " (%s)", strerror(-rc));
		goto fail;
	}
	*out = rt;
	return 0;
fail:
	ve_runtime_destroy(rt);
	return rc;
}

void ve_runtime_destroy(struct ve_runtime *rt)
{
	if (!rt)
		return;
	/* The ved link's helper thread wakes the dispatcher (notify) until the
	 * link is destroyed: stop the dispatcher's thread, then the link (BYE to
	 * ved, its helper joined), and only then free the dispatcher. */
	if (rt->d)
		ve_dispatcher_stop(rt->d);
	ve_link_destroy(&rt->link); /* NULL when embedded */
	ve_dispatcher_destroy(rt->d);
	ve_trace_destroy(rt->trace);
	free(rt);
}

int ve_runtime_attach(struct ve_runtime *rt, struct ve_vctx *v, uint32_t client, uint32_t flags)
{
	ve_vctx_set_notify(v, ve_dispatcher_notify, rt->d);
	return ve_dispatcher_attach(rt->d, v, client, flags);
}

int ve_runtime_detach(struct ve_runtime *rt, uint32_t client)
{
	return ve_dispatcher_detach(rt->d, client);
}

int ve_runtime_start(struct ve_runtime *rt)
{
	/* Bindings from ved may arrive while the thread sleeps: the link wakes it.
	 * A dispatcher polled by its owner needs no waking. */
	if (rt->link.ops->set_notify)
		rt->link.ops->set_notify(rt->link.impl, ve_dispatcher_notify, rt->d);
	return ve_dispatcher_start(rt->d);
}

void ve_runtime_stop(struct ve_runtime *rt)
{
	ve_dispatcher_stop(rt->d);
}

enum ve_runtime_mode ve_runtime_mode(const struct ve_runtime *rt)
{
	return rt->mode;
}

struct ve_dispatcher *ve_runtime_dispatcher(struct ve_runtime *rt)
{
	return rt->d;
}

const struct ve_link *ve_runtime_link(const struct ve_runtime *rt)
{
	return &rt->link;
}

const struct ve_pool *ve_runtime_pool(const struct ve_runtime *rt)
{
	return rt->link.pool;
}

int ve_runtime_profile_save(struct ve_runtime *rt, const char *path)
{
	return ve_link_profile_save(&rt->link, path);
}

void ve_runtime_stats(struct ve_runtime *rt, struct ve_runtime_stats *st)
{
	memset(st, 0, sizeof(*st));
	ve_dispatcher_stats(rt->d, &st->dispatch);
	ve_link_info(&rt->link, &st->link);
}

struct ve_trace *ve_runtime_trace(struct ve_runtime *rt)
{
	return rt->trace;
}

int ve_runtime_trace_write(struct ve_runtime *rt, const char *path)
{
	return rt->trace ? ve_trace_write(rt->trace, path) : -ENODATA;
}

struct ve_coord *ve_runtime_coord(struct ve_runtime *rt)
{
	return ve_link_coord(&rt->link);
}

struct ve_remote *ve_runtime_remote(struct ve_runtime *rt)
{
	return rt->mode == VE_RUNTIME_VED ? rt->remote : NULL;
}
