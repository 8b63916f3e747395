/*
 * csi/metrics: a small fixed-bucket histogram keyed by (method, code).
 *
 * Series are few (one per CSI method and outcome), so a linked list under one mutex is enough;
 * an observation is a list walk and a few additions, far below the cost of the call it measures.
 */
#include "csi/metrics.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "base/xalloc.h"
#include "csi/msg.h"

static const double bucket_bounds[] = { 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 25, 50, 120, 300, 600 };
#define N_BUCKETS (sizeof(bucket_bounds) / sizeof(bucket_bounds[0]))

struct series {
	struct series *next;
	char *method;
	int code;
	uint64_t buckets[N_BUCKETS]; /* non-cumulative; summed when rendered */
	uint64_t count;
	double sum;
};

struct csi_metrics {
	pthread_mutex_t lock;
	char *driver;
	struct series *series;
};

struct csi_metrics *csi_metrics_new(void)
{
	struct csi_metrics *m = xcalloc(1, sizeof(*m));
	pthread_mutex_init(&m->lock, NULL);
	m->driver = xstrdup("unknown");
	return m;
}

void csi_metrics_free(struct csi_metrics *m)
{
	if (!m)
		return;
	struct series *s = m->series;
	while (s) {
		struct series *next = s->next;
		free(s->method);
		free(s);
		s = next;
	}
	free(m->driver);
	pthread_mutex_destroy(&m->lock);
	free(m);
}

void csi_metrics_set_driver(struct csi_metrics *m, const char *driver_name)
{
	pthread_mutex_lock(&m->lock);
	free(m->driver);
	m->driver = xstrdup(driver_name);
	pthread_mutex_unlock(&m->lock);
}

void csi_metrics_observe(void *arg, const char *method, int code, int64_t duration_ns)
{
	struct csi_metrics *m = arg;
	double secs = (double)duration_ns / 1e9;
	pthread_mutex_lock(&m->lock);
	struct series *s = m->series;
	while (s && !(s->code == code && strcmp(s->method, method) == 0))
		s = s->next;
	if (!s) {
		s = xcalloc(1, sizeof(*s));
		s->method = xstrdup(method);
		s->code = code;
		s->next = m->series;
		m->series = s;
	}
	for (size_t i = 0; i < N_BUCKETS; i++) {
		if (secs <= bucket_bounds[i]) {
			s->buckets[i]++;
			break;
		}
	}
	s->count++;
	s->sum += secs;
	pthread_mutex_unlock(&m->lock);
}

static void labels(struct strbuf *out, const char *driver, const struct series *s)
{
	strbuf_addstr(out, "driver_name=");
	strbuf_addquoted(out, driver);
	strbuf_addf(out, ",grpc_status_code=\"%s\",method_name=", csi_code_go_name(s->code));
	strbuf_addquoted(out, s->method);
}

void csi_metrics_render(struct csi_metrics *m, struct strbuf *out)
{
	strbuf_addstr(out, "# HELP csi_sidecar_operations_seconds Seconds taken by CSI calls, by "
			   "method and gRPC status code\n"
			   "# TYPE csi_sidecar_operations_seconds histogram\n");
	pthread_mutex_lock(&m->lock);
	for (const struct series *s = m->series; s; s = s->next) {
		uint64_t cum = 0;
		for (size_t i = 0; i < N_BUCKETS; i++) {
			cum += s->buckets[i];
			strbuf_addstr(out, "csi_sidecar_operations_seconds_bucket{");
			labels(out, m->driver, s);
			strbuf_addf(out, ",le=\"%g\"} %llu\n", bucket_bounds[i],
				    (unsigned long long)cum);
		}
		strbuf_addstr(out, "csi_sidecar_operations_seconds_bucket{");
		labels(out, m->driver, s);
		strbuf_addf(out, ",le=\"+Inf\"} %llu\n", (unsigned long long)s->count);
		strbuf_addstr(out, "csi_sidecar_operations_seconds_sum{");
		labels(out, m->driver, s);
		strbuf_addf(out, "} %.9g\n", s->sum);
		strbuf_addstr(out, "csi_sidecar_operations_seconds_count{");
		labels(out, m->driver, s);
		strbuf_addf(out, "} %llu\n", (unsigned long long)s->count);
	}
	pthread_mutex_unlock(&m->lock);
}
