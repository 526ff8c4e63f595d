#!/usr/bin/env python3
"""A hostile client of the rendezvous store, for tests/dist/test_store_hostile.sh.

Usage: store_client.py PORT ACTION [ARGS]
  set-dead-old TEXT        SET fsdpc/dead in the wire format without a token
  set-dead TOKEN TEXT      SET fsdpc/dead carrying TOKEN
  big TOKEN                one SET of 1 MiB + 1 byte, then 120 SETs of 1 MiB; prints how
                           many were accepted
  idle N SECONDS           opens N connections, sends nothing, holds them
STORE_WIRE=old speaks the wire format from before job tokens (no token
field), to show what the same attack did to a store of that version.
Each reply is printed as 'reply STATUS TEXT'; a closed connection as 'closed'.
"""
import os
import resource
import socket
import struct
import sys
import time

HOST = "127.0.0.1"
OP_SET = 1


def frame_new(op, token, key, payload):
    if os.environ.get("STORE_WIRE") == "old":
        return frame_old(op, key, payload)
    body = bytes([op, len(token)]) + token + struct.pack("<I", len(key)) + key + payload
    return struct.pack("<I", len(body)) + body


def frame_old(op, key, payload):
    body = bytes([op]) + struct.pack("<I", len(key)) + key + payload
    return struct.pack("<I", len(body)) + body


def recv_reply(s):
    s.settimeout(5)
    try:
        hdr = b""
        while len(hdr) < 4:
            c = s.recv(4 - len(hdr))
            if not c:
                return None
            hdr += c
        (n,) = struct.unpack("<I", hdr)
        body = b""
        while len(body) < n:
            c = s.recv(n - len(body))
            if not c:
                return None
            body += c
        return body
    except (ConnectionResetError, socket.timeout, BrokenPipeError):
        return None


def send(port, data):
    s = socket.create_connection((HOST, port), timeout=5)
    try:
        s.sendall(data)
    except (ConnectionResetError, BrokenPipeError):
        print("closed")
        return None
    r = recv_reply(s)
    s.close()
    if r is None:
        print("closed")
    else:
        print("reply %d %s" % (r[0], r[1:].decode("utf-8", "replace")))
    return r


def main():
    port = int(sys.argv[1])
    act = sys.argv[2]
    if act == "set-dead-old":
        send(port, frame_old(OP_SET, b"fsdpc/dead", sys.argv[3].encode()))
    elif act == "set-dead":
        send(port, frame_new(OP_SET, sys.argv[3].encode(), b"fsdpc/dead", sys.argv[4].encode()))
    elif act == "big":
        tok = sys.argv[3].encode()
        r = send(port, frame_new(OP_SET, tok, b"big/0", b"x" * ((1 << 20) + 1)))
        ok = 0
        s = socket.create_connection((HOST, port), timeout=10)
        for i in range(120):
            try:
                s.sendall(frame_new(OP_SET, tok, b"big/%d" % (i + 1), b"y" * (1 << 20)))
            except (ConnectionResetError, BrokenPipeError):
                break
            r = recv_reply(s)
            if r is None:
                break
            if r[0] == 0:
                ok += 1
        print("accepted %d of 120" % ok)
    elif act == "idle":
        n, secs = int(sys.argv[3]), float(sys.argv[4])
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, n + 64), hard))
        socks = []
        for _ in range(n):
            try:
                socks.append(socket.create_connection((HOST, port), timeout=5))
            except OSError:
                break
        print("opened %d" % len(socks), flush=True)
        time.sleep(secs)
        still = 0
        for s in socks:
            s.setblocking(False)
            try:
                still += 0 if s.recv(1) == b"" else 1
            except BlockingIOError:
                still += 1
            except OSError:
                pass
        print("still open %d" % still)
    else:
        sys.exit("unknown action")


if __name__ == "__main__":
    main()
