#!/usr/bin/env python3
"""faults_check.py: the invariants of the fault test bed (tests/e2e/lib_hosts.sh, docs/faults.md).

Reads every host's kcsi-loopplugin log (its "Published volume ... target= node= mode=" and
"Unpublished volume ... target=" lines at -v=0), the controller-side driver's log (its
"Unpublished volume volume= node=" lines: ControllerUnpublishVolume, the detach) and the bed's
journal of faults (JSON lines: {"t": epoch, "event": "stop|cut|pause|heal|resume|oos|deleted",
"host": ..., "volume": ...}), and asserts:

  1. no ReadWriteOncePod volume (CSI mode SINGLE_NODE_SINGLE_WRITER, or named by --rwop) is
     published at two targets at overlapping intervals, on one host or two;
  2. no single-node volume (ReadWriteOnce: SINGLE_NODE_*) is published on two hosts at
     overlapping intervals, unless the earlier host had been stopped, cut off or paused before
     the later publish (its end is then unknown to the cluster); then the detach from that host
     (the controller's ControllerUnpublishVolume) must come before the later publish, and no
     earlier than max-wait-for-unmount after the pod's deletion ("deleted" in the journal), or
     after the node's out-of-service taint ("oos");
  3. (with --closed) every publish has its unpublish by the end.

Prints one line per interval and per finding; exit 1 when an invariant does not hold.
"""
import argparse
import json
import re
import sys
import time

KLOG = re.compile(r'^[IWEF](\d\d)(\d\d) (\d\d):(\d\d):(\d\d(?:\.\d+)?)\s')
FIELD = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)')
SINGLE_NODE = {1, 2, 6, 7}
SSW = 6
SLACK = 2.0  # seconds: the journal is written by a poller, the logs by the processes


def klog_time(line, year):
    m = KLOG.match(line)
    if not m:
        return None
    mo, d, h, mi, s = m.groups()
    base = time.mktime((year, int(mo), int(d), int(h), int(mi), 0, 0, 0, -1))
    return base + float(s)


def fields(line):
    out = {}
    for k, v in FIELD.findall(line):
        if v.startswith('"'):
            v = json.loads(v)
        out[k] = v
    return out


def read_host(host, path, year):
    """-> list of intervals {host, volume, target, mode, start, end (None: still published)}"""
    open_ = {}
    done = []
    with open(path, errors='replace') as f:
        for line in f:
            if 'Published volume ' not in line and 'Unpublished volume ' not in line:
                continue
            t = klog_time(line, year)
            if t is None:
                continue
            fl = fields(line)
            key = (fl.get('volume'), fl.get('target'))
            if 'Unpublished volume ' in line:
                iv = open_.pop(key, None)
                if iv:
                    iv['end'] = t
                    done.append(iv)
            elif key not in open_:  # a second Published of the same target: idempotent
                open_[key] = {'host': host, 'volume': key[0], 'target': key[1],
                              'mode': int(fl.get('mode', 1)), 'start': t, 'end': None}
    return done + list(open_.values())


def read_detaches(path, year):
    """-> {(volume, node): [times of ControllerUnpublishVolume]}"""
    out = {}
    with open(path, errors='replace') as f:
        for line in f:
            if 'Unpublished volume ' not in line or 'target=' in line:
                continue
            t = klog_time(line, year)
            fl = fields(line)
            if t is not None and 'node' in fl:
                out.setdefault((fl['volume'], fl['node']), []).append(t)
    return out


def overlap(a, b):
    inf = float('inf')
    return a['start'] < (b['end'] or inf) and b['start'] < (a['end'] or inf)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--host', action='append', default=[], help='NAME=LOG')
    ap.add_argument('--controller', required=True)
    ap.add_argument('--journal', required=True)
    ap.add_argument('--max-wait', type=float, required=True, help='seconds')
    ap.add_argument('--rwop', action='append', default=[], help='a ReadWriteOncePod volume ID')
    ap.add_argument('--closed', action='store_true')
    a = ap.parse_args()
    year = time.localtime().tm_year
    ivs = []
    for spec in a.host:
        name, path = spec.split('=', 1)
        ivs += read_host(name, path, year)
    detaches = read_detaches(a.controller, year)
    journal = [json.loads(l) for l in open(a.journal) if l.strip()]
    bad = []
    for iv in sorted(ivs, key=lambda i: i['start']):
        print('faults_check: %s %s %.1f..%s mode=%d %s' % (
            iv['host'], iv['volume'], iv['start'],
            '%.1f' % iv['end'] if iv['end'] else 'open', iv['mode'], iv['target']))
        if a.closed and iv['end'] is None:
            bad.append('%s: %s still published at %s' % (iv['host'], iv['volume'], iv['target']))
    for i, x in enumerate(ivs):
        for y in ivs[i + 1:]:
            if x['volume'] != y['volume'] or x['target'] == y['target'] or not overlap(x, y):
                continue
            if SSW in (x['mode'], y['mode']) or x['volume'] in a.rwop:
                bad.append('ReadWriteOncePod volume %s published into two pods at once: %s:%s '
                           'and %s:%s' % (x['volume'], x['host'], x['target'], y['host'],
                                          y['target']))
                continue
            if x['host'] == y['host'] or not ({x['mode'], y['mode']} & SINGLE_NODE):
                continue
            first, later = (x, y) if x['start'] <= y['start'] else (y, x)
            why = forced_ok(first, later, journal, detaches, a.max_wait)
            if why.startswith('ok'):
                print('faults_check: %s on %s and %s overlap: %s' % (
                    x['volume'], first['host'], later['host'], why))
            else:
                bad.append('volume %s published on %s and %s at once: %s' % (
                    x['volume'], first['host'], later['host'], why))
    for b in bad:
        print('faults_check: VIOLATION: ' + b)
    print('faults_check: %d intervals, %d violations' % (len(ivs), len(bad)))
    return 1 if bad else 0


def forced_ok(first, later, journal, detaches, max_wait):
    """Whether the later host's publish while the first host's was still open is the forced
    detach the cluster may do; a reason either way."""
    faults = [e for e in journal if e.get('host') == first['host']
              and e['event'] in ('stop', 'cut', 'pause') and e['t'] <= later['start']]
    if not faults:
        return 'the first host had no fault (stop, cut, pause) before the second publish'
    td = [t for t in detaches.get((first['volume'], first['host']), []) if t <= later['start'] + SLACK]
    if not td:
        return 'no detach from %s before the publish on %s' % (first['host'], later['host'])
    td = td[-1]
    # this fault's episode only: what the journal says about the host since its fault
    since = faults[-1]['t'] - SLACK
    oos = [e['t'] for e in journal if e['event'] == 'oos' and e.get('host') == first['host']
           and since <= e['t'] <= td + SLACK]
    if oos:
        return 'ok: detached %.1f s after the out-of-service taint' % (td - oos[0])
    dels = [e['t'] for e in journal if e['event'] == 'deleted' and e.get('host') == first['host']
            and since <= e['t'] <= td + SLACK]
    if not dels:
        return 'detached at %.1f with neither a pod deletion nor out-of-service before it' % td
    waited = td - dels[-1]
    if waited + SLACK < max_wait:
        return 'detached %.1f s after the pod deletion, before max-wait-for-unmount (%.0f s)' % (
            waited, max_wait)
    return 'ok: detached %.1f s after the pod deletion (max-wait-for-unmount %.0f s)' % (
        waited, max_wait)


if __name__ == '__main__':
    sys.exit(main())
