#!/bin/bash
# deploy/kubernetes as a user installs it: `kubectl apply -k` of the base and of the
# secrets-one-namespace overlay, each into a fresh kube-emulator, then read back with kubectl.
# Every object kustomize renders must exist; the controller pod holds the driver and the five
# helpers, the node pod three containers; the CSIDriver says what the kubelet and scheduler need;
# the overlay grants Secrets in kcsi-secrets only; a second apply changes nothing; the upgrade
# order's commands of docs/deploy.md do what it says.
. "$(dirname "$0")/lib_emulator.sh"
command -v kubectl >/dev/null || { echo "kubectl not installed: install Debian's kubernetes-client"; exit 1; }
: "${KCSI_SRC:?KCSI_SRC must point at the source tree}"
DEPLOY="$KCSI_SRC/deploy/kubernetes"

k() { kubectl --kubeconfig "$KC" --request-timeout=20s "$@"; }

# objects DIR: "kind namespace name" for every object `kubectl kustomize DIR` renders, sorted.
# kustomize prints each object with its keys sorted and metadata's fields indented by two spaces.
objects() {
	kubectl kustomize "$1" | awk '
		function emit() { if (kind != "") print kind, (ns == "" ? "-" : ns), name; kind = ns = name = "" }
		/^---$/ { emit(); next }
		/^[a-zA-Z]/ { top = $1 }
		/^kind: / { kind = $2 }
		top == "metadata:" && /^  name: / { name = $2 }
		top == "metadata:" && /^  namespace: / { ns = $2 }
		END { emit() }' | sort
}

# present "kind ns name" lines on stdin: fails for each object the emulator does not return.
check_present() {
	local kind ns name n=0
	while read -r kind ns name; do
		n=$((n + 1))
		if [ "$ns" = "-" ]; then
			k get "$kind" "$name" -o name >/dev/null 2>&1 || fail "$kind $name missing after apply"
		else
			k get "$kind" "$name" -n "$ns" -o name >/dev/null 2>&1 || fail "$kind $ns/$name missing after apply"
		fi
	done
	echo "  $n objects read back"
}

# apply_twice DIR: the first apply creates, the second says "unchanged" for every object.
apply_twice() {
	local dir=$1 want=$2
	k apply -k "$dir" >"$T/apply1.out" 2>&1 || { fail "apply -k $dir: $(cat "$T/apply1.out")"; return; }
	check "first apply creates $want objects" eq "$(grep -c ' created$' "$T/apply1.out")" "$want"
	k apply -k "$dir" >"$T/apply2.out" 2>&1 || fail "second apply -k $dir: $(cat "$T/apply2.out")"
	check "second apply: $want unchanged" eq "$(grep -c ' unchanged$' "$T/apply2.out")" "$want"
	check "second apply: nothing else" eq "$(grep -vc ' unchanged$' "$T/apply2.out")" 0
}

# stop_emulator: the first emulator goes before the second starts (lib_emulator.sh tracks one).
stop_emulator() {
	local rc=0
	emu_stop || rc=$?
	[ "$rc" -eq 0 ] || fail "kube-emulator exited $rc on SIGTERM"
}

# --- the base -------------------------------------------------------------------------------
objects "$DEPLOY" >"$T/base.objs"
nbase=$(wc -l <"$T/base.objs")
check "kustomize renders the base" test "$nbase" -gt 30
emu_start
apply_twice "$DEPLOY" "$nbase"
check_present <"$T/base.objs"

check "controller Deployment: the driver and five helpers" eq \
	"$(k get deployment kcsi-loop-controller -n kcsi -o jsonpath='{.spec.template.spec.containers[*].name}')" \
	"kcsi-loopplugin csi-provisioner csi-attacher csi-resizer csi-snapshotter liveness-probe"
check "controller Deployment: one ServiceAccount" eq \
	"$(k get deployment kcsi-loop-controller -n kcsi -o jsonpath='{.spec.template.spec.serviceAccountName}')" \
	"kcsi-loop-controller"
check "every controller sidecar elects a leader" eq \
	"$(k get deployment kcsi-loop-controller -n kcsi -o json |
		jq '[.spec.template.spec.containers[] | select(.name|startswith("csi-")) |
		     select(.args | index("--leader-election"))] | length')" 4
check "DaemonSet: driver, registrar, liveness-probe" eq \
	"$(k get daemonset kcsi-loop-node -n kcsi -o jsonpath='{.spec.template.spec.containers[*].name}')" \
	"loopplugin node-driver-registrar liveness-probe"
check "DaemonSet: kubelet dir Bidirectional" eq \
	"$(k get daemonset kcsi-loop-node -n kcsi -o json |
		jq -r '.spec.template.spec.containers[0].volumeMounts[] | select(.mountPath=="/var/lib/kubelet") | .mountPropagation')" \
	"Bidirectional"
check "CSIDriver fields" eq \
	"$(k get csidriver loop.kcsi.io -o json |
		jq -c '.spec | [.attachRequired, .podInfoOnMount, .storageCapacity, .fsGroupPolicy, .volumeLifecycleModes]')" \
	'[true,false,true,"File",["Persistent"]]'
check "one default StorageClass" eq \
	"$(k get storageclass -o json |
		jq -r '[.items[] | select(.metadata.annotations["storageclass.kubernetes.io/is-default-class"]=="true") | .metadata.name] | join(",")')" \
	"kcsi-loop"
check "the base binds the secrets reader cluster-wide" eq \
	"$(k get clusterrolebinding kcsi-loop-secrets-reader -o jsonpath='{.roleRef.name}')" kcsi-loop-secrets-reader
check "no sidecar ClusterRole grants secrets" eq \
	"$(k get clusterrole -o json |
		jq '[.items[] | select(.metadata.name|test("^external-")) | .rules[] | select(.resources | index("secrets"))] | length')" 0

# The upgrade order of docs/deploy.md (seed 001: controller down first, node side up first), with
# its commands: the controller scaled to 0, the DaemonSet alone applied by its label, then the
# full apply, whose three-way merge sets the manifest's replicas again.
replicas() { k get deployment kcsi-loop-controller -n kcsi -o jsonpath='{.spec.replicas}'; }
k -n kcsi patch deployment kcsi-loop-controller --type merge -p '{"spec":{"replicas":0}}' >/dev/null ||
	fail "cannot scale the controller down"
check "upgrade: controller scaled to 0" eq "$(replicas)" 0
k apply -k "$DEPLOY" -l app=kcsi-loop-node >"$T/node-only.out" 2>&1 || fail "apply -l: $(cat "$T/node-only.out")"
check "upgrade: -l app=kcsi-loop-node applies the DaemonSet only" eq \
	"$(cat "$T/node-only.out")" "daemonset.apps/kcsi-loop-node unchanged"
check "upgrade: the controller stays down meanwhile" eq "$(replicas)" 0
k apply -k "$DEPLOY" >/dev/null 2>&1 || fail "full apply after the node side failed"
check "upgrade: the full apply brings the controller back (replicas 2)" eq "$(replicas)" 2
stop_emulator

# --- the overlay ----------------------------------------------------------------------------
objects "$DEPLOY/secrets-one-namespace" >"$T/overlay.objs"
nover=$(wc -l <"$T/overlay.objs")
emu_start
apply_twice "$DEPLOY/secrets-one-namespace" "$nover"
check_present <"$T/overlay.objs"
check "overlay: no ClusterRoleBinding of the secrets reader" eq \
	"$(k get clusterrolebinding -o json |
		jq '[.items[] | select(.roleRef.name=="kcsi-loop-secrets-reader")] | length')" 0
check "overlay: RoleBinding of the secrets reader in kcsi-secrets" eq \
	"$(k get rolebinding kcsi-loop-secrets-reader -n kcsi-secrets -o json |
		jq -r '"\(.roleRef.kind)/\(.roleRef.name) \(.subjects[0].namespace)/\(.subjects[0].name)"')" \
	"ClusterRole/kcsi-loop-secrets-reader kcsi/kcsi-loop-controller"
check "overlay: the secrets reader granted nowhere else" eq \
	"$(k get rolebinding -A -o json |
		jq '[.items[] | select(.roleRef.name=="kcsi-loop-secrets-reader")] | length')" 1
check "overlay: the base's other objects are all there" eq "$nover" "$((nbase + 1))"
finish
