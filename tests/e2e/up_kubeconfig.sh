#!/bin/bash
# e2e: `kcsi up --kubeconfig` runs the storage stack and its nodes against an API server it did
# not start (a kube-emulator started here): the status table names that server's URL; a claim
# and a pod from examples/ end Running with the volume mounted; after SIGTERM nothing kcsi up
# created is left there (Node, CSINode, node Lease, CSIDriver, PV, VolumeAttachment). A Node of
# the same name already there is refused and kept; --no-controllers starts no
# kcsi-controller-manager and needs --kubeconfig; a distributed run leaves no Lease either.
set -u
: "${KCSI_BIN:?}" "${KCSI_SRC:?}"
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_up.sh"
kubectl=${KUBECTL:-kubectl}
up_cleanup() {
	release_below "$T"
	emu_cleanup
}
trap up_cleanup EXIT


emu_start
export KUBECONFIG=$KC

# ---- 1. the stack against someone else's API server ----
d=$T/up
if start_up "$d" --nodes 2 --kubeconfig "$KC"; then
	[ -e "$d/kubeconfig" ] && fail "kcsi up wrote its own kubeconfig with --kubeconfig"
	grep -q "kube-emulator" "$d.out" && fail "kcsi up started a kube-emulator with --kubeconfig"
	grep -q "export KUBECONFIG=$KC" "$d.out" || fail "kcsi up did not point KUBECONFIG at $KC"
	# the status table names the API server it uses: the URL of the --kubeconfig's server
	api=$(awk '/server:/ {print $2}' "$KC")
	awk -v u="$api" '/^ *API server \(--kubeconfig\) / && $NF == u' "$d.out" | grep -q . ||
		fail "the status table does not show the API server's URL $api: $(grep -i 'API server' "$d.out")"
	$kubectl apply -f "$KCSI_SRC/examples/storageclass-wffc.yaml" \
		-f "$KCSI_SRC/examples/pvc-filesystem.yaml" -f "$KCSI_SRC/examples/pod-writer.yaml" \
		>/dev/null || fail "kubectl apply of the examples failed"
	wait_for 20 phase_is pod/writer Running || fail "pod/writer not Running on the external API server"
	pv=$($kubectl get pvc data -o jsonpath='{.spec.volumeName}')
	uid=$($kubectl get pod writer -o jsonpath='{.metadata.uid}')
	mnt=$d/nodes/node-1/kubelet/pods/$uid/volumes/kubernetes.io~csi/$pv/mount
	mountpoint -q "$mnt" || fail "the writer's volume is not mounted at $mnt"
	$kubectl delete pod writer --timeout=30s >/dev/null || fail "deleting pod/writer"
	$kubectl delete pvc data --timeout=30s >/dev/null || fail "deleting pvc/data"
	wait_for 20 no_objects pv || fail "PVs left after the claim was deleted"
	wait_for 20 no_objects volumeattachments || fail "VolumeAttachments left after the pod was deleted"
	stop_up || fail "kcsi up exited non-zero on SIGTERM"
	grep -q "could not delete" "$d.out" && fail "kcsi up could not delete what it created: $(grep 'could not delete' "$d.out")"
	for kind in nodes csinodes csidrivers pv volumeattachments; do
		no_objects "$kind" || fail "$kind left on the API server after SIGTERM: $($kubectl get "$kind" -o name)"
	done
	no_objects leases -n kube-node-lease || fail "node Leases left: $($kubectl get leases -n kube-node-lease -o name)"
	[ "$(grep -cF " $d/" /proc/self/mountinfo)" = 0 ] || fail "mounts left under $d"
fi

# ---- 2. a Node of that name already on the cluster is not taken over ----
$kubectl create -f - >/dev/null <<'YAML' || fail "creating Node node-1"
apiVersion: v1
kind: Node
metadata: {name: node-1}
YAML
"$KCSI_BIN/kcsi" up --dir "$T/taken" --nodes 1 --kubeconfig "$KC" >"$T/taken.out" 2>&1 &&
	fail "kcsi up ran over an existing Node node-1"
grep -q "Node node-1 already exists" "$T/taken.out" || fail "unclear refusal: $(cat "$T/taken.out")"
$kubectl get node node-1 >/dev/null 2>&1 || fail "kcsi up deleted a Node it did not create"
no_objects csidrivers || fail "the refused run left its CSIDriver"
$kubectl delete node node-1 >/dev/null

# ---- 3. --no-controllers (the cluster's own controllers do the work), distributed: the
# attachers' leader Lease goes too ----
d=$T/nocm
if start_up "$d" --nodes 1 --kubeconfig "$KC" --no-controllers --provisioning=distributed; then
	grep -q "kcsi-controller-manager" "$d.out" && fail "--no-controllers started kcsi-controller-manager"
	grep -q "csi-provisioner/node-1 .*running" "$d.out" || fail "no csi-provisioner/node-1 in the distributed run"
	stop_up || fail "kcsi up --no-controllers exited non-zero"
	no_objects nodes || fail "Nodes left after --no-controllers: $($kubectl get nodes -o name)"
	no_objects leases -A || fail "Leases left after a distributed run: $($kubectl get leases -A -o name)"
fi
"$KCSI_BIN/kcsi" up --no-controllers >/dev/null 2>"$T/err" && fail "--no-controllers accepted without --kubeconfig"
grep -q -- "--no-controllers needs --kubeconfig" "$T/err" || fail "unclear error: $(cat "$T/err")"

if [ $FAILS -ne 0 ]; then
	for f in "$T"/*.out; do echo "--- $f" >&2; tail -n 40 "$f" >&2; done
	for f in "$T"/*/logs/*.log; do echo "--- $f" >&2; tail -n 15 "$f" >&2; done
	exit 1
fi
echo PASS
