/*
 * csi/server_int: the insides the files of the CSI server share (csi/server.h is the public
 * side; server.c's file-top comment is the design). Layers, each using only those below it:
 *
 *   server.c       the server's life: new, start (socket, threads), stop, run, free
 *   server_io.c    its threads: the I/O thread (accept, read, write) and the workers
 *   server_h2.c    HTTP/2: connections and their nghttp2 sessions, streams, answers
 *   server_call.c  one call: the handler registry, dispatch, what a handler asks of its ctx
 *
 * Locking: every srv_ function but srv_dispatch() runs with s->lock held.
 */
#ifndef KCSI_CSI_SERVER_INT_H
#define KCSI_CSI_SERVER_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <nghttp2/nghttp2.h>

#include "base/timeutil.h"
#include "csi/server.h"
#include "csi/wire.h"

#define CSI_SERVER_MAX_CONNS 256
#define CSI_SERVER_MAX_STREAMS 128
#define CSI_SERVER_MAX_BUFFERED (64u << 20)
#define CSI_SERVER_MAX_PATH 512
/* Frames queued for one peer above which its connection is not read until it reads some. */
#define CSI_SERVER_MAX_OUTBOUND 4096
/* How long a stopping server keeps writing answers already queued after the grace period. */
#define CSI_SERVER_DRAIN_NS (200 * NSEC_PER_MSEC)

struct handler {
	struct handler *next;
	char *method;
	const ProtobufCMethodDescriptor *md;
	csi_handler_fn fn;
	void *arg;
};

enum stream_state { ST_READING, ST_QUEUED, ST_RUNNING, ST_ANSWERED };

struct sconn;

struct sstream {
	struct sstream *prev, *next; /* the connection's streams */
	struct sstream *qprev, *qnext; /* the work queue, while ST_QUEUED */
	struct sconn *conn;
	int32_t id;
	enum stream_state state;
	bool closed;                 /* nghttp2 closed the stream (or the connection died) */
	char *method;
	int64_t deadline;            /* monotonic ns; 0: none */
	bool not_post, bad_type;
	size_t hdr_bytes;            /* header list received so far */
	struct csi_wire_msg req;
	size_t budget;               /* bytes counted in s->buffered for this stream */
	uint8_t *resp;               /* prefix + packed response */
	size_t resp_len, resp_sent;
};

struct sconn {
	struct sconn *next;
	struct csi_server *s;
	int fd;
	nghttp2_session *sess;
	struct sstream *streams;
	int jobs;                    /* streams queued or running */
	bool dead;                   /* failed or ended: the I/O thread closes it */
	bool closed;                 /* closed and unlisted: freed when jobs reach 0 */
};

struct csi_server {
	struct csi_server_opts opts;
	struct handler *handlers;
	char *path;
	int wake[2]; /* csi_server_stop() and signals write here; csi_server_run() reads */
	bool started, stopped;
	pthread_mutex_t stop_lock;

	pthread_mutex_t lock;        /* everything below */
	pthread_cond_t work;         /* queue grew, or workers must leave */
	pthread_cond_t idle;         /* a job ended */
	struct sstream *qhead, *qtail;
	int jobs;                    /* queued + running, all connections */
	int lfd;
	struct sconn *conns;
	int nconns;
	size_t buffered;
	bool stopping;               /* no new streams */
	bool io_exit, workers_exit;
	int io_wake[2];
	pthread_t io;
	bool io_running;
	pthread_t *workers;
	int nworkers;
};

/* Most bytes one server-streaming answer may hold (it is sent whole when its handler returns). */
#define CSI_SERVER_MAX_STREAM_BYTES (16u << 20)

struct csi_call_ctx {
	const char *method;
	struct csi_arena *arena;
	int64_t deadline; /* monotonic ns; 0: none */
	char *message;
	bool streaming;   /* the method answers with a stream: csi_ctx_send() fills `sent` */
	uint8_t *sent;    /* length-prefixed messages sent so far, malloc'd */
	size_t sent_len, sent_cap;
	int nsent;
};

/* ---- server_call.c ---- */

const struct handler *srv_find_handler(struct csi_server *s, const char *method);
/*
 * Runs the handler on the request bytes (no lock held); returns the status code, and for OK
 * the packed response in *out (malloc'd, *outlen bytes). For a server-streaming method *out is
 * the messages the handler sent, each with its length prefix (ctx->streaming is then set).
 */
int srv_dispatch(struct csi_server *s, struct csi_call_ctx *ctx, const uint8_t *data, size_t len,
		 uint8_t **out, size_t *outlen);

/* ---- server_h2.c ---- */

void srv_wake_io(struct csi_server *s);
/* Sends what the session has queued; a failure marks the connection dead. */
void srv_flush(struct sconn *cn);
/* Answers OK with body (prefix included, taken) or an error status (trailers-only). */
void srv_answer(struct sstream *st, int code, const char *message, uint8_t *body, size_t len);
void srv_answer_error(struct sstream *st, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void srv_queue_unlink(struct csi_server *s, struct sstream *st);
/* A worker is done with st: freed when closed meanwhile, the job counts drop. */
void srv_job_done(struct csi_server *s, struct sstream *st);
/* A connection with its nghttp2 session and our SETTINGS sent; NULL on failure. */
struct sconn *srv_conn_new(struct csi_server *s, int fd);
/* Closes a connection: its streams end, workers drop their answers. */
void srv_conn_close(struct csi_server *s, struct sconn *cn);

/* ---- server_io.c ---- */

void *srv_worker_main(void *arg);
void *srv_io_main(void *arg);

#endif
