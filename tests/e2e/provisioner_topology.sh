#!/bin/bash
# e2e: csi-provisioner's topology and deletion rules of external-provisioner v6.4, against
# csi-testdriver (which announces VOLUME_ACCESSIBILITY_CONSTRAINTS):
# - an Immediate claim while no node has registered the driver's topology keys is refused
#   ("no available topology found"), retried, and provisioned once a node has: no CreateVolume,
#   no volume without requirements, before that (labels alone, or a CSINode without keys, do not
#   count);
# - the requisite covers every key set the nodes registered, never a node that only carries the
#   labels;
# - a Released PV whose volume is still attached gets a Normal VolumeDelete event, no
#   DeleteVolume and no failed-deletion count, and goes once the VolumeAttachment is gone;
# - --worker-threads=0 starts and provisions nothing, as upstream.
set -u
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_attacher.sh"
DRV=testdriver.kcsi.dev
. "$(dirname "$0")/lib_provisioner.sh"
ZK=topology.kcsi.dev/zone
RK=topology.kcsi.dev/rack

calls() { grep -c "^$1 .*$2" "$T/td.rec" 2>/dev/null || true; }
# requisite NAME: the last CreateVolume's requisite for volume NAME as "zone=z1;rack=r2+zone=z2"
requisite() {
	grep "^CreateVolume .*\"name\":\"$1\"" "$T/td.rec" | tail -1 | cut -d' ' -f2- |
		jq -r '[.accessibility_requirements.requisite[].segments | to_entries | sort_by(.key) |
			map("\(.key | sub(".*/"; ""))=\(.value)") | join("+")] | join(";")'
}
# node NAME LABELS-JSON: a Node; csinode NAME KEYS-JSON: its CSINode with the driver's keys
node() { echo "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"$1\",\"labels\":$2}}" | kc create -f - >/dev/null; }
csinode() {
	echo "{\"apiVersion\":\"storage.k8s.io/v1\",\"kind\":\"CSINode\",\"metadata\":{\"name\":\"$1\"},
	\"spec\":{\"drivers\":[{\"name\":\"$DRV\",\"nodeID\":\"$1\",\"topologyKeys\":$2}]}}" | kc create -f - >/dev/null
}
failures_logged() { [ "$(grep -c "Failed to provision volume for claim default/$1" "$T/p.log")" -ge "$2" ]; }
event_type() { # KIND NAME REASON: the types of the object's events of that reason
	kc get events -A -o json | jq -r --arg k "$1" --arg n "$2" --arg r "$3" \
		'[.items[] | select(.involvedObject.kind==$k and .involvedObject.name==$n and .reason==$r) | .type] | unique | join(",")'
}

emu_start
mk_sc std
td_start
prov_start p "$T/td.sock" --http-endpoint 127.0.0.1:0
PORT=$(att_http_port p)

# 1. Nobody registered topology keys: a Node with the labels only, a CSINode without keys.
node n0 "{\"$ZK\":\"z0\"}"
echo "{\"apiVersion\":\"storage.k8s.io/v1\",\"kind\":\"CSINode\",\"metadata\":{\"name\":\"n0\"},
\"spec\":{\"drivers\":[{\"name\":\"$DRV\",\"nodeID\":\"n0\"}]}}" | kc create -f - >/dev/null
mk_pvc early std
EARLY=$(pv_of early)
wait_for "the user sees why (upstream's words, no prefix)" 20 has_event PersistentVolumeClaim early \
	"^ProvisioningFailed: error generating accessibility requirements: no available topology found$"
wait_for "refused again on retry" 20 failures_logged early 3
check "no CreateVolume while no topology is known" eq "$(calls CreateVolume "\"name\":\"$EARLY\"")" 0
check "no PV" pv_gone "$EARLY"

# 2. A node registers its zone: the claim is provisioned there, and only there.
node n1 "{\"$ZK\":\"z1\"}"
csinode n1 "[\"$ZK\"]"
wait_for "provisioned once a node registered keys" 20 pv_exists "$EARLY"
check "requisite: the registered node, not the labelled one" eq "$(requisite "$EARLY")" "zone=z1"

# 3. A node reporting zone and rack beside the zone-only one; one more with labels only.
node n2 "{\"$ZK\":\"z2\",\"$RK\":\"r2\"}"
csinode n2 "[\"$ZK\",\"$RK\"]"
node n3 "{\"$ZK\":\"z3\",\"$RK\":\"r3\"}"
mk_pvc mixed std
MIXED=$(pv_of mixed)
wait_for "PV of claim mixed" 20 pv_exists "$MIXED"
check "requisite: each registered key set, shorter terms first, n0 and n3 left out" \
	eq "$(requisite "$MIXED")" "zone=z1;zone=z2;rack=r2+zone=z2"

# 4. Released while a VolumeAttachment still names the PV: postponed, a Normal event.
bind mixed
mk_va va-mixed "$DRV" n2 "$MIXED"
release mixed
wait_for "the user sees it waits for the detach" 20 has_event PersistentVolume "$MIXED" \
	"^VolumeDelete: persistentvolume $MIXED is still attached to node n2, waiting for detach$"
check "a Normal event, not a Warning" eq "$(event_type PersistentVolume "$MIXED" VolumeDelete)" Normal
check "no VolumeFailedDelete" eq "$(event_type PersistentVolume "$MIXED" VolumeFailedDelete)" ""
check "no DeleteVolume while attached" eq "$(calls DeleteVolume "vol-$MIXED")" 0
check "the PV stays" pv_exists "$MIXED"
kc delete volumeattachment va-mixed >/dev/null
wait_for "deleted once detached" 20 pv_gone "$MIXED"
check "DeleteVolume once" eq "$(calls DeleteVolume "vol-$MIXED")" 1
curl -s "http://127.0.0.1:$PORT/metrics" >"$T/metrics"
check "the deletion counted once, as a success" grep -q '^controller_persistentvolume_delete_total{class="std"} 1$' "$T/metrics"
check "the wait was not counted as a failed deletion" bash -c "! grep -q '^controller_persistentvolume_delete_failed_total{class=\"std\"}' '$T/metrics'"
rc=0; att_stop p || rc=$?
check "SIGTERM exits 0" eq "$rc" 0

# 5. --worker-threads=0 is taken, as upstream's flag.Uint takes it: no worker, nothing provisioned.
prov_start p0 "$T/td.sock" --worker-threads=0
wait_for "started" 20 grep -q "Started provisioner controller" "$T/p0.log"
mk_pvc idle std
sleep 1.5
check "no CreateVolume with no worker" eq "$(calls CreateVolume "\"name\":\"$(pv_of idle)\"")" 0
check "no PV" pv_gone "$(pv_of idle)"
check "the log says why" grep -q -- "--worker-threads=0: no claim is provisioned" "$T/p0.log"
rc=0; att_stop p0 || rc=$?
check "SIGTERM exits 0" eq "$rc" 0

att_finish
