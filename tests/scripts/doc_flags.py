#!/usr/bin/env python3
"""Every flag a binary's --help lists must be in a table of its documentation.

usage: doc_flags.py SRC_DIR BIN_DIR

A flag counts as documented when `--name` (or `-name`) stands in a table row ("| ...") of the
component's own README section (## <component>, up to the next ## heading) or its docs/*.md
page, or in the rows of README's "Common flags" section, which every binary shares; a row's
`--name*` stands for every flag starting with name (`--leader-election*`). Prints each
missing flag as "<binary>: --<flag> is in --help but in no table of <where>" and exits 1 when
there is one; a component below with no documentation place found fails too.
"""
import re
import subprocess
import sys

# binary -> (README section heading, docs page or None)
COMPONENTS = {
    "csi-attacher": ("csi-attacher", "docs/csi-attacher.md"),
    "csi-provisioner": ("csi-provisioner", "docs/csi-provisioner.md"),
    "csi-resizer": ("csi-resizer", "docs/csi-resizer.md"),
    "csi-snapshotter": ("csi-snapshotter and snapshot-controller", "docs/csi-snapshotter.md"),
    "snapshot-controller": ("csi-snapshotter and snapshot-controller", "docs/snapshot-controller.md"),
    "csi-node-driver-registrar": ("csi-node-driver-registrar", "docs/csi-node-driver-registrar.md"),
    "livenessprobe": ("livenessprobe", "docs/livenessprobe.md"),
    "kcsi-controller-manager": ("kcsi-controller-manager", "docs/kcsi-controller-manager.md"),
    "kcsi-node": ("kcsi-node", "docs/kcsi-node.md"),
    "kcsi-loopplugin": ("kcsi-loopplugin", "docs/kcsi-loopplugin.md"),
    "kube-emulator": ("kube-emulator", "docs/kube-emulator.md"),
}


def readme_section(readme, heading):
    out, on = [], False
    for line in readme.splitlines():
        if line.startswith("## "):
            on = line[3:].strip() == heading
            continue
        if on:
            out.append(line)
    return "\n".join(out)


def table_flags(text):
    flags = set()
    for line in text.splitlines():
        if line.lstrip().startswith("|"):
            flags.update(re.findall(r"(?<![\w-])--?([a-zA-Z][\w.-]*\*?)", line))
    return flags


def covered(flag, documented):
    """flag is in documented, or a row names a family of it: `--leader-election*`."""
    return flag in documented or any(d.endswith("*") and flag.startswith(d[:-1]) for d in documented)


def help_flags(binary):
    p = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=20)
    text = p.stdout + p.stderr
    return sorted(set(re.findall(r"^\s+--?([a-zA-Z][\w.-]*)", text, re.M)))


def main():
    src, bindir = sys.argv[1], sys.argv[2]
    readme = open(f"{src}/README.md").read()
    common = table_flags(readme_section(readme, "Common flags"))
    missing = 0
    for binary, (heading, page) in COMPONENTS.items():
        where = [f"README ## {heading}"]
        documented = table_flags(readme_section(readme, heading))
        try:
            documented |= table_flags(open(f"{src}/{page}").read())
            where.append(page)
        except FileNotFoundError:
            pass
        if not documented:
            print(f"{binary}: no flag table found in {' or '.join(where)}")
            missing += 1
            continue
        flags = help_flags(f"{bindir}/{binary}")
        if not flags:
            print(f"{binary}: --help lists no flags")
            missing += 1
        for f in flags:
            if not covered(f, documented) and not covered(f, common):
                print(f"{binary}: --{f} is in --help but in no table of {', '.join(where)} "
                      f"or README ## Common flags")
                missing += 1
        print(f"{binary}: {len(flags)} flags in --help", file=sys.stderr)
    if missing:
        print(f"{missing} undocumented flag(s)")
        return 1
    print("every flag in every --help is in its documentation's tables")
    return 0


if __name__ == "__main__":
    sys.exit(main())
