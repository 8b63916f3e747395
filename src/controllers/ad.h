/*
 * attachdetach: the attach/detach controller of seed 002, as Kubernetes' attachdetach controller
 * runs it today for CSI volumes.
 *
 * The pure part (ad_plan.c) is the "Reconcile State" and "Act" steps of seed 002's loop, written
 * as a function from state to actions so that its tests are tables:
 *
 *   desired state of the world  (volume, node) pairs wanted by pods that are scheduled, not
 *                               terminated and not being deleted, on nodes with the annotation
 *                               volumes.kubernetes.io/controller-managed-attach-detach
 *   actual state of the world   (volume, node) pairs attached (confirmed) or uncertain (a
 *                               VolumeAttachment exists but is not attached, e.g. after a crash),
 *                               each with "mounted" (the node lists it in status.volumesInUse)
 *   ad_plan()                   detaches first (safe detach), then attaches (with the
 *                               ReadWriteOnce multi-attach policy); a volume with an operation in
 *                               flight or backing off is skipped (the per-volume lock)
 *
 * Volumes are named as the in-tree CSI plugin names them: "kubernetes.io/csi/<driver>^<handle>",
 * the names Node.status.volumesAttached and volumesInUse carry.
 *
 * The controller (attachdetach.c) owns the caches, the operation workers and the node status
 * writes ("Persist State"); see the file comment there.
 */
#ifndef KCSI_CONTROLLERS_AD_H
#define KCSI_CONTROLLERS_AD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AD_CSI_PLUGIN "kubernetes.io/csi"
#define AD_MANAGED_ANNOTATION "volumes.kubernetes.io/controller-managed-attach-detach"

/* ---- names ---- */

/* "kubernetes.io/csi/<driver>^<handle>" into buf; returns buf. */
const char *ad_unique_name(const char *driver, const char *handle, char *buf, size_t len);
/* Splits a unique name into driver and handle (copied into the buffers); returns 0 or -1 when
 * the name is not a CSI volume's. */
int ad_parse_unique_name(const char *uniq, char *driver, size_t dlen, char *handle, size_t hlen);

enum ad_va_naming {
	AD_NAMING_KUBERNETES, /* csi-<sha256(volumeHandle + driver + nodeName)>, as kubelet/ADC */
	AD_NAMING_SEED,       /* pv-<sha256(pvName + nodeName)>, seed 001 */
};
/* The VolumeAttachment name for a volume on a node (buf: at least 68 bytes). */
void ad_va_name(enum ad_va_naming naming, const char *driver, const char *handle, const char *pv,
		const char *node, char *buf, size_t len);

/* ---- the plan ---- */

/* One (volume, node) pair that pods want attached. */
struct ad_desired {
	const char *uniq;
	const char *node;
	bool multi_attach_ok; /* false for ReadWriteOnce / ReadWriteOncePod volumes */
};

/* Zero is uncertain: an entry nobody has confirmed must never count as attached. */
enum ad_attach_state { AD_UNCERTAIN, AD_ATTACHED };

/* One (volume, node) pair in the actual state of the world. */
struct ad_actual {
	const char *uniq;
	const char *node;
	uint8_t state;               /* enum ad_attach_state */
	bool mounted;                /* listed in the node's status.volumesInUse */
	int64_t detach_requested_ns; /* when the plan first wanted it detached; 0: not yet */
};

struct ad_node_health {
	bool ready;          /* Ready condition True (a missing node is not ready) */
	bool out_of_service; /* node.kubernetes.io/out-of-service taint */
};

enum ad_action_kind {
	AD_ACT_DETACH,       /* index into actual; forced tells why it did not wait for unmount */
	AD_ACT_WAIT_UNMOUNT, /* index into actual: not desired but still mounted */
	AD_ACT_ATTACH,       /* index into desired */
	AD_ACT_MULTI_ATTACH, /* index into desired: refused by the ReadWriteOnce policy */
};

enum ad_force_reason { AD_FORCE_NONE, AD_FORCE_TIMEOUT, AD_FORCE_OUT_OF_SERVICE };

struct ad_action {
	uint8_t kind;   /* enum ad_action_kind */
	uint8_t forced; /* enum ad_force_reason, for AD_ACT_DETACH */
	size_t index;
};

struct ad_plan_in {
	const struct ad_desired *desired;
	size_t ndesired;
	struct ad_actual *actual; /* the plan sets detach_requested_ns of pairs it wants to detach
				   * and clears it on pairs that are desired again */
	size_t nactual;
	/* True while the volume has an operation in flight or is backing off after a failure. */
	bool (*busy)(const char *uniq, void *ud);
	/* Health of a node (a node not in the cache: both false). */
	void (*health)(const char *node, struct ad_node_health *h, void *ud);
	void *ud;
	int64_t now_ns;
	int64_t max_wait_ns; /* --max-wait-for-unmount (upstream's 6 minutes) */
	bool no_force_timeout; /* --disable-force-detach-on-timeout */
};

/*
 * Seed 002's Reconcile + Act: returns the number of actions written to out (at most max; ndesired
 * + nactual always suffices). Detaches come before attaches; at most one action per volume
 * starts an operation (attach or detach), so the caller may start them all at once.
 */
size_t ad_plan(struct ad_plan_in *in, struct ad_action *out, size_t max);

#endif
