#!/bin/bash
# e2e: a cluster whose API server does not serve storage.k8s.io/v1 VolumeAttributesClass
# (kube-apiserver --runtime-config=storage.k8s.io/v1/volumeattributesclasses=false; here
# kube-emulator with the same flag). csi-resizer v2.3 and csi-provisioner v6.4 ask discovery at
# start and turn their VolumeAttributesClass gate off, so that
#   - kube-emulator answers as kube-apiserver: 404 for the resource, absent from discovery, the
#     rest of storage.k8s.io/v1 served; a --runtime-config entry naming nothing is refused;
#   - csi-provisioner provisions claims, one naming a class too (the class is ignored: no
#     mutable_parameters, no class on the PV), and logs upstream's line;
#   - csi-resizer expands claims (before, it waited for ever for a VolumeAttributesClass cache
#     that could not sync) and logs upstream's line;
#   - neither asks for VolumeAttributesClasses at all (kube-emulator's -v=4 request log);
#   - --feature-gates VolumeAttributesClass=true is left alone by the check (upstream's
#     ExplicitlySet): that resizer logs no such line and lists VolumeAttributesClasses (404).
set -u
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_attacher.sh"
DRV=testdriver.kcsi.dev
. "$(dirname "$0")/lib_provisioner.sh"
. "$(dirname "$0")/lib_resizer.sh"

DISABLING="Disabling VolumeAttributesClass feature gate because the VolumeAttributesClass v1 API is not available"
expands() { grep -c "^ControllerExpandVolume .*\"volume_id\":\"$1\"" "$T/td.rec" 2>/dev/null || true; }
pv_is() { [ "$(kubectl --kubeconfig "$KC" get pv "$1" -o jsonpath='{.spec.capacity.storage}')" = "$2" ]; }
# vac_requests: requests for VolumeAttributesClasses kube-emulator logged after line $MARK
vac_requests() { tail -n "+$((MARK + 1))" "$T/emulator.log" | grep -c '\] [A-Z]* /apis/storage.k8s.io/v1/volumeattributesclasses' || true; }

# 0. A --runtime-config entry that names nothing served stops kube-emulator at start.
out=$("$KCSI_BIN/kube-emulator" --listen 127.0.0.1:0 \
	--runtime-config storage.k8s.io/v1/volumeattributeclasses=false 2>&1); rc=$?
check "a misspelt resource is refused (exit 1)" eq "$rc" 1
check "with a message naming it" grep -q "storage.k8s.io/v1/volumeattributeclasses: kube-emulator serves no such resource" <<<"$out"
out=$("$KCSI_BIN/kube-emulator" --listen 127.0.0.1:0 --runtime-config api/v1=false 2>&1); rc=$?
check "the core group cannot be switched off" bash -c "[ $rc -eq 1 ] && grep -q 'named group' <<<'$out'"

emu_start --runtime-config storage.k8s.io/v1/volumeattributesclasses=false -v 4

# 1. kube-emulator answers as kube-apiserver with that flag.
req GET /apis/storage.k8s.io/v1/volumeattributesclasses
expect_code 404 "list of the switched-off resource"
req GET /apis/storage.k8s.io/v1
expect_code 200 "storage.k8s.io/v1 discovery"
check "discovery no longer lists VolumeAttributesClass" eq "$(jqo '[.resources[].kind] | index("VolumeAttributesClass")')" null
check "the rest of storage.k8s.io/v1 is listed" eq "$(jqo '[.resources[].kind] | index("StorageClass") != null')" true
check "kubectl knows no such resource" bash -c "! kubectl --kubeconfig '$KC' get volumeattributesclasses >/dev/null 2>&1"

# 2. csi-provisioner: the gate goes off at start; claims are provisioned, a class is ignored.
MARK=$(wc -l <"$T/emulator.log")
mk_sc grow '{"allowVolumeExpansion":true}'
topo_node n1 # an Immediate claim needs a node that registered the driver's topology keys
td_start --controller-caps CREATE_DELETE_VOLUME,EXPAND_VOLUME,MODIFY_VOLUME
prov_start p "$T/td.sock"
wait_for "the provisioner's discovery line" 20 grep -q "$DISABLING" "$T/p.log"
mk_pvc c1 grow
mk_pvc c2 grow '{"spec":{"volumeAttributesClassName":"gold"}}'
wait_for "c1 provisioned" 20 pv_exists "$(pv_of c1)"
wait_for "c2 provisioned though it names a class" 20 pv_exists "$(pv_of c2)"
check "no class on c2's PV (the gate is off)" eq "$(pv_field "$(pv_of c2)" '.spec.volumeAttributesClassName // "none"')" none
check "no mutable_parameters in CreateVolume" bash -c "! grep '^CreateVolume ' '$T/td.rec' | grep -q mutable_parameters"
for c in c1 c2; do
	bind "$c"
	status_patch "/api/v1/namespaces/default/persistentvolumeclaims/$c" '{"status":{"capacity":{"storage":"16Mi"}}}'
done

# 3. csi-resizer: the gate goes off at start, and claims are expanded.
rsz_start r1 "$T/td.sock"
wait_for "the resizer's discovery line" 20 grep -q "$DISABLING" "$T/r1.log"
resize c1 32Mi
resize c2 48Mi
wait_for "c1's PV expanded to 32Mi" 20 pv_is "$(pv_of c1)" 32Mi
wait_for "c2's PV expanded to 48Mi" 20 pv_is "$(pv_of c2)" 48Mi
wait_for "NodeResizePending" 10 bash -c "[ \"\$(kubectl --kubeconfig '$KC' get pvc c1 -o jsonpath='{.status.allocatedResourceStatuses.storage}')\" = NodeResizePending ]"
check "one ControllerExpandVolume for c1" eq "$(expands "$(pv_field "$(pv_of c1)" .spec.csi.volumeHandle)")" 1
check "no ControllerModifyVolume for c2's class" bash -c "! grep -q '^ControllerModifyVolume ' '$T/td.rec'"
check "neither sidecar asked for VolumeAttributesClasses" eq "$(vac_requests)" 0
check "both asked discovery" bash -c "[ \$(tail -n +$((MARK + 1)) '$T/emulator.log' | grep -c '\] GET /apis/storage.k8s.io/v1\$') -ge 2 ]"
att_stop r1 || fail "csi-resizer exited non-zero on SIGTERM"

# 4. The gate named on the command line: discovery leaves it alone (no line either way).
rsz_start r2 "$T/td.sock" --feature-gates VolumeAttributesClass=true
wait_for "the explicit resizer started its controller" 20 grep -q "Starting external resizer" "$T/r2.log"
check "no discovery line with the gate named" bash -c "! grep -q 'VolumeAttributesClass.*API' '$T/r2.log'"
wait_for "it lists VolumeAttributesClasses (and gets 404)" 20 bash -c "[ \$(tail -n +$((MARK + 1)) '$T/emulator.log' | grep -c '\] GET /apis/storage.k8s.io/v1/volumeattributesclasses') -ge 1 ]"
att_stop r2 || fail "csi-resizer exited non-zero on SIGTERM"
att_stop p || fail "csi-provisioner exited non-zero on SIGTERM"
td_stop
rsz_finish
