#!/bin/bash
# e2e: kcsi-node's volume manager on two emulated nodes (each: kcsi-loopplugin --mode node, its
# registrar, kcsi-node), with kcsi-loopplugin --mode controller and csi-attacher; the test plays
# the attach/detach controller (VolumeAttachment, Node.status.volumesAttached, detach only once
# the node stops reporting the volume in volumesInUse).
#   - a pod's volume is staged and published at the kubelet's paths, vol_data.json written, the
#     pod Running/Ready, the volume in volumesInUse;
#   - a file written through one pod is read by the next pod of the same claim;
#   - the pod's deletion is finished by kcsi-node (or follows it) once unmounted;
#   - the volume moves from node A to node B;
#   - a block volume is mapped where the kubelet maps it;
#   - node-stage and node-publish secrets and pod info reach the driver (csi-testdriver); a Secret
#     with malformed base64 or a value that is not UTF-8 fails the mount with a FailedMount
#     naming the key (no value logged, no call to the driver) until it is put right.
: "${KCSI_SRC:?}"
source "$KCSI_SRC/tests/e2e/lib_emulator.sh"
source "$KCSI_SRC/tests/e2e/lib_attacher.sh"
source "$KCSI_SRC/tests/e2e/lib_node.sh"
emu_start
controller_up
node_up n1
node_up n2
wait_for "n1 registered" 15 csinode_has n1 loop.kcsi.io
wait_for "n2 registered" 15 csinode_has n2 loop.kcsi.io

# ---- filesystem volume, pod on n1 ----
pod_with_volume p1 n1
wait_for "p1 Running" 30 pod_running p1
uid=$(pod_uid p1)
tgt=$(pod_target n1 "$uid" pv1)
stg=$(staging_of n1 "$h")
mountpoint -q "$stg" || fail "not staged at the kubelet's global mount path $stg"
mountpoint -q "$tgt" || fail "not published at the kubelet's pod path $tgt"
jq -e --arg h "$h" '.driverName=="loop.kcsi.io" and .volumeHandle==$h' "$(dirname "$stg")/vol_data.json" >/dev/null ||
	fail "global vol_data.json: $(cat "$(dirname "$stg")/vol_data.json")"
jq -e --arg h "$h" --arg va "$(va_of "$h" n1)" '.specVolID=="pv1" and .volumeHandle==$h and .nodeName=="n1" and .attachmentID==$va and .volumeLifecycleMode=="Persistent"' \
	"$(dirname "$tgt")/vol_data.json" >/dev/null || fail "pod vol_data.json: $(cat "$(dirname "$tgt")/vol_data.json")"
in_use n1 "$h" || fail "n1 does not report the volume in use"
echo "written by p1" >"$tgt/hello" || fail "cannot write through p1's mount"

kc delete pod p1 --wait=false >/dev/null
wait_for "p1 gone" 20 pod_gone p1
# The emulator deletes gracefully (deletionTimestamp): kcsi-node finished the deletion.
grep -q 'Pod'"'"'s volumes are unmounted, deleted pod="default/p1"' "$T/nodes/n1/kcsi-node.log" ||
	fail "kcsi-node did not finish p1's graceful deletion"
wait_for "p1 unpublished" 10 bash -c "! mountpoint -q '$tgt'"
[ -e "$T/nodes/n1/kubelet/pods/$uid" ] && fail "p1's pod directory left: $(find "$T/nodes/n1/kubelet/pods/$uid")"
wait_for "unstaged after the last pod" 10 bash -c "! mountpoint -q '$stg'"
wait_for "n1 stops reporting the volume in use" 10 not_in_use n1 "$h"

# ---- the next pod of the same claim reads the file ----
mk_pod p2 n1 c1
wait_for "p2 Running" 30 pod_running p2
tgt=$(pod_target n1 "$(pod_uid p2)" pv1)
[ "$(cat "$tgt/hello" 2>/dev/null)" = "written by p1" ] || fail "p2 does not read what p1 wrote"

# ---- the volume moves to n2 (detach only after n1 unmounted it) ----
kc delete pod p2 --wait=false >/dev/null
ad_detach "$h" n1
grep -q " $stg " /proc/self/mountinfo && fail "n1 still has the volume staged when it stopped reporting it in use"
ad_attach "$h" pv1 n2
mk_pod p3 n2 c1
wait_for "p3 Running on n2" 30 pod_running p3
tgt=$(pod_target n2 "$(pod_uid p3)" pv1)
mountpoint -q "$(staging_of n2 "$h")" || fail "not staged on n2"
[ "$(cat "$tgt/hello" 2>/dev/null)" = "written by p1" ] || fail "p3 on n2 does not read what p1 wrote"
kc delete pod p3 --wait=false >/dev/null
wait_for "p3 gone" 20 pod_gone p3
ad_detach "$h" n2

# ---- block volume on n2 ----
hb=$(lp_volume volb --cap SINGLE_NODE_WRITER,block)
mk_pv pvb loop.kcsi.io "$hb" '{"volumeMode":"Block","claimRef":{"namespace":"default","name":"cb"}}'
mk_claim cb pvb
ad_attach "$hb" pvb n2
mk_pod pb n2 cb block
wait_for "pb Running" 30 pod_running pb
ub=$(pod_uid pb)
pub=$T/nodes/n2/kubelet/plugins/kubernetes.io/csi/volumeDevices/publish/pvb/$ub
link=$T/nodes/n2/kubelet/pods/$ub/volumeDevices/kubernetes.io~csi/pvb
[ -d "$T/nodes/n2/kubelet/plugins/kubernetes.io/csi/volumeDevices/staging/pvb" ] || fail "no block staging path"
mountpoint -q "$pub" || fail "block volume not published at $pub"
[ "$(readlink "$link")" = "$pub" ] || fail "pod device link: $(readlink "$link")"
jq -e --arg h "$hb" '.volumeHandle==$h and .specVolID=="pvb"' \
	"$T/nodes/n2/kubelet/plugins/kubernetes.io/csi/volumeDevices/pvb/data/vol_data.json" >/dev/null || fail "block vol_data.json"
echo "raw block data" | dd of="$link" bs=512 conv=sync,notrunc status=none 2>/dev/null || fail "cannot write the device"
[ "$(head -c 14 "$pub")" = "raw block data" ] || fail "block data not read back"
kc delete pod pb --wait=false >/dev/null
wait_for "pb gone" 20 pod_gone pb
[ -e "$link" ] && fail "pod device link left"
mountpoint -q "$pub" 2>/dev/null && fail "block publish path still mounted"
wait_for "block staging removed" 10 bash -c "[ ! -e '$T/nodes/n2/kubelet/plugins/kubernetes.io/csi/volumeDevices/staging/pvb' ]"
ad_detach "$hb" n2

# ---- secrets and pod info (csi-testdriver on n1, attachRequired false, podInfoOnMount) ----
"$KCSI_TESTS/csi-testdriver" --endpoint "unix://$T/td.sock" --record "$T/td.rec" \
	--fail-count NodePublishVolume=2 >"$T/td.log" 2>&1 &
TD_PID=$!
"$KCSI_BIN/csi-node-driver-registrar" --csi-address "$T/td.sock" --kubelet-registration-path "$T/td.sock" \
	--plugin-registration-path "$T/nodes/n1/kubelet/plugins_registry" >"$T/td-reg.log" 2>&1 &
NODE_PIDS[td:reg]=$!
wait_for "testdriver registered" 15 csinode_has n1 testdriver.kcsi.dev
mk_secret() {
	jq -n --arg n "$1" --arg k "$2" --arg v "$(printf '%s' "$3" | base64)" \
		'{apiVersion: "v1", kind: "Secret", metadata: {name: $n, namespace: "default"}, data: {($k): $v}}' |
		kc create -f - >/dev/null
}
mk_secret stage-secret password s3cr3t-stage
mk_secret publish-secret token s3cr3t-publish
echo '{"apiVersion":"storage.k8s.io/v1","kind":"CSIDriver","metadata":{"name":"testdriver.kcsi.dev"},
	"spec":{"attachRequired":false,"podInfoOnMount":true,"volumeLifecycleModes":["Persistent","Ephemeral"]}}' |
	kc create -f - >/dev/null
mk_pv pvt testdriver.kcsi.dev tvol-1 '{"csi":{"driver":"testdriver.kcsi.dev","volumeHandle":"tvol-1","volumeAttributes":{"color":"blue"},
	"nodeStageSecretRef":{"name":"stage-secret","namespace":"default"},
	"nodePublishSecretRef":{"name":"publish-secret","namespace":"default"}},
	"claimRef":{"namespace":"default","name":"ct"}}'
mk_claim ct pvt
mk_pod pt n1 ct
wait_for "pt Running (no attach needed, after two failed publishes)" 30 pod_running pt
wait_for "FailedMount event with the driver's message" 5 pod_event pt FailedMount \
	'MountVolume.SetUp failed for volume "pvt" : rpc error: code = Unavailable desc = injected failure'
[ "$(grep -c NodePublishVolume "$T/td.rec")" -ge 3 ] || fail "publish not retried"
ut=$(pod_uid pt)
stage=$(grep '^/csi.v1.Node/NodeStageVolume\|^NodeStageVolume' "$T/td.rec" | tail -1 | cut -d' ' -f2-)
pubr=$(grep '^/csi.v1.Node/NodePublishVolume\|^NodePublishVolume' "$T/td.rec" | tail -1 | cut -d' ' -f2-)
jq -e '.secrets.password=="s3cr3t-stage" and .volume_context.color=="blue"' <<<"$stage" >/dev/null ||
	fail "NodeStageVolume lacks the node-stage secret: $stage"
jq -e --arg p "$T/nodes/n1/kubelet/plugins/kubernetes.io/csi/testdriver.kcsi.dev/$(sha256 tvol-1)/globalmount" \
	'.staging_target_path==$p' <<<"$stage" >/dev/null || fail "staging path: $stage"
jq -e --arg u "$ut" '.secrets.token=="s3cr3t-publish" and .volume_context["csi.storage.k8s.io/pod.name"]=="pt"
	and .volume_context["csi.storage.k8s.io/pod.namespace"]=="default" and .volume_context["csi.storage.k8s.io/pod.uid"]==$u
	and .volume_context["csi.storage.k8s.io/ephemeral"]=="false"
	and .volume_context["csi.storage.k8s.io/serviceAccount.name"]=="default"' <<<"$pubr" >/dev/null ||
	fail "NodePublishVolume lacks the publish secret or pod info: $pubr"
grep -rq 's3cr3t' "$T"/nodes/*/kcsi-node.log && fail "a secret reached kcsi-node's log"
kc delete pod pt --wait=false >/dev/null
wait_for "pt gone" 20 pod_gone pt
wait_for "testdriver unstaged" 10 grep -q NodeUnstageVolume "$T/td.rec"

# ---- an inline (ephemeral) CSI volume: published directly, handle csi-<sha256(podUID+volume)> ----
jq -n '{apiVersion: "v1", kind: "Pod", metadata: {name: "pi", namespace: "default"},
	spec: {nodeName: "n1", containers: [{name: "app", image: "busybox"}],
	       volumes: [{name: "scratch", csi: {driver: "testdriver.kcsi.dev", volumeAttributes: {size: "1Mi"},
	                  nodePublishSecretRef: {name: "publish-secret"}}}]}}' | kc create -f - >/dev/null
wait_for "pi Running" 20 pod_running pi
ui=$(pod_uid pi)
pubi=$(grep '^NodePublishVolume' "$T/td.rec" | grep '"csi.storage.k8s.io/pod.name":"pi"' | tail -1 | cut -d' ' -f2-)
jq -e --arg id "csi-$(sha256 "${ui}scratch")" --arg t "$T/nodes/n1/kubelet/pods/$ui/volumes/kubernetes.io~csi/scratch/mount" \
	'.volume_id==$id and .target_path==$t and (.staging_target_path // "")=="" and .volume_context.size=="1Mi"
	 and .volume_context["csi.storage.k8s.io/ephemeral"]=="true" and .secrets.token=="s3cr3t-publish"' <<<"$pubi" >/dev/null ||
	fail "inline volume publish: $pubi"
jq -e '.volumeLifecycleMode=="Ephemeral"' "$T/nodes/n1/kubelet/pods/$ui/volumes/kubernetes.io~csi/scratch/vol_data.json" >/dev/null ||
	fail "inline vol_data.json"
kc delete pod pi --wait=false >/dev/null
wait_for "pi gone" 20 pod_gone pi
grep '^NodeUnpublishVolume' "$T/td.rec" | grep -q "csi-$(sha256 "${ui}scratch")" || fail "inline volume not unpublished"

# ---- Secrets a CSI secret cannot come from (issue 40): malformed base64 in data (the Go client
# refuses the object; kube-emulator stores it) and a value that is not UTF-8 (a protobuf string
# must be). No call reaches the driver, the pod gets a FailedMount in the kubelet's words naming
# the key, no value is logged; once the Secret is put right the volume is mounted. ----
jq -n '{apiVersion: "v1", kind: "Secret", metadata: {name: "bad-secret", namespace: "default"},
	data: {token: "czNjcjN0*LWJhZA=="}}' | kc create -f - >/dev/null
jq -n '{apiVersion: "v1", kind: "Secret", metadata: {name: "latin1-secret", namespace: "default"},
	data: {password: "czNjcuk="}}' | kc create -f - >/dev/null
jq -n '{apiVersion: "v1", kind: "Pod", metadata: {name: "pbad", namespace: "default"},
	spec: {nodeName: "n1", containers: [{name: "app", image: "busybox"}],
	       volumes: [{name: "scratch", csi: {driver: "testdriver.kcsi.dev", nodePublishSecretRef: {name: "bad-secret"}}}]}}' |
	kc create -f - >/dev/null
wait_for "FailedMount naming the malformed key" 15 pod_event pbad FailedMount \
	'MountVolume.SetUp failed for volume "scratch" : fetching NodePublishSecretRef default/bad-secret failed: kubernetes.io/csi: failed to find the secret bad-secret in the namespace default with error: data key "token": illegal base64 data at input byte 8'
mk_pv pvu testdriver.kcsi.dev tvol-u '{"csi":{"driver":"testdriver.kcsi.dev","volumeHandle":"tvol-u",
	"nodeStageSecretRef":{"name":"latin1-secret","namespace":"default"}},"claimRef":{"namespace":"default","name":"cu"}}'
mk_claim cu pvu
mk_pod pu n1 cu
wait_for "FailedMount naming the value that is not UTF-8" 15 pod_event pu FailedMount \
	'MountVolume.MountDevice failed for volume "pvu" : fetching NodeStageSecretRef default/latin1-secret failed: kubernetes.io/csi: failed to find the secret latin1-secret in the namespace default with error: data key "password": the value is not valid UTF-8, which a CSI secret (a protobuf string) must be'
pod_running pu && fail "pu runs without its volume"
pod_running pbad && fail "pbad runs without its volume"
# while they wait, kubectl says what the kubelet would say: ContainerCreating, not a bare Pending
for p in pu pbad; do
	wait_for "$p shown ContainerCreating" 10 bash -c "kubectl --kubeconfig $KC get pod $p --no-headers | grep -q ' ContainerCreating '" ||
		fail "$p: kubectl get pod says $(kubectl --kubeconfig "$KC" get pod "$p" --no-headers)"
	kc get pod "$p" -o json | jq -e '.status.phase == "Pending" and
		([.status.conditions[] | select(.type == "Ready" and .status == "False" and .reason == "ContainersNotReady" and .message == "containers with unready status: [app]")] | length) == 1 and
		.status.containerStatuses[0].state.waiting.reason == "ContainerCreating" and .status.containerStatuses[0].ready == false' >/dev/null ||
		fail "$p: not the kubelet's waiting status: $(kc get pod "$p" -o json | jq -c .status)"
done
grep '"csi.storage.k8s.io/pod.name":"pbad"' "$T/td.rec" && fail "a publish with the malformed Secret reached the driver"
grep -q 'tvol-u' "$T/td.rec" && fail "a stage with the non-UTF-8 Secret reached the driver"
grep -rqe 'czNjcjN0' -e 'czNjcuk' -e 's3cr3' "$T"/nodes/*/kcsi-node.log && fail "a secret value reached kcsi-node's log"
kc patch secret latin1-secret --type merge -p '{"data":{"password":"czNjcjN0LXU="}}' >/dev/null
wait_for "pu Running once its Secret is put right" 60 pod_running pu
stageu=$(grep '^NodeStageVolume' "$T/td.rec" | grep tvol-u | tail -1 | cut -d' ' -f2-)
jq -e '.secrets.password=="s3cr3t-u"' <<<"$stageu" >/dev/null || fail "NodeStageVolume lacks the mended secret: $stageu"
kc delete pod pbad pu --wait=false >/dev/null
wait_for "pbad, pu gone" 20 bash -c "! kubectl --kubeconfig $KC get pod pbad pu -o name 2>/dev/null | grep -q ."

# ---- failures are events on the pod: an unregistered driver, a volume never attached ----
mk_pv pvx missing.kcsi.io vol-x '{"claimRef":{"namespace":"default","name":"cx"}}'
mk_claim cx pvx
mk_pod px n1 cx
wait_for "FailedMount event for an unregistered driver" 15 pod_event px FailedMount \
	'driver name missing.kcsi.io not found in the list of registered CSI drivers'
pod_running px && fail "px runs without its volume"
hw=$(lp_volume volw --cap SINGLE_NODE_WRITER,mount,ext4)
mk_pv pvw loop.kcsi.io "$hw" '{"claimRef":{"namespace":"default","name":"cw"}}'
mk_claim cw pvw
mk_pod pw n1 cw
wait_for "FailedAttachVolume event while the volume is not attached" 20 pod_event pw FailedAttachVolume \
	'is not yet in Node n1 status.volumesAttached'
mountpoint -q "$(staging_of n1 "$hw")" && fail "staged a volume that is not attached"
in_use n1 "$hw" || fail "a wanted volume is not reported in use while waiting for the attach"
kc delete pod px pw --wait=false >/dev/null
wait_for "px, pw gone" 20 bash -c "! kubectl --kubeconfig $KC get pod px pw -o name 2>/dev/null | grep -q ."
wait_for "pvw no longer reported in use" 10 not_in_use n1 "$hw"

# Nothing of this test is mounted any more.
sleep 0.5
grep -q " $T/nodes" /proc/self/mountinfo && fail "mounts left: $(grep -o " $T/nodes[^ ]*" /proc/self/mountinfo)"
node_finish
