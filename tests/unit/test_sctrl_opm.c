/*
 * Unit tests of snapshot-controller's operation metrics (src/snapshotctrl/opmetrics.c): what a
 * user scraping /metrics sees of operation_total_seconds and operations_in_flight.
 */
#include "check.h"
#include "base/strbuf.h"
#include "snapshotctrl/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UID "6a3f4b1e-0000-4000-8000-00000000000a"
#define UID2 "6a3f4b1e-0000-4000-8000-00000000000b"

/* The value of the metric line that starts with prefix, or -1 when there is none. */
static long long metric(struct sctrl_opm *m, const char *prefix)
{
	struct strbuf out = STRBUF_INIT;
	long long v = -1;

	sctrl_opm_render(m, &out);
	for (const char *p = out.buf; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (!strncmp(p, prefix, strlen(prefix)) && p[strlen(prefix)] == ' ')
			v = strtoll(p + strlen(prefix) + 1, NULL, 10);
	strbuf_release(&out);
	return v;
}

#define INFLIGHT "snapshot_controller_operations_in_flight"
#define COUNT(op, status) \
	"snapshot_controller_operation_total_seconds_count{driver_name=\"d.example\"," \
	"operation_name=\"" op "\",operation_status=\"" status "\",snapshot_type=\"dynamic\"}"

static void test_create_then_delete(void)
{
	struct sctrl_opm *m = sctrl_opm_new();

	sctrl_opm_start(m, SCTRL_OP_CREATE, UID, "d.example", false);
	sctrl_opm_start(m, SCTRL_OP_CREATE, UID, "d.example", false); /* a second start: no-op */
	sctrl_opm_start(m, SCTRL_OP_CREATE_READY, UID, "d.example", false);
	CHECK_INT(metric(m, INFLIGHT), 2);
	sctrl_opm_success(m, SCTRL_OP_CREATE, UID, NULL);
	sctrl_opm_success(m, SCTRL_OP_CREATE_READY, UID, "d.example");
	CHECK_INT(metric(m, COUNT("CreateSnapshot", "success")), 1);
	CHECK_INT(metric(m, COUNT("CreateSnapshotAndReady", "success")), 1);
	CHECK_INT(metric(m, INFLIGHT), 0);
	/* a sync from a cache that does not show the success yet: not started (or observed) again */
	sctrl_opm_start(m, SCTRL_OP_CREATE, UID, "d.example", false);
	CHECK_INT(metric(m, INFLIGHT), 0);

	sctrl_opm_start(m, SCTRL_OP_DELETE, UID, "d.example", false);
	CHECK_INT(metric(m, INFLIGHT), 1);
	sctrl_opm_success(m, SCTRL_OP_DELETE, UID, "d.example");
	sctrl_opm_forget(m, UID);
	CHECK_INT(metric(m, COUNT("DeleteSnapshot", "success")), 1);
	CHECK_INT(metric(m, INFLIGHT), 0);
	sctrl_opm_free(m);
}

/* A deletion that ends while the create is pending cancels it. */
static void test_cancel(void)
{
	struct sctrl_opm *m = sctrl_opm_new();

	sctrl_opm_start(m, SCTRL_OP_CREATE_READY, UID, "d.example", false);
	sctrl_opm_start(m, SCTRL_OP_DELETE, UID, "d.example", false);
	sctrl_opm_success(m, SCTRL_OP_DELETE, UID, NULL);
	CHECK_INT(metric(m, COUNT("CreateSnapshotAndReady", "cancel")), 1);
	CHECK_INT(metric(m, INFLIGHT), 0);
	sctrl_opm_free(m);
}

/*
 * A worker syncing a snapshot the informer has just reported gone (CI saw this once in
 * e2e.snapshot_groups): its start comes after the deletion's end and forget. It must not leave
 * an operation in flight for ever, while another snapshot's operations still count.
 */
static void test_start_after_gone(void)
{
	struct sctrl_opm *m = sctrl_opm_new();

	sctrl_opm_start(m, SCTRL_OP_GROUP_DELETE, UID, "d.example", false);
	sctrl_opm_success(m, SCTRL_OP_GROUP_DELETE, UID, NULL);
	sctrl_opm_forget(m, UID);
	sctrl_opm_start(m, SCTRL_OP_GROUP_DELETE, UID, "d.example", false);
	sctrl_opm_start(m, SCTRL_OP_DELETE, UID, "d.example", false);
	CHECK_INT(metric(m, INFLIGHT), 0);
	CHECK_INT(metric(m, COUNT("DeleteGroupSnapshot", "success")), 1);
	sctrl_opm_start(m, SCTRL_OP_DELETE, UID2, "d.example", false);
	CHECK_INT(metric(m, INFLIGHT), 1);
	sctrl_opm_free(m);
}

/* The ring of gone UIDs is bounded: after many more deletions, the oldest is let go. */
static void test_gone_bounded(void)
{
	struct sctrl_opm *m = sctrl_opm_new();
	char uid[64];

	for (int i = 0; i < 10000; i++) {
		snprintf(uid, sizeof(uid), "uid-%d", i);
		sctrl_opm_forget(m, uid);
	}
	sctrl_opm_start(m, SCTRL_OP_DELETE, "uid-9999", "d.example", false);
	CHECK_INT(metric(m, INFLIGHT), 0);
	sctrl_opm_start(m, SCTRL_OP_DELETE, "uid-0", "d.example", false);
	CHECK_INT(metric(m, INFLIGHT), 1);
	sctrl_opm_free(m);
}

int main(void)
{
	RUN(test_create_then_delete);
	RUN(test_cancel);
	RUN(test_start_after_gone);
	RUN(test_gone_bounded);
	return CHECK_DONE();
}
