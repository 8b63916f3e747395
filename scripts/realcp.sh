#!/usr/bin/env bash
# A real Kubernetes control plane as a test fixture: etcd, kube-apiserver, kube-controller-manager
# and kube-scheduler, the peers scripts/peers.sh built (v1.37.2, etcd v3.7.2), on 127.0.0.1 only.
#
#   scripts/realcp.sh start [--dir DIR] [--peers BINDIR] [--no-controllers] [--no-kcm]
#                           [--address IP] [--kcm-args ARGS] [--apiserver-args ARGS]
#       generates a CA and the certificates (openssl, P-256), starts the four processes on free
#       loopback ports, waits until each answers ready, and prints
#         KUBECONFIG=DIR/kubeconfig
#         realcp: ready in 5.2 s, RSS 420 MiB (etcd 40, kube-apiserver 300, ...)
#       DIR (default: a new /tmp/kcsi-realcp.XXXXXX) must not exist or be empty. The processes
#       outlive this command (own session); `stop` ends them. --no-controllers starts neither
#       kube-controller-manager nor kube-scheduler; --no-kcm starts kube-scheduler but no
#       kube-controller-manager (the caller runs its own, e.g. kcsi-controller-manager with
#       DIR/kcm.kubeconfig; nothing then makes the default ServiceAccount). --address IP: the
#       API server listens on IP (an address of this host, e.g. a bridge's, for clients in other
#       network namespaces) instead of 127.0.0.1, its certificate names it, and every kubeconfig
#       points there. --kcm-args: more flags for kube-controller-manager (blank-separated);
#       --apiserver-args: the same for kube-apiserver (e.g. a --runtime-config that switches an
#       API off).
#       On failure everything started is stopped, the
#       logs' tails are printed and DIR is removed; exit 1.
#   scripts/realcp.sh stop DIR
#       SIGTERM to each process, newest first, one at a time (SIGKILL after 10 s), then removes
#       DIR; fails if a process or a listening port is left.
#   scripts/realcp.sh rss DIR
#       prints the RSS of each running process and the total, in MiB.
#
# What the cluster is: authorization Node,RBAC; the default admission plugins (none added or
# removed); the ServiceAccount token signer and issuer (an EC key); client certificates for an
# admin (system:masters), kube-controller-manager (--use-service-account-credentials, so each
# controller runs as its own ServiceAccount under RBAC) and kube-scheduler; services in
# 10.96.0.0/16. The API server reaches kubelets (`kubectl exec`, `logs`, `port-forward`) at their
# Node's InternalIP first, with a client certificate of the CA (it does not check the kubelet's).
# DIR holds: ca.crt/ca.key, sa.key/sa.pub, the kubeconfigs (kubeconfig: admin), pids ("name pid"
# a line), ports, each process's log (NAME.log) and etcd's data.
set -euo pipefail

src="$(cd "$(dirname "$0")/.." && pwd)"
KCM_ARGS=
APISERVER_ARGS=
peers=${KCSI_PEERS:-$src/build-peers/bin}
PROG=realcp
. "$(dirname "${BASH_SOURCE[0]}")/lib_procs.sh" # free_ports, pid_ours, stop_pid, stop_dir, ...
die() { echo "$PROG: $*" >&2; exit 1; }

# ---- certificates ----
ext_file() { # kind san -> path of an openssl extension file
	local f=$D/pki/$1.ext
	case $1 in
	server) printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=%s\n' "$2" >"$f" ;;
	client) printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n' >"$f" ;;
	esac
	echo "$f"
}
gen_cert() { # name subject kind [san]
	local name=$1 subj=$2 kind=$3 san=${4:-}
	openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout "$D/pki/$name.key" -subj "$subj" -out "$D/pki/$name.csr" 2>/dev/null
	openssl x509 -req -in "$D/pki/$name.csr" -CA "$D/ca.crt" -CAkey "$D/ca.key" \
		-set_serial "0x$(openssl rand -hex 16)" -days 7 -extfile "$(ext_file "$kind" "$san")" \
		-out "$D/pki/$name.crt" 2>/dev/null
}
gen_pki() {
	mkdir -p "$D/pki"
	openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout "$D/ca.key" -out "$D/ca.crt" -subj "/CN=kcsi-realcp-ca" -days 7 \
		-addext "basicConstraints=critical,CA:TRUE" \
		-addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null
	gen_cert apiserver "/CN=kube-apiserver" server \
		"IP:127.0.0.1,IP:$ADDR,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
	gen_cert admin "/O=system:masters/CN=kubernetes-admin" client
	gen_cert kcm "/CN=system:kube-controller-manager" client
	gen_cert scheduler "/CN=system:kube-scheduler" client
	gen_cert apiserver-kubelet-client "/O=kubeadm:cluster-admins/CN=kube-apiserver-kubelet-client" client
	openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$D/sa.key" 2>/dev/null
	openssl pkey -in "$D/sa.key" -pubout -out "$D/sa.pub" 2>/dev/null
}
kubeconfig() { # file user-cert-name
	cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: realcp
  cluster:
    server: https://$ADDR:$PA
    certificate-authority-data: $(base64 -w0 "$D/ca.crt")
users:
- name: $2
  user:
    client-certificate-data: $(base64 -w0 "$D/pki/$2.crt")
    client-key-data: $(base64 -w0 "$D/pki/$2.key")
contexts:
- name: realcp
  context: {cluster: realcp, user: $2}
current-context: realcp
EOF
}


# ---- processes ----
launch() { # name args...: a new session, so the caller's signals and exit do not reach it
	local name=$1; shift
	setsid "$peers/$name" "$@" </dev/null >"$D/$name.log" 2>&1 &
	echo "$name $!" >>"$D/pids"
	wait_exec $!
}

curl_admin() { curl -sf --max-time 2 --cacert "$D/ca.crt" --cert "$D/pki/admin.crt" --key "$D/pki/admin.key" "$@"; }
ready_etcd() { curl -sf --max-time 2 "http://127.0.0.1:$PE/health" | grep -q '"health":"true"'; }
ready_apiserver() { [ "$(curl_admin "https://$ADDR:$PA/readyz")" = ok ]; }
ready_healthz() { [ "$(curl -sfk --max-time 2 "https://127.0.0.1:$1/healthz")" = ok ]; }
# kube-controller-manager's ServiceAccount controller made the default ServiceAccount, without
# which the ServiceAccount admission plugin refuses every pod.
ready_kcm() {
	ready_healthz "$PK" && curl_admin "https://$ADDR:$PA/api/v1/namespaces/default/serviceaccounts/default" >/dev/null
}
alive() { # name: still running?
	local pid
	pid=$(awk -v n="$1" '$1 == n {print $2}' "$D/pids")
	pid_ours "$pid"
}
exited() { # name: says how a process launched by this shell ended (128+N: killed by signal N)
	local pid rc
	pid=$(awk -v n="$1" '$1 == n {print $2}' "$D/pids")
	wait "$pid" 2>/dev/null
	rc=$?
	if [ $rc -gt 128 ]; then
		echo "realcp: $1 (pid $pid) exited: killed by signal $((rc - 128)) ($(kill -l $((rc - 128))))" >&2
	else
		echo "realcp: $1 (pid $pid) exited with status $rc" >&2
	fi
}
wait_ready() { # name secs check args...
	local name=$1 secs=$2; shift 2
	local end=$((SECONDS + secs))
	while [ $SECONDS -lt $end ]; do
		"$@" && return 0
		alive "$name" || { exited "$name"; return 1; }
		sleep 0.05
	done
	echo "realcp: $name not ready after ${secs}s" >&2
	return 1
}

# Newest first, one at a time: kube-apiserver's shutdown writes to etcd (its identity Lease), so
# etcd must outlive it, and the controllers must not keep it draining their requests.
stop_all() { # -> 0 if nothing is left
	local name pid left=0
	[ -f "$D/pids" ] || return 0
	while read -r name pid; do stop_pid "$name" "$pid" 10; done < <(tac "$D/pids")
	none_left || left=1
	if [ -f "$D/ports" ]; then
		local p
		for p in $(cat "$D/ports"); do
			if ss -Hltn "sport = :$p" | grep -q .; then echo "realcp: port $p still listened on" >&2; left=1; fi
		done
	fi
	return $left
}

cmd_start() {
	local nocontrollers=0 nokcm=0
	D=
	ADDR=127.0.0.1
	while [ $# -gt 0 ]; do
		case $1 in
		--dir) D=$(realpath -m "$2"); shift 2 ;;
		--peers) peers=$2; shift 2 ;;
		--no-controllers) nocontrollers=1; shift ;;
		--no-kcm) nokcm=1; shift ;;
		--address) ADDR=$2; shift 2 ;;
		--kcm-args) KCM_ARGS=$2; shift 2 ;;
		--apiserver-args) APISERVER_ARGS=$2; shift 2 ;;
		*) die "unknown argument to start: $1 (start [--dir DIR] [--peers BINDIR] [--no-controllers] [--no-kcm] [--address IP] [--kcm-args ARGS] [--apiserver-args ARGS])" ;;
		esac
	done
	local b
	for b in etcd kube-apiserver kube-controller-manager kube-scheduler; do
		[ -x "$peers/$b" ] || die "$peers/$b is missing: run scripts/peers.sh (or pass --peers)"
	done
	for b in openssl python3 curl ss setsid; do command -v $b >/dev/null || die "$b is needed"; done
	if [ -z "$D" ]; then D=$(mktemp -d /tmp/kcsi-realcp.XXXXXX)
	else
		[ ! -e "$D" ] || [ -z "$(ls -A "$D")" ] || die "$D exists and is not empty"
		mkdir -p "$D"
	fi
	local t0 ok=1
	t0=$(date +%s.%N)
	trap 'stop_all || true; rm -rf "$D"; exit 1' INT TERM
	gen_pki
	read -r PE PP PA PK PS < <(free_ports 5)
	echo "$PE $PP $PA $PK $PS" >"$D/ports"
	kubeconfig "$D/kubeconfig" admin
	kubeconfig "$D/kcm.kubeconfig" kcm
	kubeconfig "$D/scheduler.kubeconfig" scheduler
	: >"$D/pids"

	launch etcd --name realcp --data-dir "$D/etcd" \
		--listen-client-urls "http://127.0.0.1:$PE" --advertise-client-urls "http://127.0.0.1:$PE" \
		--listen-peer-urls "http://127.0.0.1:$PP" --initial-advertise-peer-urls "http://127.0.0.1:$PP" \
		--initial-cluster "realcp=http://127.0.0.1:$PP" --unsafe-no-fsync --log-level warn
	# shellcheck disable=SC2086 # --apiserver-args: more flags, split on blanks
	launch kube-apiserver --etcd-servers "http://127.0.0.1:$PE" \
		--bind-address "$ADDR" --secure-port "$PA" --advertise-address "$ADDR" \
		--endpoint-reconciler-type none --cert-dir "$D/pki" \
		--tls-cert-file "$D/pki/apiserver.crt" --tls-private-key-file "$D/pki/apiserver.key" \
		--client-ca-file "$D/ca.crt" --authorization-mode Node,RBAC --allow-privileged=true \
		--service-account-issuer https://kubernetes.default.svc.cluster.local \
		--service-account-key-file "$D/sa.pub" --service-account-signing-key-file "$D/sa.key" \
		--service-cluster-ip-range 10.96.0.0/16 \
		--kubelet-client-certificate "$D/pki/apiserver-kubelet-client.crt" \
		--kubelet-client-key "$D/pki/apiserver-kubelet-client.key" \
		--kubelet-preferred-address-types InternalIP,Hostname --v=1 $APISERVER_ARGS
	# kube-controller-manager and kube-scheduler read the extension-apiserver-authentication
	# ConfigMap at start, under roles the API server's bootstrap makes: they start once it is ready.
	wait_ready etcd 30 ready_etcd && wait_ready kube-apiserver 60 ready_apiserver || ok=0
	if [ $ok = 1 ] && [ $nocontrollers = 0 ] && [ $nokcm = 0 ]; then
		# shellcheck disable=SC2086 # --kcm-args: more flags, split on blanks
		launch kube-controller-manager --kubeconfig "$D/kcm.kubeconfig" \
			--authentication-kubeconfig "$D/kcm.kubeconfig" --authorization-kubeconfig "$D/kcm.kubeconfig" \
			--bind-address 127.0.0.1 --secure-port "$PK" --cert-dir "$D/pki/kcm" --leader-elect=false \
			--root-ca-file "$D/ca.crt" --service-account-private-key-file "$D/sa.key" \
			--cluster-signing-cert-file "$D/ca.crt" --cluster-signing-key-file "$D/ca.key" \
			--use-service-account-credentials=true --v=1 $KCM_ARGS
	fi
	if [ $ok = 1 ] && [ $nocontrollers = 0 ]; then
		launch kube-scheduler --kubeconfig "$D/scheduler.kubeconfig" \
			--authentication-kubeconfig "$D/scheduler.kubeconfig" --authorization-kubeconfig "$D/scheduler.kubeconfig" \
			--bind-address 127.0.0.1 --secure-port "$PS" --cert-dir "$D/pki/scheduler" --leader-elect=false --v=1
		wait_ready kube-scheduler 60 ready_healthz "$PS" || ok=0
		[ $ok = 0 ] || [ $nokcm = 1 ] || wait_ready kube-controller-manager 60 ready_kcm || ok=0
	fi
	if [ $ok = 0 ]; then
		for b in etcd kube-apiserver kube-controller-manager kube-scheduler; do
			[ -f "$D/$b.log" ] || continue
			echo "--- $b.log" >&2
			tail -n 15 "$D/$b.log" >&2
		done
		stop_all || true
		rm -rf "$D"
		exit 1
	fi
	trap - INT TERM
	echo "KUBECONFIG=$D/kubeconfig"
	echo "realcp: ready in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}') s, $(rss_line)"
}

cmd_stop() {
	[ $# = 1 ] || die "usage: stop DIR"
	D=$(realpath -m "$1")
	[ -d "$D" ] || die "$D is not a directory"
	[ -f "$D/ports" ] || [ -f "$D/pids" ] || die "$D is not a realcp directory (no pids, no ports)"
	stop_dir "$D"
}

case ${1:-} in
start) shift; cmd_start "$@" ;;
stop) shift; cmd_stop "$@" ;;
rss) [ $# = 2 ] || die "usage: rss DIR"; D=$(realpath -m "$2"); [ -f "$D/pids" ] || die "no $D/pids"; echo "realcp: $(rss_line)" ;;
*) die "usage: $0 start [--dir DIR] [--peers BINDIR] [--no-controllers] [--no-kcm] [--address IP] [--kcm-args ARGS] [--apiserver-args ARGS] | stop DIR | rss DIR" ;;
esac
