#!/bin/bash
# e2e: deploy/kubernetes' RBAC under the real authorizer. A real control plane
# (scripts/realcp.sh: kube-apiserver v1.37.2 with Node,RBAC, kube-controller-manager,
# kube-scheduler) gets deploy/kubernetes' ServiceAccounts, Roles, ClusterRoles and bindings (not
# its Deployments and DaemonSet), its CSIDriver and classes, and the snapshot CRDs (v1 and the
# groupsnapshot kinds). Every kcsi component then runs as a process on this host with a token of
# its own ServiceAccount, holding exactly the roles deploy/kubernetes binds for it:
#   csi-provisioner, csi-attacher, csi-resizer, csi-snapshotter  deploy binds their roles to the
#       pod's one ServiceAccount (kcsi-loop-controller), which would hide a right one sidecar
#       needs but only another's role grants; here each runs as a ServiceAccount of its own
#       (csi-provisioner, ...) that deploy's bindings name instead, the Secret reader for all four
#   snapshot-controller  its own ServiceAccount, as deploy binds it
#   kcsi-controller-manager  its own ServiceAccount in kube-system with
#       deploy/kubernetes/kcsi-controller-manager/rbac.yaml (which the kustomization leaves out),
#       with leader election, running every controller it has but volume-scheduler
#       (attachdetach, the binder, both protection controllers, nodelifecycle, taint eviction,
#       podgc); kube-controller-manager is started without those
#   kcsi-node            the kubelet's stand-in, which deploy/kubernetes does not ship (a cluster
#       has its kubelet): the admin's credentials. A kubelet's own identity (system:node:<name>,
#       Node authorizer) refuses it today: its informers list every pod, node, PV and claim where
#       the Node authorizer allows a node's own only. The DaemonSet mounts no token: the
#       registrar and the driver use none
# with the flags deploy's manifests give them (leader election in the namespace kcsi, capacity
# objects owned two levels up from POD_NAME) and CSIVolumeGroupSnapshot on. The flow: a pod writes,
# is deleted, a pod on the other node reads the file; a claim is expanded while in use; a snapshot
# is taken and restored and the restored volume holds the file; a group snapshot of two claims is
# ready; everything is deleted and every PV goes. Last, node-2 falls silent with a pod on it
# that tolerates unreachable for 0 s: the node turns Unknown and gets the unreachable taint, the
# pod is marked not Ready, evicted (DisruptionTarget) and, once the admin taints node-2
# out-of-service, failed and deleted by podgc. So every rule of kcsi-controller-manager's role
# is used but volume-scheduler's (pods/binding create, csinodes and csistoragecapacities list;
# kube-scheduler places the pods here). Then no component log may hold the authorizer's refusal ("is forbidden", "cannot <verb> resource")
# or an HTTP 403: each one found is listed.
# Prints the time taken.
set -u
: "${KCSI_BIN:?}" "${KCSI_SRC:?}"
. "$(dirname "$0")/lib_proc.sh" rbac-realcp
. "$(dirname "$0")/lib_realcp.sh"
realcp_missing_peers && exit 1
t0=$SECONDS
K() { kubectl --kubeconfig "$RKC" --request-timeout=20s "$@"; }
L=$T/logs
mkdir -p "$L"

# Processes end with SIGTERM (each must be gone within a second), then what the nodes mounted is
# released, before the control plane stops and $T goes.
rbac_stop() {
	local p n=0
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
	for p in "${PIDS[@]}"; do
		while kill -0 "$p" 2>/dev/null && [ $n -lt 20 ]; do sleep 0.05; n=$((n + 1)); done
		kill -0 "$p" 2>/dev/null && echo "rbac: pid $p ($(cat /proc/"$p"/comm 2>/dev/null)) still running 1 s after SIGTERM" >&2
		kill -KILL "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	PIDS=()
	grep -F " $T/" /proc/self/mountinfo | awk '{print $5}' | sort -r | xargs -r -n1 umount -l 2>/dev/null
	losetup -a | grep -F "$T/" | cut -d: -f1 | xargs -r -n1 losetup -d 2>/dev/null
}
_prev=$(trap -p EXIT | sed "s/^trap -- '\(.*\)' EXIT\$/\1/")
# shellcheck disable=SC2064
trap "rbac_stop; $_prev" EXIT

crd=$(cd "$KCSI_SRC/tests/peers" && PATH=/usr/local/go/bin:$PATH GOFLAGS=-mod=readonly \
	go list -m -f '{{.Dir}}' github.com/kubernetes-csi/external-snapshotter/client/v8 2>/dev/null)/config/crd
[ -f "$crd/groupsnapshot.storage.k8s.io_volumegroupsnapshots.yaml" ] ||
	{ echo "FAIL: no snapshot CRDs in the Go module cache ($crd): make peers"; exit 1; }

# kube-controller-manager leaves to kcsi-controller-manager what that one can run: attach/detach,
# the PV binder, PVC and PV protection, node lifecycle, taint eviction, pod GC (kcsi's
# --controllers below names the same)
realcp_start --kcm-args "--controllers=*,-persistentvolume-attach-detach-controller,-persistentvolume-binder-controller,-persistentvolumeclaim-protection-controller,-persistentvolume-protection-controller,-node-lifecycle-controller,-taint-eviction-controller,-pod-garbage-collector-controller"

# ---- the CRDs, deploy/kubernetes' RBAC, CSIDriver and classes ----
for f in "$crd"/*storage.k8s.io_*.yaml; do K apply -f "$f" >/dev/null || fail "CRD $f"; done
K wait --for=condition=Established crd --all --timeout=30s >/dev/null || fail "CRDs not established"
kubectl kustomize "$KCSI_SRC/deploy/kubernetes" >"$T/deploy.yaml" || { fail "kubectl kustomize deploy/kubernetes"; exit 1; }
python3 - "$T/deploy.yaml" >"$T/rbac.yaml" 2>"$T/rbac.err" <<'PY' || { fail "splitting deploy's RBAC: $(cat "$T/rbac.err")"; exit 1; }
import sys, yaml
keep = {"Namespace", "ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding",
        "CSIDriver", "StorageClass", "VolumeSnapshotClass"}
# deploy binds every controller sidecar's roles to the pod's one ServiceAccount; which sidecar a
# role is for is in its name (upstream's names), the Secret reader is for all four
sidecars = {"external-provisioner-": ["csi-provisioner"], "external-attacher-": ["csi-attacher"],
            "external-resizer-": ["csi-resizer"], "external-snapshotter-": ["csi-snapshotter"],
            "kcsi-loop-secrets-reader": ["csi-provisioner", "csi-attacher", "csi-resizer", "csi-snapshotter"]}
out = []
for d in yaml.safe_load_all(open(sys.argv[1])):
    if not d or d["kind"] not in keep:
        continue
    if d["kind"].endswith("Binding"):
        subs = []
        for s in d.get("subjects", []):
            if s.get("kind") == "ServiceAccount" and s.get("name") == "kcsi-loop-controller":
                who = [v for k, v in sidecars.items() if d["roleRef"]["name"].startswith(k)]
                if not who:
                    sys.exit("binding %s of kcsi-loop-controller: role %s is no known sidecar's"
                             % (d["metadata"]["name"], d["roleRef"]["name"]))
                subs += [{"kind": "ServiceAccount", "name": n, "namespace": s["namespace"]} for n in who[0]]
            else:
                subs.append(s)
        d["subjects"] = subs
    out.append(d)
for n in ["csi-provisioner", "csi-attacher", "csi-resizer", "csi-snapshotter"]:
    out.append({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": n, "namespace": "kcsi"}})
yaml.safe_dump_all(out, sys.stdout)
PY
K apply -f "$T/rbac.yaml" >"$T/apply.out" 2>&1 || { fail "applying deploy's RBAC: $(cat "$T/apply.out")"; exit 1; }
# kcsi-controller-manager's, which the kustomization leaves out (docs/deploy.md)
K apply -f "$KCSI_SRC/deploy/kubernetes/kcsi-controller-manager/rbac.yaml" >"$T/apply.out" 2>&1 ||
	{ fail "applying kcsi-controller-manager's RBAC: $(cat "$T/apply.out")"; exit 1; }

# ---- credentials: a token per ServiceAccount ----
kubeconfig() { # file user-yaml-lines
	cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: realcp
  cluster:
    server: $RS
    certificate-authority-data: $(base64 -w0 "$RCP/ca.crt")
users:
- name: u
  user:
$2
contexts:
- name: realcp
  context: {cluster: realcp, user: u}
current-context: realcp
EOF
}
for sa in kcsi/csi-provisioner kcsi/csi-attacher kcsi/csi-resizer kcsi/csi-snapshotter \
	kcsi/snapshot-controller kube-system/kcsi-controller-manager; do
	tok=$(K -n "${sa%/*}" create token "${sa#*/}" --duration 1h) || { fail "TokenRequest for $sa"; exit 1; }
	kubeconfig "$T/${sa#*/}.kubeconfig" "    token: $tok"
done

# The provisioner's capacity owner (--capacity-ownerref-level=2, as deploy's Deployment): a
# Deployment of that name whose pod runs nowhere, so the walk pod -> ReplicaSet -> Deployment is
# the one a cluster makes.
K -n kcsi apply -f - >/dev/null <<'YAML' || fail "the capacity owner Deployment"
apiVersion: apps/v1
kind: Deployment
metadata: {name: kcsi-loop-controller, namespace: kcsi}
spec:
  replicas: 1
  selector: {matchLabels: {app: kcsi-loop-controller}}
  template:
    metadata: {labels: {app: kcsi-loop-controller}}
    spec:
      serviceAccountName: kcsi-loop-controller
      nodeSelector: {kcsi.io/nowhere: "true"}
      containers: [{name: c, image: kcsi/pause}]
YAML
ctl_pod() { K -n kcsi get pods -l app=kcsi-loop-controller -o jsonpath='{.items[0].metadata.name}' | grep -q .; }
wait_for "the ReplicaSet's pod" 30 ctl_pod
POD=$(K -n kcsi get pods -l app=kcsi-loop-controller -o jsonpath='{.items[0].metadata.name}')

# ---- the components ----
run() { # name env... -- binary args...
	local name=$1
	shift
	local envs=()
	while [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	env "${envs[@]}" "$@" >"$L/$name.log" 2>&1 &
	PIDS+=($!)
}
mkdir -p "$T/controller" "$T/pool"
CS=$T/controller/csi.sock
run loopplugin-controller -- "$KCSI_BIN/kcsi-loopplugin" --mode controller --endpoint "unix://$CS" \
	--nodeid controller --pool-dir "$T/pool"
for n in node-1 node-2; do
	root=$T/$n/kubelet
	mkdir -p "$root/plugins/loop.kcsi.io" "$root/plugins_registry"
	sock=$root/plugins/loop.kcsi.io/csi.sock
	run "loopplugin-$n" -- "$KCSI_BIN/kcsi-loopplugin" --mode node --endpoint "unix://$sock" \
		--nodeid "$n" --pool-dir "$T/pool"
done
wait_for_quiet() { # SECONDS CMD...: wait_for without the failure
	local end=$((SECONDS + $1))
	shift
	while [ $SECONDS -lt $end ]; do "$@" >/dev/null 2>&1 && return 0; sleep 0.05; done
	return 1
}
sock_up() { [ -S "$1" ]; }
wait_for "the controller driver's socket" 10 sock_up "$CS"
NS=POD_NAMESPACE=kcsi
run csi-provisioner "$NS" NAMESPACE=kcsi "POD_NAME=$POD" -- "$KCSI_BIN/csi-provisioner" --kubeconfig "$T/csi-provisioner.kubeconfig" \
	--v=2 --csi-address "$CS" --leader-election --feature-gates=Topology=true --extra-create-metadata \
	--enable-capacity --capacity-ownerref-level=2 --capacity-poll-interval=1m
run csi-attacher "$NS" -- "$KCSI_BIN/csi-attacher" --kubeconfig "$T/csi-attacher.kubeconfig" \
	--v=2 --csi-address "$CS" --leader-election
run csi-resizer "$NS" -- "$KCSI_BIN/csi-resizer" --kubeconfig "$T/csi-resizer.kubeconfig" \
	--v=2 --csi-address "$CS" --leader-election
run csi-snapshotter "$NS" -- "$KCSI_BIN/csi-snapshotter" --kubeconfig "$T/csi-snapshotter.kubeconfig" \
	--v=2 --csi-address "$CS" --leader-election --feature-gates=CSIVolumeGroupSnapshot=true
run snapshot-controller "$NS" -- "$KCSI_BIN/snapshot-controller" --kubeconfig "$T/snapshot-controller.kubeconfig" \
	--v=2 --leader-election=true --feature-gates=CSIVolumeGroupSnapshot=true
# As deploy's Deployment (leader election in kube-system), the controllers kube-controller-manager
# leaves out; a node is Unknown after 6 s without a heartbeat (the nodes send one a second)
run kcsi-controller-manager -- "$KCSI_BIN/kcsi-controller-manager" --kubeconfig "$T/kcsi-controller-manager.kubeconfig" \
	--v=2 --leader-election --controllers=attachdetach,persistentvolume-binder,pvc-protection,pv-protection,nodelifecycle,taint-eviction-controller,podgc \
	--node-monitor-period=1s --node-monitor-grace-period=6s
for n in node-1 node-2; do
	root=$T/$n/kubelet
	sock=$root/plugins/loop.kcsi.io/csi.sock
	wait_for "$n's driver socket" 10 sock_up "$sock"
	run "registrar-$n" -- "$KCSI_BIN/csi-node-driver-registrar" --v=2 --csi-address "$sock" \
		--kubelet-registration-path "$sock" --plugin-registration-path "$root/plugins_registry"
	run "kcsi-node-$n" -- "$KCSI_BIN/kcsi-node" --kubeconfig "$RKC" --node-name "$n" --root-dir "$root" \
		--node-status-update-frequency=1s --node-lease-duration-seconds=4
	[ $n = node-2 ] && NODE2_PID=${PIDS[-1]}
done
csinode_has_driver() { K get csinode "$1" -o jsonpath='{.spec.drivers[*].name}' | grep -q loop.kcsi.io; }
for n in node-1 node-2; do wait_for "CSINode $n lists loop.kcsi.io" 30 csinode_has_driver "$n"; done
t_up=$((SECONDS - t0))

# ---- writer / reader ----
phase() { [ "$(K get "$1" -o jsonpath='{.status.phase}')" = "$2" ]; }
mnt() { # pod claim -> where the pod's volume is mounted
	local node uid pv
	node=$(K get pod "$1" -o jsonpath='{.spec.nodeName}')
	uid=$(K get pod "$1" -o jsonpath='{.metadata.uid}')
	pv=$(K get pvc "$2" -o jsonpath='{.spec.volumeName}')
	echo "$T/$node/kubelet/pods/$uid/volumes/kubernetes.io~csi/$pv/mount"
}
pod() { # name claim node ('' = the scheduler's choice)
	local sel=""
	[ -n "$3" ] && sel="nodeSelector: {kubernetes.io/hostname: $3}"
	K apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1}
spec:
  $sel
  containers: [{name: app, image: busybox:1.36, command: [sleep, "3600"], volumeMounts: [{name: d, mountPath: /data}]}]
  volumes: [{name: d, persistentVolumeClaim: {claimName: $2}}]
EOF
}
claim() { # name class size [snapshot]
	local src=""
	[ -n "${4:-}" ] && src="dataSource: {apiGroup: snapshot.storage.k8s.io, kind: VolumeSnapshot, name: $4}"
	K apply -f - >/dev/null <<EOF
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: $1, labels: {app: demo}}
spec:
  storageClassName: $2
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: $3}}
  $src
EOF
}
claim data kcsi-loop 64Mi || fail "creating pvc/data"
pod writer data node-1 || fail "creating pod/writer"
if wait_for "pod/writer Running on node-1" 60 phase pod/writer Running; then
	m=$(mnt writer data)
	if mountpoint -q "$m"; then echo "written on node-1" >"$m/hello.txt"; else fail "the writer's volume is not mounted at $m"; fi
fi
K delete pod writer --grace-period=0 --timeout=60s >/dev/null 2>&1 || fail "deleting pod/writer"
pod reader data node-2 || fail "creating pod/reader"
if wait_for "pod/reader Running on node-2" 60 phase pod/reader Running; then
	[ "$(cat "$(mnt reader data)/hello.txt" 2>/dev/null)" = "written on node-1" ] ||
		fail "node-2 does not read the file written on node-1"
fi

# ---- expansion of a claim in use ----
claim grow kcsi-loop-expandable 64Mi || fail "creating pvc/grow"
pod grower grow "" || fail "creating pod/grower"
if wait_for "pod/grower Running" 60 phase pod/grower Running; then
	K patch pvc grow -p '{"spec":{"resources":{"requests":{"storage":"128Mi"}}}}' >/dev/null || fail "expanding pvc/grow"
	grown() { [ "$(K get pvc grow -o jsonpath='{.status.capacity.storage}')" = 128Mi ]; }
	user=grower
	# A machine that withholds CAP_SYS_RESOURCE refuses online ext4 growth (docs/deploy.md,
	# "Verified on a real node"): the filesystem then grows when the claim's next pod stages it.
	if ! wait_for_quiet 20 grown && grep -q "online ext4 growth needs CAP_SYS_RESOURCE" "$L"/kcsi-node-*.log; then
		echo "REFUSED: online ext4 growth (no CAP_SYS_RESOURCE); growing offline for the next pod"
		K delete pod grower --grace-period=0 --timeout=60s >/dev/null 2>&1 || fail "deleting pod/grower"
		pod grower2 grow "" || fail "creating pod/grower2"
		user=grower2
	fi
	wait_for "pvc/grow's capacity 128Mi (controller and node expansion)" 60 grown
	wait_for "pod/$user Running" 60 phase "pod/$user" Running
	size=$(df -B1M --output=size "$(mnt $user grow)" 2>/dev/null | tail -1 | tr -d ' ')
	[ "${size:-0}" -gt 100 ] || fail "$user's filesystem is ${size:-?} MiB after expansion, want > 100"
fi

# ---- a snapshot, restored ----
K apply -f - >/dev/null <<'EOF' || fail "creating the VolumeSnapshot"
apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshot
metadata: {name: data-snap}
spec: {source: {persistentVolumeClaimName: data}}
EOF
ready() { [ "$(K get "$1" -o jsonpath='{.status.readyToUse}')" = true ]; }
if wait_for "volumesnapshot/data-snap ready (default class kcsi-loop)" 60 ready volumesnapshot/data-snap; then
	claim restored kcsi-loop 64Mi data-snap || fail "creating pvc/restored"
	pod restorer restored node-1 || fail "creating pod/restorer"
	if wait_for "pod/restorer Running" 60 phase pod/restorer Running; then
		[ "$(cat "$(mnt restorer restored)/hello.txt" 2>/dev/null)" = "written on node-1" ] ||
			fail "the volume restored from the snapshot does not hold the file"
	fi
fi

# ---- a group snapshot of the claims labelled app=demo ----
K apply -f "$KCSI_SRC/examples/groupsnapshot.yaml" >/dev/null || fail "creating the group snapshot"
if wait_for "volumegroupsnapshot/demo-group ready" 60 ready volumegroupsnapshot/demo-group; then
	n=$(K get volumesnapshots -o name | grep -vc data-snap)
	[ "$n" = 3 ] || fail "the group snapshot made $n VolumeSnapshots, want 3 (data, grow, restored)"
fi

# ---- everything deleted: the volumes and the snapshots' contents go ----
K delete volumegroupsnapshot demo-group --timeout=60s >/dev/null || fail "deleting the group snapshot"
K delete pod --all --grace-period=0 --timeout=60s >/dev/null 2>&1 || fail "deleting the pods"
K delete volumesnapshot --all --timeout=60s >/dev/null || fail "deleting the snapshots"
K delete pvc --all --timeout=60s >/dev/null || fail "deleting the claims"
none() { [ -z "$(K get "$1" -o name 2>/dev/null)" ]; }
for kind in volumegroupsnapshotcontents volumesnapshotcontents volumeattachments pv; do
	wait_for "no $kind left" 60 none "$kind"
done

# ---- node-2 falls silent: node lifecycle, taint eviction and pod GC write ----
# A Ready pod on node-2 that tolerates the unreachable taint for 0 s; node-2's kcsi-node stops
# (no heartbeat, no Lease renewal).
K apply -f - >/dev/null <<'EOF' || fail "creating pod/victim"
apiVersion: v1
kind: Pod
metadata: {name: victim}
spec:
  nodeSelector: {kubernetes.io/hostname: node-2}
  tolerations: [{key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 0}]
  containers: [{name: app, image: busybox:1.36, command: [sleep, "3600"]}]
EOF
cond() { # object type status
	[ "$(K get "$1" -o jsonpath="{.status.conditions[?(@.type==\"$2\")].status}")" = "$3" ]
}
if wait_for "pod/victim Ready on node-2" 30 cond pod/victim Ready True; then
	kill -TERM "$NODE2_PID"
	wait "$NODE2_PID" 2>/dev/null
	mapfile -t PIDS < <(printf '%s\n' "${PIDS[@]}" | grep -vx "$NODE2_PID")
	# nodelifecycle: nodes/status (Unknown), nodes (the unreachable taints), pods/status (Ready
	# False); taint eviction: pods get, pods/status (DisruptionTarget), pods delete. The pod stays
	# terminating: no kubelet on node-2 finishes it.
	unreachable() { K get node node-2 -o jsonpath='{.spec.taints[*].key}' | grep -qw node.kubernetes.io/unreachable; }
	wait_for "node-2 Ready Unknown" 20 cond node/node-2 Ready Unknown
	wait_for "node-2 tainted unreachable" 20 unreachable
	evicted() { [ -n "$(K get pod victim -o jsonpath='{.metadata.deletionTimestamp}')" ]; }
	wait_for "pod/victim evicted (deletionTimestamp)" 20 evicted
	wait_for "pod/victim marked not Ready" 10 cond pod/victim Ready False
	wait_for "pod/victim's DisruptionTarget condition" 10 cond pod/victim DisruptionTarget True
	# podgc: the out-of-service taint lets it fail the pod (pods/status) and delete it at once
	K taint node node-2 node.kubernetes.io/out-of-service=nodeshutdown:NoExecute >/dev/null ||
		fail "tainting node-2 out-of-service"
	wait_for "pod/victim gone (podgc)" 20 none pod/victim
fi
t_flow=$((SECONDS - t0))

# ---- the logs: no request refused ----
rbac_stop
for f in "$L"/*.log; do
	[ -s "$f" ] || [ "${f##*/}" = loopplugin-controller.log ] || fail "${f##*/} is empty"
	# the authorizer's refusal ("... is forbidden: User ... cannot list resource ...") or a bare
	# 403; not a validation error's "Forbidden:" field message (422)
	hits=$(grep -nE -i 'is forbidden|cannot [a-z]+ resource|(HTTP|status|code)[ :=]*403([^0-9]|$)' "$f")
	[ -z "$hits" ] || fail "${f##*/} has refused requests:
$(echo "$hits" | head -n 20)"
done
echo "rbac_realcp: components up in ${t_up} s, flow done in ${t_flow} s, total $((SECONDS - t0)) s"
realcp_stop
if [ $FAILS -ne 0 ]; then
	for f in "$L"/*.log; do echo "--- $f" >&2; tail -n 15 "$f" >&2; done
	exit 1
fi
echo PASS
