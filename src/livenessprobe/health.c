/*
 * livenessprobe's /healthz: a CSI Probe per request, bounded by --probe-timeout, sent by one
 * prober thread so that the HTTP server's thread never waits for the driver.
 *
 * A request is a deferred diag reply: lvp_health_start() puts it on the waiting list and, when no
 * Probe is in flight, wakes the prober; the prober sends one Probe and answers every reply that
 * waited for it. Requests that arrive while a Probe is in flight share its answer (single
 * flight): however many clients ask at once, the driver sees at most one Probe from us, and every
 * request is answered within the probe timeout of its arrival, because the Probe it joined
 * started earlier and has the same deadline. The answer a joiner gets is then at most one
 * timeout old, which a liveness check cannot tell from a fresh one.
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

#include "base/diag.h"
#include "base/log.h"
#include "base/xalloc.h"
#include "csi/client.h"

struct lvp_health {
	struct csi_conn *csi;
	const char *driver;
	int64_t timeout_ns;
	pthread_t prober;
	pthread_mutex_t mu;
	pthread_cond_t wake; /* the prober's: a Probe is wanted, or quit */
	/* Guarded by mu: */
	bool running;        /* a Probe is wanted, in flight, or its replies are being answered */
	bool closing;        /* shutting down: no new Probe starts */
	bool quit;           /* lvp_health_free: the prober ends */
	struct diag_reply **waiting; /* the requests the next answer goes to */
	size_t nwaiting, cap;
};

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
		KLOG_ERR(body, "Health check failed");
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

/* The prober thread: one Probe per wake-up, its answer to every request waiting then. */
static void *prober_main(void *arg)
{
	struct lvp_health *h = arg;
	char text[1200];

	pthread_mutex_lock(&h->mu);
	for (;;) {
		while (!h->running && !h->quit)
			pthread_cond_wait(&h->wake, &h->mu);
		if (h->quit)
			break;
		pthread_mutex_unlock(&h->mu);

		int status = probe_once(h, text, sizeof(text));

		pthread_mutex_lock(&h->mu);
		struct diag_reply **done = h->waiting;
		size_t n = h->nwaiting;
		h->waiting = NULL;
		h->nwaiting = h->cap = 0;
		pthread_mutex_unlock(&h->mu);
		for (size_t i = 0; i < n; i++)
			diag_reply_finish(done[i], status, text);
		free(done);
		pthread_mutex_lock(&h->mu);
		/* still running until every reply is answered (lvp_health_close() relies on it);
		 * the requests that came meanwhile want a Probe of their own */
		h->running = h->nwaiting > 0;
	}
	pthread_mutex_unlock(&h->mu);
	return NULL;
}

struct lvp_health *lvp_health_new(struct csi_conn *csi, const char *driver, int64_t timeout_ns)
{
	struct lvp_health *h = xcalloc(1, sizeof(*h));

	h->csi = csi;
	h->driver = driver;
	h->timeout_ns = timeout_ns;
	pthread_mutex_init(&h->mu, NULL);
	pthread_cond_init(&h->wake, NULL);
	if (pthread_create(&h->prober, NULL, prober_main, h) != 0) {
		pthread_cond_destroy(&h->wake);
		pthread_mutex_destroy(&h->mu);
		free(h);
		return NULL;
	}
	return h;
}

void lvp_health_free(struct lvp_health *h)
{
	if (!h)
		return;
	pthread_mutex_lock(&h->mu);
	h->quit = true;
	pthread_cond_signal(&h->wake);
	pthread_mutex_unlock(&h->mu);
	pthread_join(h->prober, NULL);
	free(h->waiting);
	pthread_cond_destroy(&h->wake);
	pthread_mutex_destroy(&h->mu);
	free(h);
}

void lvp_health_start(void *ud, struct diag_reply *r)
{
	struct lvp_health *h = ud;

	pthread_mutex_lock(&h->mu);
	if (h->closing && !h->running) {
		pthread_mutex_unlock(&h->mu);
		diag_reply_finish(r, 503, "livenessprobe is shutting down");
		return;
	}
	if (h->nwaiting == h->cap) {
		h->cap = h->cap ? 2 * h->cap : 8;
		h->waiting = xrealloc(h->waiting, h->cap * sizeof(*h->waiting));
	}
	h->waiting[h->nwaiting++] = r;
	if (!h->running) {
		h->running = true;
		pthread_cond_signal(&h->wake);
	}
	pthread_mutex_unlock(&h->mu);
}

bool lvp_health_close(struct lvp_health *h)
{
	pthread_mutex_lock(&h->mu);
	h->closing = true;
	bool running = h->running;
	pthread_mutex_unlock(&h->mu);
	return running;
}
