#!/usr/bin/env python3
"""h2_load.py SOCKET MODE N PER: raw HTTP/2 from a client that does not wait for answers, for
e2e.csi_server_bounds. Modes:
  queue  N connections, each sends PER complete Probe requests and closes (the calls stay queued
         behind a slow handler unless the server drops them when their connection goes);
  cancel one connection sends N requests and resets each (RST_STREAM CANCEL) right after;
  expire one connection sends N requests with a 50 ms grpc-timeout and stays open PER seconds,
         reading, so they expire in the queue and the server answers DEADLINE_EXCEEDED on
         streams that are still open; prints the bytes of answers it read;
  bigmeta one connection sends a Probe whose header block carries N bytes of metadata (HEADERS
         and CONTINUATION), then a GetPluginInfo on stream 3, and reads for up to PER seconds;
         prints "reset=<RST_STREAM error code of stream 1, or none> answered=<yes|no>" (a DATA
         frame on stream 3) "open=<yes|no>" (the connection was not closed or sent GOAWAY).
Frames come from tests/fuzz/gen_csi_wire_seeds.py (the fuzzer's seed writer)."""
import os
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fuzz"))
from gen_csi_wire_seeds import (DATA, END_STREAM, EMPTY_SETTINGS, GOAWAY, RST_STREAM,  # noqa: E402
                                frame, grpc_msg, header_frames, hpack, request_headers)

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def probe(stream):
    return request_headers("/csi.v1.Identity/Probe", stream) + \
        frame(DATA, END_STREAM, stream, grpc_msg())


def connect(path):
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    s.settimeout(2)
    return s


def main():
    path, mode, n, per = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    if mode == "queue":
        req = b"".join(probe(1 + 2 * i) for i in range(per))
        for _ in range(n):
            s = connect(path)
            s.sendall(PREFACE + EMPTY_SETTINGS + req)
            try:
                s.recv(4096)  # the server's SETTINGS: it is reading our bytes
            except OSError:
                pass
            time.sleep(0.002)
            s.close()
    elif mode == "cancel":
        s = connect(path)
        s.sendall(PREFACE + EMPTY_SETTINGS)
        sent = 0
        try:
            for i in range(n):
                sid = 1 + 2 * i
                s.sendall(probe(sid) + frame(RST_STREAM, 0, sid, (8).to_bytes(4, "big")))
                sent += 1
        except OSError as e:  # nghttp2's rapid-reset protection may end the connection
            print(f"h2_load: the server ended the connection after {sent} reset calls ({e})")
        time.sleep(0.5)
        s.close()
    elif mode == "expire":
        s = connect(path)
        s.sendall(PREFACE + EMPTY_SETTINGS + b"".join(
            request_headers("/csi.v1.Identity/Probe", 1 + 2 * i, timeout="50m") +
            frame(DATA, END_STREAM, 1 + 2 * i, grpc_msg()) for i in range(n)))
        got = b""
        end = time.time() + per
        s.settimeout(0.2)
        while time.time() < end:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                continue
            if not chunk:
                break
            got += chunk
        s.close()
        print(len(got))
    elif mode == "bigmeta":
        big = hpack([(":method", "POST"), (":scheme", "http"),
                     (":path", "/csi.v1.Identity/Probe"), (":authority", "localhost"),
                     ("content-type", "application/grpc"), ("te", "trailers"), ("x-big", "a" * n)])
        s = connect(path)
        s.sendall(PREFACE + EMPTY_SETTINGS + header_frames(1, big) +
                  frame(DATA, END_STREAM, 1, grpc_msg()) +
                  request_headers("/csi.v1.Identity/GetPluginInfo", 3) +
                  frame(DATA, END_STREAM, 3, grpc_msg()))
        buf, reset, answered, is_open = b"", "none", False, True
        end = time.time() + per
        s.settimeout(0.2)
        while time.time() < end and not (answered and reset != "none"):
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                chunk = b""
            if not chunk:
                is_open = False
                break
            buf += chunk
            while len(buf) >= 9:
                length = int.from_bytes(buf[:3], "big")
                if len(buf) < 9 + length:
                    break
                ftype, sid = buf[3], int.from_bytes(buf[5:9], "big") & 0x7fffffff
                payload, buf = buf[9:9 + length], buf[9 + length:]
                if ftype == RST_STREAM and sid == 1:
                    reset = str(int.from_bytes(payload[:4], "big"))
                elif ftype == DATA and sid == 3 and length > 0:
                    answered = True
                elif ftype == GOAWAY:
                    is_open = False
        s.close()
        print(f"reset={reset} answered={'yes' if answered else 'no'} "
              f"open={'yes' if is_open else 'no'}")
    else:
        sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main()
