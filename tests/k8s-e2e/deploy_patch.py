#!/usr/bin/env python3
"""deploy_patch.py FILE: what tests/k8s-e2e/run.sh changes in the rendered deploy/kubernetes
(kubectl kustomize output, rewritten in place) before applying it, as a user running the storage
e2e suite would: group snapshots on in csi-snapshotter and snapshot-controller (the suite's
groupSnapshot specs need them, and their CRDs are installed), --volume-attach-limit=32 on the
node plugin (the volumeLimits specs read the limit from CSINode), and
--capacity-for-immediate-binding on csi-provisioner (the suite's classes bind at once, and the
capacity spec waits for their CSIStorageCapacity objects, which csi-provisioner otherwise
publishes only for WaitForFirstConsumer classes). Fails when a place to change is not found, so a
change in deploy/ cannot silently skip specs."""
import sys
import yaml

GATE_OFF = "--feature-gates=CSIVolumeGroupSnapshot=false"
GATE_ON = "--feature-gates=CSIVolumeGroupSnapshot=true"
ATTACH_LIMIT = "--volume-attach-limit=32"
CAPACITY = "--enable-capacity"
IMMEDIATE = "--capacity-for-immediate-binding"


def containers(doc):
    spec = doc.get("spec", {}).get("template", {}).get("spec", {})
    return spec.get("containers", [])


def main(path):
    with open(path) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    gates = limits = capacity = 0
    for d in docs:
        for c in containers(d):
            args = c.get("args", [])
            if GATE_OFF in args:
                args[args.index(GATE_OFF)] = GATE_ON
                gates += 1
            if (d.get("kind") == "DaemonSet" and "kcsi-loopplugin" in c.get("image", "")
                    and "--mode=node" in args):
                args.append(ATTACH_LIMIT)
                limits += 1
            if c.get("name") == "csi-provisioner" and CAPACITY in args:
                args.insert(args.index(CAPACITY) + 1, IMMEDIATE)
                capacity += 1
    if gates != 2 or limits != 1 or capacity != 1:
        sys.exit(f"deploy_patch: found {gates} group snapshot gates (want 2: csi-snapshotter, "
                 f"snapshot-controller), {limits} node plugins (want 1) and {capacity} "
                 f"csi-provisioners with {CAPACITY} (want 1)")
    with open(path, "w") as f:
        yaml.safe_dump_all(docs, f, sort_keys=False)


if __name__ == "__main__":
    main(sys.argv[1])
