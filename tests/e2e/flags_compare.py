#!/usr/bin/env python3
"""Compares the flags and defaults of upstream's sidecars with kcsi's (issue 29).

  flags_compare.py COMPAT_MD COMPONENT=UPSTREAM_SOURCE:KCSI_HELP_FILE ...

UPSTREAM_SOURCE is either help:<file> (an upstream binary's --help output, Go flag or pflag
format) or table:<file> (tests/peers/flags/<component>.txt: "name default" lines, a fact per
line, for the sidecars that cannot be built here). KCSI_HELP_FILE is kcsi's --help output.

Every difference (a flag on one side only, or another default) must be a row of the table in
COMPAT_MD, and every row must still be a difference: a new difference or a stale row fails. A row
is "| component | `--flag` | upstream | kcsi | why |"; component "every binary" stands for all
the components compared; a value is `absent` (no such flag), `(none)` (no default shown: the
zero value) or the default in backticks, as --help prints it without quotes. The why must say
something a user can accept: empty or "not implemented" fails.
"""
import re
import sys

ZERO = {"", "0", "false", "0s", "map[]", "[]", '""'}


def norm_default(v):
    v = v.strip()
    if len(v) >= 2 and v[0] == '"' and v[-1] == '"':
        v = v[1:-1]
    return "(none)" if v in ZERO else v


def default_of(lines):
    last = re.sub(r"\s*\(DEPRECATED: .*\)$", "", lines[-1].rstrip())
    m = re.search(r" ?\(default (.*)\)$", last)
    return norm_default(m.group(1)) if m else "(none)"


def parse_help(text):
    """Go's PrintDefaults ("  -name type" then "    \\t" help lines) or pflag's FlagUsages
    ("      --name type   help", "  -v, --v Level   help")."""
    flags, cur = {}, None
    go_re = re.compile(r"^  -([A-Za-z0-9_.-]+)(?: .*)?$")
    pf_re = re.compile(r"^ {2,6}(?:-\w, )?--([A-Za-z0-9_.-]+)(.*)$")
    for line in text.splitlines():
        m = go_re.match(line) or pf_re.match(line)
        if m:
            cur = m.group(1)
            flags[cur] = [line]
        elif cur and line.startswith(" "):
            flags[cur].append(line)
        else:
            cur = None
    return {name: default_of(lines) for name, lines in flags.items()}


def parse_table(text):
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, _, default = line.partition(" ")
        out[name] = norm_default(default)
    return out


def parse_compat(text, components):
    rows, errors = {}, []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 5 or not cells[1].startswith("`--"):
            continue
        comp, flag, up, kc, why = cells
        flag = flag.strip("`").lstrip("-")
        up, kc = up.strip("`"), kc.strip("`")
        if not why or "not implemented" in why.lower():
            errors.append(f"{comp} --{flag}: the reason '{why}' is not one a user can accept")
        for c in (components if comp == "every binary" else [comp]):
            if (c, flag) in rows:
                errors.append(f"{c} --{flag}: listed twice in the compatibility table")
            rows[(c, flag)] = (up, kc)
    return rows, errors


def main():
    compat = open(sys.argv[1]).read()
    sides = {}
    for arg in sys.argv[2:]:
        comp, _, rest = arg.partition("=")
        up_src, _, kc_file = rest.rpartition(":")
        kind, _, up_file = up_src.partition(":")
        up_text = open(up_file).read()
        up = parse_help(up_text) if kind == "help" else parse_table(up_text)
        kc = parse_help(open(kc_file).read())
        for side, name in ((up, "upstream"), (kc, "kcsi")):
            if len(side) < 5:
                print(f"FAIL: {comp}: only {len(side)} flags parsed from {name}'s --help")
                return 1
        sides[comp] = (up, kc)
    rows, errors = parse_compat(compat, list(sides))
    seen = set()
    same = 0
    for comp, (up, kc) in sides.items():
        for flag in sorted(set(up) | set(kc)):
            if flag in ("help", "h"):
                continue
            u, k = up.get(flag, "absent"), kc.get(flag, "absent")
            if u == k:
                same += 1
                continue
            seen.add((comp, flag))
            want = rows.get((comp, flag))
            if want is None:
                errors.append(f"{comp} --{flag}: upstream {u}, kcsi {k}: not in docs/compatibility.md")
            elif want != (u, k):
                errors.append(f"{comp} --{flag}: upstream {u}, kcsi {k}, but docs/compatibility.md says {want[0]} / {want[1]}")
    for key in sorted(set(rows) - seen):
        if key[0] in sides:
            errors.append(f"{key[0]} --{key[1]}: listed in docs/compatibility.md but no longer differs")
    for comp, (up, kc) in sides.items():
        print(f"{comp}: upstream {len(up)} flags, kcsi {len(kc)}; "
              f"{sum(1 for k in seen if k[0] == comp)} listed differences")
    print(f"{same} flags with the same default on both sides")
    for e in errors:
        print("FAIL: " + e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
