/*
 * csi/call: the transport-independent half of the CSI client (client.h): typed calls with their
 * logging and metrics, and waiting for readiness. The transport (csi_connect,
 * csi_call_bytes, ...) is client.c; a test peer may link another transport under the same API
 * (tests/grpc-peer links libgrpc's), which is why these live apart.
 */
#include "csi/client.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/strbuf.h"
#include "base/timeutil.h"
#include "base/xalloc.h"
#include "csi/wire.h"

/* Logs one message as stripped JSON, truncated to max_log_len when that is >= 0. */
static void log_msg(const char *what, const ProtobufCMessage *m, int max_len)
{
	struct strbuf sb = STRBUF_INIT;
	csi_msg_to_json(m, CSI_JSON_STRIP_SECRETS, &sb);
	if (max_len >= 0 && sb.len > (size_t)max_len) {
		strbuf_setlen(&sb, (size_t)max_len);
		strbuf_addstr(&sb, "...");
	}
	KLOG_I("GRPC %s: %s", what, sb.buf);
	strbuf_release(&sb);
}

/* The request logged (at -v 5) and packed: a buffer the caller frees, its length in *len. */
static uint8_t *begin_call(struct csi_conn *c, const char *method, const ProtobufCMessage *req,
			   bool verbose, size_t *len)
{
	if (verbose) {
		KLOG_I("GRPC call: %s", method);
		log_msg("request", req, csi_conn_opts(c)->max_log_len);
	}
	*len = protobuf_c_message_get_packed_size(req);
	uint8_t *buf = xmalloc(*len ? *len : 1);
	protobuf_c_message_pack(req, buf);
	return buf;
}

/* The packed request freed, wiped first: it may carry secrets (a request's `secrets` map). */
static void end_request(uint8_t *buf, size_t len)
{
	explicit_bzero(buf, len);
	free(buf);
}

/* The call's outcome to the observer (metrics) and, on failure, to the -v 5 log. */
static void end_call(struct csi_conn *c, const char *method, int64_t start,
		     const struct csi_status *st)
{
	int64_t took = mono_now_ns() - start;
	if (csi_conn_opts(c)->observer)
		csi_conn_opts(c)->observer(csi_conn_opts(c)->observer_arg, method, st->code, took);
	if (st->code != 0 && log_v(5))
		KLOG_I("GRPC error: rpc error: code = %s desc = %s", csi_code_go_name(st->code),
		       st->message);
}

int csi_call(struct csi_conn *c, const char *method, const ProtobufCMessage *req,
	     const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp,
	     int64_t timeout_ns, struct csi_status *st)
{
	struct csi_status local;
	if (!st)
		st = &local;
	*resp = NULL;
	bool verbose = log_v(5);
	int64_t start = mono_now_ns();
	size_t len;
	uint8_t *buf = begin_call(c, method, req, verbose, &len);
	void *out;
	size_t outlen;
	csi_call_bytes(c, method, buf, len, &out, &outlen, timeout_ns, st);
	end_request(buf, len);
	if (st->code == 0) {
		*resp = protobuf_c_message_unpack(resp_desc, NULL, outlen, out);
		if (!*resp) {
			st->code = CSI_CODE_INTERNAL;
			snprintf(st->message, sizeof(st->message),
				 "cannot decode the driver's response as %s", resp_desc->name);
		}
	}
	free(out);
	end_call(c, method, start, st);
	if (verbose && st->code == 0)
		log_msg("response", *resp, csi_conn_opts(c)->max_log_len);
	return st->code;
}

/* Hands each whole message of the stream's body to fn; a bad body sets st (when it was OK). */
static int stream_deliver(struct csi_conn *c, const uint8_t *body, size_t len,
			  const ProtobufCMessageDescriptor *resp_desc, csi_stream_fn fn, void *arg,
			  struct csi_status *st, int *nmsgs)
{
	size_t off = 0, limit = (size_t)csi_conn_opts(c)->max_recv_bytes;
	const uint8_t *m;
	uint32_t mlen;
	const char *bad = NULL;
	for (;;) {
		enum csi_wire_next r = body ? csi_wire_next(body, len, &off, limit, &m, &mlen) :
			CSI_WIRE_NEXT_END;
		if (r == CSI_WIRE_NEXT_END)
			break;
		if (r == CSI_WIRE_NEXT_TRUNCATED)
			bad = "the driver's stream ended inside a response message";
		else if (r == CSI_WIRE_NEXT_TOO_LARGE)
			bad = "the driver sent a response message larger than the limit";
		else if (r == CSI_WIRE_NEXT_COMPRESSED)
			bad = "the driver sent a compressed message; no compression was offered";
		if (bad)
			break;
		ProtobufCMessage *msg = protobuf_c_message_unpack(resp_desc, NULL, mlen, m);
		if (!msg) {
			bad = "cannot decode a message of the driver's stream";
			break;
		}
		(*nmsgs)++;
		if (log_v(5))
			log_msg("stream message", msg, csi_conn_opts(c)->max_log_len);
		int rc = fn(arg, msg);
		csi_msg_free(msg);
		if (rc)
			return rc;
	}
	if (bad && st->code == CSI_CODE_OK) {
		st->code = CSI_CODE_INTERNAL;
		snprintf(st->message, sizeof(st->message), "%s (%s)", bad, resp_desc->name);
	}
	return 0;
}

int csi_call_stream(struct csi_conn *c, const char *method, const ProtobufCMessage *req,
		    const ProtobufCMessageDescriptor *resp_desc, csi_stream_fn fn, void *arg,
		    int64_t timeout_ns, struct csi_status *st)
{
	struct csi_status local;
	if (!st)
		st = &local;
	bool verbose = log_v(5);
	int64_t start = mono_now_ns();
	size_t len;
	uint8_t *buf = begin_call(c, method, req, verbose, &len);
	void *out;
	size_t outlen;
	csi_call_stream_bytes(c, method, buf, len, &out, &outlen, timeout_ns, st);
	end_request(buf, len);
	int nmsgs = 0;
	int rc = stream_deliver(c, out, outlen, resp_desc, fn, arg, st, &nmsgs);
	free(out);
	end_call(c, method, start, st);
	if (verbose && st->code == 0)
		KLOG_I("GRPC response: %d messages in the stream", nmsgs);
	return rc ? rc : st->code;
}

int csi_wait_ready(struct csi_conn *c, int64_t call_timeout_ns, char *err, size_t errlen)
{
	Csi__V1__ProbeRequest req = CSI__V1__PROBE_REQUEST__INIT;
	int64_t last_log = mono_now_ns();
	for (;;) {
		Csi__V1__ProbeResponse *resp;
		struct csi_status st;
		if (csi_probe(c, &req, &resp, call_timeout_ns, &st) != 0) {
			errbuf_printf(err, errlen, "Probe failed: %s: %s", csi_code_name(st.code),
				st.message);
			return -1;
		}
		bool ready = !resp->ready || resp->ready->value;
		csi_msg_free(resp);
		if (ready)
			return 0;
		if (mono_now_ns() - last_log >= csi_conn_opts(c)->log_interval_ns) {
			KLOG_I("CSI driver at %s is not ready yet", csi_conn_endpoint(c));
			last_log = mono_now_ns();
		}
		sleep_ns(NSEC_PER_SEC);
	}
}
