# What the tests need from the machine when ctest runs many at once (scripts/test.sh, make test):
# a RESOURCE_LOCK for what only one test may hold at a time, PROCESSORS for a test that keeps more
# than one core busy for a long stretch (ctest -jN then runs fewer others beside it), the label
# timing, a longer TIMEOUT, a COST. Every other test makes its own temporary folder, takes ports
# the kernel chooses and names what it leaves behind by that folder, so any number run side by
# side. Included before the areas: kcsi_add_test() (cmake/kcsi.cmake) applies what this table
# says to each test as it is registered, in both builds (the sanitizer build's asan.* too).

# kcsi_resource(<test>... PROPERTIES <prop> <value>...) / kcsi_resource_label(<label> <test>...)
function(kcsi_resource)
  cmake_parse_arguments(R "" "" "PROPERTIES" ${ARGN})
  foreach(t ${R_UNPARSED_ARGUMENTS})
    set(KCSI_RES_${t} ${KCSI_RES_${t}} ${R_PROPERTIES} PARENT_SCOPE)
  endforeach()
endfunction()
function(kcsi_resource_label label)
  foreach(t ${ARGN})
    set(KCSI_RESLABEL_${t} ${KCSI_RESLABEL_${t}} ${label} PARENT_SCOPE)
  endforeach()
endfunction()

# The real node: the kubelet owns /var/lib/kubelet and its containerd the image store; a real
# control plane, containerd and the kubelet start at once.
kcsi_resource(e2e.realnode e2e.k8s_storage PROPERTIES RESOURCE_LOCK kubelet PROCESSORS 2)

# A real control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler) starting:
# about 1.5 cores for its first 10-20 s; CPU-bound for most of their run: every image compressed
# (buildah), thousands of objects synced, a 50-node fleet.
kcsi_resource(e2e.rbac_realcp e2e.realcp_smoke e2e.up_realcp e2e.emulator_differential
              e2e.apiserver_restart e2e.faults_kcsi_1 e2e.faults_kcsi_2 e2e.faults_kcsi_3
              e2e.faults_real_1 e2e.faults_real_2 e2e.faults_real_3 e2e.kube_client_certs
              e2e.images e2e.cluster_scale_smoke e2e.up_fleet
              PROPERTIES PROCESSORS 2)

# The tests that run a peer scripts/peers.sh builds after the early ones (kube-apiserver, etcd,
# kube-controller-manager, kube-scheduler, the kubelet, csi-sanity; scripts/test.sh names the
# early ones) require the fixture whose setup builds them (setup.peers, CMakeLists.txt).
kcsi_resource(e2e.apiserver_restart e2e.emulator_differential e2e.faults_kcsi_1 e2e.faults_kcsi_2
              e2e.faults_kcsi_3 e2e.faults_real_1 e2e.faults_real_2 e2e.faults_real_3
              e2e.kube_client_certs e2e.rbac_realcp e2e.realcp_smoke e2e.realnode e2e.up_realcp
              e2e.cm_unschedulable e2e.up_one_writer_kube_scheduler e2e.cluster_scale_smoke
              e2e.csi_sanity e2e.k8s_storage
              PROPERTIES FIXTURES_REQUIRED peers)

# Tests that time a reaction of a second or less (SIGTERM within 1 s, a legitimate Probe answered
# within 1 s while a hostile peer floods the same socket, a kill noticed and the component
# restarted, taints within their seconds): a second on a quiet machine, several on one whose
# cores run four other tests. scripts/test.sh runs them (label timing) two at a time at nice 0,
# with only work at nice 19 beside them; the hostile ones, which make load themselves, take both
# slots each.
kcsi_resource_label(timing
    e2e.shutdown e2e.cm_leader e2e.emulator_limits e2e.livenessprobe e2e.loopplugin_safety
    e2e.node_register e2e.node_standalone e2e.provisioner_lifecycle e2e.registrar
    e2e.sidecar_startup e2e.up_dir_lock e2e.up_giveup e2e.cm_eviction e2e.hostile_csi_socket
    e2e.hostile_driver e2e.hostile_livenessprobe e2e.hostile_sidecars e2e.hostile_sidecars2
    e2e.hostile_nodeside e2e.hostile_upstream e2e.attacher_hostile e2e.grpc_interop_go
    e2e.snapshot_startup)
kcsi_resource(e2e.hostile_csi_socket e2e.hostile_driver e2e.hostile_livenessprobe
              e2e.hostile_sidecars e2e.hostile_sidecars2 e2e.hostile_nodeside
              e2e.hostile_upstream e2e.attacher_hostile PROPERTIES PROCESSORS 2)
# The hostile ones keep both cores busy for a minute or more: scripts/test.sh runs them last,
# when no test at nice 19 is left to starve.
kcsi_resource_label(hostile
    e2e.hostile_csi_socket e2e.hostile_driver e2e.hostile_livenessprobe e2e.hostile_sidecars
    e2e.hostile_sidecars2 e2e.hostile_nodeside e2e.hostile_upstream e2e.attacher_hostile)

# e2e.loopplugin_health detaches a block volume's loop device under its bind mount and keeps that
# mount for a while: a loop test beside it that gets the freed device number sees the stale bind
# mount as a user of its own volume and rightly refuses to unstage. It runs with the hostile
# tests, alone.
kcsi_resource_label(timing e2e.loopplugin_health)
kcsi_resource_label(hostile e2e.loopplugin_health)
kcsi_resource(e2e.loopplugin_health PROPERTIES PROCESSORS 2)

# Longer limits where a scenario that passes alone in a minute or two took close to its limit
# with six tests beside it (a limit is for a hang, not for a slow machine).
kcsi_resource(e2e.emulator_limits e2e.deploy_apply PROPERTIES TIMEOUT 300)
kcsi_resource(e2e.cm_eviction PROPERTIES TIMEOUT 400)
# Its pods' tolerationSeconds (5 s), a 3 s grace period and a 10 s eviction token are windows the
# script's own kubectl calls must fit in: it runs alone, even among the timing tests.
kcsi_resource(e2e.cm_eviction PROPERTIES RUN_SERIAL ON)
kcsi_resource(e2e.provisioner_crash PROPERTIES TIMEOUT 900)

# The order of a first run (no Testing/Temporary/CTestCostData.txt yet, as on a fresh clone):
# the longest start first, so none of them is left to run alone at the end. Seconds they took
# under ctest -j6 (docs/development.md); later runs use ctest's own record.
foreach(tc provisioner_crash:565 realnode:349 faults_kcsi_1:339 faults_kcsi_2:334
           diff_provisioner:313 faults_kcsi_3:279 cm_crash:279 diff_snapshot:278 diff_resizer:233
           rbac_realcp:174 resizer_crash:169 images:162 up_realcp:137 provisioner_release:120
           node_crash:122 node_volumes:111 diff_attacher:110 cm_scheduler:110 diff_capacity:108
           kube_client_certs:60)
  string(REPLACE ":" ";" tc ${tc})
  list(GET tc 0 name)
  list(GET tc 1 cost)
  kcsi_resource(e2e.${name} PROPERTIES COST ${cost})
endforeach()
