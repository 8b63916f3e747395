/*
 * libFuzzer: kube-emulator's whole request path (src/emulator: libmicrohttpd's request parsing,
 * the raw-URI check, routing, query strings, body decoding, every verb including all three
 * patch types, Tables, watches, discovery and the fault endpoint). The emulator has no layer
 * below libmicrohttpd that takes a request without a connection, so the harness starts one
 * in-process server on 127.0.0.1 (port picked by the kernel) and sends each request over a
 * fresh TCP connection ("Connection: close"), reading the answer to its end.
 *
 * Input: up to MAX_REQUESTS requests separated by "\n---\n"; each is
 *     METHOD TARGET\n          (the target is the path and query string, sent as given except
 *                               that bytes HTTP forbids there are %-escaped; no space: GET)
 *     CONTENT-TYPE\n           (empty: none; e.g. application/strategic-merge-patch+json)
 *     ACCEPT\n                 (empty: none; e.g. application/json;as=Table;v=v1;g=meta.k8s.io)
 *     BODY                     (the rest; sent with its Content-Length)
 *
 * Bounds, so that no iteration blocks and nothing grows across iterations:
 *   - watches end within 50 ms (--max-watch-timeout) and get bookmarks every 10 ms;
 *   - before every input the store is put back to a fixed baseline (every object deleted through
 *     the store's commit, as a DELETE would, then the baseline objects committed), so the store
 *     holds the baseline plus at most what MAX_REQUESTS requests create; the event history is 64
 *     events / 1 MiB;
 *   - a request that leaves fault rules in place (POST /emulator/faults) ends its input, and the
 *     rules are cleared before the next request: an injected delay never makes a later request
 *     wait;
 *   - a request not answered within REPLY_TIMEOUT_MS (9 s; a request takes milliseconds) is a
 *     finding: the harness aborts.
 * FUZZ_VERBOSE=1 prints each request line and the whole answer on stderr (replays).
 */
#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/strbuf.h"
#include "emulator/emu_internal.h"
#include "emulator/emu_server.h"
#include "fuzz_common.h"

#define MAX_REQUESTS 4
#define REPLY_TIMEOUT_MS 9000 /* under libFuzzer's -timeout=10 of scripts/fuzz.sh */

static struct emu_server *srv;
static bool verbose; /* FUZZ_VERBOSE=1: each request and answer on stderr, for replays */
static struct sockaddr_in addr;

/* What each input starts from: objects the requests can get, update, patch and delete. */
static const char *const baseline[] = {
	"{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"default\"},"
	"\"spec\":{\"finalizers\":[\"kubernetes\"]},\"status\":{\"phase\":\"Active\"}}",
	"{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"kube-system\"},"
	"\"spec\":{\"finalizers\":[\"kubernetes\"]},\"status\":{\"phase\":\"Active\"}}",
	"{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"kube-node-lease\"},"
	"\"spec\":{\"finalizers\":[\"kubernetes\"]},\"status\":{\"phase\":\"Active\"}}",
	"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p1\",\"namespace\":"
	"\"default\",\"labels\":{\"app\":\"web\",\"tier\":\"front\"},\"finalizers\":[\"f/x\"]},"
	"\"spec\":{\"nodeName\":\"n1\",\"containers\":[{\"name\":\"c1\",\"image\":\"busybox\","
	"\"ports\":[{\"containerPort\":80,\"protocol\":\"TCP\"}],\"volumeMounts\":[{\"name\":"
	"\"v1\",\"mountPath\":\"/data\"}]}],\"volumes\":[{\"name\":\"v1\","
	"\"persistentVolumeClaim\":{\"claimName\":\"pvc1\"}}]},\"status\":{\"phase\":\"Running\","
	"\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}",
	"{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"cm1\",\"namespace\":"
	"\"default\",\"annotations\":{\"a\":\"1\"}},\"data\":{\"k\":\"v\",\"list\":\"[1,2]\"}}",
	"{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\",\"labels\":"
	"{\"topology.kubernetes.io/zone\":\"a\"}},\"spec\":{\"unschedulable\":false},\"status\":"
	"{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}],\"volumesAttached\":"
	"[{\"name\":\"kubernetes.io/csi/loop^v1\",\"devicePath\":\"\"}],\"volumesInUse\":[]}}",
	"{\"apiVersion\":\"v1\",\"kind\":\"PersistentVolume\",\"metadata\":{\"name\":\"pv1\","
	"\"finalizers\":[\"kubernetes.io/pv-protection\"]},\"spec\":{\"capacity\":{\"storage\":"
	"\"1Gi\"},\"accessModes\":[\"ReadWriteOnce\"],\"csi\":{\"driver\":\"loop.kcsi.io\","
	"\"volumeHandle\":\"lv-1\",\"volumeAttributes\":{\"type\":\"thin\"}},"
	"\"persistentVolumeReclaimPolicy\":\"Delete\",\"storageClassName\":\"sc1\"},"
	"\"status\":{\"phase\":\"Bound\"}}",
	"{\"apiVersion\":\"v1\",\"kind\":\"PersistentVolumeClaim\",\"metadata\":{\"name\":\"pvc1\","
	"\"namespace\":\"default\"},\"spec\":{\"accessModes\":[\"ReadWriteOnce\"],\"resources\":"
	"{\"requests\":{\"storage\":\"1Gi\"}},\"storageClassName\":\"sc1\",\"volumeName\":\"pv1\"}}",
	"{\"apiVersion\":\"storage.k8s.io/v1\",\"kind\":\"VolumeAttachment\",\"metadata\":{\"name\":"
	"\"va1\"},\"spec\":{\"attacher\":\"loop.kcsi.io\",\"nodeName\":\"n1\",\"source\":"
	"{\"persistentVolumeName\":\"pv1\"}},\"status\":{\"attached\":true}}",
	"{\"apiVersion\":\"storage.k8s.io/v1\",\"kind\":\"CSINode\",\"metadata\":{\"name\":\"n1\"},"
	"\"spec\":{\"drivers\":[{\"name\":\"loop.kcsi.io\",\"nodeID\":\"n1\",\"topologyKeys\":"
	"[\"topology.loop.kcsi.io/zone\"]}]}}",
	"{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":{\"name\":\"n1\","
	"\"namespace\":\"kube-node-lease\"},\"spec\":{\"holderIdentity\":\"n1\","
	"\"leaseDurationSeconds\":40}}",
};
#define N_BASELINE (sizeof(baseline) / sizeof(baseline[0]))

static void commit_baseline(struct emu_store *st)
{
	for (size_t i = 0; i < N_BASELINE; i++) {
		json_t *o = json_loads(baseline[i], 0, NULL);
		assert(o);
		const char *api = json_string_value(json_object_get(o, "apiVersion"));
		const char *kind = json_string_value(json_object_get(o, "kind"));
		json_t *md = json_object_get(o, "metadata");
		int res = emu_store_resource_by_kind(st, api, kind);
		assert(res >= 0);
		char key[256];
		emu_store_key(&st->res[res], json_string_value(json_object_get(md, "namespace")),
			      json_string_value(json_object_get(md, "name")), key, sizeof(key));
		json_object_set_new(md, "uid", json_sprintf("00000000-0000-4000-8000-%012zu", i));
		json_object_set_new(md, "creationTimestamp", json_string("2026-01-01T00:00:00Z"));
		emu_store_commit(st, res, key, o, EMU_ADDED);
	}
}

/* Every object deleted (newest events say so, as a DELETE would), then the baseline again. */
static void reset_store(void)
{
	struct emu_store *st = &srv->st;
	pthread_mutex_lock(&st->mu);
	for (size_t r = 0; r < st->nres; r++) {
		while (st->res[r].n) {
			struct emu_entry *e = &st->res[r].items[st->res[r].n - 1];
			char *key = strdup(e->key);
			emu_store_commit(st, (int)r, key, json_deep_copy(e->obj), EMU_DELETED);
			free(key);
		}
	}
	commit_baseline(st);
	pthread_mutex_unlock(&st->mu);
}

/* Clears fault rules; true when there were any. */
static bool reset_faults(void)
{
	struct emu_faults *f = &srv->faults;
	pthread_mutex_lock(&f->mu);
	bool had = f->n || f->watch_max_ns;
	f->n = 0;
	f->watch_max_ns = 0;
	pthread_mutex_unlock(&f->mu);
	return had;
}

static void init(void)
{
	verbose = getenv("FUZZ_VERBOSE") != NULL;
	log_set_output_fd(open("/dev/null", O_WRONLY | O_CLOEXEC));
	struct emu_config cfg = {
		.listen = "127.0.0.1:0",
		.watch_history = 64,
		.watch_history_bytes = 1 << 20,
		.bookmark_interval_ns = 10 * 1000000LL,
		.max_watch_timeout_ns = 50 * 1000000LL,
		.idle_timeout_s = 2,
		.max_connections = 64,
	};
	char err[512];
	srv = emu_server_start(&cfg, NULL, err, sizeof(err));
	if (!srv) {
		fprintf(stderr, "fuzz_emu_request: %s\n", err);
		abort();
	}
	unsigned port = 0;
	sscanf(emu_server_url(srv), "http://127.0.0.1:%u", &port);
	addr.sin_family = AF_INET;
	addr.sin_port = htons((uint16_t)port);
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One line of the input (without its newline); advances *p. */
static void take_line(const char **p, const char *end, const char **line, size_t *len)
{
	const char *nl = memchr(*p, '\n', (size_t)(end - *p));
	*line = *p;
	*len = (size_t)((nl ? nl : end) - *p);
	*p = nl ? nl + 1 : end;
}

/* Header value: printable bytes only (no CR/LF to forge another header). */
static void add_header(struct strbuf *rq, const char *name, const char *v, size_t n)
{
	if (!n)
		return;
	strbuf_addf(rq, "%s: ", name);
	for (size_t i = 0; i < n && i < 512; i++)
		strbuf_addch(rq, (unsigned char)v[i] < 0x20 || v[i] == 0x7f ? ' ' : v[i]);
	strbuf_addstr(rq, "\r\n");
}

static void send_request(const char *req, size_t n)
{
	const char *end = req + n, *p = req, *line, *ct, *accept;
	size_t len, ctlen, acceptlen;
	take_line(&p, end, &line, &len);
	take_line(&p, end, &ct, &ctlen);
	take_line(&p, end, &accept, &acceptlen);
	const char *sp = memchr(line, ' ', len);
	struct strbuf rq = STRBUF_INIT;
	const char *target = line;
	size_t tlen = len;
	if (sp && sp > line && sp - line <= 16) {
		for (const char *m = line; m < sp; m++) /* a token: letters only */
			strbuf_addch(&rq, (*m >= 'A' && *m <= 'Z') || (*m >= 'a' && *m <= 'z') ? *m
											   : 'X');
		target = sp + 1;
		tlen = len - (size_t)(sp + 1 - line);
	} else {
		strbuf_addstr(&rq, "GET");
	}
	strbuf_addch(&rq, ' ');
	if (!tlen || target[0] != '/')
		strbuf_addch(&rq, '/');
	for (size_t i = 0; i < tlen; i++) {
		unsigned char c = (unsigned char)target[i];
		if (c <= 0x20 || c == 0x7f || c == '#')
			strbuf_addf(&rq, "%%%02X", c);
		else
			strbuf_addch(&rq, (char)c);
	}
	strbuf_addstr(&rq, " HTTP/1.1\r\nHost: fuzz\r\nConnection: close\r\n");
	add_header(&rq, "Content-Type", ct, ctlen);
	add_header(&rq, "Accept", accept, acceptlen);
	strbuf_addf(&rq, "Content-Length: %zu\r\n\r\n", (size_t)(end - p));
	strbuf_add(&rq, p, (size_t)(end - p));

	if (verbose)
		fprintf(stderr, "\n>>> %.*s\n", (int)strcspn(rq.buf, "\r"), rq.buf);
	/*
	 * Non-blocking: libFuzzer's timer signal interrupts blocking calls (a connect() failed with
	 * EINTR). The server closes first (Connection: close); closing with a zero linger then
	 * resets its end instead of leaving it in TIME_WAIT, which would use up the ~28,000 local
	 * ports within a few minutes at this rate.
	 */
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0 || (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 &&
		       errno != EINPROGRESS && errno != EINTR)) {
		perror("fuzz_emu_request: connect");
		abort();
	}
	struct linger lg = { 1, 0 };
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	/* write and read interleaved: a server that answers early must not deadlock us */
	size_t off = 0;
	int64_t deadline = now_ms() + REPLY_TIMEOUT_MS;
	char buf[16384];
	for (;;) {
		struct pollfd pf = { fd, POLLIN | (off < rq.len ? POLLOUT : 0), 0 };
		int64_t left = deadline - now_ms();
		if (left <= 0) {
			fprintf(stderr, "fuzz_emu_request: no complete answer in %d ms to: %.200s\n",
				REPLY_TIMEOUT_MS, rq.buf);
			abort();
		}
		if (poll(&pf, 1, (int)left) < 0 && errno != EINTR)
			abort();
		if (pf.revents & POLLOUT) {
			ssize_t w = send(fd, rq.buf + off, rq.len - off, MSG_NOSIGNAL);
			if (w > 0)
				off += (size_t)w;
			else if (w < 0 && errno != EAGAIN && errno != EINTR)
				off = rq.len; /* the server closed: read what it said */
		}
		if (pf.revents & (POLLIN | POLLHUP | POLLERR)) {
			ssize_t r = recv(fd, buf, sizeof(buf), 0);
			if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
				break;
			if (r > 0 && verbose)
				fprintf(stderr, "%.*s", (int)r, buf);
		}
	}
	close(fd);
	strbuf_release(&rq);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!srv)
		init();
	reset_faults();
	reset_store();
	const char *p = (const char *)data, *end = p + size;
	for (int i = 0; i < MAX_REQUESTS && p < end; i++) {
		const char *sep = memmem(p, (size_t)(end - p), "\n---\n", 5);
		const char *stop = sep ? sep : end;
		send_request(p, (size_t)(stop - p));
		if (reset_faults())
			break;
		p = sep ? sep + 5 : end;
	}
	return 0;
}
