# lib_kids.sh: signalling the processes a scenario started (sourced by lib_proc.sh and
# lib_emulator.sh, the libraries every scenario starts from).
#
# pid_is_ours PID [DIR]  true while PID is a child of this shell or, with DIR, a process whose
#                        command line names DIR/ (a component a fixture such as realcp.sh
#                        started for this scenario)
# kill_kids SIG PID...   sends SIG to each PID that is still a child of this shell; a PID that
#                        exited and was waited for is left alone
# kill_ours SIG DIR PID...
#                        the same for each PID that pid_is_ours PID DIR
#
# A cleanup trap signals every PID the scenario ever started, many of them long gone. This
# machine's kernel.pid_max is 32768 and make test starts thousands of processes a minute, so a
# PID comes back within minutes as another test's process, which such a signal would end (or
# stop) without a word in its log. A zombie (exited, not yet waited for) is still a child and
# takes the signal harmlessly.
pid_is_ours() {
	local st f
	case $1 in '' | *[!0-9]*) return 1 ;; esac
	st=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	# the fields after the command name, which may hold blanks and parentheses: state ppid ...
	read -r -a f <<<"${st##*) }"
	[ "${f[1]:-}" = "$$" ] && return 0
	[ -n "${2:-}" ] && tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -qF -- "$2/"
}
kill_kids() {
	local sig=$1 p
	shift
	for p in "$@"; do
		pid_is_ours "$p" && kill "$sig" "$p" 2>/dev/null
	done
	return 0
}
kill_ours() {
	local sig=$1 dir=$2 p
	shift 2
	for p in "$@"; do
		pid_is_ours "$p" "$dir" && kill "$sig" "$p" 2>/dev/null
	done
	return 0
}
