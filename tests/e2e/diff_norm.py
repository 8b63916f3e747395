#!/usr/bin/env python3
"""diff_norm.py: the field-by-field comparison behind the drop-in differential scenarios.

A differential scenario (tests/e2e/lib_diff.sh) runs the same story twice against one API
server, once with upstream's binary and once with kcsi's, and at each step dumps the objects
it cares about into <dir>/<side>/<step>.json: {"tag": T, "objects": [...], "events": [...]}.
Every name the scenario makes carries its side's tag (a short token such as "u7x"), so both
runs live side by side in one server.

This program normalises both sides so that what only differs by birth compares equal:
  - the side's tag becomes "@" in every string and key;
  - every object's UID becomes "{Kind:namespace/name}" wherever it appears (a claimRef, an
    ownerReference, the "pvc-<uid>" name of a provisioned PV, an event's involvedObject);
  - a PV's volume handle, a snapshot content's snapshot handle and a group snapshot content's
    group handle become "{handle:<object>}" wherever they appear (the driver derives them
    from UIDs), a pre-provisioned group content's member IDs "{handle:<object> #<index>}";
  - the hex digest in a group member's name (snapshot-/snapcontent-<sha256(group uid +
    volume handle)>) becomes "{member:<group> <PV>}";
  - resourceVersion, creationTimestamp, managedFields are dropped, RFC 3339 times and a
    snapshot's creationTime (nanoseconds) become "<time>", the provisioner identity's start
    time and random part become "<ts>-<n>";
  - a Lease's generation (its renewals, which follow the clock) is dropped;
  - this machine's host name, alone or before "_", becomes "<host>";
  - names made from generateName become "<generateName>#k", k counting the objects of that
    kind sorted by their normalised content (a CSIStorageCapacity's become
    "<generateName>{<class> <segment's labels>}");
  - events become, per involved object, the sorted set of "Type Reason" (the scenario
    compares which events a user sees, not their counts or times); with DIFF_EVENT_MESSAGES=1
    in the environment, "Type Reason: message", the message normalised as any string. Events
    whose source component is listed in DIFF_SHARED_EVENTS (comma-separated) are left out: they
    come from a controller both sides share (kcsi's snapshot-controller in csi-provisioner's
    scenario), so they record the scenario's timing (a claim patched with the resourceVersion of
    a cache one write behind, answered 409), not the component under test.
Then it flattens every object into leaf paths (step, object, JSON path) and reports each leaf
whose value differs, or which only one side has, one a line:
  <step> <object> <path>\t<upstream JSON or (absent)>\t<kcsi JSON or (absent)>
and on stderr the number of fields compared.

  diff_norm.py compare DIR COMPONENT COMPAT_MD   compares DIR/upstream and DIR/kcsi against
      the rows of COMPAT_MD's "Objects and events" table whose component is COMPONENT: exit 0
      when the differences are exactly the listed ones; else prints the unlisted ones and the
      listed ones that did not happen, exit 1 (a row whose reason starts with "Sometimes" may
      not happen: it lists a race of one side). A listed value holding '*' is a glob (for a
      value with a random part, such as kcsi's leader identity).
"""
import fnmatch
import hashlib
import json
import os
import re
import socket
import sys

TIME_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")
PROV_ID_RE = re.compile(r"^\d{10,}-\d+-")
DROP_META = ("resourceVersion", "creationTimestamp", "managedFields", "uid", "selfLink")
ABSENT = "(absent)"
HOST = socket.gethostname()
WITH_MESSAGES = os.environ.get("DIFF_EVENT_MESSAGES") == "1"
SHARED_EVENTS = set(filter(None, os.environ.get("DIFF_SHARED_EVENTS", "").split(",")))


def obj_label(o, tag):
    md = o.get("metadata", {})
    label = "%s:%s/%s" % (o.get("kind", "?"), md.get("namespace", ""), md.get("name", ""))
    return label.replace(tag, "@") if tag else label


class Side:
    """One side's steps, with the substitutions learnt from all of its objects."""

    def __init__(self, d):
        self.steps = {}
        self.tag = None
        for f in sorted(os.listdir(d)):
            if f.endswith(".json"):
                with open(os.path.join(d, f)) as fh:
                    s = json.load(fh)
                self.tag = s["tag"]
                self.steps[f[:-5]] = s
        self.subst = {}  # literal string -> replacement, longest first when applied
        uids, groups, volumes = {}, {}, {}
        for s in self.steps.values():
            for o in s["objects"]:
                uid = o.get("metadata", {}).get("uid")
                if uid:
                    uids[uid] = obj_label(o, self.tag)
                if uid and o.get("kind") == "VolumeGroupSnapshot":
                    groups[uid] = obj_label(o, self.tag)
                h = o.get("spec", {}).get("csi", {}).get("volumeHandle")
                if o.get("kind") == "PersistentVolume" and h:
                    volumes[h] = obj_label(o, self.tag)
        # A group member is named by a digest of its group's UID and its volume's handle.
        members = {}
        for gu, gl in groups.items():
            for h, pl in volumes.items():
                members[hashlib.sha256((gu + h).encode()).hexdigest()] = \
                    "{member:%s %s}" % (gl, pl)
        for u in uids:
            for hx, ml in members.items():
                uids[u] = uids[u].replace(hx, ml)
        # Labels may hold other UIDs (a PV named pvc-<claim uid>): resolve them once.
        for u in uids:
            for u2, l2 in uids.items():
                if u2 != u and u2 in uids[u]:
                    uids[u] = uids[u].replace(u2, "{" + l2 + "}")
        for u, l in uids.items():
            self.subst[u] = "{" + l + "}"
        self.subst.update(members)
        for s in self.steps.values():
            for o in s["objects"]:
                kind = o.get("kind")
                h = None
                if kind == "PersistentVolume":
                    h = o.get("spec", {}).get("csi", {}).get("volumeHandle")
                elif kind == "VolumeSnapshotContent":
                    h = (o.get("status") or {}).get("snapshotHandle") or \
                        o.get("spec", {}).get("source", {}).get("snapshotHandle")
                elif kind == "VolumeGroupSnapshotContent":
                    h = (o.get("status") or {}).get("volumeGroupSnapshotHandle") or \
                        ((o.get("spec", {}).get("source") or {}).get("groupSnapshotHandles")
                         or {}).get("volumeGroupSnapshotHandle")
                if h and h not in self.subst:
                    self.subst[h] = "{handle:" + self.text(obj_label(o, self.tag)) + "}"
                # a pre-provisioned group's member IDs, by their place in its list
                gh = ((o.get("spec", {}).get("source") or {}).get("groupSnapshotHandles")
                      or {}) if kind == "VolumeGroupSnapshotContent" else {}
                for i, m in enumerate(gh.get("volumeSnapshotHandles") or []):
                    if m and m not in self.subst:
                        self.subst[m] = "{handle:%s #%d}" % (
                            self.text(obj_label(o, self.tag)), i)
        self.order = sorted(self.subst, key=len, reverse=True)

    def text(self, s):
        if self.tag:
            s = s.replace(self.tag, "@")
        for k in getattr(self, "order", sorted(self.subst, key=len, reverse=True)):
            if k in s:
                s = s.replace(k, self.subst[k])
        if TIME_RE.match(s):
            return "<time>"
        # the machine's name (a leader's identity, an event's host): both sides ran on it
        if s == HOST or s.startswith(HOST + "_"):
            return "<host>" + s[len(HOST):]
        return s

    def norm(self, v, key=None):
        if isinstance(v, dict):
            out = {}
            for k, x in v.items():
                if k in DROP_META and key == "metadata":
                    continue
                if k == "resourceVersion":
                    continue
                out[self.text(k)] = self.norm(x, k)
            return out
        if isinstance(v, list):
            return [self.norm(x, key) for x in v]
        if key == "creationTime" and isinstance(v, int):
            return "<time>"  # a snapshot's, in nanoseconds since the epoch
        if isinstance(v, str):
            if key == "storage.kubernetes.io/csiProvisionerIdentity":
                v = PROV_ID_RE.sub("<ts>-<n>-", v)
            return self.text(v)
        return v

    def step(self, name):
        """{object label: normalised object} of one step, events folded in."""
        s = self.steps[name]
        objs = [self.norm(o) for o in s["objects"]]
        # generateName'd names: numbered by content, so both sides number alike
        by_gen = {}
        for o in objs:
            md = o.get("metadata", {})
            g = md.get("generateName")
            if g and md.get("name", "").startswith(g):
                by_gen.setdefault((o.get("kind"), g), []).append(o)
        for (kind, g), group in by_gen.items():
            if kind == "CSIStorageCapacity":
                # named by what it is for (class and segment), so that an object one side
                # does not make does not renumber the others
                for o in group:
                    seg = json.dumps((o.get("nodeTopology") or {}).get("matchLabels") or {},
                                     sort_keys=True, separators=(",", ":"))
                    o["metadata"]["name"] = "%s{%s %s}" % (g, o.get("storageClassName"), seg)
                continue
            def content(o):
                c = dict(o)
                c["metadata"] = {k: v for k, v in o["metadata"].items() if k != "name"}
                return json.dumps(c, sort_keys=True)
            for i, o in enumerate(sorted(group, key=content)):
                o["metadata"]["name"] = "%s#%d" % (g, i)
        out = {}
        for o in objs:
            md = o.get("metadata", {})
            if o.get("kind") == "Lease":
                md.pop("generation", None)  # counts renewals, which follow the clock
            out["%s:%s/%s" % (o.get("kind"), md.get("namespace", ""), md.get("name"))] = o
        ev = {}
        for e in s.get("events", []):
            src = (e.get("source") or {}).get("component") or e.get("reportingComponent")
            if src in SHARED_EVENTS:
                continue
            io = e.get("involvedObject", {})
            uid = io.get("uid", "")
            label = self.subst.get(uid)
            if label is None:
                raw = "%s:%s/%s" % (io.get("kind"), io.get("namespace", ""), io.get("name"))
                if not self.tag or self.tag not in json.dumps(io):
                    continue
                label = "{" + self.text(raw) + "}"
            item = "%s %s" % (e.get("type"), e.get("reason"))
            if WITH_MESSAGES:
                item += ": " + self.text(e.get("message", ""))
            ev.setdefault("Events:" + label, set()).add(item)
        for k, v in ev.items():
            out[k] = sorted(v)
        return out


def flatten(v, path, out):
    if isinstance(v, dict) and v:
        for k in sorted(v):
            p = "%s.%s" % (path, k) if re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", k) \
                else '%s["%s"]' % (path, k)
            flatten(v[k], p, out)
    elif isinstance(v, list) and v and not all(isinstance(x, str) for x in v):
        for i, x in enumerate(v):
            flatten(x, "%s[%d]" % (path, i), out)
    else:
        out[path or "."] = json.dumps(v, sort_keys=True)


def compare(d):
    up, kc = Side(os.path.join(d, "upstream")), Side(os.path.join(d, "kcsi"))
    diffs, fields = [], 0
    for step in sorted(set(up.steps) | set(kc.steps)):
        a = up.step(step) if step in up.steps else {}
        b = kc.step(step) if step in kc.steps else {}
        for name in sorted(set(a) | set(b)):
            fa, fb = {}, {}
            if name in a:
                flatten(a[name], "", fa)
            if name in b:
                flatten(b[name], "", fb)
            for p in sorted(set(fa) | set(fb)):
                fields += 1
                va, vb = fa.get(p, ABSENT), fb.get(p, ABSENT)
                if va != vb:
                    diffs.append(("%s %s %s" % (step, name, p or "."), va, vb))
    return diffs, fields


def split_row(line):
    cells, cur, i = [], "", 0
    line = line.strip()
    if line.startswith("|"):
        line = line[1:]
    if line.endswith("|") and not line.endswith("\\|"):
        line = line[:-1]
    while i < len(line):
        if line[i] == "\\" and i + 1 < len(line) and line[i + 1] == "|":
            cur += "|"
            i += 2
            continue
        if line[i] == "|":
            cells.append(cur.strip())
            cur = ""
        else:
            cur += line[i]
        i += 1
    cells.append(cur.strip())
    return cells


def unquote(c):
    c = c.strip()
    if c.startswith("`") and c.endswith("`") and len(c) >= 2:
        return c[1:-1]
    return c


def listed(md, component):
    """(field, upstream, kcsi) rows of the "Objects and events" table for one component, and the
    subset whose reason starts with "Sometimes" (a race in one side: a run may not show it)."""
    rows, optional, inside = set(), set(), False
    with open(md) as fh:
        for line in fh:
            if line.startswith("## "):
                inside = line.strip() == "## Objects and events"
                continue
            if not inside or not line.startswith("|"):
                continue
            c = split_row(line)
            if len(c) < 5 or c[0] in ("component",) or set(c[0]) <= set("-: "):
                continue
            if unquote(c[0]) == component:
                row = (unquote(c[1]), unquote(c[2]), unquote(c[3]))
                rows.add(row)
                if c[4].lower().startswith("sometimes"):
                    optional.add(row)
    return rows, optional


def matches(pattern, value):
    """A listed cell matches a value exactly, or as a glob when it holds '*' (a random part)."""
    if "*" not in pattern:
        return pattern == value
    return fnmatch.fnmatchcase(value, pattern.replace("[", "[[]"))


def main():
    if len(sys.argv) != 5 or sys.argv[1] != "compare":
        sys.stderr.write(__doc__)
        return 2
    d, component, md = sys.argv[2:5]
    diffs, fields = compare(d)
    want, optional = listed(md, component) if os.path.exists(md) else (set(), set())
    print("%s: %d fields compared, %d differ, %d listed in %s" %
          (component, fields, len(diffs), len(want), os.path.basename(md)))
    seen, bad = set(), 0
    for d in diffs:
        rows = [w for w in want if all(matches(p, v) for p, v in zip(w, d))]
        if rows:
            seen.update(rows)
            print("listed\t%s\t%s\t%s" % d)
        else:
            print("UNLISTED\t%s\t%s\t%s" % d)
            bad += 1
    for w in sorted(want - seen - optional):
        print("NOT SEEN\t%s\t%s\t%s" % w)
        bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
