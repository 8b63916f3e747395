# lib_hostile.sh: the hostile-network check of one TCP listener (issue 34), sourced after
# lib_proc.sh. http_hostile.py's storm (1,000 silent connections, headers at a byte a second, 1 MB
# headers, 10,000 pipelined requests read and unread, half-closed requests) runs against it for
# HOSTILE_SECS while a legitimate GET is sent every 250 ms.
#
# free_port                      a free TCP port on 127.0.0.1
# wait_port PORT PID             waits until PORT accepts, failing if PID ends first
# settle PID                     waits until PID's thread count is steady (start-up is over)
# hostile NAME PID PORT PATH     kcsi's listener: every legitimate request answered 200 within
#                                1 s, threads and file descriptors bounded and back down after,
#                                memory bounded and back down (not in a sanitizer build: ASan
#                                keeps freed memory in quarantine)
# hostile_upstream NAME PID PORT PATH   the same storm against upstream's binary: figures only
# reopen NAME KIND PORT PATH     64 silent connections re-opened as they drop, 8 probes a second
#                                apart (issue 34's case); kcsi must answer 8 of 8
# Each prints "hostile NAME (kcsi|upstream): key=value ..." for the README's hardening table.
HOSTILE_SECS=${HOSTILE_SECS:-8}
HOSTILE_PY="$KCSI_SRC/tests/e2e/http_hostile.py"

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

wait_port() {
	local i
	for i in $(seq 1 200); do
		kill -0 "$2" 2>/dev/null || { fail "pid $2 ended before listening on $1"; return 1; }
		python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1",int(sys.argv[1])),0.2).close()' \
			"$1" 2>/dev/null && return 0
		sleep 0.05
	done
	fail "nothing listens on $1 after 10 s"
	return 1
}

# settle PID: waits (up to 10 s) until PID's thread and open-file counts have not changed for a
# second, so that a component still starting its controllers is not counted against the storm
settle() {
	local last=-1 now same=0 i
	for i in $(seq 1 100); do
		# threads and open files: a component that starts informers late (snapshot-controller's
		# group kinds, on by default since v8.7) opens their watches after its threads settle
		now="$(awk '/^Threads:/ {print $2}' "/proc/$1/status" 2>/dev/null) $(ls "/proc/$1/fd" 2>/dev/null | wc -l)"
		if [ "$now" = "$last" ]; then same=$((same + 1)); else same=0; fi
		[ $same -ge 10 ] && return 0
		last=$now
		sleep 0.1
	done
}

sanitized() { grep -q __asan_init "$1" 2>/dev/null; }

# storm NAME KIND PID PORT PATH: runs it, sets h_<key> for each figure
storm() {
	local out kv
	out=$(timeout $((HOSTILE_SECS + 40)) python3 "$HOSTILE_PY" storm "127.0.0.1:$4" "$5" "$3" \
		"$HOSTILE_SECS" 2>&1 | tail -1)
	echo "hostile $1 ($2): $out"
	h_ok=-1 h_probes=0
	for kv in $out; do
		case "$kv" in *=*[!0-9]*|*=) ;; [a-z]*=*) printf -v "h_${kv%%=*}" '%s' "${kv#*=}" ;; esac
	done
}

hostile_upstream() {
	settle "$2"
	storm "$1" upstream "$2" "$3" "$4"
	kill -0 "$2" 2>/dev/null || fail "upstream $1 died under the storm"
}

hostile() {
	local name=$1 pid=$2 bin
	bin=$(readlink -f "/proc/$pid/exe")
	settle "$pid"
	storm "$name" kcsi "$pid" "$3" "$4"
	kill -0 "$pid" 2>/dev/null || { fail "$name died under the storm"; return; }
	[ "$h_probes" -ge 10 ] && [ "$h_ok" -eq "$h_probes" ] ||
		fail "$name: $h_ok of $h_probes legitimate requests answered 200 within 1 s"
	[ "${h_worst_ms:-9999}" -lt 1000 ] || fail "$name: a legitimate request took ${h_worst_ms:-?} ms"
	[ "${h_after_status:-0}" = 200 ] || fail "$name: no 200 after the storm"
	# no thread per connection: a thousand connections add none (+2: a worker the component
	# starts on its own); all back at the end
	[ "$h_threads_peak" -le $((h_threads_before + 2)) ] ||
		fail "$name: threads $h_threads_before -> $h_threads_peak under the storm"
	[ "$h_threads_after" -le $((h_threads_before + 2)) ] ||
		fail "$name: threads $h_threads_before -> $h_threads_after after the storm"
	[ "$h_fds_after" -le $((h_fds_before + 4)) ] ||
		fail "$name: file descriptors $h_fds_before -> $h_fds_after after the storm"
	sanitized "$bin" && return
	[ "$h_rss_kb_peak" -le $((h_rss_kb_before + 32768)) ] ||
		fail "$name: RSS $h_rss_kb_before -> $h_rss_kb_peak KiB under the storm"
	[ "$h_rss_kb_after" -le $((h_rss_kb_before + 8192)) ] ||
		fail "$name: RSS $h_rss_kb_before -> $h_rss_kb_after KiB after the storm"
}

reopen() {
	local out
	out=$(timeout 60 python3 "$HOSTILE_PY" reopen "127.0.0.1:$3" "$4" 64 8 2>&1 | tail -1)
	echo "reopen $1 ($2): $out"
	[ "$2" = upstream ] && return
	case "$out" in answered=8\ probes=8\ *) ;; *) fail "$1: 64 re-opened silent connections: $out" ;; esac
}
