#!/usr/bin/env bash
# A real Kubernetes node as a test fixture: the peers' kubelet v1.37.2 with a container runtime
# of its own, joined to a control plane that scripts/realcp.sh started.
#
#   scripts/realnode.sh start --cp CPDIR [--dir DIR] --images IMGDIR [--peers BINDIR] [--node NAME]
#                             [--slot N]
#       starts Debian's containerd with its CRI plugin on DIR/containerd.sock (its own root, state
#       and socket; the Docker Engine's containerd is left alone), imports every IMGDIR/*.oci.tar
#       into it (kcsi/X:T is also tagged docker.io/kcsi/X:T, the name the kubelet asks for),
#       prepares the pod network (a bridge and host-local addresses, Debian's CNI plugins) and
#       starts the kubelet with root /var/lib/kubelet, a client certificate for system:node:NAME
#       signed by CPDIR's CA, and the pause image IMGDIR holds as the runtime's sandbox image;
#       waits until the Node is Ready and prints
#         NODE=NAME
#         DIR=DIR
#         realnode: ready in 2.8 s, RSS 127 MiB (containerd 47, kubelet 79)
#       DIR (default: a new /tmp/kcsi-realnode.XXXXXX) must not exist or be empty;
#       /var/lib/kubelet must not exist (or be empty) and no other kubelet may run. The processes
#       outlive this command (own session); `stop` ends them. On failure everything is undone.
#       --slot N (1-9) starts another node beside slot 0's (the default), for a cluster of several
#       nodes on one machine, each with its own containerd, kubelet, bridge (kcsi-rnN,
#       10.244.(77+N).0/24), cgroup root and port. Its containerd and kubelet run in a mount
#       namespace of their own (a slave of the host's): there DIR/kubelet-root is /var/lib/kubelet,
#       DIR/run-containerd /run/containerd and DIR/netns /run/netns, so a DaemonSet's hostPath
#       /var/lib/kubelet is each node's own, and the mounts the node's pods and plugins make never
#       reach the host or another node. The rest of the host (/dev, /var/lib/kcsi-loop) the nodes share, as nodes
#       share storage. The default node name is kcsi-realnode-N.
#   scripts/realnode.sh stop DIR
#       (stop slots N >= 1 before slot 0: slot 0's stop detaches the loop devices of the pool)
#       deletes the Node, stops the kubelet, kills every container the runtime still runs, stops
#       containerd, then undoes everything start did: mounts under /var/lib/kubelet and DIR, the
#       loop devices of files under /var/lib/kcsi-loop (when start created it), network namespaces,
#       the bridge, the iptables rules, the cgroups, /var/lib/kubelet and DIR. Fails if anything
#       is left.
#
# No kube-proxy runs here (it is not among the peers): start installs the one rule kube-proxy
# would for the `kubernetes` Service, a DNAT of 10.96.0.1:443 from the pod network to the
# API server on 127.0.0.1 (with route_localnet on the bridge), so in-cluster clients reach it.
# Why containerd and not cri-dockerd, and what this machine allows: docs/deploy.md, "Verified on
# a real node".
set -euo pipefail

src="$(cd "$(dirname "$0")/.." && pwd)"
peers=${KCSI_PEERS:-$src/build-peers/bin}
PROG=realnode
. "$(dirname "${BASH_SOURCE[0]}")/lib_procs.sh" # free_ports, pid_ours, stop_pid, stop_dir, ...
die() { echo "$PROG: $*" >&2; exit 1; }

KUBELET_ROOT=/var/lib/kubelet
POOL=/var/lib/kcsi-loop
SERVICE_IP=10.96.0.1
SLOT=0
set_slot() { # N: the host resources of node slot N
	SLOT=$1
	BRIDGE=kcsi-rn$1
	SUBNET=10.244.$((77 + $1)).0/24
	GATEWAY=10.244.$((77 + $1)).1
	CGROUP_ROOT=kcsi-realnode$([ "$1" = 0 ] || echo "-$1")
}
set_slot 0


launch() { # name binary args... (slots >= 1: in the node's mount namespace)
	local name=$1 ns=() holder; shift
	if [ "$SLOT" != 0 ] && [ "$name" != mntns ]; then
		holder=$(pid_of mntns)
		ns=(nsenter --target "$holder" --mount --)
	fi
	setsid "${ns[@]}" "$@" </dev/null >"$D/$name.log" 2>&1 &
	echo "$name $!" >>"$D/pids"
	wait_exec $!
}
pid_of() { awk -v n="$1" '$1 == n {print $2}' "$D/pids" 2>/dev/null; }
alive() { local p; p=$(pid_of "$1"); [ -n "$p" ] && pid_ours "$p"; }
ctr_() { ctr --address "$D/containerd.sock" --namespace k8s.io "$@"; }
kc() { "$peers/kubectl" --kubeconfig "$CP/kubeconfig" --request-timeout=10s "$@"; }

wait_for() { # name secs what check...
	local name=$1 secs=$2 what=$3; shift 3
	local end=$((SECONDS + secs))
	while [ $SECONDS -lt $end ]; do
		"$@" && return 0
		alive "$name" || { echo "realnode: $name exited while waiting for $what" >&2; return 1; }
		sleep 0.1
	done
	echo "realnode: $what not within ${secs}s" >&2
	return 1
}

# ---- configuration ----
write_containerd_config() { # sandbox-image
	mkdir -p "$D/cni/net.d" "$D/cni/ipam" "$D/containerd"
	cat >"$D/containerd.toml" <<EOF
version = 2
root = "$D/containerd/root"
state = "$D/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs"]
[grpc]
  address = "$D/containerd.sock"
[ttrpc]
  address = "$D/containerd.sock.ttrpc"
[debug]
  level = "info"
[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = "$D/containerd/opt"
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "$1"
    stream_server_address = "127.0.0.1"
    # this sandbox withholds CAP_SYS_RESOURCE: no process may lower its oom_score_adj, and runc
    # fails the pod's sandbox (-998) with "failed to update /proc/self/oom_score_adj: Permission
    # denied"; clamp every value at containerd's own instead
    restrict_oom_score_adj = true
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          SystemdCgroup = false
          Root = "$D/runc"
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/usr/lib/cni"
      conf_dir = "$D/cni/net.d"
EOF
	cat >"$D/cni/net.d/10-kcsi-realnode.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "kcsi-realnode",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$D/cni/ipam",
        "ranges": [[{"subnet": "$SUBNET", "gateway": "$GATEWAY"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    }
  ]
}
EOF
}

write_kubelet_config() { # port healthz-port
	cat >"$D/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# this machine's cgroups are v1 (a hybrid hierarchy); v1.37, as v1.36, refuses them unless told
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /$CGROUP_ROOT
containerRuntimeEndpoint: unix://$D/containerd.sock
address: $GATEWAY
port: $1
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $2
tlsCertFile: $D/pki/kubelet-serving.crt
tlsPrivateKeyFile: $D/pki/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $CP/ca.crt}
authorization:
  mode: AlwaysAllow
podLogsDir: $D/pod-logs
failSwapOn: false
# a test machine's disk may be nearly full: no eviction, no image garbage collection
evictionHard: {memory.available: "1Mi", nodefs.available: "0%", imagefs.available: "0%", nodefs.inodesFree: "0%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
nodeStatusUpdateFrequency: 2s
syncFrequency: 10s
volumeStatsAggPeriod: 5s
resolvConf: /etc/resolv.conf
EOF
}

gen_certs() { # node-name
	mkdir -p "$D/pki"
	printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n' >"$D/pki/client.ext"
	openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$D/pki/kubelet.key" \
		-subj "/O=system:nodes/CN=system:node:$1" -out "$D/pki/kubelet.csr" 2>/dev/null
	openssl x509 -req -in "$D/pki/kubelet.csr" -CA "$CP/ca.crt" -CAkey "$CP/ca.key" \
		-set_serial "0x$(openssl rand -hex 16)" -days 7 -extfile "$D/pki/client.ext" \
		-out "$D/pki/kubelet.crt" 2>/dev/null
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 7 \
		-subj "/CN=$1" -addext "subjectAltName=IP:$GATEWAY,DNS:$1" \
		-keyout "$D/pki/kubelet-serving.key" -out "$D/pki/kubelet-serving.crt" 2>/dev/null
	local server
	server=$(awk '$1 == "server:" {print $2; exit}' "$CP/kubeconfig")
	cat >"$D/kubelet.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: realcp
  cluster:
    server: $server
    certificate-authority-data: $(base64 -w0 "$CP/ca.crt")
users:
- name: kubelet
  user:
    client-certificate-data: $(base64 -w0 "$D/pki/kubelet.crt")
    client-key-data: $(base64 -w0 "$D/pki/kubelet.key")
contexts:
- name: realcp
  context: {cluster: realcp, user: kubelet}
current-context: realcp
EOF
}

# ---- host state: each step records itself in DIR/undo so that stop undoes exactly it ----
note() { echo "$*" >>"$D/undo"; }
mounts_under() { # DIR: the mount points at or below DIR, deepest first
	awk -v d="$1" '$5 == d || index($5, d "/") == 1 {print $5}' /proc/self/mountinfo | sort -r
}

cgroup_hierarchies() { # the mounted v1 hierarchies with a controller (and the unified one)
	awk '$3 == "cgroup" || $3 == "cgroup2" {print $2}' /proc/mounts
}

# slots >= 1: a process that holds the node's mount namespace, made a slave of the host's so
# that the host's mounts reach it and none of its own reach the host; there DIR/kubelet-root is
# /var/lib/kubelet (shared within, as the kubelet wants for Bidirectional propagation),
# DIR/run-containerd is /run/containerd (containerd 1.6 keeps its shims' sockets there) and
# DIR/netns is /run/netns (the pods' network namespaces, which go with this one). The host keeps
# the mount points, empty.
start_mntns() {
	mkdir -p "$D/kubelet-root" "$D/run-containerd" "$D/netns" "$KUBELET_ROOT" /run/containerd \
		/run/netns
	: >"$D/mntns.hold"
	launch mntns unshare --mount --propagation slave -- bash -c '
		mount --bind "$1/kubelet-root" /var/lib/kubelet &&
		mount --make-rshared /var/lib/kubelet &&
		mount --bind "$1/run-containerd" /run/containerd &&
		mount --bind "$1/netns" /run/netns || exit 1
		: >"$1/mntns.ready"
		exec tail -f /dev/null "$1/mntns.hold"' mntns "$D"
	local i
	for i in $(seq 1 100); do
		[ -e "$D/mntns.ready" ] && return 0
		alive mntns || break
		sleep 0.05
	done
	echo "realnode: the node's mount namespace was not made: $(cat "$D/mntns.log")" >&2
	return 1
}

setup_host() { # api-port
	local d
	# the kubelet links every container's log from /var/log/containers (wherever podLogsDir is)
	note "links /var/log/containers"
	if [ "$SLOT" = 0 ]; then
		# slot 0 owns the host's kubelet root, the pool the nodes share and the host's folders
		# containerd and the kubelet fill (slots >= 1 leave them, at most empty, behind)
		mkdir -p "$KUBELET_ROOT" && note "rmdir $KUBELET_ROOT"
		if [ ! -e "$POOL" ]; then note "pool $POOL"; fi
		# containerd 1.6 keeps its shims' sockets and the CRI's fifos in /run/containerd whatever
		# its state dir; CNI's network namespaces go to /var/run/netns
		for d in /run/containerd /var/run/netns /var/log/containers; do
			[ -e "$d" ] || note "rmdir $(realpath -m "$d")"
		done
	fi
	local h
	for h in $(cgroup_hierarchies); do
		if [ ! -d "$h/$CGROUP_ROOT" ]; then
			mkdir "$h/$CGROUP_ROOT" && note "cgroup $h/$CGROUP_ROOT"
		fi
	done
	# cpuset: a new v1 group starts with no CPUs or memory nodes; give it its parent's
	h=$(awk '$3 == "cgroup" && $4 ~ /(^|,)cpuset(,|$)/ {print $2; exit}' /proc/mounts)
	if [ -n "$h" ]; then
		cat "$h/cpuset.cpus" >"$h/$CGROUP_ROOT/cpuset.cpus"
		cat "$h/cpuset.mems" >"$h/$CGROUP_ROOT/cpuset.mems"
	fi
	ip link add "$BRIDGE" type bridge && note "link $BRIDGE"
	ip addr add "$GATEWAY/${SUBNET#*/}" dev "$BRIDGE"
	ip link set "$BRIDGE" up
	sysctl -qw "net.ipv4.conf.$BRIDGE.route_localnet=1"
	local rule=(-t nat -I PREROUTING -i "$BRIDGE" -d "$SERVICE_IP" -p tcp --dport 443
		-j DNAT --to-destination "127.0.0.1:$1" -m comment --comment kcsi-realnode)
	iptables "${rule[@]}" && note "iptables ${rule[*]}"
	[ "$SLOT" != 0 ] || ls /var/run/netns 2>/dev/null | sort >"$D/netns.before" || true
}

undo_host() { # -> 0 if everything was undone
	local rc=0 what a b m
	[ -f "$D/undo" ] || return 0
	tac "$D/undo" | while read -r what a b; do
		case $what in
		iptables)
			# the recorded insert, as a delete
			local args
			args=$(echo "$a $b" | sed 's/ -I / -D /')
			# shellcheck disable=SC2086
			iptables $args 2>/dev/null || { echo "realnode: iptables rule not removed: $args" >&2; }
			;;
		link) ip link del "$a" 2>/dev/null || true ;;
		cgroup)
			# depth first: the kubelet's QoS groups and the pods' inside it
			find "$a" -depth -type d -exec rmdir {} \; 2>/dev/null || true
			[ ! -d "$a" ] || echo "realnode: cgroup $a is left (a process still in it?)" >&2
			;;
		pool)
			losetup -a 2>/dev/null | grep -F "($a/" | cut -d: -f1 | while read -r l; do losetup -d "$l" || true; done
			mounts_under "$a" | while read -r m; do umount -l "$m" || true; done
			rm -rf "$a"
			;;
		links) # the kubelet's links to our containers' logs
			find "$a" -maxdepth 1 -type l -lname "$D/*" -delete 2>/dev/null || true
			;;
		rmdir)
			mounts_under "$a" | while read -r m; do umount -l "$m" || true; done
			rm -rf "$a"
			;;
		esac
	done
	# network namespaces the runtime made and did not remove: containerd names its pods' cni-<id>;
	# any other that came meanwhile is another program's (a fault test bed's kbedN-host-K)
	if [ -f "$D/netns.before" ]; then
		ls /var/run/netns 2>/dev/null | sort | comm -13 "$D/netns.before" - | { grep '^cni-' || true; } |
			while read -r m; do
				umount "/var/run/netns/$m" 2>/dev/null || true
				rm -f "/var/run/netns/$m"
			done
	fi
	# where this node's /var/lib/kubelet is, seen from the host
	local root=$KUBELET_ROOT
	[ "$SLOT" = 0 ] || root=$D/kubelet-root
	for m in "$root" "$D"; do
		if [ -n "$(mounts_under "$m")" ]; then echo "realnode: mounts left under $m" >&2; rc=1; fi
	done
	[ "$SLOT" != 0 ] || [ ! -e "$KUBELET_ROOT" ] ||
		{ echo "realnode: $KUBELET_ROOT is left" >&2; rc=1; }
	! ip link show "$BRIDGE" >/dev/null 2>&1 || { echo "realnode: link $BRIDGE is left" >&2; rc=1; }
	return $rc
}

# ---- processes ----
stop_process() { # name secs
	local pid
	pid=$(pid_of "$1")
	[ -z "$pid" ] || stop_pid "$1" "$pid" "$2"
}

kill_containers() { # every task the runtime still runs, then the containers and sandboxes
	local c
	for c in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks kill -s SIGKILL "$c" >/dev/null 2>&1 || true; done
	sleep 0.3
	for c in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks delete -f "$c" >/dev/null 2>&1 || true; done
	for c in $(ctr_ containers ls -q 2>/dev/null); do ctr_ containers delete "$c" >/dev/null 2>&1 || true; done
}

stop_all() { # -> 0 if nothing is left
	local rc=0 pid
	[ -f "$D/pids" ] || { undo_host || rc=1; return $rc; }
	if [ -n "${NODE:-}" ] && [ -f "$CP/kubeconfig" ]; then
		kc delete node "$NODE" --wait=false >/dev/null 2>&1 || true
	fi
	stop_process kubelet 10
	if alive containerd; then kill_containers; fi
	stop_process containerd 10
	# the mount namespace goes with its last process, and the mounts its pods and plugins made
	stop_process mntns 5
	none_left || rc=1
	# shims outlive containerd by design; ours name DIR on their command line
	for pid in $(pgrep -f "containerd-shim.*$D/" || true); do kill -KILL "$pid" 2>/dev/null || true; done
	sleep 0.2
	mounts_under "$D" | while read -r m; do umount -l "$m" 2>/dev/null || true; done
	undo_host || rc=1
	return $rc
}

cmd_start() {
	local images="" node=kcsi-realnode
	D= CP=
	while [ $# -gt 0 ]; do
		case $1 in
		--dir) D=$(realpath -m "$2"); shift 2 ;;
		--cp) CP=$(realpath -m "$2"); shift 2 ;;
		--images) images=$(realpath -m "$2"); shift 2 ;;
		--peers) peers=$2; shift 2 ;;
		--node) node=$2; shift 2 ;;
		--slot) [[ $2 =~ ^[0-9]$ ]] || die "--slot is 0 to 9"; set_slot "$2"; shift 2 ;;
		*) die "unknown argument to start: $1 (start --cp CPDIR [--dir DIR] --images IMGDIR [--peers BINDIR] [--node NAME] [--slot N])" ;;
		esac
	done
	[ "$SLOT" = 0 ] || [ "$node" != kcsi-realnode ] || node=kcsi-realnode-$SLOT
	[ -n "$CP" ] || die "start needs --cp CPDIR (a control plane from scripts/realcp.sh start)"
	[ -f "$CP/ca.key" ] && [ -f "$CP/kubeconfig" ] && [ -f "$CP/ports" ] ||
		die "$CP is not a realcp directory (ca.key, kubeconfig, ports)"
	local b
	for b in kubelet kubectl; do [ -x "$peers/$b" ] || die "$peers/$b is missing: run scripts/peers.sh (or pass --peers)"; done
	for b in containerd ctr runc containerd-shim-runc-v2 /usr/lib/cni/bridge /usr/lib/cni/host-local \
		/usr/lib/cni/loopback iptables ip openssl python3 setsid losetup; do
		command -v "$b" >/dev/null || die "$b is needed (Debian: containerd, runc, containernetworking-plugins, iptables, iproute2)"
	done
	[ -n "$images" ] || die "start needs --images IMGDIR (make images): nothing is pulled here"
	[ -f "$images/pause.oci.tar" ] || die "$images has no pause.oci.tar (make images)"
	local sandbox
	sandbox=docker.io/$(tar -xOf "$images/pause.oci.tar" index.json | python3 -c 'import json,sys; print(json.load(sys.stdin)["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"])') ||
		die "$images/pause.oci.tar: no image name in its index.json"
	if [ "$SLOT" = 0 ]; then
		[ ! -e "$KUBELET_ROOT" ] || [ -z "$(ls -A "$KUBELET_ROOT")" ] ||
			die "$KUBELET_ROOT exists and is not empty: another kubelet's? (remove it first)"
		! pgrep -x kubelet >/dev/null || die "a kubelet already runs here (pid $(pgrep -x kubelet | head -1))"
	fi
	! ip link show "$BRIDGE" >/dev/null 2>&1 || die "link $BRIDGE exists: another realnode runs?"
	if [ -z "$D" ]; then D=$(mktemp -d /tmp/kcsi-realnode.XXXXXX)
	else
		[ ! -e "$D" ] || [ -z "$(ls -A "$D")" ] || die "$D exists and is not empty"
		mkdir -p "$D"
	fi
	NODE=$node
	echo "$NODE" >"$D/node"
	echo "$SLOT" >"$D/slot"
	echo "$CP" >"$D/cp"
	: >"$D/pids"
	local t0 api_port kport hport ok=1 f
	t0=$(date +%s.%N)
	trap 'stop_all || true; rm -rf "$D"; exit 1' INT TERM
	api_port=$(awk '{print $3}' "$CP/ports")
	read -r kport hport < <(free_ports 2)
	echo "$kport $hport" >"$D/ports"
	gen_certs "$NODE"
	write_containerd_config "$sandbox"
	write_kubelet_config "$kport" "$hport"
	setup_host "$api_port" || ok=0
	if [ $ok = 1 ] && [ "$SLOT" != 0 ]; then start_mntns || ok=0; fi
	if [ $ok = 1 ]; then
		launch containerd containerd --config "$D/containerd.toml"
		wait_for containerd 30 "containerd's socket" ctr_ version >/dev/null 2>&1 || ok=0
	fi
	if [ $ok = 1 ]; then
		for f in "$images"/*.oci.tar; do
			local ref
			ref=$(ctr_ images import "$f" 2>&1 | sed -n 's/^unpacking \([^ ]*\) .*/\1/p')
			[ -n "$ref" ] || { echo "realnode: import of $f failed" >&2; ok=0; break; }
			case $ref in docker.io/*) ;; *) ctr_ images tag "$ref" "docker.io/$ref" >/dev/null ;; esac
			echo "docker.io/${ref#docker.io/}" >>"$D/images"
		done
	fi
	if [ $ok = 1 ]; then
		launch kubelet "$peers/kubelet" --config "$D/kubelet.yaml" --kubeconfig "$D/kubelet.kubeconfig" \
			--hostname-override "$NODE" --node-ip "$GATEWAY" --root-dir "$KUBELET_ROOT" --v=2
		wait_for kubelet 60 "Node $NODE Ready" node_ready || ok=0
	fi
	if [ $ok = 0 ]; then
		for b in containerd kubelet; do
			[ -f "$D/$b.log" ] || continue
			echo "--- $b.log" >&2
			grep -E '^E|level=error|failed|error' "$D/$b.log" | tail -n 15 >&2 || true
		done
		stop_all || true
		rm -rf "$D"
		exit 1
	fi
	trap - INT TERM
	echo "NODE=$NODE"
	echo "DIR=$D"
	echo "realnode: ready in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}') s, $(rss_line)"
}

node_ready() {
	[ "$(kc get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}

cmd_stop() {
	[ $# = 1 ] || die "usage: stop DIR"
	D=$(realpath -m "$1")
	[ -d "$D" ] || die "$D is not a directory"
	[ -f "$D/node" ] && [ -f "$D/cp" ] || die "$D is not a realnode directory (no node, no cp)"
	NODE=$(cat "$D/node")
	CP=$(cat "$D/cp")
	set_slot "$(cat "$D/slot" 2>/dev/null || echo 0)"
	stop_dir "$D"
}

case ${1:-} in
start) shift; cmd_start "$@" ;;
stop) shift; cmd_stop "$@" ;;
*) die "usage: $0 start --cp CPDIR [--dir DIR] --images IMGDIR [--peers BINDIR] [--node NAME] [--slot N] | stop DIR" ;;
esac
