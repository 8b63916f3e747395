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

# Tests that time a reaction of a second or less (SIGTERM within 1 s, a legitimate Probe answered
# within 1 s while a hostile peer floods the same socket): a second on a quiet machine, several
# on one whose cores run six other tests. scripts/test.sh runs them (label timing) after all the
# others, a few at a time and with nothing CPU-bound beside them; the hostile ones, which make
# load themselves, take two of those slots each.
set(kcsi_timing_tests
    e2e.shutdown e2e.cm_leader e2e.emulator_limits e2e.livenessprobe e2e.loopplugin_safety
    e2e.node_register e2e.node_standalone e2e.provisioner_lifecycle e2e.registrar
    e2e.sidecar_startup e2e.up_dir_lock e2e.hostile_csi_socket e2e.hostile_driver
    e2e.hostile_livenessprobe e2e.hostile_sidecars e2e.hostile_sidecars2 e2e.hostile_nodeside
    e2e.hostile_upstream e2e.attacher_hostile)
foreach(t ${kcsi_timing_tests})
  kcsi_test_labels(${t} timing)
endforeach()
kcsi_test_properties(e2e.hostile_csi_socket e2e.hostile_driver e2e.hostile_livenessprobe
                     e2e.hostile_sidecars e2e.hostile_sidecars2 e2e.hostile_nodeside
                     e2e.hostile_upstream e2e.attacher_hostile PROPERTIES PROCESSORS 2)

# Longer limits where a scenario that passes alone in a minute or two took close to its limit
# with six tests beside it (a limit is for a hang, not for a slow machine).
kcsi_test_properties(e2e.emulator_limits e2e.deploy_apply PROPERTIES TIMEOUT 300)
kcsi_test_properties(e2e.cm_eviction PROPERTIES TIMEOUT 400)
kcsi_test_properties(e2e.provisioner_crash PROPERTIES TIMEOUT 900)

# The order of a first run (no Testing/Temporary/CTestCostData.txt yet, as on a fresh clone):
# the longest start first, so none of them is left to run alone at the end. Seconds they took
# under ctest -j6 (docs/development.md); later runs use ctest's own record.
foreach(tc provisioner_crash:565 realnode:349 faults_kcsi_1:339 faults_kcsi_2:334
           diff_provisioner:313 faults_kcsi_3:279 cm_crash:279 diff_snapshot:278 diff_resizer:233
           cm_eviction:200 rbac_realcp:174 resizer_crash:169 images:162 up_realcp:137
           provisioner_release:120 node_crash:122 node_volumes:111 diff_attacher:110
           cm_scheduler:110 diff_capacity:108 kube_client_certs:60)
  string(REPLACE ":" ";" tc ${tc})
  list(GET tc 0 name)
  list(GET tc 1 cost)
  kcsi_test_properties(e2e.${name} PROPERTIES COST ${cost})
endforeach()
