/* SPDX-License-Identifier: MIT */
/* The embedded link: direct calls into a coordinator in this process. */
#include "dispatch/link.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static int e_client_add(void *c, uint32_t client, uint32_t flags)
{
	return ve_coord_client_add(c, client, flags);
}
static int e_client_remove(void *c, uint32_t client)
{
	return ve_coord_client_remove(c, client);
}
static int e_ready(void *c, const struct ve_ready_op *op)
{
	return ve_coord_ready(c, op);
}
static int e_schedule(void *c, struct ve_binding *out, int max)
{
	return ve_coord_schedule(c, out, max);
}
static int e_submit_failed(void *c, const struct ve_binding *b, int status)
{
	return ve_coord_submit_failed(c, b, status);
}
static int e_done(void *c, uint32_t client, uint16_t entry, uint64_t key, uint64_t ns)
{
	return ve_coord_done(c, client, entry, key, ns);
}
static int e_hint(void *c, const struct ve_hint *h)
{
	return ve_coord_hint(c, h);
}
static int e_pipeline(void *c, uint32_t client, uint16_t entry, const struct ve_ready_op *op,
		      bool may_contend)
{
	(void)op;
	return ve_coord_pipeline(c, client, entry, may_contend);
}
static void e_pipeline_cancel(void *c, uint32_t client, uint16_t entry, uint64_t tok)
{
	(void)tok;
	ve_coord_pipeline_cancel(c, client, entry);
}
static void e_set_now(void *c, uint64_t now)
{
	ve_coord_set_now(c, now);
}
static uint32_t e_pending(void *c)
{
	return ve_coord_view(c)->nready;
}

static int e_grant(void *c, uint32_t client, uint16_t *entry, uint16_t *lend, uint64_t *gen)
{
	if (!ve_coord_grant_mode(c))
		return -EOPNOTSUPP;
	*lend = ve_coord_lend(c, client);
	return ve_coord_grant(c, client, entry, gen);
}
static int e_report(void *c, uint32_t client, const struct ve_grant_report *r)
{
	return ve_coord_report(c, client, r);
}
static void e_tick(void *c)
{
	ve_coord_tick(c, false);
}
static bool e_contended(void *c, uint32_t client)
{
	return ve_coord_contended(c, client);
}
static uint32_t e_others(void *c, uint32_t client)
{
	return ve_coord_others(c, client);
}
static void e_observe(void *c, uint32_t client, uint16_t entry, uint64_t key, uint64_t ns)
{
	ve_coord_observe(c, client, entry, key, ns);
}
static int e_profile_save(void *c, const char *path)
{
	return ve_profile_save(ve_coord_profile(c), path, "");
}
static void e_info(void *c, struct ve_link_info *out)
{
	struct ve_coord_stats st;
	ve_coord_stats(c, &st);
	memset(out, 0, sizeof(*out));
	out->where = "embedded";
	snprintf(out->policy, sizeof(out->policy), "%s", ve_coord_policy_name(c));
	out->bindings = st.bindings;
	out->decide_ns = st.decide_ns;
}
static void e_destroy(void *c)
{
	ve_coord_destroy(c);
}

static const struct ve_link_ops embedded_ops = {
	.name = "embedded",
	.client_add = e_client_add,
	.client_remove = e_client_remove,
	.ready = e_ready,
	.schedule = e_schedule,
	.submit_failed = e_submit_failed,
	.done = e_done,
	.hint = e_hint,
	.pipeline = e_pipeline,
	.pipeline_cancel = e_pipeline_cancel,
	.set_now = e_set_now,
	.pending = e_pending,
	.grant = e_grant,
	.report = e_report,
	.tick = e_tick,
	.contended = e_contended,
	.others = e_others,
	.observe = e_observe,
	.profile_save = e_profile_save,
	.info = e_info,
	.destroy = e_destroy,
};

int ve_link_embedded_create(const struct ve_coord_config *cfg, struct ve_link *out, char *err,
			    size_t errlen)
{
	struct ve_coord *c;
	memset(out, 0, sizeof(*out));
	int rc = ve_coord_create(cfg, &c, err, errlen);
	if (rc)
		return rc;
	out->ops = &embedded_ops;
	out->impl = c;
	out->pool = ve_coord_pool(c);
	return 0;
}

struct ve_coord *ve_link_coord(const struct ve_link *l)
{
	return l && l->ops == &embedded_ops ? l->impl : NULL;
}

void ve_link_destroy(struct ve_link *l)
{
	if (l && l->ops && l->ops->destroy)
		l->ops->destroy(l->impl);
	if (l)
		memset(l, 0, sizeof(*l));
}

int ve_link_profile_save(const struct ve_link *l, const char *path)
{
	return l->ops->profile_save ? l->ops->profile_save(l->impl, path) : -ENOTSUP;
}

void ve_link_info(const struct ve_link *l, struct ve_link_info *out)
{
	memset(out, 0, sizeof(*out));
	if (l->ops->info)
		l->ops->info(l->impl, out);
}
