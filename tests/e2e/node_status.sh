#!/bin/bash
# e2e: what kcsi-node reports, as the kubelet does, so that a real scheduler places pods on the
# node and kubectl shows them ready:
#   - the Node: capacity and allocatable (pods 110, the machine's cpu, memory and disk), nodeInfo
#     (kubeletVersion = kcsi-node --version, architecture, kernelVersion = uname -r), addresses,
#     the kubelet's four conditions; a taint someone else put on the Node survives the updates;
#   - flags: --max-pods, --capacity and --system-reserved shape capacity and allocatable, a
#     malformed one (or a --node-ip that is no address) stops kcsi-node at start with a clear error;
#   - a pod with a volume is READY 1/1 Running in `kubectl get pods`, `kubectl wait
#     --for=condition=Ready` returns, and each container has a running status.
: "${KCSI_SRC:?}"
source "$KCSI_SRC/tests/e2e/lib_emulator.sh"
source "$KCSI_SRC/tests/e2e/lib_attacher.sh"
source "$KCSI_SRC/tests/e2e/lib_node.sh"
emu_start
controller_up
node_up n1 --node-status-update-frequency 1s
node_up n2 --max-pods 3 --capacity cpu=4,memory=8Gi,example.com/dongle=2 --system-reserved cpu=500m,memory=1Gi \
	--node-ip 192.0.2.7
wait_for "n1 registered" 15 csinode_has n1 loop.kcsi.io
wait_for "n2 registered" 15 csinode_has n2 loop.kcsi.io

# ---- n1: the machine's figures ----
version=$("$KCSI_BIN/kcsi-node" --version | awk '{print $2}')
case $(uname -m) in x86_64) arch=amd64 ;; aarch64) arch=arm64 ;; *) arch=$(uname -m) ;; esac
wait_for "n1 has capacity" 10 bash -c "kubectl --kubeconfig $KC get node n1 -o json | jq -e .status.capacity.pods >/dev/null"
j=$(node_json n1)
jq -e '.status.capacity.pods=="110" and .status.allocatable.pods=="110"' <<<"$j" >/dev/null ||
	fail "n1 pods capacity/allocatable: $(jq -c .status.capacity,.status.allocatable <<<"$j")"
[ "$(jq -r .status.capacity.cpu <<<"$j")" = "$(nproc)" ] || fail "n1 cpu: $(jq -c .status.capacity <<<"$j"), nproc $(nproc)"
memkb=$(awk '/^MemTotal:/{print $2}' /proc/meminfo)
[ "$(jq -r .status.capacity.memory <<<"$j")" = "${memkb}Ki" ] || fail "n1 memory: $(jq -c .status.capacity <<<"$j"), MemTotal ${memkb} kB"
jq -e '(.status.capacity["ephemeral-storage"] | test("^[1-9][0-9]*(Ki|Mi|Gi|Ti)?$")) and
	(.status.allocatable | has("cpu") and has("memory") and has("ephemeral-storage"))' <<<"$j" >/dev/null ||
	fail "n1 ephemeral-storage/allocatable: $(jq -c .status.capacity,.status.allocatable <<<"$j")"
if [ -d /sys/kernel/mm/hugepages/hugepages-2048kB ]; then
	jq -e '.status.capacity | has("hugepages-2Mi")' <<<"$j" >/dev/null || fail "n1 lacks hugepages-2Mi: $(jq -c .status.capacity <<<"$j")"
fi
jq -e --arg v "$version" --arg a "$arch" --arg k "$(uname -r)" '.status.nodeInfo |
	.kubeletVersion==$v and .architecture==$a and .kernelVersion==$k and .operatingSystem=="linux" and
	.containerRuntimeVersion==("kcsi://" + $v) and (.osImage | length > 0) and (.bootID | length > 0)' <<<"$j" >/dev/null ||
	fail "n1 nodeInfo: $(jq -c .status.nodeInfo <<<"$j") (want $version $arch $(uname -r))"
jq -e '[.status.addresses[] | .type] == ["InternalIP", "Hostname"] and (.status.addresses[0].address | test("^[0-9.]+$"))' <<<"$j" >/dev/null ||
	fail "n1 addresses: $(jq -c .status.addresses <<<"$j")"
jq -e '[.status.conditions[] | "\(.type)=\(.status)/\(.reason)"] | sort ==
	["DiskPressure=False/KubeletHasNoDiskPressure", "MemoryPressure=False/KubeletHasSufficientMemory",
	 "PIDPressure=False/KubeletHasSufficientPID", "Ready=True/KubeletReady"]' <<<"$j" >/dev/null ||
	fail "n1 conditions: $(jq -c .status.conditions <<<"$j")"
[ "$(jq -r '.status.conditions[] | select(.type=="Ready") | .message' <<<"$j")" = "kubelet is posting ready status" ] ||
	fail "n1 Ready message: $(jq -c .status.conditions <<<"$j")"

# A taint the node lifecycle controller (or an admin) put on the Node survives kcsi-node's updates,
# and the heartbeat moves.
kc taint node n1 example.com/keep=yes:NoSchedule >/dev/null || fail "cannot taint n1"
hb=$(jq -r '.status.conditions[] | select(.type=="Ready") | .lastHeartbeatTime' <<<"$j")
wait_for "n1 heartbeat moves" 10 bash -c "[ \"\$(kubectl --kubeconfig $KC get node n1 -o json | jq -r '.status.conditions[] | select(.type==\"Ready\") | .lastHeartbeatTime')\" != '$hb' ]"
[ "$(node_json n1 | jq -c '[.spec.taints[]? | .key]')" = '["example.com/keep"]' ] ||
	fail "kcsi-node's status update touched the taints: $(node_json n1 | jq -c .spec.taints)"

# ---- n2: the flags ----
j=$(node_json n2)
jq -e '.status.capacity.pods=="3" and .status.allocatable.pods=="3" and .status.capacity.cpu=="4" and
	.status.allocatable.cpu=="3500m" and .status.capacity.memory=="8Gi" and .status.allocatable.memory=="7Gi" and
	.status.capacity["example.com/dongle"]=="2" and .status.allocatable["example.com/dongle"]=="2"' <<<"$j" >/dev/null ||
	fail "n2 capacity/allocatable from the flags: $(jq -c .status.capacity,.status.allocatable <<<"$j")"
[ "$(jq -r '.status.addresses[] | select(.type=="InternalIP") | .address' <<<"$j")" = 192.0.2.7 ] ||
	fail "n2 --node-ip: $(jq -c .status.addresses <<<"$j")"
for bad in "--max-pods 0|--max-pods must be positive" "--capacity cpu=lots|--capacity cpu=lots:" \
	"--kube-reserved gpu=1|--kube-reserved: gpu is not a resource of this node" \
	"--node-ip 10.0.0.300|--node-ip 10.0.0.300 is not an IP address"; do
	rc=0
	out=$(timeout 5 "$KCSI_BIN/kcsi-node" --kubeconfig "$KC" --node-name bad --root-dir "$T/bad" ${bad%%|*} 2>&1) || rc=$?
	[ $rc -eq 1 ] && grep -qF -- "${bad#*|}" <<<"$out" || fail "kcsi-node ${bad%%|*}: exit $rc, $out"
done
kc get node bad >/dev/null 2>&1 && fail "a kcsi-node with a bad flag registered its Node"

# ---- a pod with a volume on n2: READY 1/1 Running, kubectl wait returns ----
pod_with_volume p1 n2
kc wait --for=condition=Ready pod/p1 --timeout=30s >/dev/null || fail "kubectl wait --for=condition=Ready pod/p1 failed"
row=$(kc get pod p1 --no-headers | awk '{print $2, $3}')
[ "$row" = "1/1 Running" ] || fail "kubectl get pods shows p1 as '$row'"
uid=$(pod_uid p1)
kc get pod p1 -o json | jq -e --arg u "$uid" '.status |
	.hostIP=="192.0.2.7" and .podIP=="192.0.2.7" and .hostIPs==[{ip: "192.0.2.7"}] and .podIPs==[{ip: "192.0.2.7"}] and
	(.startTime | length > 0) and
	([.conditions[] | select(.status=="True") | .type] | sort ==
	 ["ContainersReady", "Initialized", "PodReadyToStartContainers", "PodScheduled", "Ready"]) and
	(.containerStatuses | length == 1) and (.containerStatuses[0] | .name=="app" and .image=="busybox" and
	 .ready and .started and .restartCount==0 and .containerID==("kcsi://" + $u + "/app") and
	 (.state.running.startedAt | length > 0))' >/dev/null || fail "p1 status: $(kc get pod p1 -o json | jq -c .status)"

# A pod without volumes, with an init container and two containers: 2/2, the init one Completed.
jq -n '{apiVersion: "v1", kind: "Pod", metadata: {name: "p2", namespace: "default"},
	spec: {nodeName: "n1", initContainers: [{name: "setup", image: "busybox"}],
	       containers: [{name: "a", image: "nginx"}, {name: "b", image: "redis"}]}}' | kc create -f - >/dev/null
kc wait --for=condition=Ready pod/p2 --timeout=30s >/dev/null || fail "pod p2 did not become Ready"
row=$(kc get pod p2 --no-headers | awk '{print $2, $3}')
[ "$row" = "2/2 Running" ] || fail "kubectl get pods shows p2 as '$row'"
kc get pod p2 -o json | jq -e '.status.initContainerStatuses[0] | .name=="setup" and .state.terminated.reason=="Completed" and .state.terminated.exitCode==0' >/dev/null ||
	fail "p2 init container status: $(kc get pod p2 -o json | jq -c .status.initContainerStatuses)"

kc delete pod p1 p2 --wait=false >/dev/null
wait_for "p1 gone" 20 pod_gone p1
node_finish
