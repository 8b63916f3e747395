# What the tests need from the machine when ctest runs many at once (scripts/test.sh, make test):
# a RESOURCE_LOCK for what only one test may hold at a time, PROCESSORS for a test that keeps more
# than one core busy for a long stretch (ctest -jN then runs fewer others beside it). Every other
# test makes its own temporary folder, takes ports the kernel chooses and names what it leaves
# behind by that folder, so any number run side by side. Both builds' tests are named here by
# their normal-build names; kcsi_test_properties() sets the sanitizer build's (asan.*) as well.

# The real node: the kubelet owns /var/lib/kubelet and its containerd the image store; a real
# control plane, containerd and the kubelet start at once.
kcsi_test_properties(e2e.realnode PROPERTIES RESOURCE_LOCK kubelet PROCESSORS 2)

# A real control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler) starting:
# about 1.5 cores for its first 10-20 s.
kcsi_test_properties(e2e.rbac_realcp e2e.realcp_smoke e2e.up_realcp e2e.emulator_differential
                     e2e.apiserver_restart e2e.faults_kcsi_1 e2e.faults_kcsi_2 e2e.faults_kcsi_3
                     e2e.faults_real_1 e2e.faults_real_2 e2e.faults_real_3
                     PROPERTIES PROCESSORS 2)

# CPU-bound for most of their run: every image compressed (buildah), 20,000 objects synced at
# small scale, a 50-node fleet, csi-sanity's hundreds of calls.
kcsi_test_properties(e2e.images e2e.cluster_scale_smoke e2e.up_fleet PROPERTIES PROCESSORS 2)
