# lib_mountns.sh: root_shared, sourced by scripts/test.sh and by the tests that make mount
# namespaces (lib_hosts.sh's hosts, images.sh's pause).
#
# A new mount namespace starts as a copy of every mount of the machine, other tests' loop volumes
# included. A slave of a shared / (what systemd sets up at boot, and what the kubelet expects)
# loses each mount the machine unmounts afterwards. A copy of a private / (a machine booted
# without systemd, as this one) keeps it, and with it the volume's loop device, until the
# namespace goes: the test that owns the volume then cannot detach it ("still held open"), a
# failure that only shows when the two tests run side by side.
#
# root_shared   makes / a shared mount unless it is (not recursively: the propagation of a mount
#               another test made stays as that test chose). Mounts made after it under / are
#               shared too, so make it before the first test mounts anything. Prints what it did.
root_shared() {
	awk '$5 == "/" { for (i = 7; $i != "-"; i++) if ($i ~ /^shared:/) s = 1 } END { exit !s }' \
		/proc/self/mountinfo && return 0
	mount --make-shared / || return 1
	echo "/ is now a shared mount, as systemd makes it at boot (tests/e2e/lib_mountns.sh)"
}
