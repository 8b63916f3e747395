# lib_realcp.sh: a real control plane (scripts/realcp.sh: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler v1.37.2 from the peers) for an e2e scenario (sourced,
# not run). Source it after the library that sets $T and fail() (lib_proc.sh, lib_emulator.sh):
# its EXIT trap stops the control plane before the one already set runs.
#
# realcp_start [args...]  scripts/realcp.sh start [args]; sets RCP (its dir), RKC (the admin
#                         kubeconfig), RS (the server URL), RCP_READY (seconds), RCP_RSS (MiB);
#                         prints the cost line; exits the scenario if it cannot start
# realcp_stop             scripts/realcp.sh stop: fails the scenario if a process, a port or
#                         the dir is left
# realcp_curl ARGS...     curl as the cluster's admin (client certificate), e.g.
#                         realcp_curl -X POST "$RS/api/v1/..."
# realcp_missing_peers    true (with a message) when the peers are not built
: "${KCSI_SRC:?}"
RCP=""
RKC=""
RS=""
realcp_peers=${KCSI_PEERS:-$KCSI_SRC/build-peers/bin}
realcp_missing_peers() {
	local b
	for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl; do
		if [ ! -x "$realcp_peers/$b" ]; then
			echo "realcp: $realcp_peers/$b is missing: run scripts/peers.sh (make peers)" >&2
			return 0
		fi
	done
	return 1
}
realcp_start() {
	local out
	if ! out=$(bash "$KCSI_SRC/scripts/realcp.sh" start --peers "$realcp_peers" "$@" 2>"$T/realcp.err"); then
		echo "FAIL: the real control plane did not start:" >&2
		cat "$T/realcp.err" >&2
		exit 1
	fi
	RKC=$(echo "$out" | sed -n 's/^KUBECONFIG=//p')
	RCP=$(dirname "$RKC")
	RS=$(awk '/server:/ {print $2; exit}' "$RKC")
	echo "$out" | grep '^realcp:'
	RCP_READY=$(echo "$out" | sed -n 's/.*ready in \([0-9.]*\) s.*/\1/p')
	RCP_RSS=$(echo "$out" | sed -n 's/.*RSS \([0-9]*\) MiB.*/\1/p')
}
realcp_stop() {
	[ -n "$RCP" ] || return 0
	local d=$RCP
	RCP=""
	bash "$KCSI_SRC/scripts/realcp.sh" stop "$d" || fail "realcp stop left something behind"
}
realcp_curl() {
	curl -s --cacert "$RCP/ca.crt" --cert "$RCP/pki/admin.crt" --key "$RCP/pki/admin.key" "$@"
}
realcp_cleanup() {
	if [ -n "$RCP" ]; then
		bash "$KCSI_SRC/scripts/realcp.sh" stop "$RCP" >/dev/null 2>&1
		RCP=""
	fi
}
_realcp_prev_trap=$(trap -p EXIT | sed "s/^trap -- '\(.*\)' EXIT\$/\1/")
# shellcheck disable=SC2064
trap "realcp_cleanup; $_realcp_prev_trap" EXIT
