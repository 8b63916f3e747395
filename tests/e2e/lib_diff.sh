# lib_diff.sh: drop-in differential scenarios (sourced after lib_emulator.sh, lib_attacher.sh and
# lib_provisioner.sh). A scenario runs the same story twice against one kube-emulator and one
# driver: first with upstream's binary (KCSI_PEERS, built by scripts/peers.sh), then with kcsi's
# (KCSI_BIN), with the same flags. Every name a side makes carries its tag ($TAG; namespaced
# objects live in $NS), so both runs sit side by side in the server; at each step the scenario
# dumps the objects it cares about, and diff_check compares the two sides field by field
# (tests/e2e/diff_norm.py says how names, UIDs, handles and times are normalised) against the
# differences docs/compatibility.md lists under "Objects and events": a difference not listed,
# or a listed one that did not happen, fails the scenario.
#
# diff_side SIDE               upstream | kcsi: sets SIDE, SBIN (its binaries), TAG, NS, and
#                              creates the namespace $NS
# diff_start NAME BIN [flags]  $SBIN/BIN as process NAME (ATT_PIDS[NAME]), log $T/NAME-$SIDE.log
# diff_stop NAME               SIGTERM; kcsi's must exit 0 (upstream's die of the signal: 143)
# diff_snap STEP KIND...       once the objects stop changing (the components' follow-up writes
#                              done; 5 s at most), dumps the objects of each KIND (kubectl
#                              resource names) whose JSON holds $TAG, and every Event, into
#                              $T/diff/$SIDE/STEP.json
# diff_check COMPONENT         the comparison; prints its figures and the differences
: "${KCSI_PEERS:?KCSI_PEERS must point at the peers scripts/peers.sh built}"
: "${KCSI_SRC:?}"
DIFF_COMPAT="${DIFF_COMPAT:-$KCSI_SRC/docs/compatibility.md}"

# Stages and mounts a scenario made below $T go first, so the drivers can delete the volumes.
diff_cleanup() {
	grep -F "$T/" /proc/self/mountinfo | awk '{print $5}' | sort -r | while read -r m; do
		umount -l "$m" 2>/dev/null
	done
	att_cleanup
}
trap diff_cleanup EXIT

diff_side() {
	SIDE=$1
	case $SIDE in
	upstream) SBIN=$KCSI_PEERS TAG=u7x ;;
	kcsi) SBIN=$KCSI_BIN TAG=k7x ;;
	*) echo "diff_side: upstream or kcsi, not $SIDE" >&2; exit 2 ;;
	esac
	NS=ns-$TAG
	mkdir -p "$T/diff/$SIDE"
	echo "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"$NS\"}}" |
		kc create -f - >/dev/null
	echo "== $SIDE ($SBIN)"
}

diff_start() {
	local name=$1 bin=$2
	shift 2
	if [ ! -x "$SBIN/$bin" ]; then
		echo "FAIL: $SBIN/$bin is missing (upstream's: run scripts/peers.sh)" >&2
		exit 1
	fi
	"$SBIN/$bin" "$@" >>"$T/$name-$SIDE.log" 2>&1 &
	ATT_PIDS[$name]=$!
}

diff_stop() {
	local name=$1 rc=0
	kill -TERM "${ATT_PIDS[$name]}"
	wait "${ATT_PIDS[$name]}" || rc=$?
	unset "ATT_PIDS[$name]"
	[ "$SIDE" = upstream ] || check "$SIDE $name exits 0 on SIGTERM" eq "$rc" 0
}

# diff_dump KIND...: the tagged objects of the kinds, then all events, as one JSON document. One
# kubectl run for all the kinds (kubectl lists them in the order given): a snapshot is taken
# three times or more per step, and each kubectl run costs 0.2 s of CPU.
diff_dump() {
	local kinds
	kinds=$(IFS=,; echo "$*,events")
	kc get "$kinds" -A -o json | jq -c --arg t "$TAG" '{tag: $t,
		objects: [.items[] | select(.kind != "Event" and (tostring | contains($t)))],
		events: [.items[] | select(.kind == "Event")]}'
}

# diff_snap STEP KIND...: waits (5 s at most) until two dumps 0.7 s apart agree, and keeps the last
diff_snap() {
	local step=$1 a b end=$((SECONDS + 5)) cur
	shift
	cur=$(diff_dump "$@")
	a=$(jq -c 'del(.events[].lastTimestamp)' <<<"$cur" | md5sum)
	while [ $SECONDS -lt $end ]; do
		sleep 0.7
		cur=$(diff_dump "$@")
		b=$(jq -c 'del(.events[].lastTimestamp)' <<<"$cur" | md5sum)
		[ "$a" = "$b" ] && break
		a=$b
	done
	printf '%s\n' "$cur" >"$T/diff/$SIDE/$step.json"
}

diff_check() {
	local out
	out=$(python3 "$KCSI_SRC/tests/e2e/diff_norm.py" compare "$T/diff" "$1" "$DIFF_COMPAT")
	local rc=$?
	echo "$out"
	[ $rc -eq 0 ] || fail "$1 differs from upstream in ways docs/compatibility.md does not list (above)"
}
