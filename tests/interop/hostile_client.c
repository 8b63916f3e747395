/*
 * hostile_client: one long-lived connection of kcsi's CSI client (src/csi/client.h), the way a
 * sidecar holds it, against a hostile driver (tests/e2e/h2_hostile_driver.py), for
 * tests/e2e/hostile_driver.sh (issue 34).
 *
 *   hostile_client ENDPOINT TAG TIMEOUT_MS REQUEST_BYTES [PROBE_MS GAP_MS AFTER_MS]
 *
 * On one connection: a legitimate Probe every GAP_MS (100) with a deadline of PROBE_MS (1000)
 * each, from a second thread, until AFTER_MS (500) after the hostile call has ended,
 * while the main thread makes one ControllerPublishVolume whose volume_id is "hostile-TAG" (the
 * driver misbehaves on that stream) with a secret padding the request to about REQUEST_BYTES,
 * and TIMEOUT_MS as its deadline. A third thread samples this process's VmRSS every 10 ms.
 * Prints one line:
 *   code=NAME ms=N rss_before=KiB rss_peak=KiB rss_after=KiB probes_ok=N probes=N worst_ms=N
 *   after_ok=0|1 message="..."
 * (after_ok: a Probe on the same connection once the hostile call has ended). Exit status 0
 * whenever the line was printed; the scenario judges the figures.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/timeutil.h"
#include "csi/client.h"

static struct csi_conn *conn;
static atomic_bool stop;
static atomic_long rss_peak;
static int probes, probes_ok;
static int64_t worst_ns;
static long probe_ms = 1000, gap_ms = 100;

static long rss_kb(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kb = 0;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb;
}

static void nap_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static bool probe(int64_t *took)
{
	Csi__V1__ProbeRequest req = CSI__V1__PROBE_REQUEST__INIT;
	Csi__V1__ProbeResponse *resp = NULL;
	struct csi_status st;
	int64_t t0 = mono_now_ns();
	int code = csi_probe(conn, &req, &resp, probe_ms * 1000000LL, &st);
	*took = mono_now_ns() - t0;
	csi_msg_free(resp);
	return code == 0;
}

static void *prober(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		int64_t took;
		probes++;
		probes_ok += probe(&took);
		if (took > worst_ns)
			worst_ns = took;
		nap_ms(gap_ms);
	}
	return NULL;
}

static void *sampler(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		long kb = rss_kb();
		if (kb > atomic_load(&rss_peak))
			atomic_store(&rss_peak, kb);
		nap_ms(10);
	}
	return NULL;
}

/* Appends a protobuf length-delimited field header (tag, varint length). */
static size_t put_field(uint8_t *p, unsigned field, size_t len)
{
	size_t n = 0;
	p[n++] = (uint8_t)(field << 3 | 2);
	do {
		p[n] = (uint8_t)(len & 0x7f);
		len >>= 7;
		p[n++] |= len ? 0x80 : 0;
	} while (len);
	return n;
}

int main(int argc, char **argv)
{
	if (argc != 5 && argc != 8) {
		fprintf(stderr, "usage: hostile_client ENDPOINT TAG TIMEOUT_MS REQUEST_BYTES "
			"[PROBE_MS GAP_MS AFTER_MS]\n");
		return 2;
	}
	long after_ms = 500;
	if (argc == 8)
		probe_ms = atol(argv[5]), gap_ms = atol(argv[6]), after_ms = atol(argv[7]);
	long timeout_ms = atol(argv[3]);
	size_t pad = (size_t)atol(argv[4]);
	char err[512], vol[128];
	struct csi_conn_opts o = CSI_CONN_OPTS_INIT;
	o.connect_timeout_ns = 10 * NSEC_PER_SEC;
	conn = csi_connect(argv[1], &o, err, sizeof(err));
	if (!conn) {
		fprintf(stderr, "hostile_client: %s\n", err);
		return 1;
	}
	snprintf(vol, sizeof(vol), "hostile-%s", argv[2]);

	/* ControllerPublishVolumeRequest: volume_id (1), node_id (2), secrets (5) {"pad": pad}. */
	size_t vlen = strlen(vol), cap = vlen + pad + 64, n = 0;
	uint8_t *req = malloc(cap);
	if (!req)
		return 1;
	n += put_field(req + n, 1, vlen);
	memcpy(req + n, vol, vlen), n += vlen;
	n += put_field(req + n, 2, 6);
	memcpy(req + n, "node-1", 6), n += 6;
	if (pad) {
		uint8_t vh[16];
		size_t vhn = put_field(vh, 2, pad);
		n += put_field(req + n, 5, 5 + vhn + pad);
		n += put_field(req + n, 1, 3);
		memcpy(req + n, "pad", 3), n += 3;
		memcpy(req + n, vh, vhn), n += vhn;
		memset(req + n, 'a', pad), n += pad;
	}

	int64_t took;
	probe(&took); /* the connection is up and one call's buffers exist before the baseline */
	nap_ms(100);
	long before = rss_kb();
	atomic_store(&rss_peak, before);
	pthread_t pt, st;
	pthread_create(&st, NULL, sampler, NULL);
	pthread_create(&pt, NULL, prober, NULL);
	nap_ms(300);

	struct csi_status s;
	void *out = NULL;
	size_t outlen = 0;
	int64_t t0 = mono_now_ns();
	int code = csi_call_bytes(conn, CSI_METHOD(Controller, ControllerPublishVolume), req, n, &out,
				  &outlen, timeout_ms * 1000000LL, &s);
	int64_t ms = (mono_now_ns() - t0) / 1000000;
	free(out);
	free(req);
	nap_ms(after_ms);
	atomic_store(&stop, true);
	pthread_join(pt, NULL);
	pthread_join(st, NULL);
	probe_ms = 1000;
	bool after = probe(&took);
	nap_ms(200);
	printf("code=%s ms=%lld rss_before=%ld rss_peak=%ld rss_after=%ld probes_ok=%d probes=%d "
	       "worst_ms=%lld after_ok=%d message=\"%.160s\"\n",
	       code ? csi_code_name(code) : "OK", (long long)ms, before, atomic_load(&rss_peak),
	       rss_kb(), probes_ok, probes, (long long)(worst_ns / 1000000), after,
	       code ? s.message : "");
	fflush(stdout);
	/* A connection the driver stopped reading may not close cleanly; do not wait for it. */
	_exit(0);
}
