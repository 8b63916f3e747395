/*
 * The provisioner library's metrics, with its names and labels:
 *   controller_persistentvolumeclaim_provision_total{class,source}
 *   controller_persistentvolumeclaim_provision_failed_total{class,source}
 *   controller_persistentvolumeclaim_provision_duration_seconds{class,source} (histogram)
 *   controller_persistentvolume_delete_total{class}
 *   controller_persistentvolume_delete_failed_total{class}
 *   controller_persistentvolume_delete_duration_seconds{class} (histogram)
 * Buckets are Prometheus' default ones. Label sets are bounded (PROV_METRICS_MAX_SERIES; further
 * label sets are counted under class="(other)").
 */
#include "provisioner/prov.h"

#include "base/xalloc.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define PROV_METRICS_MAX_SERIES 512
#define NBUCKETS 11
static const double buckets[NBUCKETS] = { .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10 };

struct series {
	char *cls, *source; /* source NULL: a delete series */
	uint64_t ok, failed;
	uint64_t hist[NBUCKETS + 1];
	double sum;
};

struct prov_metrics {
	pthread_mutex_t mu;
	struct series *s;
	size_t n;
};

struct prov_metrics *prov_metrics_new(void)
{
	struct prov_metrics *m = xcalloc(1, sizeof(*m));
	pthread_mutex_init(&m->mu, NULL);
	return m;
}

void prov_metrics_free(struct prov_metrics *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++) {
		free(m->s[i].cls);
		free(m->s[i].source);
	}
	free(m->s);
	pthread_mutex_destroy(&m->mu);
	free(m);
}

static struct series *get(struct prov_metrics *m, const char *cls, const char *source)
{
	for (size_t i = 0; i < m->n; i++)
		if (!strcmp(m->s[i].cls, cls) && (!source) == (!m->s[i].source) &&
		    (!source || !strcmp(m->s[i].source, source)))
			return &m->s[i];
	if (m->n >= PROV_METRICS_MAX_SERIES) {
		if (strcmp(cls, "(other)") != 0)
			return get(m, "(other)", source ? "" : NULL);
		return &m->s[m->n - 1];
	}
	m->s = xrealloc(m->s, (m->n + 1) * sizeof(*m->s));
	struct series *s = &m->s[m->n++];
	memset(s, 0, sizeof(*s));
	s->cls = xstrdup(cls);
	s->source = source ? xstrdup(source) : NULL;
	return s;
}

static void observe(struct prov_metrics *m, const char *cls, const char *source, bool ok,
		    int64_t ns)
{
	pthread_mutex_lock(&m->mu);
	struct series *s = get(m, cls ? cls : "", source);
	if (ok) {
		double sec = (double)ns / 1e9;
		size_t b = 0;
		while (b < NBUCKETS && sec > buckets[b])
			b++;
		s->hist[b]++;
		s->sum += sec;
		s->ok++;
	} else {
		s->failed++;
	}
	pthread_mutex_unlock(&m->mu);
}

void prov_metrics_provision(struct prov_metrics *m, const char *cls, const char *source, bool ok,
			    int64_t duration_ns)
{
	observe(m, cls, source ? source : "", ok, duration_ns);
}

void prov_metrics_delete(struct prov_metrics *m, const char *cls, bool ok, int64_t duration_ns)
{
	observe(m, cls, NULL, ok, duration_ns);
}

/* Label values come from objects (a claim's dataSource kind): escape them as Prometheus asks. */
static void label_value(struct strbuf *out, const char *v)
{
	for (; *v; v++) {
		if (*v == '"' || *v == '\\')
			strbuf_addch(out, '\\');
		if (*v == '\n')
			strbuf_addstr(out, "\\n");
		else
			strbuf_addch(out, *v);
	}
}

static void labels(struct strbuf *out, const struct series *s, const char *extra)
{
	strbuf_addstr(out, "{class=\"");
	label_value(out, s->cls);
	strbuf_addch(out, '"');
	if (s->source) {
		strbuf_addstr(out, ",source=\"");
		label_value(out, s->source);
		strbuf_addch(out, '"');
	}
	if (extra)
		strbuf_addf(out, ",%s", extra);
	strbuf_addch(out, '}');
}

static void render(struct prov_metrics *m, struct strbuf *out, bool provision)
{
	const char *base = provision ? "controller_persistentvolumeclaim_provision"
				     : "controller_persistentvolume_delete";
	const char *what = provision ? "persistent volumes provisioned" : "persistent volumes deleted";
	const char *by = provision ? "storage class name and source of the claim" : "storage class name";

	strbuf_addf(out, "# HELP %s_total Total number of %s successfully. Broken down by %s.\n# TYPE %s_total counter\n",
		    base, what, by, base);
	for (size_t i = 0; i < m->n; i++)
		if ((m->s[i].source != NULL) == provision && m->s[i].ok) {
			strbuf_addf(out, "%s_total", base);
			labels(out, &m->s[i], NULL);
			strbuf_addf(out, " %llu\n", (unsigned long long)m->s[i].ok);
		}
	strbuf_addf(out, "# HELP %s_failed_total Total number of %s failed attempts. Broken down by %s.\n# TYPE %s_failed_total counter\n",
		    base, provision ? "persistent volume provision" : "persistent volume delete", by, base);
	for (size_t i = 0; i < m->n; i++)
		if ((m->s[i].source != NULL) == provision && m->s[i].failed) {
			strbuf_addf(out, "%s_failed_total", base);
			labels(out, &m->s[i], NULL);
			strbuf_addf(out, " %llu\n", (unsigned long long)m->s[i].failed);
		}
	strbuf_addf(out, "# HELP %s_duration_seconds Latency in seconds to %s persistent volumes. Failed %s attempts are ignored. Broken down by %s.\n# TYPE %s_duration_seconds histogram\n",
		    base, provision ? "provision" : "delete", provision ? "provisioning" : "deletion",
		    by, base);
	for (size_t i = 0; i < m->n; i++) {
		const struct series *s = &m->s[i];
		if ((s->source != NULL) != provision || !s->ok)
			continue;
		uint64_t cum = 0;
		for (size_t b = 0; b <= NBUCKETS; b++) {
			char le[32];
			cum += s->hist[b];
			if (b < NBUCKETS)
				snprintf(le, sizeof(le), "le=\"%g\"", buckets[b]);
			else
				snprintf(le, sizeof(le), "le=\"+Inf\"");
			strbuf_addf(out, "%s_duration_seconds_bucket", base);
			labels(out, s, le);
			strbuf_addf(out, " %llu\n", (unsigned long long)cum);
		}
		strbuf_addf(out, "%s_duration_seconds_sum", base);
		labels(out, s, NULL);
		strbuf_addf(out, " %.9g\n", s->sum);
		strbuf_addf(out, "%s_duration_seconds_count", base);
		labels(out, s, NULL);
		strbuf_addf(out, " %llu\n", (unsigned long long)s->ok);
	}
}

void prov_metrics_render(struct prov_metrics *m, struct strbuf *out)
{
	pthread_mutex_lock(&m->mu);
	render(m, out, true);
	render(m, out, false);
	pthread_mutex_unlock(&m->mu);
}
