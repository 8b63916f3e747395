#!/usr/bin/env python3
"""http_hostile.py: what an attacker on the pod network can do to a plain-HTTP listener
(livenessprobe's /healthz, a sidecar's --http-endpoint), for the e2e.hostile_* scenarios.
Only 127.0.0.1/localhost: the tool refuses any other host.

  reopen HOST:PORT PATH CONNS PROBES
      CONNS connections that send nothing, each re-opened as soon as the server drops it; meanwhile
      PROBES legitimate GETs of PATH, one a second, each allowed 1 s (the kubelet's default probe
      timeout). Prints "answered=A probes=P drops=D" (A: probes answered 200 within 1 s).

  storm HOST:PORT PATH PID SECONDS
      For SECONDS, all at once: 1,000 silent connections (re-opened when dropped), 20 clients
      sending a header one byte a second, clients sending a 1 MB header (again and again), a
      client pipelining 10,000 requests that reads its answers, one that pipelines and never
      reads, and clients that half-close (a partial or a whole request, then shutdown(SHUT_WR),
      never reading). Meanwhile a legitimate GET of PATH every 250 ms, each allowed 1 s; the
      server process PID's resident memory and thread count are sampled before, during and after
      (the attack ended, every hostile socket closed, up to 10 s for them to come down).
      Prints one line of key=value figures (see report()).
"""
import os
import resource
import selectors
import socket
import sys
import threading
import time

SILENT = 1000
SLOW = 20
BIG = 4
BIG_HEADER = 1 << 20
PIPELINED = 10000
HALF = 20


def addr_of(arg):
    host, port = arg.rsplit(":", 1)
    if host not in ("127.0.0.1", "localhost", "::1", "[::1]"):
        sys.exit("http_hostile.py: only loopback addresses, not %s" % host)
    return host.strip("[]"), int(port)


def request(path):
    return ("GET %s HTTP/1.1\r\nHost: localhost\r\nUser-Agent: kcsi-e2e\r\n\r\n" % path).encode()


def probe(addr, path, timeout=1.0):
    """One legitimate GET (a new connection, as the kubelet's prober does); returns (status,
    seconds) with status 0 when no answer came within timeout."""
    t0 = time.monotonic()
    try:
        s = socket.create_connection(addr, timeout=timeout)
    except OSError:
        return 0, time.monotonic() - t0
    try:
        s.settimeout(max(0.01, timeout - (time.monotonic() - t0)))
        s.sendall(("GET %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n" %
                   path).encode())
        data = b""
        while b"\r\n" not in data:
            s.settimeout(max(0.01, timeout - (time.monotonic() - t0)))
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        line = data.split(b"\r\n", 1)[0].split()
        status = int(line[1]) if len(line) >= 2 and line[1].isdigit() else 0
    except (OSError, ValueError):
        status = 0
    finally:
        s.close()
    dt = time.monotonic() - t0
    return (status if dt <= timeout else 0), dt


def proc_sample(pid):
    rss = threads = 0
    fds = 0
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
                elif line.startswith("Threads:"):
                    threads = int(line.split()[1])
        fds = len(os.listdir("/proc/%d/fd" % pid))
    except OSError:
        pass
    return rss, threads, fds


class Hostile:
    """The hostile clients, on one selector thread. A client that reads sees the server's answers
    and its close (then it is re-opened); one that never reads is parked once it has sent its
    bytes and looked at once a second without reading (MSG_PEEK): a close with nothing unread
    re-opens it, and a half-closing client is replaced after two seconds whatever happened."""

    def __init__(self, addr, path):
        self.addr, self.path = addr, path
        self.sel = selectors.DefaultSelector()
        self.stop = threading.Event()
        self.drops = 0
        self.big_sent = 0
        self.pipelined_answers = 0
        self.errors = 0
        self.socks = {}  # socket -> state: kind, out (bytes still to send), read, parked

    def open(self, kind, out=b"", read=True, shut=False):
        s = socket.socket(socket.AF_INET6 if ":" in self.addr[0] else socket.AF_INET)
        s.setblocking(False)
        if s.connect_ex(self.addr) not in (0, 115):  # EINPROGRESS
            self.errors += 1
            s.close()
            return
        self.socks[s] = {"kind": kind, "out": out, "read": read, "shut": shut,
                         "parked": None, "slow": 0}
        self.sel.register(s, (selectors.EVENT_READ if read else 0) |
                          (selectors.EVENT_WRITE if out or not read else 0))

    def close(self, s, reopen=True):
        st = self.socks.pop(s)
        if st["parked"] is None:
            self.sel.unregister(s)
        s.close()
        if reopen and not self.stop.is_set():
            self.drops += 1
            self.start_one(st["kind"])

    def start_one(self, kind):
        req = request(self.path)
        if kind in ("silent", "slow"):
            self.open(kind)
        elif kind == "big":
            self.open(kind, b"GET " + self.path.encode() + b" HTTP/1.1\r\nHost: localhost\r\n"
                      b"X-Big: " + b"a" * BIG_HEADER + b"\r\n\r\n")
        elif kind == "pipeline":
            self.open(kind, req * PIPELINED)
        elif kind == "pipeline-noread":
            self.open(kind, req * PIPELINED, read=False)
        elif kind == "half":  # half a request, then shutdown(SHUT_WR)
            self.open(kind, req[: len(req) // 2], read=False, shut=True)
        elif kind == "half-whole":  # a whole request, then shutdown(SHUT_WR)
            self.open(kind, req, read=False, shut=True)

    def start_all(self):
        for _ in range(SILENT):
            self.start_one("silent")
        for _ in range(SLOW):
            self.start_one("slow")
        for _ in range(BIG):
            self.start_one("big")
        self.start_one("pipeline")
        self.start_one("pipeline-noread")
        for i in range(HALF):
            self.start_one("half" if i % 2 else "half-whole")

    def loop(self, until):
        next_tick = time.monotonic() + 1
        while not self.stop.is_set() and time.monotonic() < until:
            for key, ev in self.sel.select(timeout=0.1):
                if key.fileobj in self.socks:
                    self.on_event(key.fileobj, ev)
            if time.monotonic() >= next_tick:
                next_tick += 1
                self.tick()
        self.stop.set()
        for s in list(self.socks):
            self.close(s, reopen=False)
        self.sel.close()

    def tick(self):
        now = time.monotonic()
        for s, st in list(self.socks.items()):
            if st["kind"] == "slow" and st["parked"] is None:
                # one byte a second: a request line, then a header that never ends
                text = b"GET " + self.path.encode() + b" HTTP/1.1\r\nX-Slow: "
                i = st["slow"]
                st["slow"] += 1
                try:
                    s.send(text[i:i + 1] if i < len(text) else b"a")
                except BlockingIOError:
                    pass
                except OSError:
                    self.close(s)
            elif st["parked"] is not None:
                try:
                    gone = s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
                except BlockingIOError:
                    gone = False
                except OSError:
                    gone = True
                if gone or (st["shut"] and now - st["parked"] > 2):
                    self.close(s)

    def park(self, s, st):
        self.sel.unregister(s)
        st["parked"] = time.monotonic()
        if st["shut"]:
            try:
                s.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    def on_event(self, s, ev):
        st = self.socks[s]
        if ev & selectors.EVENT_WRITE:
            if st["out"]:
                try:
                    n = s.send(st["out"][:65536])
                except BlockingIOError:
                    n = 0
                except OSError:
                    self.close(s)
                    return
                if st["kind"] == "big":
                    self.big_sent += n
                st["out"] = st["out"][n:]
            if not st["out"]:
                if not st["read"]:
                    self.park(s, st)
                    return
                self.sel.modify(s, selectors.EVENT_READ)
        if ev & selectors.EVENT_READ:
            try:
                data = s.recv(65536)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                self.close(s)
                return
            if st["kind"] == "pipeline":
                self.pipelined_answers += data.count(b"HTTP/1.1 ")


def report(**kv):
    print(" ".join("%s=%s" % (k, v) for k, v in kv.items()), flush=True)


def reopen(addr, path, conns, probes):
    h = Hostile(addr, path)
    for _ in range(conns):
        h.start_one("silent")
    answered = 0
    lat = []
    t = threading.Thread(target=h.loop, args=(time.monotonic() + probes + 60,))
    t.start()
    time.sleep(1)
    for _ in range(probes):
        t0 = time.monotonic()
        status, dt = probe(addr, path)
        lat.append(dt)
        if status == 200:
            answered += 1
        time.sleep(max(0, 1 - (time.monotonic() - t0)))
    h.stop.set()
    t.join()
    report(answered=answered, probes=probes, drops=h.drops,
           max_ms=int(max(lat) * 1000))


def storm(addr, path, pid, seconds):
    base = proc_sample(pid)
    h = Hostile(addr, path)
    h.start_all()
    th = threading.Thread(target=h.loop, args=(time.monotonic() + seconds,))
    peak = list(base)
    samples = []
    ok = total = 0
    worst = 0.0
    th.start()
    time.sleep(0.5)  # the silent connections are in
    end = time.monotonic() + seconds - 0.5
    while time.monotonic() < end:
        t0 = time.monotonic()
        status, dt = probe(addr, path)
        total += 1
        if status == 200:
            ok += 1
        worst = max(worst, dt)
        smp = proc_sample(pid)
        samples.append(smp)
        peak = [max(a, b) for a, b in zip(peak, smp)]
        time.sleep(max(0, 0.25 - (time.monotonic() - t0)))
    th.join()
    # the attack is over: wait up to 10 s for the figures to come down
    after = proc_sample(pid)
    t_end = time.monotonic() + 10
    while time.monotonic() < t_end:
        after = proc_sample(pid)
        if after[1] <= base[1] + 1 and after[0] <= base[0] + 4096 and after[2] <= base[2] + 2:
            break
        time.sleep(0.25)
    status, _ = probe(addr, path)
    report(ok=ok, probes=total, worst_ms=int(worst * 1000), after_status=status,
           rss_kb_before=base[0], rss_kb_peak=peak[0], rss_kb_after=after[0],
           threads_before=base[1], threads_peak=peak[1], threads_after=after[1],
           fds_before=base[2], fds_peak=peak[2], fds_after=after[2],
           drops=h.drops, big_bytes_sent=h.big_sent, pipelined_answers=h.pipelined_answers)


def main():
    # a thousand sockets and more: the soft file limit may be 1,024
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    mode = sys.argv[1]
    if mode == "reopen" and len(sys.argv) == 6:
        reopen(addr_of(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    elif mode == "storm" and len(sys.argv) == 6:
        storm(addr_of(sys.argv[2]), sys.argv[3], int(sys.argv[4]), float(sys.argv[5]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
