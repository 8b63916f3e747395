# lib_procs.sh: what scripts/realcp.sh and scripts/realnode.sh share about the processes they
# start and stop. Sourced; the caller sets D (its work dir, which every process it starts names
# on its command line) and PROG (its name, the prefix of every message), keeps "name pid" lines
# in $D/pids, and defines stop_all (stops everything; 0 when nothing is left).
#
#   free_ports N   N free loopback ports, all bound at once so that they differ; another
#                  process may still take one before its server binds it (start then fails with
#                  "address already in use" in a log)
#   pid_ours PID   alive, not a zombie, and its command line names $D/ (a recycled pid is never
#                  taken for ours)
#   wait_exec PID  waits (2 s at most) until PID, just forked, has exec'd the program that names
#                  $D/: before that its command line is the forking shell's, and pid_ours would
#                  take the still-starting process for one that exited (seen under load:
#                  "realcp: kube-scheduler exited" with an empty log)
#   rss_kib PID    its resident memory in KiB (0 when gone)
#   rss_line       "RSS <total> MiB (<name> <MiB>, ...)" over $D/pids
#   stop_pid NAME PID SECS
#                  SIGTERM, then SIGKILL when PID is still ours SECS s later (said on stderr with
#                  the last lines of $D/NAME.log, when there is one)
#   none_left      0 when no process of $D/pids is ours any more; else names each on stderr
#   stop_dir DIR   the `stop DIR` command: stop_all, then DIR removed; 0 when both went well

free_ports() {
	python3 -c '
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))' "$1"
}
pid_ours() {
	local st
	st=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
	[ "$st" != Z ] || return 1
	tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -qF -- "$D/"
}
wait_exec() {
	local i
	# up to 30 s: under load (make test-stress) fork to exec took more than the 2 s this waited,
	# and a child still between the two looked like one that had exited
	for i in $(seq 1 3000); do
		[ -d "/proc/$1" ] || return 0
		tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -qF -- "$D/" && return 0
		sleep 0.01
	done
}
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
rss_line() {
	local total=0 parts="" name pid k
	while read -r name pid; do
		pid_ours "$pid" || continue
		k=$(rss_kib "$pid")
		total=$((total + k))
		parts="$parts${parts:+, }$name $((k / 1024))"
	done <"$D/pids"
	echo "RSS $((total / 1024)) MiB ($parts)"
}
stop_pid() {
	local i
	pid_ours "$2" || return 0
	kill -TERM "$2" 2>/dev/null || true
	for i in $(seq 1 $(($3 * 20))); do pid_ours "$2" || return 0; sleep 0.05; done
	echo "$PROG: $1 ($2) ignored SIGTERM for $3 s; SIGKILL" >&2
	[ ! -f "$D/$1.log" ] || { echo "$PROG: the last lines of $1.log:" >&2; tail -n 8 "$D/$1.log" >&2; }
	kill -KILL "$2" 2>/dev/null || true
	sleep 0.2
}
none_left() {
	local name pid rc=0
	while read -r name pid; do
		pid_ours "$pid" && { echo "$PROG: $name ($pid) still running" >&2; rc=1; }
	done <"$D/pids"
	return $rc
}
stop_dir() {
	local rc=0
	stop_all || rc=1
	rm -rf "$1"
	[ ! -e "$1" ] || { echo "$PROG: could not remove $1" >&2; rc=1; }
	return $rc
}
