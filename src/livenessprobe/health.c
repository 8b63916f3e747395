/*
 * livenessprobe's /healthz: one CSI Probe per request, bounded by --probe-timeout.
 *
 * The requests that arrive while a Probe is in flight wait for its answer instead of sending
 * their own (single flight): however many clients ask at once, the driver sees at most one Probe
 * from us, and every request is answered within the probe timeout of its arrival, because the
 * Probe it joined started earlier and has the same deadline. The answer a joiner gets is then
 * at most one timeout old, which a liveness check cannot tell from a fresh one.
 *
 * On shutdown lvp_health_close() stops new Probes, so that stopping the HTTP server waits for
 * no driver; a Probe already in flight is left behind by the caller.
 *
 * The connection is the process's one csi_conn: after the driver restarts, the next Probe
 * connects again (a missing or refusing socket answers UNAVAILABLE at once).
 */
#include "livenessprobe/livenessprobe.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "base/timeutil.h"
#include "base/xalloc.h"
#include "csi/client.h"

struct lvp_health {
	struct csi_conn *csi;
	const char *driver;
	int64_t timeout_ns;
	pthread_mutex_t mu;
	pthread_cond_t done; /* on CLOCK_MONOTONIC: a clock step must not stretch a wait */
	/* Guarded by mu: */
	bool running;        /* a Probe is in flight */
	bool closing;        /* shutting down: no new Probe starts */
	unsigned long finished; /* Probes finished so far; a joiner waits for it to move */
	int status;          /* the last finished Probe's answer */
	char body[1200];
};

struct lvp_health *lvp_health_new(struct csi_conn *csi, const char *driver, int64_t timeout_ns)
{
	struct lvp_health *h = xcalloc(1, sizeof(*h));
	pthread_condattr_t ca;

	h->csi = csi;
	h->driver = driver;
	h->timeout_ns = timeout_ns;
	pthread_mutex_init(&h->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&h->done, &ca);
	pthread_condattr_destroy(&ca);
	return h;
}

void lvp_health_free(struct lvp_health *h)
{
	if (!h)
		return;
	pthread_cond_destroy(&h->done);
	pthread_mutex_destroy(&h->mu);
	free(h);
}

/* Sends one Probe; returns the HTTP status and writes the body, logging as upstream does. */
static int probe_once(struct lvp_health *h, char *body, size_t len)
{
	Csi__V1__ProbeRequest req = CSI__V1__PROBE_REQUEST__INIT;
	Csi__V1__ProbeResponse *resp = NULL;
	struct csi_status cs;

	KLOG_V(5, "Sending probe request to CSI driver driver=%s", LOGQ(h->driver));
	if (csi_probe(h->csi, &req, &resp, h->timeout_ns, &cs) != 0) {
		/* Go's status error text, which upstream writes as the body */
		snprintf(body, len, "rpc error: code = %s desc = %s", csi_code_go_name(cs.code),
			 cs.message);
		KLOG_E("Health check failed err=%s", LOGQ(body));
		return 500;
	}
	bool ready = !resp->ready || resp->ready->value;
	csi_msg_free(resp);
	if (!ready) {
		snprintf(body, len, "driver responded but is not ready");
		KLOG_E("Driver responded but is not ready");
		return 500;
	}
	snprintf(body, len, "ok");
	KLOG_V(5, "Health check succeeded");
	return 200;
}

static struct timespec mono_deadline(int64_t ns)
{
	int64_t at = mono_now_ns() + ns;
	struct timespec ts = { (time_t)(at / NSEC_PER_SEC), (long)(at % NSEC_PER_SEC) };
	return ts;
}

/* Waits for the Probe in flight (mu held); returns its status, or 0 when it did not end. */
static int join_probe(struct lvp_health *h, struct strbuf *body)
{
	unsigned long seen = h->finished;
	/* the Probe joined ends within timeout_ns; the margin covers the scheduler only */
	struct timespec until = mono_deadline(h->timeout_ns + 50 * NSEC_PER_MSEC);

	while (h->finished == seen) {
		if (pthread_cond_timedwait(&h->done, &h->mu, &until) != 0 && h->finished == seen)
			return 0;
	}
	strbuf_addstr(body, h->body);
	return h->status;
}

int lvp_health_serve(void *ud, struct strbuf *body, const char **content_type)
{
	struct lvp_health *h = ud;
	char text[sizeof(h->body)];
	int status;

	(void)content_type;
	pthread_mutex_lock(&h->mu);
	if (h->closing && !h->running) {
		pthread_mutex_unlock(&h->mu);
		strbuf_addstr(body, "livenessprobe is shutting down");
		return 503;
	}
	if (h->running) {
		status = join_probe(h, body);
		pthread_mutex_unlock(&h->mu);
		if (status)
			return status;
		strbuf_addstr(body, "rpc error: code = DeadlineExceeded desc = context deadline exceeded");
		return 500;
	}
	h->running = true;
	pthread_mutex_unlock(&h->mu);

	status = probe_once(h, text, sizeof(text));

	pthread_mutex_lock(&h->mu);
	h->status = status;
	memcpy(h->body, text, sizeof(h->body));
	h->finished++;
	h->running = false;
	pthread_cond_broadcast(&h->done);
	pthread_mutex_unlock(&h->mu);
	strbuf_addstr(body, text);
	return status;
}

bool lvp_health_close(struct lvp_health *h)
{
	pthread_mutex_lock(&h->mu);
	h->closing = true;
	bool running = h->running;
	pthread_mutex_unlock(&h->mu);
	return running;
}
