#!/usr/bin/env python3
"""h2_hostile_driver.py SOCKET WINDOW: a hostile CSI driver (a raw HTTP/2 gRPC server on a unix
socket) for e2e.hostile_driver (issue 34): what grpc-go's server cannot be made to do.

Every call is answered OK with an empty message (a valid answer to Probe and to
ControllerPublishVolume), unless its request body holds a tag:
  hostile-big         a response message of 100 MB, sent as fast as the client's flow-control
                      window lets, until the client resets the stream;
  hostile-forever     a response whose 3 MiB message arrives at 50 KiB/s: the stream never ends
                      within any sensible deadline;
  hostile-notrailers  a whole response message, then nothing: trailers never sent;
  hostile-noread      the driver stops reading the connection once it has seen the tag;
  hostile-nowindow    the driver reads but never grants more flow-control window (run it with
                      a WINDOW small enough that the request does not fit).
WINDOW is the SETTINGS_INITIAL_WINDOW_SIZE and connection window the driver grants at the
start. Prints one line per hostile stream when it ends: "stream tag=T bytes=N reset=0|1 secs=S".
"""
import os
import socket
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fuzz"))
from gen_csi_wire_seeds import (DATA, END_HEADERS, END_STREAM, HEADERS, PING,  # noqa: E402
                                RST_STREAM, SETTINGS, WINDOW_UPDATE, frame, grpc_msg, hpack)

GOAWAY = 7
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
TAGS = (b"hostile-big", b"hostile-forever", b"hostile-notrailers", b"hostile-noread",
        b"hostile-nowindow")
LIFE = 120  # no hostile stream outlives this many seconds


def log(*a):
    print(*a, flush=True)


class Conn:
    def __init__(self, sock, window):
        self.s, self.window = sock, window
        self.wlock = threading.Lock()
        self.cv = threading.Condition()
        self.conn_win = 65535          # what this side may still send
        self.init_win = 65535
        self.stream_win = {}
        self.reset = set()
        self.bodies = {}
        self.closed = False
        self.read_all = threading.Event()  # set once the reader saw the connection's end
        self.nowindow = False

    def send(self, data):
        with self.wlock:
            self.s.sendall(data)

    def headers(self, sid, h, end=False):
        self.send(frame(HEADERS, END_HEADERS | (END_STREAM if end else 0), sid, hpack(h)))

    def data(self, sid, payload):
        """Sends payload on sid within the client's windows; False once the stream is reset."""
        off = 0
        while off < len(payload):
            with self.cv:
                while not self.closed and sid not in self.reset and \
                        (self.conn_win <= 0 or self.stream_win.get(sid, 0) <= 0):
                    self.cv.wait(1)
                if self.closed or sid in self.reset:
                    return False
                n = min(16384, len(payload) - off, self.conn_win, self.stream_win[sid])
                self.conn_win -= n
                self.stream_win[sid] -= n
            self.send(frame(DATA, 0, sid, payload[off:off + n]))
            off += n
        return True

    def gone(self, sid):
        with self.cv:
            return self.closed or sid in self.reset

    def serve(self):
        settings = struct.pack(">HI", 4, self.window) + struct.pack(">HI", 3, 1000)
        self.send(frame(SETTINGS, 0, 0, settings))
        if self.window > 65535:
            self.send(frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", self.window - 65535)))
        buf = b""
        while len(buf) < len(PREFACE):
            b = self.s.recv(65536)
            if not b:
                return
            buf += b
        buf = buf[len(PREFACE):]
        while True:
            while len(buf) < 9:
                b = self.s.recv(65536)
                if not b:
                    return
                buf += b
            ln = struct.unpack(">I", b"\0" + buf[:3])[0]
            while len(buf) < 9 + ln:
                b = self.s.recv(65536)
                if not b:
                    return
                buf += b
            ftype, flags, sid = buf[3], buf[4], struct.unpack(">I", buf[5:9])[0] & 0x7fffffff
            payload, buf = buf[9:9 + ln], buf[9 + ln:]
            if not self.frame(ftype, flags, sid, payload):
                return

    def frame(self, ftype, flags, sid, payload):
        if ftype == SETTINGS and not flags & 1:
            for i in range(0, len(payload) - 5, 6):
                k, v = struct.unpack(">HI", payload[i:i + 6])
                if k == 4:
                    with self.cv:
                        for s in self.stream_win:
                            self.stream_win[s] += v - self.init_win
                        self.init_win = v
                        self.cv.notify_all()
            self.send(frame(SETTINGS, 1, 0))
        elif ftype == PING and not flags & 1:
            self.send(frame(PING, 1, 0, payload))
        elif ftype == WINDOW_UPDATE:
            inc = struct.unpack(">I", payload)[0] & 0x7fffffff
            with self.cv:
                if sid == 0:
                    self.conn_win += inc
                elif sid in self.stream_win:
                    self.stream_win[sid] += inc
                self.cv.notify_all()
        elif ftype == RST_STREAM:
            with self.cv:
                self.reset.add(sid)
                self.cv.notify_all()
        elif ftype == GOAWAY:
            return False
        elif ftype == HEADERS:
            with self.cv:
                self.stream_win[sid] = self.init_win
            self.bodies[sid] = b""
            if flags & END_STREAM:
                self.dispatch(sid)
        elif ftype == DATA and sid in self.bodies:
            body = self.bodies[sid]
            if len(body) < 65536:
                self.bodies[sid] = body + payload
            if b"hostile-noread" in self.bodies[sid]:
                log("stream tag=hostile-noread bytes=%d reset=0 secs=0" % len(self.bodies[sid]))
                return self.park()
            if b"hostile-nowindow" in self.bodies[sid]:
                self.nowindow = True
            if payload and not self.nowindow:
                inc = struct.pack(">I", len(payload))
                self.send(frame(WINDOW_UPDATE, 0, 0, inc) + frame(WINDOW_UPDATE, 0, sid, inc))
            if flags & END_STREAM:
                self.dispatch(sid)
        return True

    def park(self):
        """Never reads this connection again; it is closed when the client's end is (or at LIFE)."""
        end = time.monotonic() + LIFE
        while time.monotonic() < end:
            time.sleep(0.5)
        return False

    def dispatch(self, sid):
        body = self.bodies.pop(sid, b"")
        tag = next((t for t in TAGS if t in body), None)
        threading.Thread(target=self.answer, args=(sid, tag), daemon=True).start()

    def answer(self, sid, tag):
        ok = [(":status", "200"), ("content-type", "application/grpc")]
        start, sent = time.monotonic(), 0
        try:
            self.headers(sid, ok)
            if tag is None:
                self.data(sid, grpc_msg())
                self.headers(sid, [("grpc-status", "0")], end=True)
                return
            if tag == b"hostile-big":
                total = 100 * 1000 * 1000
                chunk = b"\x0a" * (1 << 20)
                if self.data(sid, grpc_msg(length=total)):
                    while sent < total and self.data(sid, chunk[:min(len(chunk), total - sent)]):
                        sent += min(len(chunk), total - sent)
                if sent == total:
                    self.headers(sid, [("grpc-status", "0")], end=True)
            elif tag == b"hostile-forever":
                if self.data(sid, grpc_msg(length=3 << 20)):
                    while time.monotonic() - start < LIFE and self.data(sid, b"\x0a" * 1024):
                        sent += 1024
                        time.sleep(0.02)
            else:  # notrailers (nowindow: the request never ends, so no answer starts)
                self.data(sid, grpc_msg())
                while time.monotonic() - start < LIFE and not self.gone(sid):
                    time.sleep(0.05)
        except OSError:
            pass
        if tag:
            # A client that resets a stream and then closes the connection makes this thread's
            # write fail (EPIPE) as soon as it closes, while the RST_STREAM it sent before may
            # still wait in the socket for the reader thread: the record is written once the
            # reader has taken everything the client sent.
            if sid not in self.reset and (self.closed or not self.gone(sid)):
                self.read_all.wait(10)
            log("stream tag=%s bytes=%d reset=%d secs=%.1f" % (
                tag.decode(), sent, sid in self.reset, time.monotonic() - start))


def main():
    path, window = sys.argv[1], int(sys.argv[2])
    try:
        os.unlink(path)
    except OSError:
        pass
    ls = socket.socket(socket.AF_UNIX)
    ls.bind(path)
    ls.listen(64)
    while True:
        s, _ = ls.accept()
        c = Conn(s, window)

        def run(c=c, s=s):
            try:
                c.serve()
            except OSError:
                pass
            with c.cv:
                c.closed = True
                c.cv.notify_all()
            c.read_all.set()
            s.close()
        threading.Thread(target=run, daemon=True).start()


if __name__ == "__main__":
    main()
