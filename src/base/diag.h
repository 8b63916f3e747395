/*
 * diag: the small HTTP server daemons expose for diagnostics (--http-endpoint): /metrics,
 * /healthz/leader-election and the like. Built on libmicrohttpd with its own thread; handlers are
 * called from that thread and must be thread-safe with respect to the rest of the program.
 *
 * Addresses use Go's net.Listen form: ":8080" (all interfaces), "127.0.0.1:8080", "[::1]:8080",
 * "localhost:0". Port 0 picks a free port; diag_server_port() tells which.
 *
 * One thread serves every connection (libmicrohttpd's polling thread, on poll(2): its epoll mode
 * in 0.9.75 keeps a connection whose client closed mid-request until the idle timeout). A
 * connection costs a socket and a little memory, never a thread, so idle, slow or half-open
 * clients, however many, hold nothing a legitimate request needs. The server takes as many
 * connections as the process may open files, less a reserve for the rest of the program
 * (diag_server_start() raises the soft RLIMIT_NOFILE to the hard one, as Go's runtime does for
 * upstream's binaries). A connection idle for 30 s is closed; a request head over 16 KiB is
 * answered 431 and its connection closed.
 *
 * Handlers run on that thread and must answer at once. A handler that waits for something
 * (livenessprobe's /healthz waits up to --probe-timeout for the driver) is registered with
 * diag_server_handle_deferred(): it keeps the request's struct diag_reply and answers it later,
 * from any thread, while the server goes on serving every other connection.
 *
 * Only GET and HEAD are served; anything else is 405. Unknown paths are 404.
 *
 * process metrics: diag_render_process_metrics() appends the process_* series that Go's
 * Prometheus client exports (CPU seconds, resident and virtual memory, open and max fds, start
 * time), read from /proc/self, so dashboards built for the Go sidecars show kcsi's figures.
 */
#ifndef KCSI_BASE_DIAG_H
#define KCSI_BASE_DIAG_H

#include <stddef.h>

#include "base/strbuf.h"

struct diag_server;

/*
 * A handler fills body and returns the HTTP status. *content_type defaults to
 * "text/plain; charset=utf-8".
 */
typedef int (*diag_handler_fn)(void *ud, struct strbuf *body, const char **content_type);

/* Starts listening. Returns NULL with a reason in err (bad address, port in use). */
struct diag_server *diag_server_start(const char *address, char *err, size_t errlen);
/* Registers a handler for an exact path. May be called before or after start. */
void diag_server_handle(struct diag_server *s, const char *path, diag_handler_fn fn, void *ud);

/*
 * Deferred answers. fn is called on the server's thread with a reply that stands for one request;
 * it returns at once, and diag_reply_finish() answers the request, exactly once, from any thread
 * (fn itself included). The reply belongs to the server: after diag_reply_finish() it is gone.
 * Every reply handed out must be finished before diag_server_stop().
 */
struct diag_reply;
typedef void (*diag_deferred_fn)(void *ud, struct diag_reply *r);
void diag_server_handle_deferred(struct diag_server *s, const char *path, diag_deferred_fn fn,
				 void *ud);
/* Answers the request with status and body (copied) as text/plain. */
void diag_reply_finish(struct diag_reply *r, int status, const char *body);

int diag_server_port(const struct diag_server *s);
/* Stops the server and frees it. NULL is a no-op. No deferred reply may be unfinished. */
void diag_server_stop(struct diag_server *s);

/* Appends process_* metrics in Prometheus text format. */
void diag_render_process_metrics(struct strbuf *out);

/* Splits a Go-style "host:port" address. host is "" for ":port". Returns 0 or -1. */
int diag_split_address(const char *address, char *host, size_t hostlen, int *port);

#endif
