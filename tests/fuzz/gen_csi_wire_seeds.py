#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_csi_wire (tests/fuzz/corpus/fuzz_csi_wire/).

Each seed is the mode byte (see fuzz_csi_wire.c) and then the mode's input. The server and client
seeds are real HTTP/2 frames with header blocks HPACK-encoded as literals without indexing, so
that the fuzzer starts from calls both sides complete (OK, gRPC errors, HTTP errors, resets)
rather than from frames nghttp2 refuses at once.

    python3 tests/fuzz/gen_csi_wire_seeds.py [OUT_DIR]
"""
import os
import struct
import sys

DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = \
    0, 1, 3, 4, 6, 7, 8, 9
END_STREAM, END_HEADERS = 0x1, 0x4

MODE_WIRE, MODE_SERVER, MODE_CLIENT, MODE_CLIENT_AT_ONCE = 0, 1, 2, 3


def frame(ftype, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + \
        struct.pack(">I", stream) + payload


def hpack_int(value, prefix_bits, first=0):
    """An HPACK integer with an N-bit prefix (RFC 7541, 5.1)."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out = [first | limit]
    value -= limit
    while value >= 128:
        out.append(value % 128 + 128)
        value //= 128
    out.append(value)
    return bytes(out)


def hpack(headers):
    """Literal header fields without indexing, new names, no Huffman (RFC 7541, 6.2.2)."""
    out = b""
    for name, value in headers:
        name, value = name.encode(), value.encode() if isinstance(value, str) else value
        out += b"\x00" + hpack_int(len(name), 7) + name + hpack_int(len(value), 7) + value
    return out


def header_frames(stream, block, flags=0):
    """A header block as HEADERS and CONTINUATION frames of at most 16,384 bytes."""
    chunks = [block[i:i + 16384] for i in range(0, len(block), 16384)] or [b""]
    out = b""
    for i, c in enumerate(chunks):
        last = END_HEADERS if i == len(chunks) - 1 else 0
        out += frame(HEADERS, flags | last, stream, c) if i == 0 else \
            frame(CONTINUATION, last, stream, c)
    return out


def grpc_msg(body=b"", flag=0, length=None):
    return bytes([flag]) + struct.pack(">I", len(body) if length is None else length) + body


def request_headers(path, stream=1, timeout=None, method="POST", ctype="application/grpc",
                    end_stream=False):
    h = [(":method", method), (":scheme", "http"), (":path", path), (":authority", "localhost"),
         ("content-type", ctype), ("te", "trailers")]
    if timeout:
        h.append(("grpc-timeout", timeout))
    return frame(HEADERS, END_HEADERS | (END_STREAM if end_stream else 0), stream, hpack(h))


def call(path, stream=1, body=b"", **kw):
    return request_headers(path, stream, **kw) + frame(DATA, END_STREAM, stream, grpc_msg(body))


EMPTY_SETTINGS = frame(SETTINGS, 0, 0)
PROBE = "/csi.v1.Identity/Probe"
INFO = "/csi.v1.Identity/GetPluginInfo"
CAPS = "/csi.v1.Identity/GetPluginCapabilities"


def server_seeds():
    s = EMPTY_SETTINGS
    yield "server_probe", s + call(PROBE, timeout="1S")
    yield "server_plugin_info", s + call(INFO)
    yield "server_error_message", s + call(CAPS)
    yield "server_two_streams", s + request_headers(PROBE, 1) + request_headers(INFO, 3) + \
        frame(DATA, END_STREAM, 3, grpc_msg()) + frame(DATA, END_STREAM, 1, grpc_msg())
    yield "server_unknown_method", s + call("/csi.v1.Controller/CreateVolume")
    yield "server_not_post", s + call(PROBE, method="GET")
    yield "server_bad_content_type", s + call(PROBE, ctype="application/json")
    yield "server_compressed", s + request_headers(PROBE) + \
        frame(DATA, END_STREAM, 1, grpc_msg(b"\x00", flag=1))
    yield "server_too_large", s + request_headers(PROBE) + \
        frame(DATA, END_STREAM, 1, grpc_msg(length=0x7fffffff))
    yield "server_two_messages", s + request_headers(PROBE) + \
        frame(DATA, 0, 1, grpc_msg()) + frame(DATA, END_STREAM, 1, grpc_msg())
    yield "server_split_message", s + request_headers(INFO) + frame(DATA, 0, 1, b"\x00\x00") + \
        frame(DATA, 0, 1, b"\x00\x00\x02") + frame(DATA, END_STREAM, 1, b"\x0a\x00")
    yield "server_no_message", s + request_headers(PROBE, end_stream=True)
    yield "server_truncated", s + request_headers(PROBE) + \
        frame(DATA, END_STREAM, 1, grpc_msg(length=10)[:7])
    yield "server_deadline_passed", s + call(PROBE, timeout="1n")
    yield "server_cancel", s + call(PROBE) + frame(RST_STREAM, 0, 1, struct.pack(">I", 8))
    yield "server_ping_window_goaway", s + frame(PING, 0, 0, b"12345678") + \
        frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 1 << 20)) + call(PROBE) + \
        frame(GOAWAY, 0, 0, struct.pack(">II", 1, 0))
    yield "server_long_path", s + call("/" + "x" * 600)
    # 20,000 bytes of metadata: past CSI_WIRE_MAX_HEADER_LIST (16 KiB), in two frames
    yield "server_big_metadata", s + header_frames(1, hpack(
        [(":method", "POST"), (":scheme", "http"), (":path", PROBE), (":authority", "x"),
         ("content-type", "application/grpc"), ("x-meta", "m" * 20000)])) + \
        frame(DATA, END_STREAM, 1, grpc_msg()) + call(PROBE, stream=3)


def response_headers(extra=(), end_stream=False, status="200"):
    h = [(":status", status), ("content-type", "application/grpc")] + list(extra)
    return frame(HEADERS, END_HEADERS | (END_STREAM if end_stream else 0), 1, hpack(h))


def trailers(code="0", message=None):
    h = [("grpc-status", code)] + ([("grpc-message", message)] if message else [])
    return frame(HEADERS, END_HEADERS | END_STREAM, 1, hpack(h))


def client_seeds():
    ready = b"\x0a\x02\x08\x01"  # ProbeResponse{ready: {value: true}}
    ok = response_headers() + frame(DATA, 0, 1, grpc_msg()) + trailers()
    yield "client_ok_empty", ok
    yield "client_ok_ready", response_headers() + frame(DATA, 0, 1, grpc_msg(ready)) + trailers()
    yield "client_ok_split", response_headers() + frame(DATA, 0, 1, grpc_msg(ready)[:3]) + \
        frame(DATA, 0, 1, grpc_msg(ready)[3:]) + trailers()
    yield "client_trailers_only", response_headers(
        [("grpc-status", "5"), ("grpc-message", "volume%20vol-1%20not%20found%0A%zz%00")],
        end_stream=True)
    yield "client_error_after_data", response_headers() + frame(DATA, 0, 1, grpc_msg(ready)) + \
        trailers("13", "caf%C3%A9")
    yield "client_http_503", frame(HEADERS, END_HEADERS | END_STREAM, 1,
                                   hpack([(":status", "503")]))
    yield "client_no_status", response_headers() + frame(DATA, END_STREAM, 1, grpc_msg())
    yield "client_no_message", response_headers() + trailers()
    yield "client_bad_content_type", frame(HEADERS, END_HEADERS, 1, hpack(
        [(":status", "200"), ("content-type", "text/html")])) + trailers()
    yield "client_compressed", response_headers() + frame(DATA, 0, 1, grpc_msg(b"x", flag=1)) + \
        trailers()
    yield "client_too_large", response_headers() + \
        frame(DATA, 0, 1, grpc_msg(length=0x7fffffff)) + trailers()
    yield "client_two_messages", response_headers() + \
        frame(DATA, 0, 1, grpc_msg() + grpc_msg()) + trailers()
    yield "client_rst_refused", frame(RST_STREAM, 0, 1, struct.pack(">I", 7))
    yield "client_rst_cancel", response_headers() + frame(RST_STREAM, 0, 1, struct.pack(">I", 8))
    yield "client_goaway", frame(GOAWAY, 0, 0, struct.pack(">II", 0, 0))
    yield "client_settings_ping", frame(SETTINGS, 1, 0) + frame(PING, 0, 0, b"abcdefgh") + ok
    yield "client_big_trailers", response_headers() + frame(DATA, 0, 1, grpc_msg()) + \
        header_frames(1, hpack([("grpc-status", "0"), ("x-meta", "m" * 20000)]), END_STREAM)
    yield "client_status_out_of_range", response_headers([("grpc-status", "999")],
                                                         end_stream=True)


def wire_seeds():
    yield "wire_timeout", b"10S"
    yield "wire_timeout_max", b"99999999H"
    yield "wire_message", b"\x08caf%C3%A9 %zz %00 100%25"
    # accumulator: limit 16, chunk sizes 1 and 3, then "hello" as a length-prefixed message
    yield "wire_accumulator", bytes([16, 2, 1, 3]) + grpc_msg(b"hello")
    yield "wire_accumulator_too_many", bytes([8, 1, 0]) + grpc_msg(b"ok") + b"!"


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "corpus", "fuzz_csi_wire")
    os.makedirs(out, exist_ok=True)
    seeds = [(n, MODE_WIRE, b) for n, b in wire_seeds()]
    seeds += [(n, MODE_SERVER, b) for n, b in server_seeds()]
    seeds += [(n, MODE_CLIENT, b) for n, b in client_seeds()]
    seeds += [("client_at_once_settings_ack", MODE_CLIENT_AT_ONCE, frame(SETTINGS, 1, 0)),
              ("client_at_once_garbage", MODE_CLIENT_AT_ONCE, b"\x00\x00\x04\x08\x00\x00\x00")]
    for name, mode, body in seeds:
        with open(os.path.join(out, name), "wb") as f:
            f.write(bytes([mode]) + body)
    print(f"{len(seeds)} seeds in {out}")


if __name__ == "__main__":
    main()
