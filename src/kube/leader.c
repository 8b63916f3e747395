/*
 * One thread runs acquire -> renew -> (lost | stop). Every decision follows the record last
 * observed and the local time it was observed: a Lease is considered held while its record keeps
 * changing, and expired a lease duration after it stopped changing. Writes are PUTs carrying the
 * observed resourceVersion, so two candidates racing for a free Lease cannot both win: the loser
 * gets a 409 and tries again next period.
 */
#include "kube/leader.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/backoff.h"
#include "base/log.h"
#include "base/strbuf.h"
#include "base/timeutil.h"
#include "base/xalloc.h"
#include "kube/events.h"

struct kube_leader {
	struct kube_client *client;
	struct kube_leader_opts o;
	char *ns, *name, *identity;
	pthread_t thread;
	bool started;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	bool stop, leading;
	int64_t last_renew_mono;
	/* observed record */
	char observed_holder[256];
	char observed_raw[1024]; /* spec as text, to tell when it changed */
	int64_t observed_mono;
	json_t *lease; /* last Lease read or written (for resourceVersion and transitions) */
	struct kube_recorder *recorder; /* with o.events */
};

static void microtime_now(char *buf, size_t len)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct tm tm;
	gmtime_r(&ts.tv_sec, &tm);
	snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
		 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000);
}

void kube_leader_lease_name(const char *prefix, const char *driver, char *buf, size_t len)
{
	size_t n;

	if (len < 2)
		return;
	snprintf(buf, len - 1, "%s-%s", prefix, driver); /* room for the 'X' below */
	for (char *p = buf + strlen(prefix) + 1; *p && p < buf + len; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		      *p == '-'))
			*p = '-';
	/* As the sidecars do: a name must not end with '-'. */
	n = strlen(buf);
	if (n > 0 && buf[n - 1] == '-') {
		buf[n] = 'X';
		buf[n + 1] = '\0';
	}
}

struct kube_leader *kube_leader_new(struct kube_client *c, const struct kube_leader_opts *o)
{
	struct kube_leader *le = xcalloc(1, sizeof(*le));
	le->client = c;
	le->o = *o;
	if (!le->o.lease_duration_ns)
		le->o.lease_duration_ns = 15 * NSEC_PER_SEC;
	if (!le->o.renew_deadline_ns)
		le->o.renew_deadline_ns = 10 * NSEC_PER_SEC;
	if (!le->o.retry_period_ns)
		le->o.retry_period_ns = 5 * NSEC_PER_SEC;
	const char *cns = kube_client_config(c)->namespace;
	le->ns = xstrdup(o->ns && *o->ns ? o->ns : (cns && *cns ? cns : "default"));
	le->name = xstrdup(o->name);
	if (o->identity && *o->identity) {
		le->identity = xstrdup(o->identity);
	} else {
		char host[256] = "unknown";
		gethostname(host, sizeof(host) - 1);
		struct strbuf sb = STRBUF_INIT;
		strbuf_addf(&sb, "%s_%08x%08x", host, (unsigned)(random_unit() * 4294967295.0),
			    (unsigned)(random_unit() * 4294967295.0));
		le->identity = strbuf_detach(&sb, NULL);
	}
	if (o->events) {
		struct strbuf comp = STRBUF_INIT;
		strbuf_addf(&comp, "%s/%s", le->name, le->identity);
		struct kube_recorder_opts ro = { .component = comp.buf };
		le->recorder = kube_recorder_new(c, &ro);
		strbuf_release(&comp);
	}
	pthread_mutex_init(&le->mu, NULL);
	pthread_cond_init(&le->cond, NULL);
	return le;
}

const char *kube_leader_identity(struct kube_leader *le)
{
	return le->identity;
}

/* Sleeps up to ns; returns true when asked to stop. */
static bool wait_or_stop(struct kube_leader *le, int64_t ns)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	int64_t t = ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec + ns;
	ts.tv_sec = t / NSEC_PER_SEC;
	ts.tv_nsec = t % NSEC_PER_SEC;
	pthread_mutex_lock(&le->mu);
	while (!le->stop && pthread_cond_timedwait(&le->cond, &le->mu, &ts) == 0)
		;
	bool s = le->stop;
	pthread_mutex_unlock(&le->mu);
	return s;
}

static void observe(struct kube_leader *le, json_t *lease)
{
	json_t *spec = json_object_get(lease, "spec");
	char *raw = json_dumps(spec, JSON_COMPACT | JSON_SORT_KEYS);
	const char *holder = json_string_value(json_object_get(spec, "holderIdentity"));
	if (!raw || strcmp(raw, le->observed_raw) != 0) {
		snprintf(le->observed_raw, sizeof(le->observed_raw), "%s", raw ? raw : "");
		le->observed_mono = mono_now_ns();
		if (strcmp(holder ? holder : "", le->observed_holder) != 0) {
			snprintf(le->observed_holder, sizeof(le->observed_holder), "%s", holder ? holder : "");
			if (holder && *holder) {
				KLOG_I("New leader elected lease=\"%s/%s\" identity=%s", le->ns,
				       le->name, LOGQ(holder));
				if (le->o.on_new_leader)
					le->o.on_new_leader(holder, le->o.ud);
			}
		}
	}
	free(raw);
	json_decref(le->lease);
	le->lease = json_incref(lease);
}

static json_t *new_spec(struct kube_leader *le, bool release)
{
	char now[64];
	microtime_now(now, sizeof(now));
	json_t *old = json_object_get(le->lease, "spec");
	const char *holder = json_string_value(json_object_get(old, "holderIdentity"));
	json_int_t trans = json_integer_value(json_object_get(old, "leaseTransitions"));
	bool mine = holder && !strcmp(holder, le->identity);
	const char *acq = json_string_value(json_object_get(old, "acquireTime"));
	if (!mine && !release && holder && *holder)
		trans++;
	json_t *spec = json_pack("{s:s, s:I, s:s, s:s, s:I}", "holderIdentity",
				 release ? "" : le->identity, "leaseDurationSeconds",
				 (json_int_t)(release ? 1 : le->o.lease_duration_ns / NSEC_PER_SEC),
				 "acquireTime", (mine && acq && !release) ? acq : now, "renewTime", now,
				 "leaseTransitions", trans);
	return spec;
}

/* --leader-election-labels: set on create and kept on every update, as client-go's LeaseLock. */
static void add_labels(struct kube_leader *le, json_t *lease)
{
	json_t *md = json_object_get(lease, "metadata"), *labels;
	const char *k;
	json_t *v;

	if (!le->o.labels || !json_is_object(md))
		return;
	labels = json_object_get(md, "labels");
	if (!json_is_object(labels)) {
		labels = json_object();
		json_object_set_new(md, "labels", labels);
	}
	json_object_foreach(le->o.labels, k, v)
		json_object_set(labels, k, v);
}

/* One attempt to acquire or renew; returns true when we hold the lease afterwards. */
static bool try_acquire_or_renew(struct kube_leader *le)
{
	struct kube_err e;
	json_t *lease = kube_get(le->client, &KUBE_RES_LEASES, le->ns, le->name, &e);
	if (!lease) {
		if (!kube_err_is_not_found(&e)) {
			KLOG_E("Error retrieving lease lock lease=\"%s/%s\": %s", le->ns, le->name, e.message);
			return false;
		}
		json_decref(le->lease);
		le->lease = NULL;
		json_t *obj = json_pack("{s:s, s:s, s:{s:s, s:s}, s:o}", "apiVersion",
					"coordination.k8s.io/v1", "kind", "Lease", "metadata", "name",
					le->name, "namespace", le->ns, "spec", new_spec(le, false));
		add_labels(le, obj);
		json_t *created = kube_create(le->client, &KUBE_RES_LEASES, le->ns, obj, &e);
		json_decref(obj);
		if (!created) {
			KLOG_E("Error creating lease lease=\"%s/%s\": %s", le->ns, le->name, e.message);
			return false;
		}
		observe(le, created);
		json_decref(created);
		return true;
	}
	observe(le, lease);
	json_decref(lease);
	const char *holder = le->observed_holder;
	bool mine = !strcmp(holder, le->identity);
	if (*holder && !mine && mono_now_ns() < le->observed_mono + le->o.lease_duration_ns)
		return false; /* held by another and not expired */
	json_t *upd = json_deep_copy(le->lease);
	json_object_set_new(upd, "spec", new_spec(le, false));
	add_labels(le, upd);
	json_t *res = kube_update(le->client, &KUBE_RES_LEASES, le->ns, upd, false, &e);
	json_decref(upd);
	if (!res) {
		KLOG_V(2, "Failed to update lease lease=\"%s/%s\": %s", le->ns, le->name, e.message);
		return false;
	}
	observe(le, res);
	json_decref(res);
	return true;
}

static void set_leading(struct kube_leader *le, bool v)
{
	pthread_mutex_lock(&le->mu);
	le->leading = v;
	if (v)
		le->last_renew_mono = mono_now_ns();
	pthread_mutex_unlock(&le->mu);
}

static void release(struct kube_leader *le)
{
	if (!le->lease)
		return;
	json_t *upd = json_deep_copy(le->lease);
	json_object_set_new(upd, "spec", new_spec(le, true));
	struct kube_err e;
	json_t *res = kube_update(le->client, &KUBE_RES_LEASES, le->ns, upd, false, &e);
	json_decref(upd);
	if (res)
		KLOG_I("Released lease lease=\"%s/%s\"", le->ns, le->name);
	else
		KLOG_E("Failed to release lease lease=\"%s/%s\": %s", le->ns, le->name, e.message);
	json_decref(res);
}

static int64_t jittered(int64_t d)
{
	return d + (int64_t)(random_unit() * 0.2 * (double)d);
}

static void *run(void *arg)
{
	struct kube_leader *le = arg;
	KLOG_I("Attempting to acquire leader lease lease=\"%s/%s\" identity=%s", le->ns, le->name,
	       LOGQ(le->identity));
	/* acquire */
	while (!try_acquire_or_renew(le))
		if (wait_or_stop(le, jittered(le->o.retry_period_ns)))
			return NULL;
	KLOG_I("Successfully acquired lease lease=\"%s/%s\"", le->ns, le->name);
	if (le->recorder) {
		json_t *md = json_object_get(le->lease, "metadata");
		struct kube_objref ref = {
			.kind = "Lease", .api_version = "coordination.k8s.io/v1", .ns = le->ns,
			.name = le->name, .uid = json_string_value(json_object_get(md, "uid")),
			.resource_version = json_string_value(json_object_get(md, "resourceVersion")),
		};
		kube_event(le->recorder, &ref, KUBE_EVENT_NORMAL, "LeaderElection", "%s became leader",
			   le->identity);
	}
	set_leading(le, true);
	if (le->o.on_started_leading)
		le->o.on_started_leading(le->o.ud);
	/* renew */
	for (;;) {
		if (wait_or_stop(le, le->o.retry_period_ns))
			break;
		int64_t deadline = mono_now_ns() + le->o.renew_deadline_ns;
		bool ok = false;
		while (!(ok = try_acquire_or_renew(le)) && mono_now_ns() < deadline)
			if (wait_or_stop(le, le->o.retry_period_ns / 4 + 1))
				break;
		pthread_mutex_lock(&le->mu);
		bool stopping = le->stop;
		pthread_mutex_unlock(&le->mu);
		if (stopping)
			break;
		if (!ok) {
			set_leading(le, false);
			KLOG_E("Failed to renew lease lease=\"%s/%s\": leadership lost", le->ns, le->name);
			if (le->o.on_stopped_leading) {
				le->o.on_stopped_leading(le->o.ud);
				return NULL;
			}
			KLOG_F("stopped leading");
		}
		set_leading(le, true);
	}
	release(le);
	set_leading(le, false);
	if (le->o.on_stopped_leading)
		le->o.on_stopped_leading(le->o.ud);
	return NULL;
}

int kube_leader_start(struct kube_leader *le)
{
	if (pthread_create(&le->thread, NULL, run, le) != 0)
		return -1;
	le->started = true;
	return 0;
}

bool kube_leader_is_leader(struct kube_leader *le)
{
	pthread_mutex_lock(&le->mu);
	bool l = le->leading;
	pthread_mutex_unlock(&le->mu);
	return l;
}

void kube_leader_render_metrics(struct kube_leader *le, struct strbuf *out)
{
	strbuf_addf(out, "# HELP leader_election_master_status [ALPHA] Gauge of if the reporting "
			 "system is master of the relevant lease, 0 indicates backup, 1 indicates "
			 "master. 'name' is the string used to identify the lease. Please make sure "
			 "to group by name.\n"
			 "# TYPE leader_election_master_status gauge\n"
			 "leader_election_master_status{name=\"%s\"} %d\n",
		    le->name, kube_leader_is_leader(le) ? 1 : 0);
}

bool kube_leader_healthy(struct kube_leader *le)
{
	pthread_mutex_lock(&le->mu);
	bool ok = !le->leading ||
		  mono_now_ns() - le->last_renew_mono < le->o.lease_duration_ns + 20 * NSEC_PER_SEC;
	pthread_mutex_unlock(&le->mu);
	return ok;
}

void kube_leader_stop(struct kube_leader *le)
{
	pthread_mutex_lock(&le->mu);
	bool was = le->stop;
	le->stop = true;
	pthread_cond_broadcast(&le->cond);
	pthread_mutex_unlock(&le->mu);
	if (!was && le->started)
		pthread_join(le->thread, NULL);
}

void kube_leader_free(struct kube_leader *le)
{
	if (!le)
		return;
	kube_leader_stop(le);
	kube_recorder_free(le->recorder);
	json_decref(le->lease);
	free(le->ns);
	free(le->name);
	free(le->identity);
	pthread_mutex_destroy(&le->mu);
	pthread_cond_destroy(&le->cond);
	free(le);
}
