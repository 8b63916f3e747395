#!/usr/bin/env python3
"""Runs one corpus of API requests against two servers and compares the answers.

    differential.py --corpus FILE --docs docs/kube-emulator.md EMU_KUBECONFIG REAL_KUBECONFIG

The corpus (YAML) is a list of steps, run in order against each server with the same client
(each server's kubeconfig: server, CA, client certificate or token):

    - id: sc-create                      # unique; ${rv:ID} / ${uid:ID} / ${name:ID} in a later
      req: POST /apis/storage.k8s.io/v1/storageclasses    # path or body take that step's answer
      type: json | merge | strategic | jsonpatch | apply | table   (default json; table: GET with
                                         kubectl's Table Accept header)
      body: {...}                        # sent as JSON
      watch: true                        # a watch: the events until timeoutSeconds end it

Each answer is normalised (uids, resourceVersions, timestamps, managedFields, selfLink, continue
tokens, generated name suffixes and Table ages are replaced by placeholders) and compared: the
status code first, then the bodies field by field. A difference is "ID PATH: emulator X, real Y".

The differences kube-emulator is known to have are the table between the markers
`<!-- differential:begin -->` and `<!-- differential:end -->` of docs/kube-emulator.md: rows
`| step globs | path globs | reason |` (comma-separated, `*` matches anything; the path `:code` is
the status code). The run
fails when a difference matches no row (a new difference: fix kube-emulator or list it) and when
a row matches no difference (fixed: remove it from the list). Prints the counts.
"""
import argparse
import base64
import copy
import http.client
import json
import os
import re
import shutil
import ssl
import sys
import tempfile
import urllib.parse

import yaml

TABLE_ACCEPT = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
CONTENT_TYPES = {
    "json": "application/json",
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "jsonpatch": "application/json-patch+json",
    "apply": "application/apply-patch+yaml",
    "table": "application/json",
}
TS_KEYS = {"creationTimestamp", "deletionTimestamp", "lastTransitionTime", "eventTime", "renewTime",
           "acquireTime", "firstTimestamp", "lastTimestamp", "lastHeartbeatTime", "lastProbeTime",
           "time", "startTime", "creationTime", "lastPhaseTransitionTime"}


class Server:
    def __init__(self, name, kubeconfig, tmp):
        self.name = name
        with open(kubeconfig) as f:
            kc = yaml.safe_load(f)
        ctx_name = kc.get("current-context")
        ctx = next(c["context"] for c in kc["contexts"] if c["name"] == ctx_name)
        cluster = next(c["cluster"] for c in kc["clusters"] if c["name"] == ctx["cluster"])
        user = next((u["user"] for u in kc.get("users", []) if u["name"] == ctx.get("user")), {}) or {}
        url = urllib.parse.urlparse(cluster["server"])
        self.host, self.port = url.hostname, url.port
        self.headers = {}
        if user.get("token"):
            self.headers["Authorization"] = "Bearer " + user["token"]
        self.ctx = None
        if url.scheme == "https":
            self.ctx = ssl.create_default_context()
            if cluster.get("certificate-authority-data"):
                self.ctx.load_verify_locations(
                    cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
            elif cluster.get("certificate-authority"):
                self.ctx.load_verify_locations(cafile=cluster["certificate-authority"])
            if user.get("client-certificate-data"):
                cert = os.path.join(tmp, name + ".crt")
                key = os.path.join(tmp, name + ".key")
                with open(cert, "wb") as f:
                    f.write(base64.b64decode(user["client-certificate-data"]))
                with open(key, "wb") as f:
                    f.write(base64.b64decode(user["client-key-data"]))
                self.ctx.load_cert_chain(cert, key)
        self.answers = {}  # step id -> parsed body
        self.uids = set()

    def request(self, method, path, body, ctype, accept):
        if self.ctx:
            conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=30)
        else:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        headers = dict(self.headers)
        headers["Accept"] = accept
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = ctype
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        raw = resp.read()
        conn.close()
        return resp.status, raw


def substitute(value, server):
    """${rv:ID}, ${uid:ID}, ${name:ID} from this server's answer to step ID."""
    def one(m):
        what, sid = m.group(1), m.group(2)
        ans = server.answers.get(sid)
        if not isinstance(ans, dict):
            raise SystemExit(f"corpus: ${{{what}:{sid}}}: step {sid} has no JSON answer")
        meta = ans.get("metadata", {})
        return str({"rv": meta.get("resourceVersion"), "uid": meta.get("uid"),
                    "name": meta.get("name")}[what])
    if isinstance(value, str):
        return re.sub(r"\$\{(rv|uid|name):([A-Za-z0-9_.-]+)\}", one, value)
    if isinstance(value, list):
        return [substitute(v, server) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, server) for k, v in value.items()}
    return value


def collect_uids(obj, server):
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == "uid" and isinstance(v, str) and v:
                server.uids.add(v)
            else:
                collect_uids(v, server)
    elif isinstance(obj, list):
        for v in obj:
            collect_uids(v, server)


def normalise(obj, server, key=None, age_cols=()):
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if k in ("managedFields", "selfLink"):
                continue
            if k == "uid" and isinstance(v, str) and v:
                out[k] = "<uid>"
            elif k == "resourceVersion" and isinstance(v, str) and v:
                out[k] = "<rv>"
            elif k in TS_KEYS and isinstance(v, (str, int)) and v:
                out[k] = "<ts>"
            elif k == "continue" and isinstance(v, str) and v:
                out[k] = "<continue>"
            elif k == "rows" and isinstance(v, list) and age_cols:
                out[k] = [normalise_row(r, server, age_cols) for r in v]
            else:
                out[k] = normalise(v, server, k)
        return out
    if isinstance(obj, list):
        return [normalise(v, server, key) for v in obj]
    if isinstance(obj, str):
        s = obj
        for u in server.uids:
            s = s.replace(u, "<uid>")
        # resourceVersions inside messages ("too old resource version: 5 (120)")
        s = re.sub(r"resource version: \d+ \(\d+\)", "resource version: <rv> (<rv>)", s)
        # ("Timeout: Too large resource version: 999999999, current: 120")
        s = re.sub(r"resource version: \d+, current: \d+", "resource version: <rv>, current: <rv>", s)
        # generateName suffixes: 5 characters after a name ending in '-' followed by "gen-"
        s = re.sub(r"\bgen-[a-z0-9]{5}\b", "gen-<rand>", s)
        return s
    return obj


def normalise_row(row, server, age_cols):
    r = normalise(row, server)
    cells = r.get("cells")
    if isinstance(cells, list):
        for i in age_cols:
            if i < len(cells):
                cells[i] = "<age>"
    return r


def table_age_cols(body):
    if isinstance(body, dict) and body.get("kind") == "Table":
        return tuple(i for i, c in enumerate(body.get("columnDefinitions", []))
                     if c.get("name", "").lower() in ("age", "created at", "last seen"))
    return ()


def parse_body(raw, watch):
    text = raw.decode("utf-8", "replace")
    if watch:
        events = []
        for line in text.splitlines():
            line = line.strip()
            if line:
                try:
                    events.append(json.loads(line))
                except ValueError:
                    events.append({"unparsed": line})
        return events
    try:
        return json.loads(text) if text.strip() else None
    except ValueError:
        return {"unparsed": text[:200]}


def run(server, steps):
    out = {}
    for st in steps:
        method, path = st["req"].split(None, 1)
        path = substitute(path, server)
        body = substitute(copy.deepcopy(st.get("body")), server)
        kind = st.get("type", "json")
        accept = TABLE_ACCEPT if kind == "table" else "application/json"
        code, raw = server.request(method, path, body, CONTENT_TYPES[kind], accept)
        parsed = parse_body(raw, st.get("watch"))
        server.answers[st["id"]] = parsed
        collect_uids(parsed, server)
        out[st["id"]] = (code, parsed)
    return out


def show(v):
    if v is MISSING:
        return "<absent>"
    s = json.dumps(v, sort_keys=True)
    return s if len(s) <= 160 else s[:157] + "..."


MISSING = object()


def compare(a, b, path, diffs):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            compare(a.get(k, MISSING), b.get(k, MISSING), f"{path}.{k}", diffs)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            compare(x, y, f"{path}[{i}]", diffs)
    elif a != b:
        diffs.append((path or ".", a, b))


def read_expected(docs):
    with open(docs) as f:
        text = f.read()
    m = re.search(r"<!-- differential:begin -->(.*?)<!-- differential:end -->", text, re.S)
    if not m:
        raise SystemExit(f"{docs}: no <!-- differential:begin --> ... <!-- differential:end --> table")
    rows = []
    for line in m.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not line.strip().startswith("|") or set(cells[0]) <= set("-: "):
            continue
        if cells[0].lower() == "step":
            continue
        rows.append((globs(cells[0]), globs(cells[1]), cells[2]))
    return rows


def globs(cell):
    """A table cell of comma-separated `globs` -> one regular expression; only * is special."""
    alts = [c.strip().strip("`") for c in cell.split(",") if c.strip()]
    return re.compile("|".join("(?:" + re.escape(a).replace("\\*", ".*") + ")" for a in alts) + r"\Z")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--docs", required=True)
    ap.add_argument("--show-all", action="store_true", help="print every difference, listed or not")
    ap.add_argument("emu")
    ap.add_argument("real")
    args = ap.parse_args()
    with open(args.corpus) as f:
        steps = yaml.safe_load(f)
    ids = [s["id"] for s in steps]
    if len(ids) != len(set(ids)):
        raise SystemExit("corpus: duplicate step ids")
    # the client certificates and keys of the two kubeconfigs, as files, for the run only
    tmp = tempfile.mkdtemp(prefix="kcsi-differential.")
    try:
        emu = Server("emulator", args.emu, tmp)
        real = Server("real", args.real, tmp)
        a = run(emu, steps)
        b = run(real, steps)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    diffs = []
    for st in steps:
        sid = st["id"]
        (ca, ba), (cb, bb) = a[sid], b[sid]
        if ca != cb:
            diffs.append((sid, ":code", ca, cb))
            continue
        na = normalise(ba, emu, age_cols=table_age_cols(ba))
        nb = normalise(bb, real, age_cols=table_age_cols(bb))
        found = []
        compare(na, nb, "", found)
        diffs += [(sid, p, x, y) for p, x, y in found]
    rows = read_expected(args.docs)
    used = [0] * len(rows)
    unlisted = []
    for sid, path, x, y in diffs:
        line = f"{sid} {path}: emulator {show(x)}, real {show(y)}"
        hit = [i for i, (sg, pg, _) in enumerate(rows) if sg.match(sid) and pg.match(path)]
        for i in hit:
            used[i] += 1
        if not hit:
            unlisted.append(line)
        if args.show_all:
            print(("listed   " if hit else "UNLISTED ") + line)
    stale = [rows[i] for i, n in enumerate(used) if n == 0]
    for line in unlisted:
        print("new difference (fix kube-emulator or list it in docs/kube-emulator.md): " + line)
    for sg, pg, why in stale:
        print(f"listed difference not seen (fixed? remove the row): | {sg.pattern} | {pg.pattern} | {why} |")
    print(f"differential: {len(steps)} requests compared; {len(diffs)} field differences, "
          f"{len(diffs) - len(unlisted)} of them under the {len(rows)} listed in docs/kube-emulator.md; "
          f"{len(unlisted)} unlisted, {len(stale)} listed but not seen")
    return 1 if unlisted or stale else 0


if __name__ == "__main__":
    sys.exit(main())
