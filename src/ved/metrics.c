/* SPDX-License-Identifier: MIT */
/* ved's metrics and its own trace spans (metrics.h; docs/operations.md, "Metrics"). */
#include "ved/metrics.h"
#include "pool/pool.h"
#include "util/util.h"
#include "util/version.h"

#include <errno.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define OBSERVE_NS 100000ull	/* a pass over the clients at least this often */
#define RATE_NS	   1000000000ull /* ve_binds_per_second over this window */
#define NONE16	   VE_POOL_NONE

struct mcl {
	bool on;
	uint64_t joined_ns;
	int32_t pid;
	uint16_t grant;	       /* granted entry, NONE16 */
	uint64_t grant_gen;
	uint64_t grant_since;
	uint64_t lease_leaves; /* leaves of the entries it holds a lease on */
	uint32_t leases;
	uint32_t sms; /* SMs of (grant | leases) */
	double sm_s;  /* integral of sms over time */
	uint8_t why;  /* the policy's reason for its grant (VE_WHY_*) */
	double why_s[VE_WHY_COUNT]; /* time spent with each */
};

struct ment {
	uint8_t state;
	int32_t holder;
	int32_t reserve_for;
	uint64_t lease_since, reserve_since;
};

struct crow {
	uint32_t id;
	char labels[512]; /* gpu="0",client="1",pid="..",user="..",class="..",name=".." */
	struct ve_serve_client_info ci;
	struct ve_serve_waits w;
	const struct ved_metrics_client *dc;
	double start_s;
};

struct ved_metrics {
	bool have_pool;
	uint64_t last_ns, last_clients_ns, last_tr;
	uint64_t last_joined, last_left; /* the server's counters at the last pass */
	struct mcl cl[VE_COORD_MAX_CLIENTS];
	struct ment e[VE_POOL_MAX_ENTRIES];
	uint32_t busy_sms;
	double busy_sm_s;
	uint64_t rate_ns, rate_binds;
	double binds_per_s;
	/* uid -> user name, looked up once each (a scrape, not the loop) */
	struct {
		uint32_t uid;
		char name[32];
	} users[64];
	uint32_t nusers;
	struct crow rows[VE_COORD_MAX_CLIENTS]; /* render's scratch */
};

int ved_metrics_create(struct ved_metrics **out)
{
	struct ved_metrics *m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	for (uint32_t i = 0; i < VE_COORD_MAX_CLIENTS; i++)
		m->cl[i].grant = NONE16;
	*out = m;
	return 0;
}

void ved_metrics_destroy(struct ved_metrics *m)
{
	free(m);
}

/* ------------------------------------------------------------------ observing */

static uint32_t sms_of(const struct ve_pool *p, uint64_t leaves)
{
	uint32_t s = 0;
	for (uint32_t i = 0; i < p->nleaves; i++)
		if (leaves & (1ull << i))
			s += p->leaf_sms[i];
	return s;
}

static uint64_t leaves_of(const struct ve_pool *p, uint16_t e)
{
	return e < p->nentries ? p->e[e].leaves : 0;
}

static void span(struct ve_serve *srv, const struct ve_pool *p, uint8_t kind, int32_t client,
		 int32_t pid, uint16_t entry, uint64_t t0, uint64_t t1)
{
	struct ve_ctl_tev ev = {.t0_ns = t0,
				.t1_ns = t1 >= t0 ? t1 : t0,
				.client = client,
				.pid = pid,
				.entry = entry,
				.sms = entry < p->nentries ? (uint16_t)p->e[entry].sms : 0,
				.kind = kind};
	ve_serve_trace_add(srv, &ev);
}

static int32_t pid_of(const struct ved_metrics *m, int32_t client)
{
	return client >= 0 && client < VE_COORD_MAX_CLIENTS ? m->cl[client].pid : 0;
}

static void integrate(struct ved_metrics *m, uint64_t now)
{
	if (m->last_ns && now > m->last_ns) {
		double dt = (double)(now - m->last_ns) / 1e9;
		for (uint32_t i = 0; i < VE_COORD_MAX_CLIENTS; i++)
			if (m->cl[i].on) {
				m->cl[i].sm_s += dt * m->cl[i].sms;
				m->cl[i].why_s[m->cl[i].why < VE_WHY_COUNT ? m->cl[i].why : 0] += dt;
			}
		m->busy_sm_s += dt * m->busy_sms;
	}
	m->last_ns = now;
}

/* Lease and reservation changes since the last pass, as spans. */
static void entries_pass(struct ved_metrics *m, struct ve_serve *srv, const struct ve_pool *p,
			 uint64_t now)
{
	for (uint32_t i = 0; i < VE_COORD_MAX_CLIENTS; i++) {
		m->cl[i].lease_leaves = 0;
		m->cl[i].leases = 0;
	}
	for (uint32_t k = 0; k < p->nentries; k++) {
		const struct ve_pool_entry *pe = &p->e[k];
		struct ment *me = &m->e[k];
		bool held = pe->state == VE_ENTRY_LEASED || pe->state == VE_ENTRY_DRAINING;
		bool was = me->state == VE_ENTRY_LEASED || me->state == VE_ENTRY_DRAINING;
		if (was && (!held || pe->holder != me->holder))
			span(srv, p, VE_TEV_LEASE, me->holder, pid_of(m, me->holder), (uint16_t)k,
			     me->lease_since, now);
		if (held && (!was || pe->holder != me->holder))
			me->lease_since = now;
		if (me->reserve_for >= 0 && pe->reserve_for != me->reserve_for)
			span(srv, p, VE_TEV_RESERVE, me->reserve_for, pid_of(m, me->reserve_for),
			     (uint16_t)k, me->reserve_since, now);
		if (pe->reserve_for >= 0 && pe->reserve_for != me->reserve_for)
			me->reserve_since = now;
		me->state = pe->state;
		me->holder = held ? pe->holder : VE_HOLDER_NONE;
		me->reserve_for = pe->reserve_for;
		if (!held)
			continue;
		if (pe->holder >= 0 && pe->holder < VE_COORD_MAX_CLIENTS) {
			m->cl[pe->holder].lease_leaves |= pe->leaves;
			m->cl[pe->holder].leases++;
		} else if (pe->holder == VE_HOLDER_SHARED) {
			for (unsigned s = 0; s < p->nsharers[k]; s++) {
				int32_t c = p->sharers[k][s];
				if (c >= 0 && c < VE_COORD_MAX_CLIENTS) {
					m->cl[c].lease_leaves |= pe->leaves;
					m->cl[c].leases++;
				}
			}
		}
	}
	m->last_tr = p->transitions;
}

/* Arrivals, departures and grant changes since the last pass. Looking a
 * client up costs a copy of its record: done only when some client came or
 * went (the server's counters say so); otherwise only the grants of those
 * known are read. */
static void clients_pass(struct ved_metrics *m, struct ve_serve *srv, const struct ve_pool *p,
			 uint64_t now)
{
	struct ve_coord *co = ve_serve_coord(srv);
	struct ve_serve_stats ss;
	ve_serve_stats(srv, &ss);
	bool churn = ss.joined != m->last_joined || ss.left != m->last_left;
	m->last_joined = ss.joined;
	m->last_left = ss.left;
	for (uint32_t i = 0; i < VE_COORD_MAX_CLIENTS; i++) {
		struct mcl *c = &m->cl[i];
		if (churn) {
			struct ve_serve_client_info ci;
			ve_serve_client_info(srv, i, &ci);
			bool same = c->on && ci.active && ci.joined_ns == c->joined_ns;
			if (c->on && !same) {
				/* Gone (or its id reused): its grant span ends here. */
				if (c->grant != NONE16)
					span(srv, p, VE_TEV_GRANT, (int32_t)i, c->pid, c->grant,
					     c->grant_since, now);
				*c = (struct mcl){.grant = NONE16};
			}
			if (ci.active && !c->on)
				*c = (struct mcl){.on = true,
						  .joined_ns = ci.joined_ns,
						  .pid = ci.pid,
						  .grant = NONE16};
		}
		if (!c->on)
			continue;
		uint16_t e = NONE16;
		uint64_t gen = 0;
		if (ve_coord_grant(co, i, &e, &gen) == 0 && e != c->grant) {
			if (c->grant != NONE16)
				span(srv, p, VE_TEV_GRANT, (int32_t)i, c->pid, c->grant,
				     c->grant_since, now);
			c->grant = e;
			c->grant_since = now;
		}
		c->grant_gen = gen;
		c->why = ve_coord_why(co, i);
	}
	m->last_clients_ns = now;
}

static void recount(struct ved_metrics *m, const struct ve_pool *p)
{
	uint64_t busy = p->busy;
	for (uint32_t i = 0; i < VE_COORD_MAX_CLIENTS; i++) {
		struct mcl *c = &m->cl[i];
		if (!c->on) {
			c->sms = 0;
			continue;
		}
		uint64_t l = leaves_of(p, c->grant) | c->lease_leaves;
		c->sms = sms_of(p, l);
		busy |= l;
	}
	m->busy_sms = sms_of(p, busy);
}

void ved_metrics_observe(struct ved_metrics *m, struct ve_serve *srv, uint64_t now)
{
	if (!srv)
		return;
	const struct ve_pool *p = ve_serve_pool(srv);
	bool pool_changed = !m->have_pool || p->transitions != m->last_tr;
	bool timer = now - m->last_clients_ns >= OBSERVE_NS;
	if (!pool_changed && !timer)
		return;
	integrate(m, now);
	if (!m->have_pool) {
		for (uint32_t k = 0; k < VE_POOL_MAX_ENTRIES; k++)
			m->e[k] = (struct ment){.holder = VE_HOLDER_NONE,
						.reserve_for = VE_HOLDER_NONE};
		m->have_pool = true;
		m->rate_ns = now;
	}
	if (timer)
		clients_pass(m, srv, p, now);
	if (pool_changed || timer)
		entries_pass(m, srv, p, now);
	recount(m, p);
	if (now - m->rate_ns >= RATE_NS) {
		struct ve_coord_stats cs;
		ve_coord_stats(ve_serve_coord(srv), &cs);
		m->binds_per_s = (double)(cs.bindings - m->rate_binds) * 1e9 / (double)(now - m->rate_ns);
		m->rate_binds = cs.bindings;
		m->rate_ns = now;
	}
}

void ved_metrics_client_sms(const struct ved_metrics *m, uint32_t id, uint16_t *grant,
			    uint32_t *sms)
{
	*grant = NONE16;
	*sms = 0;
	if (id < VE_COORD_MAX_CLIENTS && m->cl[id].on) {
		*grant = m->cl[id].grant;
		*sms = m->cl[id].sms;
	}
}

uint32_t ved_metrics_open_spans(const struct ved_metrics *m, const struct ve_serve *srv,
				struct ve_ctl_tev *out, uint32_t max, uint64_t now)
{
	if (!srv || !m->have_pool)
		return 0;
	const struct ve_pool *p = ve_serve_pool(srv);
	uint32_t n = 0;
#define OPEN(kind_, client_, entry_, since_)                                                        \
	do {                                                                                       \
		if (n < max)                                                                       \
			out[n++] = (struct ve_ctl_tev){                                            \
			    .t0_ns = (since_),                                                     \
			    .t1_ns = now > (since_) ? now : (since_),                              \
			    .client = (client_),                                                   \
			    .pid = pid_of(m, (client_)),                                           \
			    .entry = (entry_),                                                     \
			    .sms = (entry_) < p->nentries ? (uint16_t)p->e[(entry_)].sms : 0,      \
			    .kind = (kind_),                                                       \
			    .flags = VE_TEV_F_OPEN};                                               \
	} while (0)
	for (uint32_t i = 0; i < VE_COORD_MAX_CLIENTS; i++)
		if (m->cl[i].on && m->cl[i].grant != NONE16)
			OPEN(VE_TEV_GRANT, (int32_t)i, m->cl[i].grant, m->cl[i].grant_since);
	for (uint32_t k = 0; k < p->nentries; k++) {
		const struct ment *me = &m->e[k];
		if (me->state == VE_ENTRY_LEASED || me->state == VE_ENTRY_DRAINING)
			OPEN(VE_TEV_LEASE, me->holder, (uint16_t)k, me->lease_since);
		if (me->reserve_for >= 0)
			OPEN(VE_TEV_RESERVE, me->reserve_for, (uint16_t)k, me->reserve_since);
	}
#undef OPEN
	return n;
}

/* ------------------------------------------------------------------ rendering */

static const char *user_of(struct ved_metrics *m, uint32_t uid)
{
	for (uint32_t i = 0; i < m->nusers; i++)
		if (m->users[i].uid == uid)
			return m->users[i].name;
	uint32_t k = m->nusers < VE_ARRAY_SIZE(m->users) ? m->nusers++ : uid % VE_ARRAY_SIZE(m->users);
	m->users[k].uid = uid;
	struct passwd pw, *res = NULL;
	char buf[1024];
	if (getpwuid_r((uid_t)uid, &pw, buf, sizeof(buf), &res) == 0 && res && res->pw_name)
		snprintf(m->users[k].name, sizeof(m->users[k].name), "%s", res->pw_name);
	else
		snprintf(m->users[k].name, sizeof(m->users[k].name), "%u", uid);
	return m->users[k].name;
}

/* A label value: backslash, double quote and newline escaped (the format's rules). */
static void label_value(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			fprintf(f, "\\%c", *s);
		else if (*s == '\n')
			fputs("\\n", f);
		else
			fputc(*s, f);
	}
}

static void family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A number as the format wants it (no exponent surprises for integers). */
static void value(FILE *f, double v)
{
	if (v == (double)(int64_t)v && v > -1e15 && v < 1e15)
		fprintf(f, " %lld\n", (long long)v);
	else
		fprintf(f, " %.15g\n", v);
}


static void sample(FILE *f, const char *name, const char *labels, const char *extra, double v)
{
	fprintf(f, "%s{%s%s%s}", name, labels, extra && *extra ? "," : "", extra ? extra : "");
	value(f, v);
}

int ved_metrics_render(struct ved_metrics *m, struct ve_serve *srv,
		       const struct ved_metrics_daemon *dm, FILE *f)
{
	uint64_t mono = ve__now_ns();
	ved_metrics_observe(m, srv, mono);
	integrate(m, mono);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	double unix_now = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
	char gpu[32];
	snprintf(gpu, sizeof(gpu), "gpu=\"%d\"", dm->device);

	/* ---- ved */
	family(f, "ve_build_info", "gauge",
	       "Vitamin-E release, commit and CUDA headers ved was built with (always 1).");
	fprintf(f, "ve_build_info{%s,version=\"", gpu);
	label_value(f, ve_version());
	fprintf(f, "\",commit=\"");
	label_value(f, ve_version_commit());
	fprintf(f, "\",cuda_headers=\"%d.%d\"} 1\n", ve_version_cuda_headers() / 1000,
		ve_version_cuda_headers() % 1000 / 10);
	family(f, "ve_ved_start_time_seconds", "gauge", "When ved started, in seconds since the epoch.");
	sample(f, "ve_ved_start_time_seconds", gpu, NULL, (double)dm->start_unix_ns / 1e9);
	family(f, "ve_ved_draining", "gauge",
	       "1 while ved is draining (admits no new client; ve-ctl drain), else 0.");
	sample(f, "ve_ved_draining", gpu, NULL, dm->draining);
	family(f, "ve_ved_reloads_total", "counter",
	       "Configuration reloads (SIGHUP or ve-ctl reload) that succeeded.");
	sample(f, "ve_ved_reloads_total", gpu, NULL, (double)dm->reloads);
	family(f, "ve_ved_reload_failures_total", "counter",
	       "Configuration reloads refused (the running configuration stayed).");
	sample(f, "ve_ved_reload_failures_total", gpu, NULL, (double)dm->reload_failures);
	family(f, "ve_mps_running", "gauge",
	       "1 if an MPS control daemon serves the clients' pipe directory, as ved last probed.");
	sample(f, "ve_mps_running", gpu, NULL, dm->mps == VE_MPS_RUNNING);
	family(f, "ve_clients", "gauge", "Client processes registered now.");
	sample(f, "ve_clients", gpu, NULL, dm->nclients);
	family(f, "ve_clients_max", "gauge", "Clients ved serves at most at once (max_clients).");
	sample(f, "ve_clients_max", gpu, NULL, dm->max_clients);
	family(f, "ve_clients_refused_total", "counter",
	       "Connections refused (permissions, limits, pool mismatch, draining).");
	sample(f, "ve_clients_refused_total", gpu, NULL, (double)dm->refused);
	family(f, "ve_clients_refused_draining_total", "counter",
	       "Registrations refused because ved was draining.");
	sample(f, "ve_clients_refused_draining_total", gpu, NULL, (double)dm->refused_draining);
	family(f, "ve_records_per_second", "gauge",
	       "Records through every client's rings, both ways, over the last second.");
	sample(f, "ve_records_per_second", gpu, NULL, dm->records_per_s);
	family(f, "ve_loop_sleeps_total", "counter",
	       "Times ved's loop went to sleep in epoll_wait (nothing to do for spin_us).");
	sample(f, "ve_loop_sleeps_total", gpu, NULL, (double)dm->sleeps);
	family(f, "ve_loop_wakeups_total", "counter", "Times ved's loop woke up from that sleep.");
	sample(f, "ve_loop_wakeups_total", gpu, NULL, (double)dm->wakeups);
	if (!srv)
		return ferror(f) ? -EIO : 0; /* no pool before the first client */

	/* ---- pool and coordinator */
	struct ve_coord *co = ve_serve_coord(srv);
	const struct ve_pool *p = ve_serve_pool(srv);
	struct ve_coord_stats cs;
	ve_coord_stats(co, &cs);
	struct ve_serve_stats ss;
	ve_serve_stats(srv, &ss);
	family(f, "ve_policy_info", "gauge", "The policy ved runs (always 1).");
	fprintf(f, "ve_policy_info{%s,policy=\"", gpu);
	label_value(f, ve_coord_policy_name(co));
	fprintf(f, "\",mode=\"%s\"} 1\n", ve_coord_grant_mode(co) ? "grant" : "per_op");
	family(f, "ve_device_sms", "gauge", "SMs of the device, as the pool's leaves split them.");
	sample(f, "ve_device_sms", gpu, NULL, p->total_sms);
	family(f, "ve_pool_entries", "gauge", "Green contexts (entries) in the pool.");
	sample(f, "ve_pool_entries", gpu, NULL, p->nentries);
	uint32_t nst[4] = {0};
	for (uint32_t k = 0; k < p->nentries; k++)
		if (p->e[k].state < 4)
			nst[p->e[k].state]++;
	family(f, "ve_pool_entries_in_use", "gauge", "Pool entries in use, by state.");
	sample(f, "ve_pool_entries_in_use", gpu, "state=\"leased\"", nst[VE_ENTRY_LEASED]);
	sample(f, "ve_pool_entries_in_use", gpu, "state=\"draining\"", nst[VE_ENTRY_DRAINING]);
	sample(f, "ve_pool_entries_in_use", gpu, "state=\"reserved\"", nst[VE_ENTRY_RESERVED]);
	family(f, "ve_device_sms_busy", "gauge",
	       "SMs leased or granted to some client now (Vitamin-E's accounting, not a hardware "
	       "counter).");
	sample(f, "ve_device_sms_busy", gpu, NULL, m->busy_sms);
	family(f, "ve_device_sm_utilization_ratio", "gauge",
	       "ve_device_sms_busy / ve_device_sms now.");
	sample(f, "ve_device_sm_utilization_ratio", gpu, NULL,
	       p->total_sms ? (double)m->busy_sms / p->total_sms : 0);
	family(f, "ve_device_sm_busy_seconds_total", "counter",
	       "SM-seconds leased or granted (rate() / ve_device_sms is the utilization over a "
	       "window).");
	sample(f, "ve_device_sm_busy_seconds_total", gpu, NULL, m->busy_sm_s);
	family(f, "ve_binds_total", "counter", "Ops bound to a pool entry by the coordinator.");
	sample(f, "ve_binds_total", gpu, NULL, (double)cs.bindings);
	family(f, "ve_binds_per_second", "gauge", "Ops bound per second over the last second.");
	sample(f, "ve_binds_per_second", gpu, NULL, m->binds_per_s);
	family(f, "ve_completions_total", "counter", "Bound ops whose completion ved was told of.");
	sample(f, "ve_completions_total", gpu, NULL, (double)cs.completions);
	family(f, "ve_failed_submits_total", "counter",
	       "Bound ops whose submission failed (put back in the ready queue).");
	sample(f, "ve_failed_submits_total", gpu, NULL, (double)cs.failed_submits);
	family(f, "ve_rejected_proposals_total", "counter",
	       "Policy proposals the coordinator refused as invalid.");
	sample(f, "ve_rejected_proposals_total", gpu, NULL, (double)cs.rejects);
	family(f, "ve_reservations_total", "counter", "Entry reservations the policy made.");
	sample(f, "ve_reservations_total", gpu, NULL, (double)cs.reservations);
	family(f, "ve_decision_seconds_total", "counter", "Time spent in the policy's decisions.");
	sample(f, "ve_decision_seconds_total", gpu, NULL, (double)cs.decide_ns / 1e9);
	family(f, "ve_grant_ticks_total", "counter", "Grant rounds of the policy (grant mode).");
	sample(f, "ve_grant_ticks_total", gpu, NULL, (double)cs.ticks);
	family(f, "ve_grant_changes_total", "counter", "Grants given or taken away (grant mode).");
	sample(f, "ve_grant_changes_total", gpu, NULL, (double)cs.grant_changes);
	family(f, "ve_grant_reclaims_total", "counter",
	       "SMs taken from a client and reported drained (grant mode).");
	sample(f, "ve_grant_reclaims_total", gpu, NULL, (double)cs.reclaims);
	family(f, "ve_grant_lends_total", "counter",
	       "SMs lent to a client for its short kernels (docs/policies.md, Lending).");
	sample(f, "ve_grant_lends_total", gpu, NULL, (double)cs.lends);
	family(f, "ve_grant_lends_taken_back_total", "counter",
	       "Lends taken back (each then drains like a reclaim).");
	sample(f, "ve_grant_lends_taken_back_total", gpu, NULL, (double)cs.lend_takes);
	family(f, "ve_grant_reclaim_p50_seconds", "gauge",
	       "Median time from a grant taken away to its SMs drained (recent reclaims).");
	sample(f, "ve_grant_reclaim_p50_seconds", gpu, NULL, (double)cs.reclaim_ns_p50 / 1e9);
	family(f, "ve_grant_reclaim_p99_seconds", "gauge",
	       "99th percentile of the same (recent reclaims).");
	sample(f, "ve_grant_reclaim_p99_seconds", gpu, NULL, (double)cs.reclaim_ns_p99 / 1e9);
	family(f, "ve_records_total", "counter", "Records through the clients' rings.");
	sample(f, "ve_records_total", gpu, "direction=\"in\"", (double)ss.records_in);
	sample(f, "ve_records_total", gpu, "direction=\"out\"", (double)ss.records_out);
	family(f, "ve_clients_joined_total", "counter", "Clients that registered.");
	sample(f, "ve_clients_joined_total", gpu, NULL, (double)ss.joined);
	family(f, "ve_clients_left_total", "counter", "Clients that left (or were disconnected).");
	sample(f, "ve_clients_left_total", gpu, NULL, (double)ss.left);
	family(f, "ve_protocol_errors_total", "counter",
	       "Protocol violations by clients (each disconnected the client).");
	sample(f, "ve_protocol_errors_total", gpu, NULL, (double)ss.protocol_errors);
	family(f, "ve_reclaimed_ops_total", "counter",
	       "Ops of departed clients completed by ved on their behalf.");
	sample(f, "ve_reclaimed_ops_total", gpu, NULL, (double)ss.reclaimed_ops);

	/* ---- clients: every family lists all of them, as the format wants */
	struct crow *rows = m->rows;
	uint32_t nr = 0;
	for (uint32_t k = 0; k < dm->nclients && nr < VE_COORD_MAX_CLIENTS; k++) {
		const struct ved_metrics_client *dc = &dm->cl[k];
		struct crow *r = &rows[nr];
		ve_serve_client_info(srv, dc->id, &r->ci);
		if (!r->ci.active)
			continue;
		r->id = dc->id;
		r->dc = dc;
		ve_serve_client_waits(srv, dc->id, &r->w);
		r->start_s = unix_now - (double)(mono - r->ci.joined_ns) / 1e9;
		char *lb = NULL;
		size_t lbn = 0;
		FILE *lf = open_memstream(&lb, &lbn);
		if (!lf)
			return -ENOMEM;
		fprintf(lf, "%s,client=\"%u\",pid=\"%d\",user=\"", gpu, dc->id, (int)dc->pid);
		label_value(lf, user_of(m, dc->uid));
		fprintf(lf, "\",class=\"%s\",name=\"",
			(r->ci.flags & VE_READY_LATENCY) ? "latency" : "batch");
		label_value(lf, r->ci.name);
		fputc('"', lf);
		fclose(lf);
		snprintf(r->labels, sizeof(r->labels), "%s", lb ? lb : gpu);
		free(lb);
		nr++;
	}
#define EACH(name_, expr_)                                                                         \
	for (uint32_t k_ = 0; k_ < nr; k_++) {                                                     \
		const struct crow *r = &rows[k_];                                                  \
		(void)r;                                                                           \
		sample(f, name_, r->labels, NULL, (expr_));                                        \
	}
	family(f, "ve_client_start_time_seconds", "gauge",
	       "When the client registered, in seconds since the epoch.");
	EACH("ve_client_start_time_seconds", r->start_s);
	family(f, "ve_client_sms_granted", "gauge",
	       "SMs the client may use now: its grant's and those of the entries it holds leases "
	       "on.");
	EACH("ve_client_sms_granted", m->cl[r->id].sms);
	family(f, "ve_client_sm_seconds_total", "counter",
	       "SM-seconds granted to the client (rate() is its average SMs over a window).");
	EACH("ve_client_sm_seconds_total", m->cl[r->id].sm_s);
	family(f, "ve_client_grant_reason_seconds_total", "counter",
	       "Seconds the client spent with each reason for its grant (label why, as in ve-ctl "
	       "clients: idle, alone, split, shared, turn, in-gap, waiting, narrow, reserved, "
	       "fixed, random; - when the policy gives none).");
	for (uint32_t k = 0; k < nr; k++)
		for (unsigned w = 0; w < VE_WHY_COUNT; w++)
			if (m->cl[rows[k].id].why_s[w] > 0) {
				char why[32];
				snprintf(why, sizeof(why), "why=\"%s\"", ve_grant_why_name(w));
				sample(f, "ve_client_grant_reason_seconds_total", rows[k].labels, why,
				       m->cl[rows[k].id].why_s[w]);
			}
	family(f, "ve_client_leases_held", "gauge", "Pool entries the client holds a lease on now.");
	EACH("ve_client_leases_held", m->cl[r->id].leases);
	family(f, "ve_client_ops_ready", "gauge", "Ops of the client waiting at ved for a binding.");
	EACH("ve_client_ops_ready", r->ci.nready);
	family(f, "ve_client_ops_bound", "gauge", "Ops of the client bound and not yet done.");
	EACH("ve_client_ops_bound", r->ci.nbound);
	family(f, "ve_client_binds_total", "counter", "Ops of the client bound by ved.");
	EACH("ve_client_binds_total", (double)r->ci.bindings);
	family(f, "ve_client_completions_total", "counter", "Ops of the client done.");
	EACH("ve_client_completions_total", (double)r->ci.completions);
	family(f, "ve_client_failed_submits_total", "counter",
	       "Ops of the client whose submission failed.");
	EACH("ve_client_failed_submits_total", (double)r->ci.failed);
	family(f, "ve_client_late_ops_total", "counter",
	       "Ops of the client that finished after their deadline (ve_advise_deadline, "
	       "VE_TPOT_MS; grant mode).");
	EACH("ve_client_late_ops_total", (double)r->ci.late);
	family(f, "ve_client_ops_per_second", "gauge", "Ops of the client done per second (last second).");
	EACH("ve_client_ops_per_second", r->dc->ops_per_s);
	family(f, "ve_client_watchdog_fallbacks_total", "counter",
	       "Times the process had fallen back to safe mode (ved gone, or its heartbeat stale) "
	       "when it registered.");
	EACH("ve_client_watchdog_fallbacks_total", r->dc->fallbacks);
	family(f, "ve_client_records_total", "counter", "Records through the client's rings.");
	for (uint32_t k = 0; k < nr; k++) {
		sample(f, "ve_client_records_total", rows[k].labels, "direction=\"in\"",
		       (double)rows[k].ci.records_in);
		sample(f, "ve_client_records_total", rows[k].labels, "direction=\"out\"",
		       (double)rows[k].ci.records_out);
	}
	family(f, "ve_client_bind_wait_seconds", "summary",
	       "Wait of the client's ops for a binding (ready at ved -> bound); quantiles of the "
	       "recent ones.");
	for (uint32_t k = 0; k < nr; k++) {
		const struct crow *r = &rows[k];
		if (r->w.count) {
			sample(f, "ve_client_bind_wait_seconds", r->labels, "quantile=\"0.5\"",
			       (double)r->w.p50_ns / 1e9);
			sample(f, "ve_client_bind_wait_seconds", r->labels, "quantile=\"0.99\"",
			       (double)r->w.p99_ns / 1e9);
		}
		sample(f, "ve_client_bind_wait_seconds_sum", r->labels, NULL,
		       (double)r->w.sum_ns / 1e9);
		sample(f, "ve_client_bind_wait_seconds_count", r->labels, NULL, (double)r->w.count);
	}
#undef EACH
	return ferror(f) ? -EIO : 0;
}
