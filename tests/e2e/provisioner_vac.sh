#!/bin/bash
# e2e: what external-provisioner v6.3 does with a claim's VolumeAttributesClass and a class's
# controller-modify secret, with the real kcsi-loopplugin (MODIFY_VOLUME; mutable parameter
# type=thin|thick) and csi-testdriver (without MODIFY_VOLUME):
#   - the class's parameters reach CreateVolume as mutable_parameters, the PV carries
#     spec.volumeAttributesClassName and the volume is made as the class says (thick: allocated);
#   - a class that does not exist yet keeps the claim waiting with ProvisioningFailed, and the
#     claim is provisioned once it is created; a class of another driver is refused;
#   - a driver without MODIFY_VOLUME refuses such a claim with upstream's message;
#   - csi.storage.k8s.io/controller-modify-secret-name/-namespace (templates resolved) become the
#     PV's volume.kubernetes.io/controller-modify-secret-* annotations, which csi-resizer reads.
set -u
. "$(dirname "$0")/lib_emulator.sh"
. "$(dirname "$0")/lib_attacher.sh"
. "$(dirname "$0")/lib_provisioner.sh"

mk_vac() { # NAME DRIVER TYPE
	jq -n --arg n "$1" --arg d "$2" --arg t "$3" '{apiVersion: "storage.k8s.io/v1",
		kind: "VolumeAttributesClass", metadata: {name: $n}, driverName: $d,
		parameters: {type: $t}}' | kc create -f - >/dev/null
}
# The blocks the loop driver's image of a PV's volume takes on disk, in KiB.
img_kib() { du -k "$T/pool/volumes/$(pv_field "$1" .spec.csi.volumeHandle).img" | cut -f1; }

emu_start
lp_start node-1
topo_node node-1
mk_sc std
mk_sc modsec '{"parameters":{"csi.storage.k8s.io/controller-modify-secret-name":"mod-${pvc.name}","csi.storage.k8s.io/controller-modify-secret-namespace":"${pvc.namespace}"}}'
mk_vac thick "$DRV" thick
prov_start p "$T/lp.sock" -v 5

# 1. A claim of an existing class: mutable_parameters, the PV's class, a thick volume.
mk_pvc fast std '{"spec":{"volumeAttributesClassName":"thick"}}'
FPV=$(pv_of fast)
wait_for "PV of the claim with a VolumeAttributesClass" 20 pv_exists "$FPV"
check "CreateVolume got the class's parameters as mutable_parameters" grep -q "\"name\":\"$FPV\".*\"mutable_parameters\":{\"type\":\"thick\"}" "$T/p.log"
check "the PV names the class" eq "$(pv_field "$FPV" .spec.volumeAttributesClassName)" thick
check "the volume was made thick (16 MiB allocated)" bash -c "[ $(img_kib "$FPV") -ge 16384 ]"
mk_pvc plain std
PPV=$(pv_of plain)
wait_for "PV of a claim without a class" 20 pv_exists "$PPV"
check "no class on its PV" eq "$(pv_field "$PPV" '.spec.volumeAttributesClassName // "none"')" none
check "no mutable_parameters in its CreateVolume" bash -c "! grep '\"name\":\"$PPV\"' '$T/p.log' | grep -q mutable_parameters"

# 2. A class that does not exist yet: the claim waits with the API's answer, then goes on.
mk_pvc waiting std '{"spec":{"volumeAttributesClassName":"later"}}'
wait_for "missing class shown on the claim" 20 has_event PersistentVolumeClaim waiting 'ProvisioningFailed: .*volumeattributesclasses.storage.k8s.io "later" not found'
check "no PV while the class is missing" bash -c "! kubectl --kubeconfig '$KC' get pv '$(pv_of waiting)' >/dev/null 2>&1"
mk_vac later "$DRV" thin
wait_for "provisioned once the class exists" 20 pv_exists "$(pv_of waiting)"
check "its PV names the class" eq "$(pv_field "$(pv_of waiting)" .spec.volumeAttributesClassName)" later

# 3. A class of another driver: refused with upstream's message, no volume.
mk_vac other other.example.com thick
mk_pvc wrong std '{"spec":{"volumeAttributesClassName":"other"}}'
wait_for "class of another driver refused" 20 has_event PersistentVolumeClaim wrong "VAC other referenced in PVC is for driver other.example.com which does not match driver name $DRV"
check "no PV for it" bash -c "! kubectl --kubeconfig '$KC' get pv '$(pv_of wrong)' >/dev/null 2>&1"

# 4. The controller-modify secret of a class: the PV's annotations, templates resolved.
mk_pvc secretive modsec
SPV=$(pv_of secretive)
wait_for "PV of the class with a modify secret" 20 pv_exists "$SPV"
check "controller-modify-secret-name annotation" eq "$(pv_field "$SPV" '.metadata.annotations["volume.kubernetes.io/controller-modify-secret-name"]')" mod-secretive
check "controller-modify-secret-namespace annotation" eq "$(pv_field "$SPV" '.metadata.annotations["volume.kubernetes.io/controller-modify-secret-namespace"]')" default
check "no modify-secret annotations without such a key" eq "$(pv_field "$PPV" '.metadata.annotations["volume.kubernetes.io/controller-modify-secret-name"] // "none"')" none
check "the modify-secret keys do not reach the driver" bash -c "! grep '\"name\":\"$SPV\"' '$T/p.log' | grep -q 'modify-secret'"
rc=0; att_stop p || rc=$?
check "SIGTERM exits 0" eq "$rc" 0

# 5. A driver without MODIFY_VOLUME: a claim with a class is refused, one without is not.
DRV=testdriver.kcsi.dev
topo_node tnode
mk_sc tstd
mk_vac tthick "$DRV" thick
td_start --controller-caps CREATE_DELETE_VOLUME
prov_start t "$T/td.sock"
mk_pvc nomod tstd '{"spec":{"volumeAttributesClassName":"tthick"}}'
wait_for "refused by capability" 20 has_event PersistentVolumeClaim nomod "CSI driver does not support VolumeAttributesClass: controller MODIFY_VOLUME capability is not reported"
mk_pvc tplain tstd
wait_for "a claim without a class still provisioned" 20 pv_exists "$(pv_of tplain)"
check "no PV for the refused claim" bash -c "! kubectl --kubeconfig '$KC' get pv '$(pv_of nomod)' >/dev/null 2>&1"
att_stop t
td_stop
att_finish
