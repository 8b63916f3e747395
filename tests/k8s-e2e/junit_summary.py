#!/usr/bin/env python3
"""junit_summary.py JUNIT SECONDS: the storage e2e run in one line, and each failed spec.
    k8s-e2e: ran 123, passed 120, failed 3, skipped 456 in 30.5 min
    FAILED: [sig-storage] CSI Volumes [Driver: loop.kcsi.io] ...
Exit status 1 when a spec failed or the report is missing (the suite did not get to run)."""
import sys
import xml.etree.ElementTree as ET


def main(path, secs):
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        print(f"k8s-e2e: no report ({e})")
        return 1
    ran = passed = failed = skipped = 0
    failures = []
    for tc in root.iter("testcase"):
        name = tc.get("name", "")
        if tc.find("skipped") is not None:
            skipped += 1
            continue
        if not name.startswith("[It]"):  # the suite's own nodes: set-up, reports, checks
            if tc.find("failure") is not None or tc.find("error") is not None:
                failures.append(name)
            continue
        ran += 1
        if tc.find("failure") is not None or tc.find("error") is not None:
            failed += 1
            failures.append(name)
        else:
            passed += 1
    print(f"k8s-e2e: ran {ran}, passed {passed}, failed {failed}, skipped {skipped} "
          f"in {int(secs) / 60:.1f} min")
    for f in failures:
        print(f"FAILED: {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
