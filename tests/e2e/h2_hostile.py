#!/usr/bin/env python3
"""h2_hostile.py SOCKET PID SECONDS KCSI [BOUND]: a hostile HTTP/2 client against a CSI driver's unix
socket, as the kubelet and a sidecar see it (issue 34), for e2e.hostile_csi_socket.

For SECONDS, five attackers at once, each re-connecting when the server drops it:
  rapid-reset   a Probe call, then RST_STREAM at once, on stream after stream;
  continuation  a HEADERS frame without END_HEADERS, then CONTINUATION frames without end;
  settings      SETTINGS frames, never reading the server's acknowledgements;
  window        WINDOW_UPDATE frames on the connection and on open streams;
  noread        100 Probe calls on one connection whose answers are never read.
Meanwhile a legitimate Probe (`KCSI --endpoint unix://SOCKET identity probe`, a new connection
each) every 250 ms, allowed BOUND seconds (1 by default); PID's RSS, threads and file descriptors are sampled before,
during and after (up to 10 s for them to come down). Prints one line of key=value figures.
"""
import os
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fuzz"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_csi_wire_seeds import (CONTINUATION, DATA, END_STREAM, EMPTY_SETTINGS, HEADERS,  # noqa
                                RST_STREAM, SETTINGS, WINDOW_UPDATE, frame, grpc_msg, hpack,
                                request_headers)
from http_hostile import proc_sample  # noqa: E402

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
PROBE = "/csi.v1.Identity/Probe"


def probe_call(sid):
    return request_headers(PROBE, sid) + frame(DATA, END_STREAM, sid, grpc_msg())


class Attacker(threading.Thread):
    def __init__(self, path, kind, stop):
        super().__init__(daemon=True)
        self.path, self.kind, self.stop = path, kind, stop
        self.drops = 0   # connections the server ended
        self.units = 0   # resets, frames or bytes sent, by kind

    def connect(self):
        s = socket.socket(socket.AF_UNIX)
        s.connect(self.path)
        s.settimeout(1)
        s.sendall(PREFACE + EMPTY_SETTINGS)
        return s

    def run(self):
        while not self.stop.is_set():
            try:
                s = self.connect()
            except OSError:
                time.sleep(0.05)
                continue
            try:
                getattr(self, "attack_" + self.kind.replace("-", "_"))(s)
            except OSError:
                self.drops += 1
            finally:
                s.close()

    def attack_rapid_reset(self, s):
        sid = 1
        while not self.stop.is_set():
            s.sendall(probe_call(sid) + frame(RST_STREAM, 0, sid, (8).to_bytes(4, "big")))
            self.units += 1
            sid += 2
            if sid > 2 ** 31 - 2:
                return

    def attack_continuation(self, s):
        block = hpack([(":method", "POST"), (":scheme", "http"), (":path", PROBE),
                       (":authority", "localhost"), ("content-type", "application/grpc")])
        s.sendall(frame(HEADERS, 0, 1, block))
        filler = hpack([("x-filler", "a" * 16000)])
        while not self.stop.is_set():
            s.sendall(frame(CONTINUATION, 0, 1, filler))
            self.units += len(filler)

    def attack_settings(self, s):
        one = frame(SETTINGS, 0, 0, (4).to_bytes(2, "big") + (65535).to_bytes(4, "big"))
        while not self.stop.is_set():
            s.sendall(one * 64)
            self.units += 64

    def attack_window(self, s):
        sid = 1
        while not self.stop.is_set():
            # a stream left open (no END_STREAM), then window updates on it and the connection
            s.sendall(request_headers(PROBE, sid) +
                      (frame(WINDOW_UPDATE, 0, 0, (1).to_bytes(4, "big")) +
                       frame(WINDOW_UPDATE, 0, sid, (1).to_bytes(4, "big"))) * 32)
            self.units += 64
            sid += 2

    def attack_noread(self, s):
        s.sendall(b"".join(probe_call(1 + 2 * i) for i in range(100)))
        self.units += 100
        while not self.stop.is_set():
            time.sleep(0.1)  # held open, nothing read


def legit(kcsi, path, bound):
    t0 = time.monotonic()
    try:
        r = subprocess.run([kcsi, "--endpoint", "unix://" + path, "--timeout", "%gs" % bound,
                            "identity", "probe"], capture_output=True, timeout=bound + 0.5)
        ok = r.returncode == 0
    except subprocess.TimeoutExpired:
        ok = False
    dt = time.monotonic() - t0
    return ok and dt <= bound, dt


def main():
    if len(sys.argv) not in (5, 6):
        sys.exit(__doc__)
    path, pid, seconds, kcsi = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
    bound = float(sys.argv[5]) if len(sys.argv) == 6 else 1.0
    base = proc_sample(pid)
    stop = threading.Event()
    kinds = ["rapid-reset", "continuation", "settings", "window", "noread"]
    attackers = [Attacker(path, k, stop) for k in kinds]
    for a in attackers:
        a.start()
    peak = list(base)
    ok = total = 0
    worst = 0.0
    end = time.monotonic() + seconds
    time.sleep(0.3)
    while time.monotonic() < end:
        t0 = time.monotonic()
        good, dt = legit(kcsi, path, bound)
        total += 1
        ok += good
        worst = max(worst, dt)
        peak = [max(a, b) for a, b in zip(peak, proc_sample(pid))]
        time.sleep(max(0, 0.25 - (time.monotonic() - t0)))
    stop.set()
    for a in attackers:
        a.join(5)
    after = proc_sample(pid)
    t_end = time.monotonic() + 10
    while time.monotonic() < t_end:
        after = proc_sample(pid)
        if after[1] <= base[1] + 1 and after[0] <= base[0] + 4096 and after[2] <= base[2] + 2:
            break
        time.sleep(0.25)
    good, _ = legit(kcsi, path, bound)
    figures = dict(ok=ok, probes=total, worst_ms=int(worst * 1000), after_ok=int(good),
                   rss_kb_before=base[0], rss_kb_peak=peak[0], rss_kb_after=after[0],
                   threads_before=base[1], threads_peak=peak[1], threads_after=after[1],
                   fds_before=base[2], fds_peak=peak[2], fds_after=after[2])
    for a in attackers:
        figures[a.kind.replace("-", "_") + "_drops"] = a.drops
        figures[a.kind.replace("-", "_") + "_sent"] = a.units
    print(" ".join("%s=%s" % kv for kv in figures.items()), flush=True)


if __name__ == "__main__":
    main()
