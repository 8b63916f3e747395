/*
 * emu_server: kube-emulator, an in-memory server of the Kubernetes REST API subset that the
 * CSI sidecars, kubectl and client-go use. A test tool, never a production API server.
 *
 * The server runs libmicrohttpd with one thread per connection: ordinary requests are answered
 * under the store lock, and a watch is a chunked response whose reader blocks on the store's
 * condition variable in its own connection thread. See docs/kube-emulator.md for the API.
 *
 * Ownership: emu_server_start() copies what it needs from the config; the server owns its store,
 * daemon and fault table. With a state file, emu_server_start() takes its lock and loads it, and
 * every write is logged to it as it commits (emu_state.h). emu_server_stop() ends every watch,
 * stops the daemon, saves the state file when one is configured, and frees everything.
 */
#ifndef KCSI_EMULATOR_SERVER_H
#define KCSI_EMULATOR_SERVER_H

#include <stdbool.h>
#include <stddef.h>

#include "emulator/emu_config.h"

/* emu_server_stop() waits this long for busy connections, then leaves them to the exit */
#define EMU_STOP_GRACE_MS 600
/* kube-emulator's exit code when its --listen address is taken (kcsi up tells it from others) */
#define EMU_EXIT_ADDR_IN_USE 3

struct emu_server;

/*
 * NULL with err when the server cannot start; *addr_in_use (may be NULL) then says whether the
 * cause was the --listen address being taken, which kube-emulator reports with its own exit code.
 */
struct emu_server *emu_server_start(const struct emu_config *cfg, bool *addr_in_use, char *err,
				    size_t errlen);
/* "http://127.0.0.1:34567" or "https://..."; owned by the server. */
const char *emu_server_url(const struct emu_server *srv);
/* Writes a kubeconfig for this server to path atomically (temp file + rename). */
int emu_server_write_kubeconfig(const struct emu_server *srv, const char *path, char *err,
				size_t errlen);
/*
 * Returns 0, or -1 with err when saving the state file failed (everything is freed anyway).
 * Connections still busy after EMU_STOP_GRACE_MS (a long fault delay, a slow client) are not
 * waited for: the state file is saved, nothing is freed, and 1 is returned (-2 if the save
 * failed); the caller must then end the process with _exit(), as main() does, so that SIGTERM
 * always exits within a second.
 */
int emu_server_stop(struct emu_server *srv, char *err, size_t errlen);

#endif
