#!/usr/bin/env python3
"""junit_summary.py JUNIT SECONDS [--skips] [--expect FILE]: the storage e2e run in one line, and
each failed spec.
    k8s-e2e: ran 123, passed 120, failed 3, skipped 40 (reason given), not selected 3210 in 30.5 min
    FAILED: [sig-storage] CSI Volumes [Driver: loop.kcsi.io] ...
A spec the suite skipped at run time carries its reason (ginkgo's JUnit message "skipped - WHY":
a capability the manifest does not claim, a file system, a cluster size); one outside the focus
carries none. --skips adds a count per reason. --expect FILE: every line of FILE (a spec's text,
comments and blank lines aside) names a spec that ran and passed; one that was skipped, failed or
not found is named on a NOT PASSED line. Exit status 1 when a spec failed, when an expected one did
not pass, when no spec was selected (a focus that matches nothing), or when the report is missing
(the suite did not get to run)."""
import collections
import re
import sys
import xml.etree.ElementTree as ET


def expected(path):
    with open(path) as f:
        return [ln.strip() for ln in f if ln.strip() and not ln.lstrip().startswith("#")]


def main(path, secs, show_skips, expect):
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        print(f"k8s-e2e: no report ({e})")
        return 1
    ran = passed = failed = 0
    skipped = collections.Counter()
    not_selected = 0
    failures = []
    passed_names = []
    for tc in root.iter("testcase"):
        name = tc.get("name", "")
        skip = tc.find("skipped")
        if skip is not None:
            why = skip.get("message", "")
            if why.startswith("skipped - "):
                skipped[why[len("skipped - "):].splitlines()[0].strip()] += 1
            else:
                not_selected += 1
            continue
        bad = tc.find("failure") is not None or tc.find("error") is not None
        if not name.startswith("[It]"):  # the suite's own nodes: set-up, reports, checks
            if bad:
                failures.append(name)
            continue
        ran += 1
        if bad:
            failed += 1
            failures.append(name)
        else:
            passed += 1
            passed_names.append(name)
    print(f"k8s-e2e: ran {ran}, passed {passed}, failed {failed}, "
          f"skipped {sum(skipped.values())} (reason given), not selected {not_selected} "
          f"in {int(secs) / 60:.1f} min")
    for f in failures:
        print(f"FAILED: {f}")
    if show_skips:
        for why, n in skipped.most_common():
            print(f"SKIPPED {n:4d}: {why}")
    # a spec's text ends where the expected line does, or its tags follow
    # (spaces compared as one: the report has two where the suite joins an empty text)
    flat = [" ".join(n.split()) for n in passed_names]
    missing = [e for e in expect
               if not any(re.search(re.escape(" ".join(e.split())) + r"( \[|$)", n) for n in flat)]
    for e in missing:
        print(f"NOT PASSED (expected to run and pass): {e}")
    if ran == 0 and sum(skipped.values()) == 0:
        print("k8s-e2e: no spec was selected: check --focus and --skip")
        return 1
    return 1 if failures or missing else 0


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    rest = sys.argv[3:]
    if "--expect" in rest and rest.index("--expect") + 1 == len(rest):
        sys.exit("junit_summary.py: --expect needs a file")
    expect = expected(rest[rest.index("--expect") + 1]) if "--expect" in rest else []
    sys.exit(main(sys.argv[1], sys.argv[2], "--skips" in rest, expect))
