/*
 * The recorder thread owns the aggregation cache; callers only append to a queue under a mutex.
 * The spam filter runs in the caller (it is cheap) so a flood is cut before it is even queued.
 * The cache maps the event's identity to the Event object it created; entries older than the
 * window are dropped lazily when looked up, and the whole cache is bounded (4096 entries, like
 * client-go's LRU) by clearing it when full, which at worst creates one new Event per key.
 *
 * Similar events (same object, type and reason, different messages) are counted per window;
 * from the eleventh distinct message on they are combined into one Event whose message is
 * "(combined from similar events): <latest message>", so a loop of ever-changing error texts
 * still produces a bounded number of objects.
 */
#include "kube/events.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/timeutil.h"
#include "base/xalloc.h"
#include "kube/hmap.h"
#include "kube/jw.h"

#define CACHE_MAX 4096
/* Events waiting for the recorder thread; more are dropped (client-go's broadcaster queue). */
#define PENDING_MAX 1000
/* After kube_recorder_free(), queued events are still sent for this long, then dropped. */
#define STOP_GRACE_NS (500 * NSEC_PER_MSEC)
#define SIMILAR_MAX 10
#define COMBINED_PREFIX "(combined from similar events): "

/*
 * A queued event, kept as plain strings (a jansson tree of an Event costs about 4 KB; this about
 * 600 B). The Event object is built when it is sent.
 */
struct pending {
	struct pending *next;
	char *ns;      /* the Event's namespace */
	char *agg_key; /* object, type, reason */
	char *message;
	char *reason;
	char *component; /* source.component: the recorder's, or its view's */
	char *kind, *api_version, *obj_ns, *name, *uid, *rv; /* involvedObject; NULL when absent */
	bool warning;
	char ts[RFC3339_BUFLEN]; /* when it happened */
};

static char *dup_or_null(const char *s)
{
	return s && *s ? xstrdup(s) : NULL;
}

static void pending_free(struct pending *p)
{
	free(p->ns);
	free(p->agg_key);
	free(p->message);
	free(p->reason);
	free(p->component);
	free(p->kind);
	free(p->api_version);
	free(p->obj_ns);
	free(p->name);
	free(p->uid);
	free(p->rv);
	free(p);
}


struct agg {
	char *name;   /* Event object name */
	char *ns;
	long count;
	int64_t last_mono;
	char first_ts[RFC3339_BUFLEN];
};

struct similar {
	int64_t first_mono;
	struct kube_hmap msgs; /* distinct messages seen in the window */
};

struct spam {
	double tokens;
	int64_t last_mono;
};

struct kube_recorder {
	struct kube_recorder *base; /* a view's recorder (kube_recorder_as); NULL: this one */
	struct kube_client *client;
	char *component, *host;
	int burst;
	int64_t refill_ns, window_ns;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cond, idle_cond;
	struct pending *head, *tail;
	size_t npending;
	int64_t stop_deadline; /* monotonic; set when stop is */
	bool stop, busy;
	struct kube_hmap spam;  /* object key -> struct spam* (guarded by mu) */
	struct kube_hmap cache; /* event key -> struct agg* (recorder thread only) */
	struct kube_hmap similar; /* aggregate key -> struct similar* (recorder thread only) */
	struct kube_recorder_stats stats;
};

static void *run(void *arg);

/* The Event to create for p, named name, with the given message, as JSON text into out. */
static void pending_event(const struct kube_recorder *r, const struct pending *p, const char *name,
			  const char *message, struct strbuf *out)
{
	struct jw w = JW_INIT(out);
	jw_begin_object(&w);
	jw_kv_str(&w, "apiVersion", "v1");
	jw_kv_str(&w, "kind", "Event");
	jw_key(&w, "metadata");
	jw_begin_object(&w);
	jw_kv_str(&w, "name", name);
	jw_kv_str(&w, "namespace", p->ns);
	jw_end_object(&w);
	jw_key(&w, "involvedObject");
	jw_begin_object(&w);
	const char *io[][2] = { { "kind", p->kind }, { "apiVersion", p->api_version },
				{ "namespace", p->obj_ns }, { "name", p->name }, { "uid", p->uid },
				{ "resourceVersion", p->rv } };
	for (size_t i = 0; i < sizeof(io) / sizeof(io[0]); i++)
		if (io[i][1])
			jw_kv_str(&w, io[i][0], io[i][1]);
	jw_end_object(&w);
	jw_kv_str(&w, "reason", p->reason);
	jw_kv_str(&w, "message", message);
	jw_key(&w, "source");
	jw_begin_object(&w);
	jw_kv_str(&w, "component", p->component);
	if (r->host)
		jw_kv_str(&w, "host", r->host);
	jw_end_object(&w);
	jw_kv_str(&w, "firstTimestamp", p->ts);
	jw_kv_str(&w, "lastTimestamp", p->ts);
	jw_key(&w, "count");
	jw_int(&w, 1);
	jw_kv_str(&w, "type", p->warning ? "Warning" : "Normal");
	jw_kv_str(&w, "reportingComponent", p->component);
	jw_end_object(&w);
}

struct kube_recorder *kube_recorder_new(struct kube_client *c, const struct kube_recorder_opts *o)
{
	struct kube_recorder *r = xcalloc(1, sizeof(*r));
	r->client = c;
	r->component = xstrdup(o->component ? o->component : "kcsi");
	r->host = o->host ? xstrdup(o->host) : NULL;
	r->burst = o->spam_burst > 0 ? o->spam_burst : 25;
	r->refill_ns = o->spam_refill_ns > 0 ? o->spam_refill_ns : 5 * NSEC_PER_MIN;
	r->window_ns = o->window_ns > 0 ? o->window_ns : 10 * NSEC_PER_MIN;
	pthread_mutex_init(&r->mu, NULL);
	pthread_cond_init(&r->cond, NULL);
	pthread_cond_init(&r->idle_cond, NULL);
	pthread_create(&r->thread, NULL, run, r);
	return r;
}

struct kube_recorder *kube_recorder_as(struct kube_recorder *r, const char *component)
{
	struct kube_recorder *v;

	if (!r)
		return NULL;
	v = xcalloc(1, sizeof(*v));
	v->base = r->base ? r->base : r;
	v->component = xstrdup(component);
	return v;
}

/* The tokens a bucket holds at `now`, refilled since its last use, at most the burst. */
static double spam_tokens(const struct kube_recorder *r, const struct spam *s, int64_t now)
{
	double t = s->tokens + (double)(now - s->last_mono) / (double)r->refill_ns;
	return t > r->burst ? r->burst : t;
}

/*
 * Keeps the spam filter at most CACHE_MAX objects (client-go bounds it with an LRU of that size).
 * A bucket that has refilled completely is the same as no bucket, so those go first; if the
 * objects are all still spamming, the least recently used half goes. Called with r->mu held.
 */
static void spam_prune(struct kube_recorder *r, int64_t now)
{
	int64_t sum = 0;
	size_t n = 0;
	for (size_t i = 0; i < r->spam.cap; i++)
		if (r->spam.slots[i].key) {
			sum += (now - ((struct spam *)r->spam.slots[i].value)->last_mono) / 1024;
			n++;
		}
	int64_t mean_age = n ? sum / (int64_t)n * 1024 : 0;
	for (int pass = 0; pass < 2 && r->spam.len >= CACHE_MAX; pass++) {
		struct kube_hmap keep = KUBE_HMAP_INIT;
		for (size_t i = 0; i < r->spam.cap; i++) {
			struct kube_hmap_slot *sl = &r->spam.slots[i];
			if (!sl->key)
				continue;
			struct spam *s = sl->value;
			bool drop = pass == 0 ? spam_tokens(r, s, now) >= r->burst
					      : now - s->last_mono >= mean_age;
			if (drop)
				free(s);
			else
				kube_hmap_put(&keep, sl->key, s);
		}
		kube_hmap_clear(&r->spam);
		r->spam = keep;
	}
}

/* The spam filter: one bucket per object. Called with r->mu held. */
static bool spam_allow(struct kube_recorder *r, const char *objkey)
{
	struct spam *s = kube_hmap_get(&r->spam, objkey);
	int64_t now = mono_now_ns();
	if (!s) {
		if (r->spam.len >= CACHE_MAX)
			spam_prune(r, now);
		s = xcalloc(1, sizeof(*s));
		s->tokens = r->burst;
		s->last_mono = now;
		kube_hmap_put(&r->spam, objkey, s);
	}
	s->tokens = spam_tokens(r, s, now);
	s->last_mono = now;
	if (s->tokens < 1)
		return false;
	s->tokens -= 1;
	return true;
}

void kube_objref_of(const struct kube_obj *o, struct kube_objref *ref, char *uidbuf, size_t uidlen)
{
	static const char *kinds[][2] = {
		[KUBE_KIND_VA] = { "VolumeAttachment", "storage.k8s.io/v1" },
		[KUBE_KIND_PV] = { "PersistentVolume", "v1" },
		[KUBE_KIND_CSINODE] = { "CSINode", "storage.k8s.io/v1" },
		[KUBE_KIND_NODE] = { "Node", "v1" },
		[KUBE_KIND_LEASE] = { "Lease", "coordination.k8s.io/v1" },
		[KUBE_KIND_PVC] = { "PersistentVolumeClaim", "v1" },
		[KUBE_KIND_SC] = { "StorageClass", "storage.k8s.io/v1" },
		[KUBE_KIND_POD] = { "Pod", "v1" },
		[KUBE_KIND_CSIDRIVER] = { "CSIDriver", "storage.k8s.io/v1" },
		[KUBE_KIND_CSISC] = { "CSIStorageCapacity", "storage.k8s.io/v1" },
		[KUBE_KIND_VAC] = { "VolumeAttributesClass", "storage.k8s.io/v1" },
		[KUBE_KIND_VS] = { "VolumeSnapshot", "snapshot.storage.k8s.io/v1" },
		[KUBE_KIND_VSC] = { "VolumeSnapshotContent", "snapshot.storage.k8s.io/v1" },
		[KUBE_KIND_VSCLASS] = { "VolumeSnapshotClass", "snapshot.storage.k8s.io/v1" },
		[KUBE_KIND_VGS] = { "VolumeGroupSnapshot", "groupsnapshot.storage.k8s.io/v1" },
		[KUBE_KIND_VGSC] = { "VolumeGroupSnapshotContent", "groupsnapshot.storage.k8s.io/v1" },
		[KUBE_KIND_VGSCLASS] = { "VolumeGroupSnapshotClass", "groupsnapshot.storage.k8s.io/v1" },
	};
	memset(ref, 0, sizeof(*ref));
	if (o->kind < sizeof(kinds) / sizeof(kinds[0]) && kinds[o->kind][0]) {
		ref->kind = kinds[o->kind][0];
		ref->api_version = kinds[o->kind][1];
	}
	ref->ns = o->ns;
	ref->name = o->name;
	ref->uid = kube_obj_uid(o, uidbuf, uidlen);
	ref->resource_version = o->rv;
}

void kube_event(struct kube_recorder *r, const struct kube_objref *ref, enum kube_event_type type,
		const char *reason, const char *fmt, ...)
{
	struct strbuf msg = STRBUF_INIT, objkey = STRBUF_INIT, key = STRBUF_INIT;
	struct strbuf spamkey = STRBUF_INIT;
	const char *component;
	va_list ap;

	if (!r)
		return;
	component = r->component;
	if (r->base)
		r = r->base; /* a view: the recorder's queue, filter and cache, the view's component */
	va_start(ap, fmt);
	strbuf_vaddf(&msg, fmt, ap);
	va_end(ap);
	const char *tname = type == KUBE_EVENT_WARNING ? "Warning" : "Normal";
	strbuf_addf(&objkey, "%s/%s/%s/%s", ref->kind ? ref->kind : "", ref->ns ? ref->ns : "",
		    ref->name ? ref->name : "", ref->uid ? ref->uid : "");
	/* client-go keys both the spam filter and the aggregation by the source too */
	strbuf_addf(&spamkey, "%s\x1f%s", component, objkey.buf);
	strbuf_addf(&key, "%s\x1f%s\x1f%s", spamkey.buf, tname, reason);
	const char *ns = ref->ns && *ref->ns ? ref->ns : "default";
	KLOG_V(4, "Event(%s) type=%s reason=%s message=%s", objkey.buf, LOGQ(tname), LOGQ(reason),
	       LOGQ(msg.buf));
	pthread_mutex_lock(&r->mu);
	if (r->stop || r->npending >= PENDING_MAX || !spam_allow(r, spamkey.buf)) {
		r->stats.dropped++;
	} else {
		struct pending *p = xcalloc(1, sizeof(*p));
		p->ns = xstrdup(ns);
		p->agg_key = strbuf_detach(&key, NULL);
		p->message = strbuf_detach(&msg, NULL);
		p->reason = xstrdup(reason);
		p->component = xstrdup(component);
		p->kind = dup_or_null(ref->kind);
		p->api_version = dup_or_null(ref->api_version);
		p->obj_ns = dup_or_null(ref->ns);
		p->name = dup_or_null(ref->name);
		p->uid = dup_or_null(ref->uid);
		p->rv = dup_or_null(ref->resource_version);
		p->warning = type == KUBE_EVENT_WARNING;
		rfc3339_format(time(NULL), p->ts, sizeof(p->ts));
		if (r->tail)
			r->tail->next = p;
		else
			r->head = p;
		r->tail = p;
		r->npending++;
		pthread_cond_signal(&r->cond);
	}
	pthread_mutex_unlock(&r->mu);
	strbuf_release(&msg);
	strbuf_release(&objkey);
	strbuf_release(&spamkey);
	strbuf_release(&key);
}

static void agg_free(struct agg *a)
{
	if (!a)
		return;
	free(a->name);
	free(a->ns);
	free(a);
}

static void cache_clear(struct kube_hmap *m)
{
	for (size_t i = 0; i < m->cap; i++)
		if (m->slots[i].key)
			agg_free(m->slots[i].value);
	kube_hmap_clear(m);
}

static void similar_free(struct similar *sm)
{
	if (!sm)
		return;
	kube_hmap_clear(&sm->msgs);
	free(sm);
}

static void similar_clear(struct kube_hmap *m)
{
	for (size_t i = 0; i < m->cap; i++)
		if (m->slots[i].key)
			similar_free(m->slots[i].value);
	kube_hmap_clear(m);
}

/*
 * Decides the identity of an event: its own message, or the combined message once the
 * object/type/reason has had more than SIMILAR_MAX distinct messages in the window.
 * Returns true when combined.
 */
static bool combine_similar(struct kube_recorder *r, struct pending *p, int64_t now)
{
	struct similar *sm = kube_hmap_get(&r->similar, p->agg_key);
	if (sm && now - sm->first_mono >= r->window_ns) {
		similar_free(kube_hmap_del(&r->similar, p->agg_key));
		sm = NULL;
	}
	if (!sm) {
		if (r->similar.len >= CACHE_MAX)
			similar_clear(&r->similar);
		sm = xcalloc(1, sizeof(*sm));
		sm->first_mono = now;
		kube_hmap_put(&r->similar, p->agg_key, sm);
	}
	if (sm->msgs.len <= SIMILAR_MAX)
		kube_hmap_put(&sm->msgs, p->message, NULL);
	return sm->msgs.len > SIMILAR_MAX;
}

/* Counts a result under the lock. */
static void count(struct kube_recorder *r, uint64_t *stat)
{
	pthread_mutex_lock(&r->mu);
	(*stat)++;
	pthread_mutex_unlock(&r->mu);
}

/*
 * Patches the aggregated Event a with one more occurrence. Returns true when done (sent or
 * failed for good), false when the Event is gone on the server and must be created again.
 */
static bool patch_agg(struct kube_recorder *r, struct agg *a, const char *combined_msg,
		      int64_t now)
{
	char ts[RFC3339_BUFLEN];
	rfc3339_format(time(NULL), ts, sizeof(ts));
	json_t *patch = json_pack("{s:I, s:s}", "count", (json_int_t)(a->count + 1), "lastTimestamp", ts);
	if (combined_msg)
		json_object_set_new(patch, "message", json_string(combined_msg));
	char *body = json_dumps(patch, JSON_COMPACT);
	json_decref(patch);
	struct kube_err e;
	int rc = kube_patch_discard(r->client, &KUBE_RES_EVENTS, a->ns, a->name, false,
				    KUBE_PATCH_MERGE, body, &e);
	free(body);
	if (rc == 0) {
		a->count++;
		a->last_mono = now;
		count(r, &r->stats.patched);
		return true;
	}
	if (kube_err_is_not_found(&e))
		return false;
	KLOG_ERR(e.message, "Server rejected event patch");
	count(r, &r->stats.failed);
	return true;
}

/* Sends one event: a PATCH of the aggregated Event, or a new Event. */
static void send_one(struct kube_recorder *r, struct pending *p)
{
	int64_t now = mono_now_ns();
	bool combined = combine_similar(r, p, now);
	struct strbuf shown = STRBUF_INIT, keysb = STRBUF_INIT;
	if (combined)
		strbuf_addf(&shown, COMBINED_PREFIX "%s", p->message);
	else
		strbuf_addstr(&shown, p->message);
	strbuf_addf(&keysb, "%s\x1f%s", p->agg_key, combined ? COMBINED_PREFIX : p->message);
	const char *key = keysb.buf;
	struct agg *a = kube_hmap_get(&r->cache, key);
	if (a && now - a->last_mono < r->window_ns &&
	    patch_agg(r, a, combined ? shown.buf : NULL, now))
		goto out;
	/* No recent Event, or it expired on the server: create a new one. */
	agg_free(kube_hmap_del(&r->cache, key));
	char name[320];
	snprintf(name, sizeof(name), "%s.%llx", p->name ? p->name : "event",
		 (unsigned long long)wall_now_ns());
	struct strbuf ev = STRBUF_INIT;
	pending_event(r, p, name, shown.buf, &ev);
	struct kube_err e;
	/* the answer (the Event as stored) is not read: not decoding it saves a parse per event */
	int rc = kube_create_discard(r->client, &KUBE_RES_EVENTS, p->ns, ev.buf, &e);
	strbuf_release(&ev);
	if (rc != 0) {
		count(r, &r->stats.failed);
		KLOG_ERR(e.message, "Server rejected event");
		goto out;
	}
	count(r, &r->stats.created);
	if (r->cache.len >= CACHE_MAX)
		cache_clear(&r->cache);
	a = xcalloc(1, sizeof(*a));
	a->name = xstrdup(name);
	a->ns = xstrdup(p->ns);
	a->count = 1;
	a->last_mono = now;
	kube_hmap_put(&r->cache, key, a);
out:
	strbuf_release(&shown);
	strbuf_release(&keysb);
}

static void *run(void *arg)
{
	struct kube_recorder *r = arg;
	pthread_mutex_lock(&r->mu);
	for (;;) {
		while (!r->head && !r->stop)
			pthread_cond_wait(&r->cond, &r->mu);
		if (!r->head)
			break;
		struct pending *p = r->head;
		r->head = p->next;
		if (!r->head)
			r->tail = NULL;
		r->npending--;
		bool late = r->stop && mono_now_ns() >= r->stop_deadline;
		if (late)
			r->stats.dropped++;
		r->busy = true;
		pthread_mutex_unlock(&r->mu);
		if (!late)
			send_one(r, p);
		pending_free(p);
		pthread_mutex_lock(&r->mu);
		r->busy = false;
		pthread_cond_broadcast(&r->idle_cond);
	}
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

void kube_recorder_flush(struct kube_recorder *r)
{
	if (r->base)
		r = r->base;
	pthread_mutex_lock(&r->mu);
	while (r->head || r->busy)
		pthread_cond_wait(&r->idle_cond, &r->mu);
	pthread_mutex_unlock(&r->mu);
}

void kube_recorder_stats(struct kube_recorder *r, struct kube_recorder_stats *s)
{
	if (r->base)
		r = r->base;
	pthread_mutex_lock(&r->mu);
	*s = r->stats;
	s->tracked = r->spam.len;
	pthread_mutex_unlock(&r->mu);
}

void kube_recorder_free(struct kube_recorder *r)
{
	if (!r)
		return;
	if (r->base) {
		free(r->component);
		free(r);
		return;
	}
	pthread_mutex_lock(&r->mu);
	r->stop = true;
	r->stop_deadline = mono_now_ns() + STOP_GRACE_NS;
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->mu);
	pthread_join(r->thread, NULL);
	cache_clear(&r->cache);
	similar_clear(&r->similar);
	for (size_t i = 0; i < r->spam.cap; i++)
		if (r->spam.slots[i].key)
			free(r->spam.slots[i].value);
	kube_hmap_clear(&r->spam);
	pthread_mutex_destroy(&r->mu);
	pthread_cond_destroy(&r->cond);
	pthread_cond_destroy(&r->idle_cond);
	free(r->component);
	free(r->host);
	free(r);
}

void kube_vevent_about(struct kube_recorder *r, const struct kube_obj *about,
		       enum kube_event_type type, const char *reason, const char *fmt, va_list ap)
{
	struct kube_objref ref;
	char uid[64], msg[KUBE_EVENT_MESSAGE_MAX];

	if (!r || !about)
		return;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	kube_objref_of(about, &ref, uid, sizeof(uid));
	kube_event(r, &ref, type, reason, "%s", msg);
}

void kube_event_about(struct kube_recorder *r, const struct kube_obj *about,
		      enum kube_event_type type, const char *reason, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	kube_vevent_about(r, about, type, reason, fmt, ap);
	va_end(ap);
}
