/*
 * diag: the small HTTP server sidecars expose for diagnostics (--http-endpoint): /metrics,
 * /healthz/leader-election and the like. Built on libmicrohttpd with its own thread; handlers are
 * called from that thread and must be thread-safe with respect to the rest of the program.
 *
 * Addresses use Go's net.Listen form: ":8080" (all interfaces), "127.0.0.1:8080", "[::1]:8080",
 * "localhost:0". Port 0 picks a free port; diag_server_port() tells which.
 *
 * diag_server_start() serves every request on its one thread, in turn: handlers must answer
 * at once. diag_server_start_threaded() is for handlers that wait.
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
/*
 * The same for handlers that may block (livenessprobe's /healthz waits up to --probe-timeout for
 * the driver): each connection is served on a thread of its own, so a slow request delays no
 * other; at most max_conns (> 0) connections at once, more are closed at accept, and an idle
 * keep-alive connection is closed after 5 s.
 */
struct diag_server *diag_server_start_threaded(const char *address, unsigned max_conns,
					       char *err, size_t errlen);
/* Registers a handler for an exact path. May be called before or after start. */
void diag_server_handle(struct diag_server *s, const char *path, diag_handler_fn fn, void *ud);
int diag_server_port(const struct diag_server *s);
/* Stops the server and frees it. NULL is a no-op. */
void diag_server_stop(struct diag_server *s);

/* Appends process_* metrics in Prometheus text format. */
void diag_render_process_metrics(struct strbuf *out);

/* Splits a Go-style "host:port" address. host is "" for ":port". Returns 0 or -1. */
int diag_split_address(const char *address, char *host, size_t hostlen, int *port);

#endif
