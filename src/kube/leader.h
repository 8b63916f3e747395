/*
 * kube leader: leader election on a coordination.k8s.io/v1 Lease, with client-go's semantics
 * and defaults (lease duration 15s, renew deadline 10s, retry period 5s).
 *
 * A candidate tries to acquire the Lease every retry period. The Lease is free when it has no
 * holder or when its record has not changed for a lease duration as measured on this machine's
 * clock (so clock skew between nodes does not matter). The leader renews every retry period; if
 * it cannot renew for the renew deadline it has lost the lease and on_stopped_leading runs
 * (default: log and exit, as the upstream sidecars do). kube_leader_stop() of a leader releases
 * the Lease (empty holder) so a standby takes over at once.
 *
 * With events set, acquiring the Lease records a Normal event "LeaderElection" "<identity> became
 * leader" on it, source component "<lease name>/<identity>", as client-go's LeaseLock does for
 * the sidecars (the elector owns that recorder, on its client).
 *
 * Give the elector its own struct kube_client so volume work never delays renewal. The elector
 * borrows the client; callbacks run on the elector's thread.
 */
#ifndef KCSI_KUBE_LEADER_H
#define KCSI_KUBE_LEADER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kube/client.h"

struct kube_leader_opts {
	const char *ns;       /* --leader-election-namespace; NULL or "": the config's namespace or "default" */
	const char *name;     /* the Lease name (see kube_leader_lease_name) */
	const char *identity; /* NULL: hostname + "_" + random suffix */
	int64_t lease_duration_ns; /* 0: 15s */
	int64_t renew_deadline_ns; /* 0: 10s */
	int64_t retry_period_ns;   /* 0: 5s */
	void (*on_started_leading)(void *ud);
	void (*on_stopped_leading)(void *ud); /* NULL: exit the process with an error */
	void (*on_new_leader)(const char *identity, void *ud);
	bool events;          /* record the LeaderElection event on acquiring */
	json_t *labels;       /* merged into the Lease's metadata.labels on every write (borrowed,
			       * kept alive by the caller); NULL: none */
	void *ud;
};

struct kube_leader;

struct kube_leader *kube_leader_new(struct kube_client *c, const struct kube_leader_opts *o);
int kube_leader_start(struct kube_leader *le);
bool kube_leader_is_leader(struct kube_leader *le);
struct strbuf;
/* Appends the leader_election_master_status gauge of this elector's Lease (1 leading, 0 standing
 * by) to a /metrics body, as client-go's leader election metrics provider words it. */
void kube_leader_render_metrics(struct kube_leader *le, struct strbuf *out);
/* For /healthz/leader-election: false when leading but the last renewal is older than the lease
 * duration plus 20 seconds (client-go's healthz adaptor timeout). */
bool kube_leader_healthy(struct kube_leader *le);
const char *kube_leader_identity(struct kube_leader *le);
/* Stops the elector; a leader releases the Lease first. */
void kube_leader_stop(struct kube_leader *le);
void kube_leader_free(struct kube_leader *le);

/* "<prefix>-<driver>" with every character of the driver outside [a-zA-Z0-9-] replaced by '-'
 * and an 'X' after a trailing '-', as the sidecars name their leases
 * (e.g. external-attacher-leader-hostpath-csi-k8s-io). */
void kube_leader_lease_name(const char *prefix, const char *driver, char *buf, size_t len);

#endif
