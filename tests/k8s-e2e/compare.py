#!/usr/bin/env python3
"""compare.py KCSI_JUNIT UPSTREAM_JUNIT: the storage e2e suite's outcome per spec with kcsi's
sidecars and with upstream's (the same loop driver, cluster and suite), and every spec whose
outcome differs. A spec that passes with upstream's sidecars and fails with kcsi's is a kcsi bug:
exit 1. Prints
    k8s-e2e compare: 150 specs ran in both, same outcome 150; kcsi-only failures 0, ...
"""
import sys
import xml.etree.ElementTree as ET


def outcomes(path):
    out = {}
    for tc in ET.parse(path).getroot().iter("testcase"):
        name = tc.get("name", "")
        if tc.find("skipped") is not None:
            out[name] = "skipped"
        elif tc.find("failure") is not None or tc.find("error") is not None:
            out[name] = "failed"
        else:
            out[name] = "passed"
    return out


def main(kpath, upath):
    k, u = outcomes(kpath), outcomes(upath)
    both = [n for n in k if n in u and k[n] != "skipped" and u[n] != "skipped"]
    same = sum(1 for n in both if k[n] == u[n])
    kcsi_bug = sorted(n for n in both if k[n] == "failed" and u[n] == "passed")
    upstream_only = sorted(n for n in both if u[n] == "failed" and k[n] == "passed")
    ran_differently = sorted(n for n in set(k) | set(u)
                             if (k.get(n) == "skipped") != (u.get(n) == "skipped"))
    print(f"k8s-e2e compare: {len(both)} specs ran in both, same outcome {same}; "
          f"kcsi-only failures {len(kcsi_bug)}, upstream-only failures {len(upstream_only)}, "
          f"run in one only {len(ran_differently)}")
    for n in kcsi_bug:
        print(f"KCSI FAILS, UPSTREAM PASSES: {n}")
    for n in upstream_only:
        print(f"UPSTREAM FAILS, KCSI PASSES: {n}")
    for n in ran_differently:
        print(f"RUN IN ONE ONLY (kcsi {k.get(n, 'absent')}, upstream {u.get(n, 'absent')}): {n}")
    return 1 if kcsi_bug else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
