#!/bin/bash
# What the kcsi-loopplugin e2e scripts driving the plugin through the kcsi CLI share (sourced;
# the script sets BIN to the built binaries and defines fail):
#   lp_wait_ready SOCK  waits until the plugin on SOCK answers Probe (the socket file appears
#                       before the server listens), else fails
#   lp_host_cleanup D   takes down what a run left on the host below folder D: every mount,
#                       deepest first, then every loop device whose backing file is below D
#                       (devices of deleted images too: the kernel names them "<path> (deleted)")

lp_wait_ready() {
	for _ in $(seq 1 200); do
		[ -S "$1" ] && "$BIN/kcsi" --endpoint "unix://$1" --timeout 5s identity probe \
			>/dev/null 2>&1 && return 0
		sleep 0.05
	done
	fail "plugin on $1 did not become ready"
}

lp_host_cleanup() {
	grep -F "$1" /proc/self/mountinfo | awk '{print $5}' | sort -r | while read -r m; do
		umount -l "$m" 2>/dev/null || true
	done
	losetup -a | grep -F "$1" | cut -d: -f1 | while read -r l; do losetup -d "$l" || true; done
}
