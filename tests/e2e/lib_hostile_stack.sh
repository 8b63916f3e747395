# lib_hostile_stack.sh: what the hostile_* scenarios of the Kubernetes-facing components share
# (sourced after lib_proc.sh and lib_hostile.sh): kube-emulator ($KC) and csi-testdriver ($SOCK),
# and listener NAME PATH BIN FLAG...: starts BIN with FLAG... where @PORT@ stands for a free port,
# waits for that port, runs the storm (hostile, or hostile_upstream when NAME starts with
# "upstream ") and, when REOPEN is set, the 64 re-opened silent connections, and stops it.
"$KCSI_BIN/kube-emulator" --listen 127.0.0.1:0 --write-kubeconfig "$T/kubeconfig" >"$T/emu.log" 2>&1 &
PIDS+=($!)
wait_for "kube-emulator" 10 test -s "$T/kubeconfig"
KC=$T/kubeconfig
SOCK=$T/csi.sock
"$KCSI_TESTS/csi-testdriver" --endpoint "unix://$SOCK" >"$T/drv.log" 2>&1 &
PIDS+=($!)
wait_for "driver socket" 10 test -S "$SOCK"

listener() {
	local name=$1 path=$2 bin=$3 port pid log
	shift 3
	port=$(free_port)
	log="$T/$(echo "$name" | tr -c 'a-z0-9\n' '_').log"
	"$bin" "${@//@PORT@/$port}" >"$log" 2>&1 &
	pid=$!; PIDS+=($pid)
	if wait_port "$port" $pid; then
		case "$name" in
		upstream\ *) hostile_upstream "$name" $pid "$port" "$path"
			[ -n "${REOPEN:-}" ] && reopen "$name" upstream "$port" "$path" ;;
		*) hostile "$name" $pid "$port" "$path"
			[ -n "${REOPEN:-}" ] && reopen "$name" kcsi "$port" "$path" ;;
		esac
	else
		tail -5 "$log"
	fi
	kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null
}

# upstream BIN: the peer's path; empty, and a failure counted, when scripts/peers.sh did not build
# it (the side-by-side figures are what the test is for)
upstream() {
	if [ -x "${KCSI_PEERS:-}/$1" ]; then echo "$KCSI_PEERS/$1"; else
		echo "FAIL: upstream $1 is not in KCSI_PEERS (${KCSI_PEERS:-unset}); run scripts/peers.sh" >&2
		return 1
	fi
}
