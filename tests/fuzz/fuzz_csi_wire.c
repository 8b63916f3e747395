/*
 * libFuzzer: kcsi's gRPC transport, the layer between a CSI peer's bytes and a handler or a
 * caller: src/csi/wire.c (grpc-timeout, grpc-message, the length-prefixed message) alone, and
 * src/csi/server.c and src/csi/client.c (on nghttp2) over real unix sockets.
 *
 * Input: the first byte picks the mode (its value modulo 4), the rest is the mode's input.
 *   0  wire.c alone. The rest is read four ways: as a grpc-timeout value (checked against a
 *      reference parser); its first 8 bytes as a duration to format (checked: at most 8 digits,
 *      parses back to no less, by less than one unit more); as [outlen byte][grpc-message]
 *      decoded into a heap buffer of exactly outlen bytes; and as
 *      [limit byte][k][k chunk sizes][DATA bytes] fed to a message accumulator in chunks of
 *      those sizes (a size 0 is an empty DATA frame), whose outcome is checked against a
 *      reference reading of the whole bytes. Also decode(encode(s)) == s.
 *   1  the SERVER: a csi_server started once (LLVMFuzzerInitialize) on a unix socket in a
 *      private temp folder, serving Identity Probe, GetPluginInfo and GetPluginCapabilities
 *      (the last always fails with a message that needs percent-encoding). Per input: connect,
 *      send the HTTP/2 client preface and then the rest as the client's bytes (so it should
 *      begin with a SETTINGS frame), reading the server's answers meanwhile; wait until every
 *      stream the input ended has an answer (END_STREAM or RST_STREAM), or a GOAWAY, or
 *      ANSWER_WAIT_MS; shutdown(SHUT_WR); read to EOF. A finding (abort) besides the
 *      sanitizers: the server has not read the input within IO_CAP_MS, or still holds the
 *      connection IO_CAP_MS after the client's EOF.
 *   2  the CLIENT, answered after its request: a fake driver in the harness (one thread per
 *      input, on a second listening socket) accepts, writes an empty SETTINGS frame, waits
 *      until the client's request has ended (END_STREAM on stream 1), writes the rest as the
 *      driver's bytes, shuts down its side and waits for the client to close. The harness
 *      calls csi_connect() and csi_call_bytes("/csi.v1.Identity/Probe", 1 s timeout); the call
 *      must return a status (any code; OK with a response buffer) and never hang.
 *   3  the same, but the rest is written as soon as csi_connect() has returned, racing the
 *      request (so it may arrive before the request's HEADERS), and the fake driver shuts down
 *      its side once the request has ended. (Writing it with the SETTINGS frame would mostly
 *      break the handshake, and csi_connect() would retry until its timeout.)
 *      In both modes further connections (the client reconnects after a broken one) are
 *      accepted and closed at once.
 *
 * What it does to the machine: one folder /tmp/kcsi-fuzz-wire-XXXXXX with two sockets, removed
 * at exit; threads: the server's I/O thread and 2 workers, and per client-mode input the
 * client's I/O thread and the fake driver's. No file is written. Logs go to /dev/null.
 * FUZZ_VERBOSE=1 prints on stderr what each side received (frame types) and the call's status,
 * for replays.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/strbuf.h"
#include "csi/client.h"
#include "csi/server.h"
#include "csi/wire.h"
#include "fuzz_common.h"

#define IO_CAP_MS 2000      /* the server reads the input and closes after EOF within this */
#define ANSWER_WAIT_MS 100  /* longest wait for the server's answers before the EOF */
#define CALL_TIMEOUT_NS 1000000000LL

/* A finding whatever NDEBUG says: print what failed and abort. */
#define FUZZ_CHECK(cond) \
	do { \
		if (!(cond)) { \
			fprintf(stderr, "fuzz_csi_wire: %s:%d: check failed: %s\n", __FILE__, \
				__LINE__, #cond); \
			abort(); \
		} \
	} while (0)

static const uint8_t preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
#define PREFACE_LEN 24
static const uint8_t empty_settings[9] = { 0, 0, 0, 4, 0, 0, 0, 0, 0 };

static char dir[64], srv_path[128], peer_path[128], peer_endpoint[160];
static struct csi_server *srv;
static int peer_lfd = -1;
static bool verbose;

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- mode 0: wire.c alone ---- */

/* The grammar of grpc-timeout, written out again: 1..8 digits, one unit, saturating. */
static int64_t ref_timeout(const uint8_t *v, size_t n)
{
	if (n < 2 || n > 9)
		return -1;
	__int128 x = 0;
	for (size_t i = 0; i + 1 < n; i++) {
		if (v[i] < '0' || v[i] > '9')
			return -1;
		x = x * 10 + (v[i] - '0');
	}
	static const char units[] = "HMSmun";
	static const int64_t ns[] = { 3600000000000LL, 60000000000LL, 1000000000LL, 1000000, 1000,
				      1 };
	for (int u = 0; u < 6; u++)
		if (v[n - 1] == (uint8_t)units[u])
			return x * ns[u] > INT64_MAX ? INT64_MAX : (int64_t)(x * ns[u]);
	return -1;
}

static void fuzz_timeout(const uint8_t *d, size_t n)
{
	FUZZ_CHECK(csi_wire_timeout_parse((const char *)d, n) == ref_timeout(d, n));

	uint64_t u = 0;
	for (size_t i = 0; i < 8 && i < n; i++)
		u |= (uint64_t)d[i] << (8 * i);
	int64_t ns = (int64_t)u;
	char out[16];
	csi_wire_timeout_format(ns, out);
	size_t len = strnlen(out, sizeof(out));
	FUZZ_CHECK(len >= 2 && len <= 9);
	int64_t back = csi_wire_timeout_parse(out, len);
	int64_t want = ns < 1 ? 1 : ns;
	FUZZ_CHECK(back >= want);
	const uint8_t one[2] = { '1', (uint8_t)out[len - 1] };
	int64_t unit = ref_timeout(one, 2);
	FUZZ_CHECK(unit > 0 && back - want < unit);
}

static void fuzz_message(const uint8_t *d, size_t n)
{
	if (!n)
		return;
	size_t outlen = 1 + d[0] % 48;
	char *out = malloc(outlen); /* exactly outlen: ASan sees a byte written past it */
	csi_wire_message_decode(d + 1, n - 1, out, outlen);
	FUZZ_CHECK(strnlen(out, outlen) < outlen);
	FUZZ_CHECK(strnlen(out, outlen) <= n - 1);
	free(out);

	/* what the server encodes its client decodes back, up to a NUL */
	char *s = fuzz_cstr(d, n);
	struct strbuf enc = STRBUF_INIT;
	csi_wire_message_encode(s, &enc);
	for (size_t i = 0; i < enc.len; i++)
		FUZZ_CHECK(enc.buf[i] >= 0x20 && enc.buf[i] <= 0x7e);
	size_t slen = strlen(s);
	char *dec = malloc(slen + 1);
	csi_wire_message_decode((const uint8_t *)enc.buf, enc.len, dec, slen + 1);
	FUZZ_CHECK(strcmp(dec, s) == 0);
	free(dec);
	strbuf_release(&enc);
	free(s);
}

static void fuzz_accumulator(const uint8_t *d, size_t n)
{
	if (n < 2)
		return;
	size_t limit = d[0] < 200 ? d[0] : (size_t)(d[0] - 200) << 16;
	size_t k = d[1] % 8;
	if (n < 2 + k)
		return;
	const uint8_t *sizes = d + 2, *p = d + 2 + k;
	size_t len = n - 2 - k;

	struct csi_wire_msg m;
	csi_wire_msg_init(&m, limit);
	enum csi_wire_msg_err e = CSI_WIRE_MSG_OK;
	size_t off = 0, i = 0, idle = 0;
	do {
		size_t c = k ? sizes[i++ % k] : len - off;
		if (idle >= k || c > len - off)
			c = len - off; /* a whole round of empty frames: the rest at once */
		idle = c ? 0 : idle + 1;
		enum csi_wire_msg_err r = csi_wire_msg_feed(&m, p + off, c);
		FUZZ_CHECK(!e || r == e); /* an error sticks */
		e = r;
		off += c;
	} while (off < len);

	/* the same bytes read at once, by the protocol's definition */
	enum csi_wire_msg_err want = CSI_WIRE_MSG_OK;
	bool complete = false;
	uint32_t mlen = 0;
	if (len >= 5) {
		mlen = (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 | p[4];
		if (p[0])
			want = CSI_WIRE_MSG_COMPRESSED;
		else if (mlen > limit)
			want = CSI_WIRE_MSG_TOO_LARGE;
		else if (len - 5 > mlen)
			want = CSI_WIRE_MSG_TOO_MANY;
		else
			complete = len - 5 == mlen;
	}
	FUZZ_CHECK(e == want);
	FUZZ_CHECK(csi_wire_msg_complete(&m) == complete);
	FUZZ_CHECK(csi_wire_msg_empty(&m) == (len == 0));
	if (want != CSI_WIRE_MSG_OK)
		FUZZ_CHECK(m.buf == NULL); /* a refused message holds nothing */
	if (complete) {
		size_t got;
		uint8_t *b = csi_wire_msg_take(&m, &got);
		FUZZ_CHECK(got == mlen && (mlen == 0 || memcmp(b, p + 5, mlen) == 0));
		FUZZ_CHECK(csi_wire_msg_empty(&m) && !csi_wire_msg_complete(&m));
		free(b);
	}
	csi_wire_msg_release(&m);
}

/* ---- HTTP/2 frames, read from a byte stream: each whole frame's header is reported ---- */

struct frame_scan {
	size_t skip_first;  /* bytes to ignore at the start (the client preface) */
	uint8_t hdr[9];
	size_t hdr_got;     /* 9: the header is in, payload_left bytes of payload to come */
	size_t payload_left;
};

typedef void (*frame_fn)(void *arg, uint8_t type, uint8_t flags, uint32_t stream);

static void frame_done(struct frame_scan *fs, frame_fn fn, void *arg)
{
	uint32_t id = ((uint32_t)fs->hdr[5] << 24 | (uint32_t)fs->hdr[6] << 16 |
		       (uint32_t)fs->hdr[7] << 8 | fs->hdr[8]) & 0x7fffffff;
	fs->hdr_got = 0;
	fn(arg, fs->hdr[3], fs->hdr[4], id);
}

static void frame_scan(struct frame_scan *fs, const uint8_t *p, size_t n, frame_fn fn, void *arg)
{
	while (n) {
		if (fs->skip_first) {
			size_t k = fs->skip_first < n ? fs->skip_first : n;
			fs->skip_first -= k, p += k, n -= k;
		} else if (fs->hdr_got == 9) {
			size_t k = fs->payload_left < n ? fs->payload_left : n;
			fs->payload_left -= k, p += k, n -= k;
			if (!fs->payload_left)
				frame_done(fs, fn, arg);
		} else {
			fs->hdr[fs->hdr_got++] = *p++;
			n--;
			if (fs->hdr_got < 9)
				continue;
			fs->payload_left = (size_t)fs->hdr[0] << 16 | (size_t)fs->hdr[1] << 8 |
					   fs->hdr[2];
			if (!fs->payload_left)
				frame_done(fs, fn, arg);
		}
	}
}

enum { F_DATA = 0, F_HEADERS = 1, F_RST_STREAM = 3, F_GOAWAY = 7 };
#define FLAG_END_STREAM 1

static const char *frame_name(uint8_t type)
{
	static const char *const names[] = { "DATA", "HEADERS", "PRIORITY", "RST_STREAM",
					     "SETTINGS", "PUSH_PROMISE", "PING", "GOAWAY",
					     "WINDOW_UPDATE", "CONTINUATION" };
	return type < 10 ? names[type] : "unknown";
}

/* ---- mode 1: the server ---- */

#define MAX_TRACKED 64

/* Streams the input ended (the server owes them an answer) and the answers seen. */
struct exchange {
	uint32_t opened[MAX_TRACKED], ended[MAX_TRACKED];
	size_t nopened, nended, nanswered;
	bool answered[MAX_TRACKED];
	bool goaway;
};

static int find_id(const uint32_t *ids, size_t n, uint32_t id)
{
	for (size_t i = 0; i < n; i++)
		if (ids[i] == id)
			return (int)i;
	return -1;
}

static void on_client_frame(void *arg, uint8_t type, uint8_t flags, uint32_t id)
{
	struct exchange *x = arg;
	if (type == F_HEADERS && (id & 1) && find_id(x->opened, x->nopened, id) < 0 &&
	    x->nopened < MAX_TRACKED)
		x->opened[x->nopened++] = id;
	if ((type == F_HEADERS || type == F_DATA) && (flags & FLAG_END_STREAM) &&
	    find_id(x->opened, x->nopened, id) >= 0 && find_id(x->ended, x->nended, id) < 0 &&
	    x->nended < MAX_TRACKED)
		x->ended[x->nended++] = id;
	if (type == F_RST_STREAM) { /* a stream the client cancelled is owed nothing */
		int i = find_id(x->ended, x->nended, id);
		if (i >= 0)
			x->ended[i] = 0;
	}
}

static void on_server_frame(void *arg, uint8_t type, uint8_t flags, uint32_t id)
{
	struct exchange *x = arg;
	if (verbose)
		fprintf(stderr, "  server: %s flags=0x%02x stream=%u\n", frame_name(type), flags, id);
	if (type == F_GOAWAY)
		x->goaway = true;
	bool end = type == F_RST_STREAM ||
		   ((type == F_HEADERS || type == F_DATA) && (flags & FLAG_END_STREAM));
	int i = end ? find_id(x->ended, x->nended, id) : -1;
	if (i >= 0 && !x->answered[i]) {
		x->answered[i] = true;
		x->nanswered++;
	}
}

static bool all_answered(const struct exchange *x)
{
	size_t owed = 0;
	for (size_t i = 0; i < x->nended; i++)
		owed += x->ended[i] != 0 && !x->answered[i];
	return owed == 0;
}

static int connect_unix(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	int64_t deadline = now_ms() + IO_CAP_MS;
	for (;;) {
		/* non-blocking: libFuzzer's timer signal must not leave a connect() half done */
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0) {
			perror("fuzz_csi_wire: socket");
			abort();
		}
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			return fd;
		int err = errno;
		close(fd);
		/* EAGAIN: the backlog is full for a moment */
		if ((err != EAGAIN && err != EINTR) || now_ms() >= deadline) {
			fprintf(stderr, "fuzz_csi_wire: connect %s: %s\n", path, strerror(err));
			abort();
		}
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
	}
}

static void drive_server(const uint8_t *in, size_t n)
{
	size_t len = PREFACE_LEN + n;
	uint8_t *out = malloc(len);
	memcpy(out, preface, PREFACE_LEN);
	memcpy(out + PREFACE_LEN, in, n);
	struct exchange x = { 0 };
	struct frame_scan cs = { 0 }, ss = { 0 };
	frame_scan(&cs, in, n, on_client_frame, &x);

	int fd = connect_unix(srv_path);
	size_t off = 0;
	bool eof = false, shut = false;
	int64_t start = now_ms(), written_at = 0, shut_at = 0;
	uint8_t buf[16384];
	while (!eof) {
		int64_t now = now_ms();
		if (off < len && now - start >= IO_CAP_MS) {
			fprintf(stderr, "fuzz_csi_wire: the server read %zu of %zu bytes in %d ms\n",
				off, len, IO_CAP_MS);
			abort();
		}
		if (off == len && !written_at)
			written_at = now;
		if (!shut && written_at &&
		    (all_answered(&x) || x.goaway || now - written_at >= ANSWER_WAIT_MS)) {
			shutdown(fd, SHUT_WR);
			shut = true;
			shut_at = now;
		}
		if (shut && now - shut_at >= IO_CAP_MS) {
			fprintf(stderr, "fuzz_csi_wire: the server kept the connection %d ms after "
				"the client's EOF\n", IO_CAP_MS);
			abort();
		}
		int timeout = shut ? (int)(shut_at + IO_CAP_MS - now) :
			      written_at ? (int)(written_at + ANSWER_WAIT_MS - now) :
					   (int)(start + IO_CAP_MS - now);
		struct pollfd pf = { fd, (short)(POLLIN | (off < len ? POLLOUT : 0)), 0 };
		if (poll(&pf, 1, timeout < 1 ? 1 : timeout) < 0 && errno != EINTR)
			abort();
		if (pf.revents & POLLOUT) {
			ssize_t w = send(fd, out + off, len - off, MSG_NOSIGNAL);
			if (w > 0)
				off += (size_t)w;
			else if (w < 0 && errno != EAGAIN && errno != EINTR)
				off = len; /* the server closed: read what it said */
		}
		if (pf.revents & (POLLIN | POLLHUP | POLLERR)) {
			ssize_t r = recv(fd, buf, sizeof(buf), 0);
			if (r > 0)
				frame_scan(&ss, buf, (size_t)r, on_server_frame, &x);
			else if (r == 0 || (errno != EAGAIN && errno != EINTR))
				eof = true;
		}
	}
	if (verbose)
		fprintf(stderr, "  streams ended by the input: %zu, answered: %zu%s\n", x.nended,
			x.nanswered, x.goaway ? ", GOAWAY" : "");
	close(fd);
	free(out);
}

/* ---- modes 2 and 3: the client against a fake driver ---- */

struct peer {
	const uint8_t *in;
	size_t n;
	bool after_request; /* mode 2: write the input once the client's request has ended */
	int ctl[2];         /* the harness writes 'g' when csi_connect() returned, 'x' to stop */
	bool request_ended;
};

static void on_request_frame(void *arg, uint8_t type, uint8_t flags, uint32_t id)
{
	struct peer *pr = arg;
	if (verbose)
		fprintf(stderr, "  client: %s flags=0x%02x stream=%u\n", frame_name(type), flags, id);
	if (id == 1 && (type == F_HEADERS || type == F_DATA) && (flags & FLAG_END_STREAM))
		pr->request_ended = true;
}

static void *peer_main(void *arg)
{
	struct peer *pr = arg;
	int fd = -1;
	bool served = false, writing = false, wrote_all = false, shut = false;
	size_t off = 0;
	struct frame_scan fs = { .skip_first = PREFACE_LEN };
	uint8_t buf[16384];
	for (;;) {
		struct pollfd p[3] = { { pr->ctl[0], POLLIN, 0 }, { peer_lfd, POLLIN, 0 },
				       { fd, POLLIN, 0 } };
		if (writing)
			p[2].events |= POLLOUT;
		if (poll(p, fd >= 0 ? 3 : 2, -1) < 0 && errno != EINTR)
			abort();
		char cmd = 0;
		if ((p[0].revents & POLLIN) && read(pr->ctl[0], &cmd, 1) == 1 && cmd == 'x')
			break;
		if (cmd == 'g' && fd >= 0 && !pr->after_request && !wrote_all)
			writing = true;
		if (p[1].revents & POLLIN) {
			int a = accept4(peer_lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
			if (a >= 0 && !served) {
				served = true;
				fd = a;
				/* an empty socket buffer takes 9 bytes at once */
				ssize_t w = send(fd, empty_settings, 9, MSG_NOSIGNAL);
				(void)w; /* a client already gone reads nothing anyway */
			} else if (a >= 0) {
				close(a); /* a reconnect after the input broke the first one */
			}
		}
		if (fd < 0)
			continue;
		if (p[2].revents & (POLLIN | POLLHUP | POLLERR)) {
			ssize_t r = recv(fd, buf, sizeof(buf), 0);
			if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
				close(fd); /* the client closed (csi_conn_free) */
				fd = -1;
				writing = false;
				continue;
			}
			if (r > 0)
				frame_scan(&fs, buf, (size_t)r, on_request_frame, pr);
			if (pr->request_ended && !wrote_all)
				writing = true;
			else if (pr->request_ended && !shut)
				shut = shutdown(fd, SHUT_WR) == 0; /* mode 3: EOF once the request is in */
		}
		if (writing && (p[2].revents & POLLOUT)) {
			ssize_t w = off < pr->n ? send(fd, pr->in + off, pr->n - off, MSG_NOSIGNAL) : 0;
			if (w > 0)
				off += (size_t)w;
			else if (w < 0 && errno != EAGAIN && errno != EINTR)
				off = pr->n;
			if (off == pr->n) {
				writing = false;
				wrote_all = true;
				if (pr->request_ended)
					shut = shutdown(fd, SHUT_WR) == 0;
			}
		}
	}
	if (fd >= 0)
		close(fd);
	for (int a; (a = accept4(peer_lfd, NULL, NULL, SOCK_CLOEXEC)) >= 0;)
		close(a);
	return NULL;
}

static void drive_client(const uint8_t *in, size_t n, bool after_request)
{
	struct peer pr = { .in = in, .n = n, .after_request = after_request };
	if (pipe2(pr.ctl, O_CLOEXEC) != 0)
		abort();
	pthread_t t;
	if (pthread_create(&t, NULL, peer_main, &pr) != 0)
		abort();

	struct csi_conn_opts o = CSI_CONN_OPTS_INIT;
	o.connect_timeout_ns = CALL_TIMEOUT_NS;
	char err[256];
	struct csi_conn *c = csi_connect(peer_endpoint, &o, err, sizeof(err));
	if (!c) {
		if (verbose)
			fprintf(stderr, "  csi_connect: %s\n", err);
	} else {
		if (!after_request && write(pr.ctl[1], "g", 1) != 1)
			abort();
		void *out = (void *)1;
		size_t outlen = 1;
		struct csi_status st;
		int64_t t0 = now_ms();
		int code = csi_call_bytes(c, CSI_METHOD(Identity, Probe), "", 0, &out, &outlen,
					  CALL_TIMEOUT_NS, &st);
		if (verbose)
			fprintf(stderr, "  call: code %d (%s) \"%s\", %zu bytes, %lld ms\n", code,
				csi_code_name(code), st.message, outlen, (long long)(now_ms() - t0));
		FUZZ_CHECK(code == st.code && code >= 0);
		FUZZ_CHECK(memchr(st.message, '\0', sizeof(st.message)) != NULL);
		if (code == CSI_CODE_OK)
			FUZZ_CHECK(out != NULL);
		else
			FUZZ_CHECK(out == NULL && outlen == 0);
		free(out);
		csi_conn_free(c);
	}
	if (write(pr.ctl[1], "x", 1) != 1)
		abort();
	pthread_join(t, NULL);
	close(pr.ctl[0]);
	close(pr.ctl[1]);
}

/* ---- set-up ---- */

static int h_probe(struct csi_call_ctx *ctx, const ProtobufCMessage *req, ProtobufCMessage *resp,
		   void *arg)
{
	(void)req, (void)arg;
	Csi__V1__ProbeResponse *r = (Csi__V1__ProbeResponse *)resp;
	r->ready = csi_msg_new(csi_ctx_arena(ctx), &google__protobuf__bool_value__descriptor);
	r->ready->value = 1;
	return 0;
}

static int h_info(struct csi_call_ctx *ctx, const ProtobufCMessage *req, ProtobufCMessage *resp,
		  void *arg)
{
	(void)ctx, (void)req, (void)arg;
	Csi__V1__GetPluginInfoResponse *r = (Csi__V1__GetPluginInfoResponse *)resp;
	r->name = "fuzz.kcsi.io";
	r->vendor_version = "1";
	return 0;
}

static int h_caps(struct csi_call_ctx *ctx, const ProtobufCMessage *req, ProtobufCMessage *resp,
		  void *arg)
{
	(void)req, (void)resp, (void)arg;
	return csi_ctx_error(ctx, CSI_CODE_FAILED_PRECONDITION, "100%% not ready:\ncaf\xc3\xa9");
}

static void cleanup(void)
{
	csi_server_free(srv);
	srv = NULL;
	if (peer_lfd >= 0)
		close(peer_lfd);
	unlink(srv_path);
	unlink(peer_path);
	rmdir(dir);
}

static int listen_unix(const char *path)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 64) != 0) {
		perror("fuzz_csi_wire: listen");
		abort();
	}
	return fd;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	verbose = getenv("FUZZ_VERBOSE") != NULL;
	if (!verbose)
		log_set_output_fd(open("/dev/null", O_WRONLY | O_CLOEXEC));
	snprintf(dir, sizeof(dir), "/tmp/kcsi-fuzz-wire-XXXXXX");
	if (!mkdtemp(dir)) {
		perror("fuzz_csi_wire: mkdtemp");
		abort();
	}
	snprintf(srv_path, sizeof(srv_path), "%s/csi.sock", dir);
	snprintf(peer_path, sizeof(peer_path), "%s/peer.sock", dir);
	snprintf(peer_endpoint, sizeof(peer_endpoint), "unix://%s", peer_path);

	struct csi_server_opts o = CSI_SERVER_OPTS_INIT;
	o.threads = 2;
	o.grace_ns = 100000000LL;
	srv = csi_server_new(&o);
	csi_server_handle(srv, CSI_METHOD(Identity, Probe), h_probe, NULL);
	csi_server_handle(srv, CSI_METHOD(Identity, GetPluginInfo), h_info, NULL);
	csi_server_handle(srv, CSI_METHOD(Identity, GetPluginCapabilities), h_caps, NULL);
	char err[256], ep[160];
	snprintf(ep, sizeof(ep), "unix://%s", srv_path);
	if (csi_server_start(srv, ep, err, sizeof(err)) != 0) {
		fprintf(stderr, "fuzz_csi_wire: %s\n", err);
		abort();
	}
	peer_lfd = listen_unix(peer_path);
	atexit(cleanup);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!size)
		return 0;
	const uint8_t *d = data + 1;
	size_t n = size - 1;
	switch (data[0] % 4) {
	case 0:
		fuzz_timeout(d, n);
		fuzz_message(d, n);
		fuzz_accumulator(d, n);
		break;
	case 1:
		drive_server(d, n);
		break;
	case 2:
		drive_client(d, n, true);
		break;
	case 3:
		drive_client(d, n, false);
		break;
	}
	return 0;
}
