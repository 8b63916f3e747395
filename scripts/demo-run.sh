#!/usr/bin/env bash
# The kcsi demo: one volume's whole attach/detach life on this machine.
#
# kube-emulator (the Kubernetes API), kcsi-loopplugin (a CSI driver on loop devices) and
# csi-attacher run as separate processes on loopback and a unix socket. The script plays the two
# Kubernetes parts that are not here: the attach/detach controller (it creates and deletes the
# VolumeAttachment) and the kubelet (it stages and publishes the volume with the kcsi CLI).
# Everything it starts or mounts is removed on exit, also after Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${KCSI_BIN:-$PWD/build/bin}
DRIVER=loop.kcsi.io
NODE=demo-node
PV=pv-demo

T=$(mktemp -d /tmp/kcsi-demo.XXXXXX)
PIDS=()
VOL=""
STAGED=""
PUBLISHED=""

if [ -t 1 ]; then
	bold() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
else
	bold() { printf '\n== %s\n' "$*"; }
fi
say() { printf '   %s\n' "$*"; }
kc() { kubectl --kubeconfig "$T/kubeconfig" "$@"; }
K() { "$BIN/kcsi" --endpoint "unix://$T/csi.sock" "$@"; }

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	set +e
	[ -n "$PUBLISHED" ] && K node unpublish "$VOL" "$PUBLISHED" >/dev/null 2>&1
	[ -n "$STAGED" ] && K node unstage "$VOL" "$STAGED" >/dev/null 2>&1
	if [ -n "$VOL" ]; then
		K controller unpublish "$VOL" "$NODE" >/dev/null 2>&1
		K controller delete-volume "$VOL" >/dev/null 2>&1
	fi
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
	# Safety net: nothing of ours may stay mounted or attached to a loop device.
	grep " $T/" /proc/self/mountinfo | awk '{print $5}' | sort -r | xargs -r -n1 umount -l 2>/dev/null
	losetup -a | grep "$T/" | cut -d: -f1 | xargs -r -n1 losetup -d 2>/dev/null
	rm -rf "$T"
	if [ $rc -ne 0 ]; then
		echo "demo: stopped (exit $rc); everything it started was removed" >&2
	fi
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

wait_until() { # SECONDS DESCRIPTION COMMAND...
	local secs=$1 what=$2
	shift 2
	for _ in $(seq 1 $((secs * 10))); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "demo: timed out waiting for $what; logs are in $T" >&2
	tail -20 "$T"/*.log >&2
	return 1
}

va_state() {
	kc get volumeattachment "$VA" -o json 2>/dev/null | jq -r '"attached=\(.status.attached // false)  finalizers=\(.metadata.finalizers // [] | join(","))  node-id=\(.metadata.annotations["csi.alpha.kubernetes.io/node-id"] // "-")  metadata=\(.status.attachmentMetadata // {} | tojson)"'
}
pv_state() {
	kc get pv "$PV" -o json 2>/dev/null | jq -r '"finalizers=\(.metadata.finalizers // [] | join(","))  deleting=\(.metadata.deletionTimestamp != null)"'
}

bold "Starting the three processes"
"$BIN/kube-emulator" --listen 127.0.0.1:0 --write-kubeconfig "$T/kubeconfig" >"$T/emulator.log" 2>&1 &
PIDS+=($!)
wait_until 10 "kube-emulator" test -s "$T/kubeconfig"
say "kube-emulator      serving the Kubernetes API at $(awk '/server:/ {print $2}' "$T/kubeconfig")"
mkdir -p "$T/pool"
"$BIN/kcsi-loopplugin" --endpoint "unix://$T/csi.sock" --nodeid "$NODE" --pool-dir "$T/pool" \
	>"$T/driver.log" 2>&1 &
PIDS+=($!)
wait_until 10 "kcsi-loopplugin" test -S "$T/csi.sock"
say "kcsi-loopplugin    CSI driver '$DRIVER' on unix://$T/csi.sock, pool $T/pool"
"$BIN/csi-attacher" --csi-address "unix://$T/csi.sock" --kubeconfig "$T/kubeconfig" -v 2 \
	>"$T/attacher.log" 2>&1 &
PIDS+=($!)
wait_until 10 "csi-attacher" grep -q "Starting CSI attacher" "$T/attacher.log"
say "csi-attacher       watching VolumeAttachments of '$DRIVER'"

bold "Creating a 64 MiB volume in the driver (what csi-provisioner would do)"
VOL=$(K -o json controller create-volume demo-volume --cap-bytes 64Mi --cap SINGLE_NODE_WRITER,mount,ext4 |
	jq -r .volume.volume_id)
say "CreateVolume -> volume ID $VOL (a sparse image file in the pool)"

bold "Registering the node and the volume with Kubernetes"
cat <<EOF | kc create -f - >/dev/null
apiVersion: v1
kind: Node
metadata:
  name: $NODE
---
apiVersion: storage.k8s.io/v1
kind: CSINode
metadata:
  name: $NODE
spec:
  drivers:
  - name: $DRIVER
    nodeID: $NODE
---
apiVersion: v1
kind: PersistentVolume
metadata:
  name: $PV
spec:
  capacity:
    storage: 64Mi
  accessModes: ["ReadWriteOnce"]
  csi:
    driver: $DRIVER
    volumeHandle: $VOL
    fsType: ext4
EOF
say "Node $NODE, CSINode $NODE (driver $DRIVER has node ID $NODE), PersistentVolume $PV"

bold "The attach/detach controller asks for the volume on the node"
VA="pv-$(printf '%s%s' "$PV" "$NODE" | sha256sum | cut -d' ' -f1)"
cat <<EOF | kc create -f - >/dev/null
apiVersion: storage.k8s.io/v1
kind: VolumeAttachment
metadata:
  name: $VA
spec:
  attacher: $DRIVER
  nodeName: $NODE
  source:
    persistentVolumeName: $PV
EOF
say "VolumeAttachment $VA"
say "(named pv-<SHA-256 of PV name + node name>, as Kubernetes names it)"
va_attached() { [ "$(kc get volumeattachment "$VA" -o jsonpath='{.status.attached}')" = true ]; }
wait_until 20 "the attach" va_attached
say "csi-attacher called ControllerPublishVolume; the VolumeAttachment now says:"
say "  $(va_state)"
say "and the PersistentVolume is protected: $(pv_state)"

bold "The kubelet stages and publishes the volume"
CAP=SINGLE_NODE_WRITER,mount,ext4
PUBCTX=()
while IFS= read -r kv; do PUBCTX+=(--pub-ctx "$kv"); done < <(
	kc get volumeattachment "$VA" -o json | jq -r '.status.attachmentMetadata // {} | to_entries[] | "\(.key)=\(.value)"')
mkdir -p "$T/staging" "$T/pod-volume"
K node stage "$VOL" "$T/staging" --cap "$CAP" "${PUBCTX[@]}" >/dev/null
STAGED="$T/staging"
DEV=$(findmnt -n -o SOURCE --target "$T/staging")
say "NodeStageVolume: loop device $DEV formatted ext4 and mounted at the staging path"
K node publish "$VOL" "$T/pod-volume/mount" --staging "$T/staging" --cap "$CAP" >/dev/null
PUBLISHED="$T/pod-volume/mount"
say "NodePublishVolume: bind-mounted into the pod's volume folder $PUBLISHED"

bold "A pod writes and reads a file on the volume"
echo "hello from kcsi at $(date -u +%H:%M:%S)" >"$PUBLISHED/hello.txt"
sync
say "wrote:  $(cat "$PUBLISHED/hello.txt")"
say "read back through the staging mount: $(cat "$T/staging/hello.txt")"
say "filesystem: $(df -h --output=size,used,avail "$PUBLISHED" | tail -1 | xargs)"

bold "The pod goes away: the kubelet unpublishes and unstages"
K node unpublish "$VOL" "$PUBLISHED" >/dev/null
PUBLISHED=""
K node unstage "$VOL" "$T/staging" >/dev/null
STAGED=""
say "NodeUnpublishVolume and NodeUnstageVolume: unmounted, loop device released"

bold "The attach/detach controller deletes the VolumeAttachment"
kc delete volumeattachment "$VA" --wait=false >/dev/null
say "deletionTimestamp set; the attacher's finalizer keeps the object until the volume is detached"
va_gone() { ! kc get volumeattachment "$VA" >/dev/null 2>&1; }
wait_until 20 "the detach" va_gone
say "csi-attacher called ControllerUnpublishVolume, wrote attached=false, removed its finalizer:"
say "the VolumeAttachment is gone"
say "the PersistentVolume still carries the finalizer while it exists: $(pv_state)"

bold "The PersistentVolume is deleted"
kc delete pv "$PV" --wait=false >/dev/null
pv_gone() { ! kc get pv "$PV" >/dev/null 2>&1; }
wait_until 20 "the PV finalizer removal" pv_gone
say "no VolumeAttachment uses it, so csi-attacher removed its finalizer and the PV is gone"
K controller delete-volume "$VOL" >/dev/null
VOL=""
say "DeleteVolume: the image file is removed from the pool"

bold "Done"
say "Stopping the processes; no process, loop device or mount is left behind."
