# lib_hosts.sh: a multi-host fault test bed on one machine (sourced, not run; docs/faults.md).
# Source it after lib_proc.sh (sets $T, fail) and lib_realcp.sh.
#
# Hosts are Linux network namespaces, each with a veth pair into a bridge this library makes;
# the root namespace holds the bridge's first address and the control plane (the real one,
# scripts/realcp.sh --address: etcd, kube-apiserver, kube-scheduler v1.37.2, and either
# kube-controller-manager v1.37.2 or kcsi-controller-manager), plus the controller side of the
# driver: kcsi-loopplugin --mode controller --detach-staged, csi-provisioner, csi-attacher.
# Each host runs kcsi-loopplugin --mode node (its pool is the shared $T/pool, what a SAN gives
# every host; one driver zone, "local", for all), csi-node-driver-registrar and kcsi-node, node
# name = host name. A host is a network namespace and a mount namespace of its own (a machine's
# own mount table over the shared files; propagation slave of a shared / (lib_mountns.sh): the
# root's mounts and unmounts reach it, its own don't leave it), both kept by files under $T/ns,
# and its processes enter both with nsenter (not `ip netns exec`, which would make a new mount
# namespace per process, so kcsi-node would not see the driver's mounts). Loop devices are the
# kernel's, not a namespace's: a volume a stopped host still has mounted is the same loop device the
# next host mounts (the same superblock, so the data is shared the way a SAN's disk is, without a
# SAN's corruption of a double writer: that is what faults_check.py looks for in the publish logs
# instead).
#
# bed_up CM N            the bridge, N hosts host-1..N (zone label: the K-th word of $BED_ZONES,
#                        e.g. "zone-a zone-a zone-b"; without it zone-a for odd, zone-b for
#                        even), the control plane with CM (kcsi | real) as controller manager,
#                        the CSIDriver and the class kcsi-loop; waits until every node is Ready
# host_start H           (re)starts H's three processes (logs $T/hosts/H/*.log, appended)
# host_stop H            kill -9 of H's processes; its mounts stay
# host_cut H / host_heal H   iptables DROP of everything between H and the bridge's address
#                        (its processes and mounts keep running) / removes it
# host_pause H / host_resume H   SIGSTOP / SIGCONT of H's processes
# apiserver_restart      kill -9 of kube-apiserver and the same command line again (etcd keeps
#                        the state); waits until it is ready
# cm_kill / cm_start     kill -9 / start the controller manager chosen in bed_up
# journal EVENT [K=V...] appends {"t": now, "event": EVENT, ...} to $T/journal.jsonl (the
#                        checker's record of the faults)
# api_writes             kube-apiserver's apiserver_request_total of the write verbs (POST PUT
#                        PATCH DELETE) as "resource verb count" lines (from its /metrics)
# bed_check              tests/e2e/faults_check.py over the hosts' driver logs and the journal
# bed_leaks              fails for a VolumeAttachment, loop device, mount, process or netns left
# The EXIT trap stops everything, unmounts, detaches the loop devices and removes the netns,
# the veths, the bridge and the iptables rules.
: "${KCSI_BIN:?}" "${KCSI_SRC:?}" "${T:?}"
BED_ID=$(($$ % 200 + 20))
BED_BR=kbed$BED_ID
BED_NET=10.213.$BED_ID
BED_IP=$BED_NET.1
BED_CM=
BED_HOSTS=()
MAX_WAIT=${MAX_WAIT:-20s}
BED_ZONES=${BED_ZONES:-}
declare -A HOST_PIDS=()
CM_PID=
CTL_PIDS=()
K() { kubectl --kubeconfig "$RKC" --request-timeout=10s "$@"; }
now() { date +%s.%N; }
journal() {
	local ev=$1 kv
	shift
	local line="{\"t\": $(now), \"event\": \"$ev\""
	for kv in "$@"; do line="$line, \"${kv%%=*}\": \"${kv#*=}\""; done
	echo "$line}" >>"$T/journal.jsonl"
}
host_ns() { echo "kbed$BED_ID-$1"; }
# in_host H CMD...: CMD in H's network and mount namespaces
in_host() { local h=$1; shift; nsenter --net="/run/netns/$(host_ns "$h")" --mount="$T/ns/$h" "$@"; }
exec_in() { in_host "$@"; }
# bg_in H LOG CMD...: CMD started there in the background, output appended to LOG; sets BG_PID
# to CMD's own pid (the subshell execs nsenter, which execs CMD)
bg_in() {
	local h=$1 log=$2
	shift 2
	(exec nsenter --net="/run/netns/$(host_ns "$h")" --mount="$T/ns/$h" "$@" >>"$log" 2>&1 </dev/null) &
	BG_PID=$!
}

bed_net_up() {
	local n=$1 i h ns
	# the hosts' mount namespaces are slaves of a shared /: what the machine unmounts after they
	# are made (another test's volume) leaves them too
	. "$(dirname "${BASH_SOURCE[0]}")/lib_mountns.sh"
	root_shared || { fail "cannot make / a shared mount"; return 1; }
	# the mount namespaces' files live on a private mount: a namespace file bind-mounted where
	# propagation is shared would be refused
	mkdir -p "$T/ns"
	mount --bind "$T/ns" "$T/ns" && mount --make-private "$T/ns" || { fail "a private mount for $T/ns"; return 1; }
	# The bed's number names its bridge, veths, netns and subnet. Another bed may run beside this
	# one (ctest -j): the bridge is made under the first free number, which makes it ours.
	local tries=0
	until ip link add "$BED_BR" type bridge 2>/dev/null; do
		tries=$((tries + 1))
		[ $tries -lt 200 ] || { fail "ip link add bridge: no free bed number (kbed20..kbed219)"; return 1; }
		BED_ID=$(((BED_ID - 20 + 1) % 200 + 20))
		BED_BR=kbed$BED_ID
		BED_NET=10.213.$BED_ID
		BED_IP=$BED_NET.1
	done
	ip addr add "$BED_IP/24" dev "$BED_BR"
	ip link set "$BED_BR" up
	for i in $(seq 1 "$n"); do
		h=host-$i
		ns=$(host_ns "$h")
		ip netns add "$ns" || { fail "ip netns add $ns"; return 1; }
		ip link add "kbv$BED_ID-$i" type veth peer name eth0 netns "$ns"
		ip link set "kbv$BED_ID-$i" master "$BED_BR" up
		ip -n "$ns" addr add "$BED_NET.$((10 + i))/24" dev eth0
		ip -n "$ns" link set eth0 up
		ip -n "$ns" link set lo up
		touch "$T/ns/$h"
		unshare --mount="$T/ns/$h" --propagation slave true || { fail "unshare --mount for $h"; return 1; }
		BED_HOSTS+=("$h")
	done
}

host_start() {
	local h=$1 d=$T/hosts/$1 zone
	zone=$(host_zone "$1")
	mkdir -p "$d/kubelet/plugins/loop.kcsi.io" "$d/kubelet/plugins_registry"
	local sock=$d/kubelet/plugins/loop.kcsi.io/csi.sock
	bg_in "$h" "$d/lp.log" "$KCSI_BIN/kcsi-loopplugin" --mode node --endpoint "unix://$sock" --v=2 \
		--nodeid "$h" --pool-dir "$T/pool"
	HOST_PIDS[$h:lp]=$BG_PID
	bg_in "$h" "$d/registrar.log" "$KCSI_BIN/csi-node-driver-registrar" --csi-address "$sock" \
		--kubelet-registration-path "$sock" --plugin-registration-path "$d/kubelet/plugins_registry"
	HOST_PIDS[$h:reg]=$BG_PID
	bg_in "$h" "$d/kcsi-node.log" "$KCSI_BIN/kcsi-node" --kubeconfig "$RKC" --node-name "$h" \
		--root-dir "$d/kubelet" --node-labels "topology.kubernetes.io/zone=$zone" \
		--node-status-update-frequency 2s --node-lease-duration-seconds 8 --v=2
	HOST_PIDS[$h:node]=$BG_PID
}
host_zone() {
	local k=${1#host-} z=()
	read -ra z <<<"$BED_ZONES"
	if [ -n "${z[$((k - 1))]:-}" ]; then echo "${z[$((k - 1))]}"
	elif [ $((k % 2)) = 0 ]; then echo zone-b
	else echo zone-a; fi
}
host_pids() { local k; for k in lp reg node; do [ -n "${HOST_PIDS[$1:$k]:-}" ] && echo "${HOST_PIDS[$1:$k]}"; done; }
host_stop() {
	local p
	for p in $(host_pids "$1"); do kill_kids -KILL "$p"; wait "$p" 2>/dev/null; done
	unset "HOST_PIDS[$1:lp]" "HOST_PIDS[$1:reg]" "HOST_PIDS[$1:node]"
	journal stop host="$1"
}
host_cut() {
	in_host "$1" iptables -I OUTPUT -d "$BED_IP" -j DROP
	in_host "$1" iptables -I INPUT -s "$BED_IP" -j DROP
	journal cut host="$1"
}
host_heal() {
	in_host "$1" iptables -D OUTPUT -d "$BED_IP" -j DROP
	in_host "$1" iptables -D INPUT -s "$BED_IP" -j DROP
	journal heal host="$1"
}
host_pause() { kill_kids -STOP $(host_pids "$1"); journal pause host="$1"; }
host_resume() { kill_kids -CONT $(host_pids "$1"); journal resume host="$1"; }

# ---- the control plane ----
cm_start() {
	case $BED_CM in
	kcsi)
		"$KCSI_BIN/kcsi-controller-manager" --kubeconfig "$RKC" --v=2 \
			--max-wait-for-unmount "$MAX_WAIT" --node-monitor-period 1s \
			--node-monitor-grace-period 10s >>"$T/cm.log" 2>&1 &
		CM_PID=$!
		;;
	real)
		# the same command line realcp.sh ran, saved by bed_up
		setsid bash -c 'exec "$@"' _ "${REAL_KCM_CMD[@]}" </dev/null >>"$T/cm.log" 2>&1 &
		CM_PID=$!
		;;
	esac
	journal cm_start cm="$BED_CM"
}
cm_kill() { kill_ours -KILL "$RCP" "$CM_PID"; wait "$CM_PID" 2>/dev/null; CM_PID=; journal cm_kill; }
api_writes() {
	realcp_curl -sf --max-time 5 "$RS/metrics" | awk '
		function label(l,   m) {
			if (!match($0, "[{,]" l "=\"[^\"]*\"")) return ""
			m = substr($0, RSTART + length(l) + 3, RLENGTH - length(l) - 4)
			return m
		}
		/^apiserver_request_total\{/ {
			v = label("verb")
			if (v != "POST" && v != "PUT" && v != "PATCH" && v != "DELETE") next
			r = label("resource"); s = label("subresource")
			if (s != "") r = r "/" s
			n[r " " v] += $NF
		}
		END { for (k in n) print k, n[k] }'
}
rcp_pid() { awk -v n="$1" '$1 == n {print $2}' "$RCP/pids" | tail -1; }
apiserver_ready() { [ "$(realcp_curl -sf --max-time 2 "$RS/readyz")" = ok ]; }
apiserver_restart() {
	local pid cmd=()
	pid=$(rcp_pid kube-apiserver)
	mapfile -d '' cmd <"/proc/$pid/cmdline"
	kill -KILL "$pid"
	while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
	journal apiserver_down
	setsid "${cmd[@]}" </dev/null >>"$RCP/kube-apiserver.log" 2>&1 &
	# in the old one's place in realcp's list, which stops newest first: appended, the new
	# kube-apiserver would be stopped before kube-scheduler, whose open watches would then hold
	# its graceful shutdown until realcp kills it (10 s)
	sed -i "s/^kube-apiserver $pid\$/kube-apiserver $!/" "$RCP/pids"
	wait_for "kube-apiserver ready again" 60 apiserver_ready
	journal apiserver_up
}

bed_up() {
	BED_CM=$1
	local n=$2 args=() h
	mkdir -p "$T/pool" "$T/hosts" "$T/ctl"
	: >"$T/journal.jsonl"
	bed_net_up "$n" || return 1
	args+=(--address "$BED_IP") # the bed's number, and so its address, is known from here on
	# kube-controller-manager: a node is Unknown 10 s after its last heartbeat (its default 50 s)
	# and the bed's hosts renew every 2 s; upstream has no flag for maxWaitForUnmountDuration (a
	# constant, 6 min in the attach/detach reconciler)
	args+=(--kcm-args "--node-monitor-grace-period=10s --node-monitor-period=1s")
	realcp_start "${args[@]}"
	if [ "$BED_CM" = real ]; then
		mapfile -d '' REAL_KCM_CMD <"/proc/$(rcp_pid kube-controller-manager)/cmdline"
		CM_PID=$(rcp_pid kube-controller-manager)
	else
		# realcp starts its kcm to make the default ServiceAccount, then the bed swaps it
		kill -TERM "$(rcp_pid kube-controller-manager)"
		cm_start
	fi
	K apply -f - >/dev/null <<'EOF' || fail "the CSIDriver and the class"
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: {name: loop.kcsi.io}
spec: {attachRequired: true, podInfoOnMount: false, volumeLifecycleModes: [Persistent]}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: kcsi-loop}
provisioner: loop.kcsi.io
volumeBindingMode: Immediate
reclaimPolicy: Delete
parameters: {csi.storage.k8s.io/fstype: ext4}
EOF
	local cs=$T/ctl/csi.sock
	"$KCSI_BIN/kcsi-loopplugin" --mode controller --endpoint "unix://$cs" --nodeid controller \
		--pool-dir "$T/pool" --detach-staged --v=2 >>"$T/ctl/lp.log" 2>&1 &
	CTL_PIDS+=($!)
	"$KCSI_BIN/csi-provisioner" --kubeconfig "$RKC" --csi-address "$cs" --v=2 >>"$T/ctl/provisioner.log" 2>&1 &
	CTL_PIDS+=($!)
	"$KCSI_BIN/csi-attacher" --kubeconfig "$RKC" --csi-address "$cs" --v=2 >>"$T/ctl/attacher.log" 2>&1 &
	CTL_PIDS+=($!)
	for h in "${BED_HOSTS[@]}"; do host_start "$h"; done
	for h in "${BED_HOSTS[@]}"; do wait_for "node $h Ready" 60 node_ready "$h" || return 1; done
}
node_ready() { [ "$(K get node "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]; }
node_not_ready() { ! node_ready "$1"; }

# ---- pods and claims ----
# claim NAME [MODE]: a 32Mi claim of kcsi-loop (ReadWriteOnce unless MODE), waits until Bound
claim() {
	K apply -f - >/dev/null <<EOF || fail "creating pvc/$1"
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: $1}
spec: {storageClassName: kcsi-loop, accessModes: [${2:-ReadWriteOnce}], resources: {requests: {storage: 32Mi}}}
EOF
	wait_for "pvc/$1 Bound" 60 phase_is "pvc/$1" Bound
}
phase_is() { [ "$(K get "$1" -o jsonpath='{.status.phase}' 2>/dev/null)" = "$2" ]; }
# pod NAME CLAIM [HOST] [TOLERATION_SECONDS]: a pod of the claim (on HOST by nodeSelector, else
# where the scheduler places it), tolerating the not-ready/unreachable taints that long (300 s,
# DefaultTolerationSeconds' value, if not given)
# (POD_NODENAME=H: spec.nodeName H instead, past the scheduler, as a user may write it)
pod() {
	local sel="" tol=${4:-300}
	[ -n "${3:-}" ] && sel="nodeSelector: {kubernetes.io/hostname: $3}"
	[ -n "${POD_NODENAME:-}" ] && sel="nodeName: $POD_NODENAME"
	K apply -f - >/dev/null <<EOF || fail "creating pod/$1"
apiVersion: v1
kind: Pod
metadata: {name: $1, labels: {app: bed}}
spec:
  $sel
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 5
  tolerations:
  - {key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: $tol}
  - {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: $tol}
  containers: [{name: app, image: busybox:1.36, command: [sleep, "3600"], volumeMounts: [{name: d, mountPath: /data}]}]
  volumes: [{name: d, persistentVolumeClaim: {claimName: $2}}]
EOF
}
pod_node() { K get pod "$1" -o jsonpath='{.spec.nodeName}'; }
pod_running() { phase_is "pod/$1" Running; }
pod_deleting() { [ -n "$(K get pod "$1" -o jsonpath='{.metadata.deletionTimestamp}' 2>/dev/null)" ]; }
pod_gone() { ! K get pod "$1" >/dev/null 2>&1; }
# pod_dir POD CLAIM: where the pod's volume is mounted on its host
pod_dir() {
	local node uid pv
	node=$(pod_node "$1")
	uid=$(K get pod "$1" -o jsonpath='{.metadata.uid}')
	pv=$(K get pvc "$2" -o jsonpath='{.spec.volumeName}')
	echo "$T/hosts/$node/kubelet/pods/$uid/volumes/kubernetes.io~csi/$pv/mount"
}
va_on() { # CLAIM HOST: a VolumeAttachment of the claim's PV to HOST exists
	local pv
	pv=$(K get pvc "$1" -o jsonpath='{.spec.volumeName}')
	K get volumeattachments -o json | jq -e --arg pv "$pv" --arg n "$2" \
		'[.items[] | select(.spec.source.persistentVolumeName == $pv and .spec.nodeName == $n)] | length > 0' >/dev/null
}
va_gone_on() { ! va_on "$@"; }
# fence H CLAIM SECS: once the claim's volume is detached from H (its VolumeAttachment gone: the
# forced detach), H loses the disk, as a SAN fences a host it detached: one kernel's loop
# device cannot be in two machines, so the bed unmounts H's mounts of it (umount -l in H's mount
# namespace; what H's kcsi-node and driver find when it comes back is the empty directories).
# Says so (FENCE); journals it.
fence() {
	local h=$1 c=$2 m
	wait_for "the volume of $c detached from $h" "$3" va_gone_on "$c" "$h" || return 1
	for m in $(host_mounts "$h" | sort -r); do in_host "$h" umount -l "$m"; done
	journal fence host="$h"
	echo "FENCE: $h cut off its disk after the forced detach (simulated: its mounts of the volume unmounted in its mount namespace; a SAN would refuse its I/O instead)"
}
taint_oos() { K taint node "$1" node.kubernetes.io/out-of-service=nodeshutdown:NoExecute >/dev/null && journal oos host="$1"; }
untaint_oos() { K taint node "$1" node.kubernetes.io/out-of-service=nodeshutdown:NoExecute- >/dev/null; }

bed_check() {
	local logs=() h
	for h in "${BED_HOSTS[@]}"; do logs+=(--host "$h=$T/hosts/$h/lp.log"); done
	python3 "$KCSI_SRC/tests/e2e/faults_check.py" "${logs[@]}" --controller "$T/ctl/lp.log" \
		--journal "$T/journal.jsonl" --max-wait "${MAX_WAIT%s}" $BED_CHECK_ARGS ||
		fail "the invariants (faults_check.py) do not hold"
}
BED_CHECK_ARGS=

bed_leaks() {
	local left
	wait_for "no VolumeAttachment left" 60 no_vas || fail "VolumeAttachments left: $(K get volumeattachments -o name | tr '\n' ' ')"
	for h in "${BED_HOSTS[@]}"; do
		left=$(host_mounts "$h")
		[ -z "$left" ] || fail "mounts left on $h: $left"
	done
	left=$(losetup -a | grep -F "$T/")
	[ -z "$left" ] || fail "loop devices left: $left"
}
# host_mounts H: what H has mounted under $T (its own mount table, not the root's)
host_mounts() { exec_in "$1" cat /proc/self/mountinfo 2>/dev/null | awk -v t="$T/hosts/" 'index($5, t) == 1 {print $5}'; }
no_vas() { [ -z "$(K get volumeattachments -o name 2>/dev/null)" ]; }

bed_stop() {
	local k p i
	# only what is still this bed's (lib_kids.sh): a PID that exited earlier may be another test's now
	for k in "${!HOST_PIDS[@]}"; do kill_kids -CONT "${HOST_PIDS[$k]}"; kill_kids -TERM "${HOST_PIDS[$k]}"; done
	kill_ours -TERM "$RCP" "${CTL_PIDS[@]}" $CM_PID
	for p in "${HOST_PIDS[@]}" "${CTL_PIDS[@]}" $CM_PID; do
		for i in $(seq 1 20); do
			[ "$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)" != Z ] && pid_is_ours "$p" "$RCP" || break
			sleep 0.05
		done
		kill_ours -KILL "$RCP" "$p"
	done
	HOST_PIDS=()
	CTL_PIDS=()
	CM_PID=
	for h in "${BED_HOSTS[@]}"; do
		[ -f "$T/ns/$h" ] || continue
		host_mounts "$h" | sort -r | while read -r m; do exec_in "$h" umount -l "$m" 2>/dev/null; done
		umount "$T/ns/$h" 2>/dev/null
		ip netns del "$(host_ns "$h")" 2>/dev/null
	done
	umount "$T/ns" 2>/dev/null
	grep -F " $T/" /proc/self/mountinfo | awk '{print $5}' | sort -r | xargs -r -n1 umount -l 2>/dev/null
	losetup -a | grep -F "$T/" | cut -d: -f1 | xargs -r -n1 losetup -d 2>/dev/null
	BED_HOSTS=()
	# The control plane stops before the bridge goes: kube-apiserver listens on the bridge
	# address, and with that address gone the FINs of its clients (kube-scheduler, ...) that
	# close their connections are never delivered, so its graceful shutdown waits for those
	# connections' open watches until its --request-timeout (60 s; realcp kills it after 10 s).
	realcp_stop
	ip link del "$BED_BR" 2>/dev/null
	true
}
bed_netns_left() { ip netns list | grep -q "^kbed$BED_ID-" || ip link show "$BED_BR" >/dev/null 2>&1; }
_hosts_prev_trap=$(trap -p EXIT | sed "s/^trap -- '\(.*\)' EXIT\$/\1/")
# shellcheck disable=SC2064
trap "bed_stop; $_hosts_prev_trap" EXIT
