#!/usr/bin/env python3
"""Quick TCP measurements for the delay prototype.

  measure.py rtt-server PORT
  measure.py rtt-client HOST PORT [SAMPLES]       # prints JSON: median/min/max of request/response RTT (ms)
  measure.py tput-server PORT SKIP_S              # prints JSON: Mbit/s over the whole stream and after SKIP_S
  measure.py tput-client HOST PORT SECONDS
"""
import json
import socket
import statistics
import sys
import time


def connect(host, port):
    deadline = time.monotonic() + 10
    while True:
        try:
            s = socket.create_connection((host, port))
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return s
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def listen(port):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("0.0.0.0", port))
    ls.listen(1)
    conn, _ = ls.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    ls.close()
    return conn


def recv_exact(s, n):
    got = b""
    while len(got) < n:
        chunk = s.recv(n - len(got))
        if not chunk:
            raise EOFError
        got += chunk
    return got


def rtt_server(port):
    conn = listen(port)
    try:
        while True:
            conn.sendall(recv_exact(conn, 64))
    except EOFError:
        pass


def rtt_client(host, port, samples):
    s = connect(host, port)
    msg = b"x" * 64
    for _ in range(3):  # warm up: handshake done, ARP resolved, cwnd irrelevant at 64 B
        s.sendall(msg)
        recv_exact(s, 64)
    rtts = []
    for _ in range(samples):
        t0 = time.perf_counter()
        s.sendall(msg)
        recv_exact(s, 64)
        rtts.append((time.perf_counter() - t0) * 1e3)
        time.sleep(0.01)
    s.close()
    print(json.dumps({"samples": samples, "median_ms": round(statistics.median(rtts), 3),
                      "min_ms": round(min(rtts), 3), "max_ms": round(max(rtts), 3)}))


def tput_server(port, skip_s):
    conn = listen(port)
    buf = bytearray(1 << 20)
    total = 0
    first = last = None
    marks = []  # (time, total) once a tenth of a second
    while True:
        n = conn.recv_into(buf)
        if n == 0:
            break
        now = time.monotonic()
        if first is None:
            first = now
        total += n
        last = now
        if not marks or now - marks[-1][0] >= 0.1:
            marks.append((now, total))
    out = {"bytes": total, "seconds": round(last - first, 3),
           "mbit_per_s": round(total * 8 / (last - first) / 1e6, 2)}
    after = [m for m in marks if m[0] - first >= skip_s]
    if after:
        t0, b0 = after[0]
        if last > t0:
            out["steady_mbit_per_s"] = round((total - b0) * 8 / (last - t0) / 1e6, 2)
            out["steady_from_s"] = round(t0 - first, 2)
    print(json.dumps(out))


def tput_client(host, port, seconds):
    s = connect(host, port)
    chunk = b"x" * (1 << 20)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        s.sendall(chunk)
    s.close()


def main():
    mode = sys.argv[1]
    if mode == "rtt-server":
        rtt_server(int(sys.argv[2]))
    elif mode == "rtt-client":
        rtt_client(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]) if len(sys.argv) > 4 else 20)
    elif mode == "tput-server":
        tput_server(int(sys.argv[2]), float(sys.argv[3]))
    elif mode == "tput-client":
        tput_client(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
