/*
 * up crds: `kcsi up --install-snapshot-crds`. The CustomResourceDefinitions csi-snapshotter and
 * snapshot-controller need (deploy/kubernetes/snapshot-crds, embedded at build time) are posted
 * to an API server that lacks them, and exactly those are deleted again at exit.
 *
 * A CRD that already exists is the cluster's: it is neither replaced nor deleted, whatever its
 * versions. The set is owned by the caller (a struct in its own state, zeroed before use).
 */
#ifndef KCSI_UP_CRDS_H
#define KCSI_UP_CRDS_H

#include <stdbool.h>
#include <stdint.h>

#include "kube/client.h"

/* One embedded manifest: the CRD's metadata.name and its YAML. */
struct up_crd_manifest {
	const char *name;
	const char *yaml;
};
/* The six snapshot CRDs; the array ends with { NULL, NULL } (snapshot_crds.c, generated). */
extern const struct up_crd_manifest up_snapshot_crds[];

#define UP_MAX_CRDS 8

struct up_crds {
	const char *installed[UP_MAX_CRDS]; /* names this run created, in order; not owned */
	int n;
};

/*
 * Creates every embedded CRD the API server does not have yet and waits (until deadline, a
 * monotonic time) for each created one to be Established. Prints what it did on stdout. Returns
 * 0, or -1 with the reason on stderr (what was created so far stays in *st for up_crds_remove).
 */
int up_crds_install(struct kube_client *kc, struct up_crds *st, int64_t deadline);
/*
 * Deletes the CRDs in *st, newest first, and waits up to wait_ns for them to be gone. A CRD
 * still there (its objects wait on finalizers no controller will remove now) is reported with
 * what holds it. Returns how many are not gone.
 */
int up_crds_remove(struct kube_client *kc, struct up_crds *st, int64_t wait_ns);

#endif
