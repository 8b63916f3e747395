#!/bin/bash
# e2e: kcsi-node's Node object and plugin registration. Two nodes, each with kcsi-loopplugin in
# node mode, its csi-node-driver-registrar and kcsi-node: each Node gets the controller-managed
# annotation, the labels, Ready and a Lease; the plugin watcher writes the CSINode entry, the
# nodeid annotation and the topology label. A registrar that goes away deregisters its driver; a
# driver whose NodeGetInfo fails leaves no CSINode entry (a stale one is removed) and its
# registrar ends with the kubelet's error; SIGTERM ends kcsi-node within a second.
: "${KCSI_SRC:?}"
source "$KCSI_SRC/tests/e2e/lib_emulator.sh"
source "$KCSI_SRC/tests/e2e/lib_attacher.sh"
source "$KCSI_SRC/tests/e2e/lib_node.sh"
emu_start

node_up n1
node_up n2
for n in n1 n2; do
	wait_for "CSINode entry on $n" 15 csinode_has $n loop.kcsi.io
	e=$(csinode_driver $n loop.kcsi.io)
	[ "$(jq -r .nodeID <<<"$e")" = $n ] || fail "$n CSINode nodeID: $e"
	[ "$(jq -c .topologyKeys <<<"$e")" = '["topology.loop.kcsi.io/zone"]' ] || fail "$n topologyKeys: $e"
	j=$(node_json $n)
	[ "$(jq -r '.metadata.annotations["volumes.kubernetes.io/controller-managed-attach-detach"]' <<<"$j")" = true ] ||
		fail "$n lacks the controller-managed-attach-detach annotation"
	[ "$(jq -r '.metadata.annotations["csi.volume.kubernetes.io/nodeid"]' <<<"$j")" = "{\"loop.kcsi.io\":\"$n\"}" ] ||
		fail "$n nodeid annotation: $(jq -c .metadata.annotations <<<"$j")"
	[ "$(jq -r '.metadata.labels["kubernetes.io/hostname"]' <<<"$j")" = $n ] || fail "$n hostname label"
	[ "$(jq -r '.metadata.labels["topology.loop.kcsi.io/zone"]' <<<"$j")" = $n ] || fail "$n zone label"
	[ "$(jq -r '.status.conditions[]? | select(.type=="Ready") | .status' <<<"$j")" = True ] || fail "$n not Ready"
	kc get lease -n kube-node-lease $n -o json | jq -e ".spec.holderIdentity==\"$n\" and .spec.leaseDurationSeconds==40" >/dev/null ||
		fail "$n has no Lease in kube-node-lease"
	[ -e "$T/nodes/$n/plugins/loop.kcsi.io/registration" ] && fail "$n: the registrar wrote a probe file (upstream v2.9 stopped)"
	owner=$(kc get csinode $n -o json | jq -r '.metadata.ownerReferences[0].kind + "/" + .metadata.ownerReferences[0].name')
	[ "$owner" = "Node/$n" ] || fail "$n CSINode owner: $owner"
done
kill -0 "${NODE_PIDS[n1:reg]}" || fail "registrar of n1 exited after a successful registration"

# The registrar of n2 stops (SIGTERM removes its socket): the driver is deregistered.
kill -TERM "${NODE_PIDS[n2:reg]}"; wait "${NODE_PIDS[n2:reg]}"; unset "NODE_PIDS[n2:reg]"
wait_for "n2 CSINode entry removed" 10 csinode_lacks n2 loop.kcsi.io
wait_for "n2 nodeid annotation removed" 10 bash -c \
	"[ \"\$(kubectl --kubeconfig $KC get node n2 -o jsonpath='{.metadata.annotations.csi\.volume\.kubernetes\.io/nodeid}')\" = '' ]"
csinode_has n1 loop.kcsi.io || fail "n1 lost its entry when n2's registrar stopped"

# A driver whose NodeGetInfo fails, with a stale CSINode entry from an earlier life.
kc get csinode n1 -o json | jq '.spec.drivers += [{"name":"testdriver.kcsi.dev","nodeID":"old","topologyKeys":null}]' |
	kc replace -f - >/dev/null || fail "cannot seed a stale CSINode entry"
csinode_has n1 testdriver.kcsi.dev || fail "stale entry not seeded"
"$KCSI_TESTS/csi-testdriver" --endpoint "unix://$T/td.sock" --fail NodeGetInfo=INTERNAL >"$T/td.log" 2>&1 &
TD_PID=$!
"$KCSI_BIN/csi-node-driver-registrar" --csi-address "$T/td.sock" --kubelet-registration-path "$T/td.sock" \
	--plugin-registration-path "$T/nodes/n1/kubelet/plugins_registry" >"$T/td-reg.log" 2>&1 &
TDREG=$!
rc=0; timeout 20 tail --pid=$TDREG -f /dev/null || fail "the registrar of the failing driver did not exit"
wait $TDREG || rc=$?
[ $rc -eq 1 ] || fail "registrar of a driver whose NodeGetInfo fails: exit $rc, want 1"
grep -q 'Registration process failed with error, restarting registration container err=.*NodeGetInfo failed: rpc error: code = Internal desc = injected failure' "$T/td-reg.log" ||
	fail "registrar does not log the kubelet's error"
wait_for "no CSINode entry for the failing driver" 10 csinode_lacks n1 testdriver.kcsi.dev
csinode_has n1 loop.kcsi.io || fail "n1 lost the loop driver's entry"

# SIGTERM: exit 0 within a second.
start=$(date +%s%N)
kill -TERM "${NODE_PIDS[n1:node]}"; rc=0; wait "${NODE_PIDS[n1:node]}" || rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
unset "NODE_PIDS[n1:node]"
[ $rc -eq 0 ] || fail "kcsi-node SIGTERM: exit $rc"
[ $ms -lt 1000 ] || fail "kcsi-node SIGTERM took ${ms} ms"
node_finish
