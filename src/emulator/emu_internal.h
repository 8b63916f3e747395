/*
 * emu_internal: the types the emulator's own files share: the server's state and one API call.
 * Types only: each file's functions are in its own header (emu_reply.h, emu_verbs.h, ...). Not a
 * public interface: only the emulator's own .c files include it.
 *
 * Ownership: struct emu_call borrows everything from the MHD connection and the request; it lives
 * on the stack of one request handler.
 */
#ifndef KCSI_EMULATOR_INTERNAL_H
#define KCSI_EMULATOR_INTERNAL_H

#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdbool.h>

#include "emulator/emu_config.h"
#include "emulator/emu_faults.h"
#include "emulator/emu_store.h"
#include "emulator/emu_table.h"

struct emu_server {
	struct emu_config cfg;
	char *token, *state_file;
	char *tls_cert, *tls_key, *tls_ca; /* PEM contents */
	struct emu_store st;
	struct emu_faults faults;
	struct MHD_Daemon *daemon;
	int listen_fd;
	char url[160];
	char host_port[128];
};

/* One resource request after routing. */
struct emu_call {
	struct emu_server *srv;
	struct MHD_Connection *conn;
	const char *method;
	int res;
	struct emu_resource *r;
	/* the apiVersion the client addressed: r->api_version, or the group with r->also_version
	 * (emu_served_text converts answers to it) */
	const char *api_version;
	char api_version_buf[96];
	/* the resource the client addressed when it is a view of r's storage (events.k8s.io's
	 * Events of the core ones, emu_events.h), else NULL */
	const struct emu_resource *view;
	const char *ns;   /* NULL for cluster-scoped, or all namespaces */
	const char *name; /* NULL for the collection */
	const char *sub;  /* NULL or "status" */
	const char *body;
	size_t body_len;
	bool dry_run; /* dryRun=All: decide and answer, but commit nothing */
	/* DeleteOptions (emu_delete_options): gracePeriodSeconds when has_grace */
	bool has_grace;
	long long grace;
	void *rq; /* the server's per-request state */
	/* Accept asked for a Table (emu_table_wanted) */
	bool table;
	struct emu_table_req treq;
};

#endif
