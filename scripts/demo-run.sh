#!/usr/bin/env bash
# The kcsi demo: `kcsi up` runs the whole storage stack on this machine, then only kubectl talks to
# it, applying the manifests in examples/ as a user would. Every step shows what the controllers
# did with `kubectl get` / `kubectl describe`. Ctrl-C at any moment, or a step that fails, stops
# the stack and leaves nothing behind (kcsi up unmounts and detaches what is still in use); a
# failed step makes the demo exit with its status.
#
#   KCSI_BIN   folder of the kcsi binaries (default: build/bin)
#   KUBECTL    kubectl to use (default: kubectl on PATH)
#   TMPDIR     where the demo's folder (kcsi-demo.XXXXXX) is made (default: /tmp)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
bin=${KCSI_BIN:-$src/build/bin}
kubectl=${KUBECTL:-kubectl}
work=$(mktemp -d "${TMPDIR:-/tmp}/kcsi-demo.XXXXXX")
up_pid=
cur_pid=
# Runs on every exit: the end, a failed step (set -e), Ctrl-C. Nothing in it may stop it half-way,
# so errexit is off here: a step that failed has already been reaped, and kill then fails.
stop() {
	set +e
	trap - EXIT INT TERM
	if [ -n "$cur_pid" ]; then kill -TERM "$cur_pid" 2>/dev/null; fi
	if [ -n "$up_pid" ] && kill -0 "$up_pid" 2>/dev/null; then
		kill -TERM "$up_pid" 2>/dev/null || true
		wait "$up_pid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
on_exit() {
	local rc=$?
	[ "$rc" -eq 0 ] || echo "demo: a step failed (exit $rc); stopping kcsi up" >&2
	stop
}
trap on_exit EXIT
trap 'echo; echo "demo: interrupted"; stop; exit 130' INT TERM

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
# Each command runs in the background and is waited for, so that Ctrl-C reaches the trap at once
# (bash defers a trap until a foreground child ends, and kubectl retries a dead server for a
# minute).
run() {
	printf '$ %s\n' "$*"
	"$@" &
	cur_pid=$!
	local rc=0
	wait "$cur_pid" || rc=$? # not a bare wait: set -e would leave before cur_pid is cleared
	cur_pid=
	return $rc
}
k() { run "$kubectl" "$@"; }

say "kcsi up: kube-emulator, csi-provisioner, csi-attacher, csi-resizer, csi-snapshotter, snapshot-controller, kcsi-controller-manager, and two nodes (kcsi-loopplugin, csi-node-driver-registrar, livenessprobe, kcsi-node)"
"$bin/kcsi" up --dir "$work/stack" --nodes 2 >"$work/up.out" 2>&1 &
up_pid=$!
for _ in $(seq 1 600); do
	[ -f "$work/stack/ready" ] && break
	kill -0 "$up_pid" 2>/dev/null || { cat "$work/up.out"; echo "demo: kcsi up failed" >&2; exit 1; }
	sleep 0.05
done
[ -f "$work/stack/ready" ] || { cat "$work/up.out"; echo "demo: kcsi up was not ready in 30 s" >&2; exit 1; }
cat "$work/up.out"
export KUBECONFIG=$work/stack/kubeconfig

say "The cluster as kubectl sees it: two nodes, each with the loop driver registered in its CSINode"
k get nodes
k get csinodes
k get csidrivers

say "A StorageClass that waits for the first consumer, and a claim of it: Pending, no volume yet"
k apply -f "$src/examples/storageclass-wffc.yaml" -f "$src/examples/pvc-filesystem.yaml"
k get pvc data

say "A pod on node-1 uses the claim: the scheduler picks node-1 and marks the claim, the provisioner creates the volume, the binder binds it"
k apply -f "$src/examples/pod-writer.yaml"
k wait --for=condition=Ready pod/writer --timeout=60s
k get pods -o wide
k get pvc data
pv=$("$kubectl" get pvc data -o jsonpath='{.spec.volumeName}')
k get pv "$pv"
say "The PV's node affinity comes from the driver's accessible topology"
k describe pv "$pv"

say "The attach/detach controller attached the volume to node-1 (VolumeAttachment), csi-attacher called ControllerPublishVolume"
k get volumeattachments
k get node node-1 -o jsonpath='{.status.volumesAttached}{"\n"}{.status.volumesInUse}{"\n"}'

uid=$("$kubectl" get pod writer -o jsonpath='{.metadata.uid}')
mnt=$work/stack/nodes/node-1/kubelet/pods/$uid/volumes/kubernetes.io~csi/$pv/mount
say "kcsi-node staged and published the volume at the kubelet's paths; kcsi-node runs no containers, so we write the file the container would, through the pod's mount"
run findmnt -n -o TARGET,SOURCE,FSTYPE --target "$mnt"
echo "hello from node-1, $(date -u +%H:%M:%S)" >"$mnt/hello.txt"
run cat "$mnt/hello.txt"

say "Delete the writer: kcsi-node unmounts, drops the volume from volumesInUse, then the controller detaches"
k delete pod writer --timeout=60s
for _ in $(seq 1 200); do
	[ -z "$("$kubectl" get volumeattachments -o name)" ] && break
	sleep 0.05
done
k get volumeattachments

say "A reader pod on node-2: the same volume is attached there and mounted"
k apply -f "$src/examples/pod-reader.yaml"
k wait --for=condition=Ready pod/reader --timeout=60s
k get pods -o wide
k get volumeattachments
uid=$("$kubectl" get pod reader -o jsonpath='{.metadata.uid}')
mnt=$work/stack/nodes/node-2/kubelet/pods/$uid/volumes/kubernetes.io~csi/$pv/mount
say "The file written on node-1, read back on node-2"
run cat "$mnt/hello.txt"

say "A VolumeSnapshot of the claim: snapshot-controller creates its content, csi-snapshotter has the driver take it, READYTOUSE becomes true; a claim restored from it is provisioned"
k apply -f "$src/examples/storageclass-immediate.yaml" -f "$src/examples/snapshot.yaml"
k wait --for=jsonpath='{.status.readyToUse}'=true volumesnapshot/data-snap --timeout=60s
k get volumesnapshot data-snap
k get volumesnapshotcontent
k wait --for=jsonpath='{.status.phase}'=Bound pvc/data-restored --timeout=60s
k get pvc data-restored

say "Expansion while the pod runs: an expandable class (xfs) and a claim of 320Mi with its pod"
k apply -f "$src/examples/storageclass-expandable.yaml" -f "$src/examples/pvc-expandable.yaml"
k wait --for=condition=Ready pod/grower --timeout=60s
gpv=$("$kubectl" get pvc grow -o jsonpath='{.spec.volumeName}')
gnode=$("$kubectl" get pod grower -o jsonpath='{.spec.nodeName}')
guid=$("$kubectl" get pod grower -o jsonpath='{.metadata.uid}')
gmnt=$work/stack/nodes/$gnode/kubelet/pods/$guid/volumes/kubernetes.io~csi/$gpv/mount
run df -h "$gmnt"
say "kubectl patch asks for 640Mi: csi-resizer calls ControllerExpandVolume and grows the PV, kcsi-node calls NodeExpandVolume (xfs_growfs) under the running pod, and the claim reports 640Mi"
k patch pvc grow -p '{"spec":{"resources":{"requests":{"storage":"640Mi"}}}}'
k wait --for=jsonpath='{.status.capacity.storage}'=640Mi pvc/grow --timeout=60s
k get pvc grow
run df -h "$gmnt"
say "A VolumeAttributesClass (type: thick): csi-resizer calls ControllerModifyVolume and records the claim's current class"
k apply -f "$src/examples/volumeattributesclass.yaml"
k patch pvc grow -p '{"spec":{"volumeAttributesClassName":"kcsi-loop-thick"}}'
k wait --for=jsonpath='{.status.currentVolumeAttributesClassName}'=kcsi-loop-thick pvc/grow --timeout=60s
k get pvc grow
k get volumeattributesclass

say "A group snapshot of the two claims labelled app=demo: the driver takes both at once (CreateVolumeGroupSnapshot), snapshot-controller makes one VolumeSnapshot per member"
k label pvc data grow app=demo
k apply -f "$src/examples/groupsnapshot.yaml"
k wait --for=jsonpath='{.status.readyToUse}'=true volumegroupsnapshot/demo-group --timeout=60s
k get volumegroupsnapshot
k get volumesnapshot

say "Teardown: the pods, the snapshot and the claims; the provisioner deletes the volumes and the PVs"
k delete volumegroupsnapshot demo-group --timeout=60s
k delete pod grower --timeout=60s
k delete pvc grow --timeout=60s
k delete pod reader --timeout=60s
k delete pvc data-restored --timeout=60s
k delete volumesnapshot data-snap --timeout=60s
k delete pvc data --timeout=60s
for _ in $(seq 1 200); do
	[ -z "$("$kubectl" get pv -o name)" ] && break
	sleep 0.05
done
k get pvc,pv,volumeattachments
k get events --sort-by=.lastTimestamp

say "Stopping kcsi up"
kill -TERM "$up_pid"
wait "$up_pid" || true
up_pid=
tail -n 2 "$work/up.out"
echo
echo "demo: done"
