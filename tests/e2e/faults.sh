#!/bin/bash
# e2e: faults between hosts (issue 35; docs/faults.md). One bed (tests/e2e/lib_hosts.sh: hosts as
# network namespaces, the real control plane on the bridge) with the controller manager CM, then
# the scenarios named, each with its own claim and pods, each healing what it broke:
#   faults.sh CM SCENARIO...   CM: kcsi (kcsi-controller-manager, --max-wait-for-unmount 20s)
#                                  | real (kube-controller-manager v1.37.2: 6 min, no flag)
#   stop   a host with a mounted volume is killed (-9, mounts stay): its pod (tolerationSeconds
#          10) is evicted, the volume detached (kcsi: the Terminating pod keeps it, as
#          upstream, until force-deleted (force_delete), then after max-wait-for-unmount; real: the
#          6 min are out of reach, so: nothing detached for 30 s, then the out-of-service taint),
#          the replacement pod runs on the other host and reads what was written before; the
#          host comes back and kcsi-node unmounts and unstages what no pod uses any more
#   heal   a host cut off (iptables DROP) for 15 s, less than its pod's toleration: no eviction,
#          no detach, no unpublish, the data intact
#   cut    a host cut off beyond its pod's toleration: eviction, replacement on the other host
#          (kcsi: forced detach after max-wait; real: nothing detached while cut, detached when
#          the healed host's kcsi-node reports the volume unmounted), the healed host unmounts
#          and never mounts the volume again
#   oos    non-graceful shutdown: host killed, node.kubernetes.io/out-of-service taint: the pod
#          goes and the volume is detached at once
#   zone   (3 hosts: host-1 and host-2 in zone-a, host-3 in zone-b) all of zone-a cut off:
#          zone-a is FullDisruption while zone-b is Normal, so upstream's handleDisruption
#          keeps zone-a's NoExecute tainter at --node-eviction-rate (HealthyQPSFunc, 0.1/s,
#          burst 1): both zone-a pods (tolerationSeconds 10) evicted, the second at least 5 s
#          after the first, zone-b's pod kept; then every host cut off (all zones
#          FullDisruption: evictions stop, taints removed): no pod evicted for 35 s
#   rwop   a ReadWriteOncePod claim used by a pod on host-1: a second pod with nodeName host-1
#          is refused (FailedMount, not Running), a third is not scheduled (FailedScheduling);
#          the first deleted, the second runs and reads its data; the second deleted, the
#          scheduler places the third (nodeSelector host-2), which runs and reads the data
#   pause  host-1's processes stopped (SIGSTOP) beyond its pod's toleration: as cut (kcsi:
#          forced detach after max-wait; real: nothing detached while paused, detached once
#          resumed); the resumed host never mounts the volume again
#   apiserver  kube-apiserver killed and restarted while a pod's volume attaches: it runs
#   cmkill the controller manager killed during a forced detach and started again: the detach
#          still comes, and not before max-wait-for-unmount (real: out-of-service after restart)
# Each scenario ends with tests/e2e/faults_check.py over every host's driver log (no
# ReadWriteOncePod volume in two pods, no single-node volume on two hosts at once except a
# forced detach after max-wait or out-of-service) and the leak check (no VolumeAttachment, mount
# or loop device of its claim). Prints a line "FIGURES cm=.. scenario=.. evict=.. reattach=.."
# per scenario (seconds from the fault) and a line "WRITES cm=.. scenario=.. total=.. ..." (the
# API server's write requests during the scenario, from its apiserver_request_total), both
# appended to $KCSI_FAULTS_FIGURES if set. With the zone scenario the bed has 3 hosts, else 2.
set -u
: "${KCSI_BIN:?}" "${KCSI_SRC:?}"
CM=${1:?usage: faults.sh kcsi|real SCENARIO...}
shift
. "$(dirname "$0")/lib_proc.sh" "faults-$CM"
. "$(dirname "$0")/lib_realcp.sh"
. "$(dirname "$0")/lib_hosts.sh"
realcp_missing_peers && exit 1
# a SIGTERM (ctest's timeout, ^C) runs the EXIT traps: nothing of the bed is left
trap 'exit 143' TERM INT
t_start=$SECONDS
MAX_WAIT=20s
# kcsi-controller-manager without taint-based eviction (issue 35 part 1) evicts nothing: the
# scenarios then delete the pod as the eviction would, and say so (GAP).
EVICTS=1
[ "$CM" = kcsi ] && ! "$KCSI_BIN/kcsi-controller-manager" --help 2>&1 | grep -q node-eviction-rate && EVICTS=0

NHOSTS=2
case " $* " in *" zone "*) NHOSTS=3 BED_ZONES="zone-a zone-a zone-b" ;; esac
bed_up "$CM" $NHOSTS || { fail "the bed did not come up"; exit 1; }
echo "faults: bed up in $((SECONDS - t_start)) s (cm=$CM, $NHOSTS hosts)"

secs() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.1f", b - a}'; }
figures() { # scenario key=value...
	local l="FIGURES cm=$CM scenario=$*"
	echo "$l"
	[ -n "${KCSI_FAULTS_FIGURES:-}" ] && echo "$l" >>"$KCSI_FAULTS_FIGURES"
	true
}
# write_data POD CLAIM / data_is POD CLAIM: the file written before a fault, and read after
# (in the pod's host's mount namespace; written through and synced, as a database commits)
write_data() {
	exec_in "$(pod_node "$1")" sh -c 'echo "written by $1" >"$2/data.txt" && sync "$2/data.txt"' _ "$1" "$(pod_dir "$1" "$2")"
}
data_is() { [ "$(exec_in "$(pod_node "$1")" cat "$(pod_dir "$1" "$2")/data.txt" 2>/dev/null)" = "written by $3" ]; }
host_clean() { [ -z "$(host_mounts "$1")" ]; }
# evicted POD SECS: waits for the pod's deletion by the cluster; journals it; 1 when none came
evicted() {
	local p=$1 secs=$2 end=$((SECONDS + $2))
	while [ $SECONDS -lt $end ]; do
		if pod_deleting "$p" || pod_gone "$p"; then
			journal deleted host="$(cat "$T/node.$p")" pod="$p"
			return 0
		fi
		sleep 0.1
	done
	return 1
}
# evict_or_delete POD SECS: evicted, or (kcsi without eviction) the test deletes it; sets T_EVICT
evict_or_delete() {
	# without eviction, wait what a toleration of 10 s after the node goes Unknown (10 s) is
	local secs=$2
	[ $EVICTS = 1 ] || secs=20
	if evicted "$1" "$secs"; then
		T_EVICT=$(now)
		return 0
	fi
	if [ $EVICTS = 1 ]; then
		fail "pod/$1 not evicted within $2 s of its host's fault"
		return 1
	fi
	echo "GAP: kcsi-controller-manager has no taint-based eviction (issue 35 part 1): the test deletes pod/$1 as the eviction would"
	T_EVICT=
	K delete pod "$1" --wait=false >/dev/null
	evicted "$1" 5
}
# force_delete POD CLAIM HOST (kcsi): as upstream's attach/detach controller, kcsi's keeps the
# volume of an evicted pod whose node went silent while its containers ran (the pod stays
# Terminating: it is not terminated), so nothing is detached by eviction alone; the operator
# force-deletes the pod (kubectl delete --force), and the volume is detached
# max-wait-for-unmount after that (upstream: 6 min, out of reach: the real branch uses the
# out-of-service taint instead). Checks the volume is still attached 5 s into the Terminating.
force_delete() {
	sleep 5
	va_on "$2" "$3" || fail "the volume of $2 was detached from $3 while pod/$1 was Terminating with running containers (upstream keeps it attached)"
	K delete pod "$1" --force --grace-period=0 >/dev/null 2>&1
	journal deleted host="$3" pod="$1"
	echo "faults: pod/$1 force-deleted (Terminating on $3, which cannot report it stopped)"
}
# start_writer SCENARIO HOST [TOLERATION]: claim SC-data, pod SC-w on HOST, data written
start_writer() {
	claim "$1-data" || return 1
	pod "$1-w" "$1-data" "$2" "${3:-10}"
	wait_for "pod/$1-w Running on $2" 60 pod_running "$1-w" || return 1
	echo "$2" >"$T/node.$1-w"
	write_data "$1-w" "$1-data"
}
# finish SCENARIO: pods and claim deleted, the invariants, no leak of the scenario's volume
finish() {
	K delete pod -l app=bed --grace-period=0 --force --wait=false >/dev/null 2>&1
	wait_for "the pods of $1 gone" 60 no_pods
	K delete pvc --all --wait=false >/dev/null 2>&1
	wait_for "no VolumeAttachment after $1" 60 no_vas
	wait_for "no PV after $1" 60 no_pvs
	local h
	for h in "${BED_HOSTS[@]}"; do wait_for "$h has nothing mounted after $1" 30 host_clean "$h"; done
	bed_check
	bed_leaks
}
no_pods() { [ -z "$(K get pods -o name 2>/dev/null)" ]; }
no_pvs() { [ -z "$(K get pv -o name 2>/dev/null)" ]; }
restart_host() { host_start "$1"; wait_for "node $1 Ready again" 60 node_ready "$1"; journal resume host="$1"; }

# ---- the scenarios ----
sc_stop() {
	start_writer stop host-1 || return
	local t0 t_re
	t0=$(now)
	host_stop host-1
	evict_or_delete stop-w 40 || return
	pod stop-r stop-data host-2
	if [ "$CM" = real ]; then
		sleep 30
		va_on stop-data host-1 || fail "kube-controller-manager detached from the stopped host within 30 s of the eviction (6 min expected)"
		pod_running stop-r && fail "the replacement ran while the volume was attached to the stopped host"
		taint_oos host-1
	else
		force_delete stop-w stop-data host-1
	fi
	fence host-1 stop-data 90
	wait_for "the replacement stop-r Running on host-2" 60 pod_running stop-r || return
	t_re=$(now)
	data_is stop-r stop-data stop-w || fail "stop-r does not read the data written before the fault"
	restart_host host-1
	wait_for "host-1 unmounts what no pod uses after it comes back" 30 host_clean host-1
	[ "$CM" = real ] && untaint_oos host-1
	figures "stop evict=$([ -n "$T_EVICT" ] && secs "$t0" "$T_EVICT" || echo none) reattach=$(secs "$t0" "$t_re")"
	finish stop
}
sc_heal() {
	start_writer heal host-1 300 || return
	local before
	before=$(grep -c "Unpublished volume" "$T/hosts/host-1/lp.log")
	host_cut host-1
	wait_for "host-1 NotReady while cut off" 30 node_not_ready host-1
	sleep 5
	host_heal host-1
	wait_for "host-1 Ready after the heal" 30 node_ready host-1
	pod_running heal-w || fail "heal-w is not Running after a partition shorter than its toleration"
	pod_deleting heal-w && fail "heal-w was evicted by a partition shorter than its toleration"
	va_on heal-data host-1 || fail "the volume was detached from host-1 during a short partition"
	[ "$(grep -c "Unpublished volume" "$T/hosts/host-1/lp.log")" = "$before" ] || fail "host-1 unpublished something during the partition"
	data_is heal-w heal-data heal-w || fail "heal-w's data changed"
	figures "heal evict=none reattach=none"
	finish heal
}
sc_cut() {
	start_writer cut host-1 || return
	local t0 t_re
	t0=$(now)
	host_cut host-1
	evict_or_delete cut-w 40 || return
	pod cut-r cut-data host-2
	if [ "$CM" = real ]; then
		sleep 20
		va_on cut-data host-1 || fail "kube-controller-manager detached from the cut-off host within 20 s of the eviction"
		host_heal host-1
	else
		force_delete cut-w cut-data host-1
		fence host-1 cut-data 90
	fi
	wait_for "the replacement cut-r Running on host-2" 90 pod_running cut-r || return
	t_re=$(now)
	data_is cut-r cut-data cut-w || fail "cut-r does not read the data written before the fault"
	[ "$CM" = kcsi ] && host_heal host-1
	wait_for "host-1 unmounts what no pod uses after the heal" 30 host_clean host-1
	sleep 3
	host_clean host-1 || fail "host-1 mounted the volume again after the heal: $(host_mounts host-1)"
	figures "cut evict=$([ -n "$T_EVICT" ] && secs "$t0" "$T_EVICT" || echo none) reattach=$(secs "$t0" "$t_re")"
	finish cut
}
sc_oos() {
	start_writer oos host-1 300 || return
	local t0 t_re t_gone
	t0=$(now)
	host_stop host-1
	wait_for "host-1 NotReady" 30 node_not_ready host-1
	taint_oos host-1
	fence host-1 oos-data 30 &
	local fp=$!
	# upstream's pod GC deletes a terminating pod of an out-of-service node at once; kcsi's
	# controller manager has no pod GC: the test deletes it after 2 s
	local w=20
	[ $EVICTS = 1 ] || w=2
	if ! evicted oos-w $w; then
		[ $EVICTS = 0 ] || fail "oos-w not deleted within 20 s of the out-of-service taint"
		[ $EVICTS = 0 ] && echo "GAP: kcsi-controller-manager evicts nothing for out-of-service: the test deletes oos-w" &&
			K delete pod oos-w --wait=false >/dev/null && evicted oos-w 5
	fi
	t_gone=$(now)
	pod oos-r oos-data host-2
	wait $fp
	wait_for "the replacement oos-r Running on host-2" 60 pod_running oos-r || return
	t_re=$(now)
	data_is oos-r oos-data oos-w || fail "oos-r does not read the data written before the fault"
	restart_host host-1
	wait_for "host-1 unmounts what no pod uses after it comes back" 30 host_clean host-1
	untaint_oos host-1
	figures "oos evict=$(secs "$t0" "$t_gone") reattach=$(secs "$t0" "$t_re")"
	finish oos
}
# deletions POD...: "POD SECONDS-SINCE-EPOCH" for each pod now being deleted (or gone)
deletions() {
	K get pods -o json | jq -r --argjson want "$(printf '%s\n' "$@" | jq -R . | jq -s .)" '
		($want - [.items[].metadata.name]) as $gone
		| ([.items[] | select(.metadata.deletionTimestamp != null) | .metadata.name] + $gone)[]
		| select(. as $n | $want | index($n))'
}
sc_zone() {
	local h p t0 t1= t2= t3= gone
	claim zone-a1 && claim zone-a2 && claim zone-b1 || return
	pod zone-w1 zone-a1 host-1 10
	pod zone-w2 zone-a2 host-2 10
	pod zone-w3 zone-b1 host-3 10
	for p in 1 2 3; do
		wait_for "zone-w$p Running" 60 pod_running "zone-w$p" || return
		echo "host-$p" >"$T/node.zone-w$p"
	done
	# 1: all of zone-a cut off, zone-b up
	t0=$(now)
	host_cut host-1
	host_cut host-2
	local end=$((SECONDS + 60))
	while [ $SECONDS -lt $end ] && { [ -z "$t1" ] || [ -z "$t2" ]; }; do
		gone=$(deletions zone-w1 zone-w2 zone-w3)
		for p in $gone; do
			case $p in
			zone-w1) [ -z "$t1" ] && t1=$(now) && journal deleted host=host-1 pod=zone-w1 ;;
			zone-w2) [ -z "$t2" ] && t2=$(now) && journal deleted host=host-2 pod=zone-w2 ;;
			zone-w3) [ -z "$t3" ] && t3=$(now) ;;
			esac
		done
		sleep 0.2
	done
	[ -n "$t1" ] && [ -n "$t2" ] || fail "zone-a fully cut off while zone-b is up: both zone-a pods should be evicted at --node-eviction-rate within 60 s (zone-w1 $([ -n "$t1" ] && echo evicted || echo kept), zone-w2 $([ -n "$t2" ] && echo evicted || echo kept))"
	[ -z "$t3" ] || fail "zone-w3 evicted although host-3 (zone-b) was never cut off"
	local e1=none e2=none gap=none
	[ -n "$t1" ] && e1=$(secs "$t0" "$t1")
	[ -n "$t2" ] && e2=$(secs "$t0" "$t2")
	if [ -n "$t1" ] && [ -n "$t2" ]; then
		gap=$(awk -v a="$t1" -v b="$t2" 'BEGIN {d = b - a; if (d < 0) d = -d; printf "%.1f", d}')
		# the second node's NoExecute taint waits for a token of zone-a's bucket (0.1/s, burst 1)
		awk -v g="$gap" 'BEGIN {exit !(g >= 5)}' ||
			fail "the two zone-a evictions came $gap s apart: the eviction rate (0.1 node/s) lets the second node's taint come no sooner than ~10 s after the first"
	fi
	echo "zone: zone-a cut off, zone-b up: evictions at $e1 s (host-1) and $e2 s (host-2), $gap s apart"
	host_heal host-1
	host_heal host-2
	for h in host-1 host-2; do wait_for "$h Ready after the heal" 30 node_ready "$h"; done
	# 2: every host cut off: all zones FullDisruption, no eviction
	claim zone-a3 || return
	pod zone-v1 zone-a3 host-1 10
	wait_for "zone-v1 Running" 60 pod_running zone-v1 || return
	echo host-1 >"$T/node.zone-v1"
	wait_for "zone-w1 and zone-w2 gone after the heal" 60 pods_gone zone-w1 zone-w2
	for h in "${BED_HOSTS[@]}"; do host_cut "$h"; done
	sleep 35
	gone=$(deletions zone-v1 zone-w3)
	for h in "${BED_HOSTS[@]}"; do host_heal "$h"; done
	[ -z "$gone" ] || fail "evicted while every zone was cut off from the control plane: $gone"
	for h in "${BED_HOSTS[@]}"; do wait_for "$h Ready after the heal" 30 node_ready "$h"; done
	sleep 2
	pod_running zone-v1 && pod_running zone-w3 || fail "zone-v1 or zone-w3 not Running after the heal"
	figures "zone evict1=$e1 evict2=$e2 gap=$gap zoneb=$([ -n "$t3" ] && echo evicted || echo kept) all=$([ -n "$gone" ] && echo evicted || echo none)"
	finish zone
}
pods_gone() { local p; for p; do pod_gone "$p" || return 1; done; }
sc_rwop() {
	claim rwop-data ReadWriteOncePod || return
	pod rwop-a rwop-data host-1
	wait_for "rwop-a Running on host-1" 60 pod_running rwop-a || return
	echo host-1 >"$T/node.rwop-a"
	write_data rwop-a rwop-data
	POD_NODENAME=host-1 pod rwop-b rwop-data
	# rwop-c on host-2 by nodeSelector (still placed by the scheduler): the claim moves hosts
	pod rwop-c rwop-data host-2
	wait_for "a FailedMount event of rwop-b" 40 has_event rwop-b FailedMount ||
		fail "rwop-b (nodeName host-1, the claim in use by rwop-a) has no FailedMount event"
	echo "rwop: rwop-b: $(event_msg rwop-b FailedMount)"
	pod_running rwop-b && fail "rwop-b Running while rwop-a uses the ReadWriteOncePod claim"
	wait_for "a FailedScheduling event of rwop-c" 30 has_event rwop-c FailedScheduling ||
		fail "rwop-c has no FailedScheduling event"
	event_msg rwop-c FailedScheduling | grep -q ReadWriteOncePod ||
		fail "rwop-c's FailedScheduling does not name ReadWriteOncePod: $(event_msg rwop-c FailedScheduling)"
	[ -z "$(pod_node rwop-c)" ] || fail "the scheduler placed rwop-c on $(pod_node rwop-c)"
	K delete pod rwop-a --wait=false >/dev/null
	wait_for "rwop-b Running once rwop-a is gone" 90 pod_running rwop-b || return
	echo host-1 >"$T/node.rwop-b"
	data_is rwop-b rwop-data rwop-a || fail "rwop-b does not read rwop-a's data"
	[ -z "$(pod_node rwop-c)" ] || fail "the scheduler placed rwop-c while rwop-b uses the claim"
	# rwop-c still waits for the claim: freed, kube-scheduler places it (its VolumeRestrictions
	# plugin requeues the pod when a pod of the claim is deleted). Done here rather than left to
	# finish, whose force-deletes would free the claim a few ms before rwop-c's own deletion, so
	# the scheduler's bind of rwop-c would race them and the scenario's writes be 1 or 2 binds.
	local t0 t_re
	t0=$(now)
	K delete pod rwop-b --wait=false >/dev/null
	wait_for "rwop-c placed once rwop-b is gone" 60 pod_placed rwop-c || return
	pod_gone rwop-b || fail "the scheduler placed rwop-c while rwop-b (Terminating) still held the claim"
	wait_for "rwop-c Running" 90 pod_running rwop-c || return
	t_re=$(now)
	pod_node rwop-c >"$T/node.rwop-c"
	data_is rwop-c rwop-data rwop-a || fail "rwop-c does not read rwop-a's data"
	figures "rwop evict=none reattach=$(secs "$t0" "$t_re")"
	finish rwop
}
pod_placed() { [ -n "$(pod_node "$1" 2>/dev/null)" ]; }
has_event() { [ -n "$(event_msg "$1" "$2")" ]; }
event_msg() {
	K get events --field-selector "involvedObject.name=$1,reason=$2" -o jsonpath='{.items[*].message}' 2>/dev/null
}
sc_pause() {
	start_writer pause host-1 || return
	local t0 t_re
	t0=$(now)
	host_pause host-1
	evict_or_delete pause-w 40 || return
	pod pause-r pause-data host-2
	if [ "$CM" = real ]; then
		sleep 20
		va_on pause-data host-1 || fail "kube-controller-manager detached from the paused host within 20 s of the eviction"
		host_resume host-1
	else
		force_delete pause-w pause-data host-1
		fence host-1 pause-data 90
	fi
	wait_for "the replacement pause-r Running on host-2" 90 pod_running pause-r || return
	t_re=$(now)
	data_is pause-r pause-data pause-w || fail "pause-r does not read the data written before the fault"
	[ "$CM" = kcsi ] && host_resume host-1
	wait_for "host-1 Ready after it resumes" 30 node_ready host-1
	wait_for "host-1 unmounts what no pod uses after it resumes" 30 host_clean host-1
	sleep 3
	host_clean host-1 || fail "host-1 mounted the volume again after it resumed: $(host_mounts host-1)"
	figures "pause evict=$([ -n "$T_EVICT" ] && secs "$t0" "$T_EVICT" || echo none) reattach=$(secs "$t0" "$t_re")"
	finish pause
}
sc_apiserver() {
	claim api-data || return
	local t0 t_re
	t0=$(now)
	pod api-w api-data host-2
	wait_for "a VolumeAttachment for api-w" 30 va_on api-data host-2
	apiserver_restart
	wait_for "api-w Running after the API server's restart" 90 pod_running api-w || return
	t_re=$(now)
	echo host-2 >"$T/node.api-w"
	write_data api-w api-data
	data_is api-w api-data api-w || fail "api-w cannot write its volume"
	figures "apiserver evict=none reattach=$(secs "$t0" "$t_re")"
	finish api
}
sc_cmkill() {
	start_writer cmk host-1 || return
	local t0 t_re
	t0=$(now)
	host_stop host-1
	evict_or_delete cmk-w 40 || return
	pod cmk-r cmk-data host-2
	[ "$CM" = kcsi ] && force_delete cmk-w cmk-data host-1
	sleep 8
	cm_kill
	sleep 2
	cm_start
	if [ "$CM" = real ]; then
		sleep 10
		va_on cmk-data host-1 || fail "kube-controller-manager detached from the stopped host within 20 s of the eviction"
		taint_oos host-1
	fi
	fence host-1 cmk-data 90
	wait_for "the replacement cmk-r Running on host-2 after the restart" 60 pod_running cmk-r || return
	t_re=$(now)
	data_is cmk-r cmk-data cmk-w || fail "cmk-r does not read the data written before the fault"
	restart_host host-1
	wait_for "host-1 unmounts what no pod uses after it comes back" 30 host_clean host-1
	[ "$CM" = real ] && untaint_oos host-1
	figures "cmkill evict=$([ -n "$T_EVICT" ] && secs "$t0" "$T_EVICT" || echo none) reattach=$(secs "$t0" "$t_re")"
	finish cmk
}

# writes SCENARIO BEFORE AFTER: the WRITES line (a counter that went down was reset by the API
# server's restart: its count since then)
writes() {
	local l
	l=$(awk -v cm="$CM" -v sc="$1" '
		FNR == NR { b[$1 " " $2] = $3; next }
		{ d = $3 - b[$1 " " $2]; if (d < 0) d = $3; if (d > 0) { n[$1 " " $2] = d; tot += d; if ($1 != "leases") nl += d } }
		END {
			printf "WRITES cm=%s scenario=%s total=%d non-lease=%d", cm, sc, tot, nl
			for (k in n) { split(k, kv, " "); printf " %s:%s=%d", kv[1], kv[2], n[k] }
			print ""
		}' <(echo "$2") <(echo "$3"))
	echo "$l"
	[ -n "${KCSI_FAULTS_FIGURES:-}" ] && echo "$l" >>"$KCSI_FAULTS_FIGURES"
	true
}
for s in "$@"; do
	t_s=$SECONDS
	echo "faults: scenario $s (cm=$CM)"
	w0=$(api_writes)
	"sc_$s"
	writes "$s" "$w0" "$(api_writes)"
	echo "faults: scenario $s took $((SECONDS - t_s)) s, failures so far $FAILS"
done
# KCSI_FAULTS_LOGS=DIR keeps every component's log (with timestamps) for reading afterwards
if [ -n "${KCSI_FAULTS_LOGS:-}" ]; then
	mkdir -p "$KCSI_FAULTS_LOGS" && cp -r "$T"/cm.log "$T"/ctl "$T"/hosts "$T"/journal.jsonl "$RCP"/*.log "$KCSI_FAULTS_LOGS"/ 2>/dev/null
	echo "faults: logs kept in $KCSI_FAULTS_LOGS"
fi
bed_stop
bed_netns_left && fail "a netns or the bridge is left"
realcp_stop
echo "faults: total $((SECONDS - t_start)) s"
if [ "$FAILS" -ne 0 ]; then
	for f in "$T"/cm.log "$T"/ctl/*.log "$T"/hosts/*/*.log; do
		[ -f "$f" ] || continue
		echo "---- $f (last 25 lines)" >&2
		tail -25 "$f" >&2
	done
	exit 1
fi
echo PASS
