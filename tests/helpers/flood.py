#!/usr/bin/env python3
"""A hostile client of the zeus daemon and exporter, for tests/e2e/daemon_flood.sh and
exporter_flood.sh: each subcommand plays one attack of issue 26, prints one line saying what it
got ("leases 64 refused 503 ..."), then (unless it says otherwise) holds what it took until it is
killed, so that the test can play a normal client meanwhile.

  leases SOCK N         POST /leases up to N times on one keep-alive connection
  conns SOCK N          open N connections and send nothing
  streams SOCK N        open N GET /gpu/stream_power streams
  trickle SOCK|HOST:PORT  send a request's headers one byte a second; prints how long the
                        server kept the connection ("closed after 2.1 s"), then exits
  trickles HOST:PORT N  open N connections whose headers trickle in (a line every 4 s)
  normal SOCK GPU MW    the normal client: on one connection, POST /leases, a change under
                        it (override), renew, release, a read; exits 0, or 1 saying which failed
  deadholder SOCK GPU MW  connect, fork; the parent exits; the child sends the change on the
                        inherited connection and prints the reply's status and body, then exits
  aliasleases HOST:PORT N A  POST /leases?ttl_s=600 up to N times, each on a connection from one
                        of A aliases of loopback in turn (127.0.0.2, 127.0.0.3, ...)
  aliasconns HOST:PORT N A   open N connections from A aliases of loopback and send nothing
  aliasjobs HOST:PORT N A    POST /register_job (zeus pfo-server) N times from A aliases of loopback;
                        prints "aliasjobs MADE last STATUS BODY" and exits
"""
import os
import socket
import sys
import time

from rawsock import connect


def connect_from(where, k, aliases):
    """A TCP connection to HOST:PORT from alias k % aliases of loopback (127.0.0.2 on)."""
    host, port = where.rsplit(":", 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((f"127.0.0.{2 + k % aliases}", 0))
    s.connect((host, int(port)))
    return s


def request(method, path):
    return f"{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n".encode()


def read_reply(s):
    """Status and body of one reply (Content-Length framing); (0, reason) when the connection ends."""
    buf = b""
    try:
        while b"\r\n\r\n" not in buf:
            chunk = s.recv(65536)
            if not chunk:
                return 0, "closed"
            buf += chunk
        head, body = buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        length = 0
        for h in lines[1:]:
            k, _, v = h.partition(":")
            if k.strip().lower() == "content-length":
                length = int(v)
        while len(body) < length:
            chunk = s.recv(65536)
            if not chunk:
                break
            body += chunk
        return status, body[:length].decode("utf-8", "replace")
    except (ConnectionResetError, BrokenPipeError) as e:
        return 0, type(e).__name__


def hold():
    sys.stdout.flush()
    while True:
        time.sleep(3600)


def leases(sock, n):
    s = connect(sock)
    made, last = 0, (0, "")
    for _ in range(n):
        s.sendall(request("POST", "/leases"))
        last = read_reply(s)
        if last[0] != 200:
            break
        made += 1
    print(f"leases {made} then {last[0]} {last[1]}")
    hold()


def aliasleases(where, n, aliases):
    made, last, per = 0, (0, ""), {}
    for k in range(n):
        try:
            s = connect_from(where, k, aliases)
            s.sendall(request("POST", "/leases?ttl_s=600"))
            last = read_reply(s)
            s.close()
        except OSError as e:
            last = (0, type(e).__name__)
        if last[0] == 200:
            made += 1
            per[k % aliases] = per.get(k % aliases, 0) + 1
    print(f"aliasleases {made} from {len(per)} addresses, last {last[0]} {last[1]}")
    hold()


def aliasjobs(where, n, aliases):
    body = b'{"job_id": "", "pp_degree": 1, "dp_degree": 1, "tp_degree": 1, "world_size": 1}'
    made, last = 0, (0, "")
    for k in range(n):
        try:
            s = connect_from(where, k, aliases)
            s.sendall(b"POST /register_job HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            status, text = read_reply(s)
            s.close()
        except OSError as e:
            status, text = 0, type(e).__name__
        if status == 200:
            made += 1
        else:
            last = (status, text)
    print(f"aliasjobs {made} last {last[0]} {last[1]}")


def conns(sock, n, aliases=0):
    held = []
    refused = 0
    for k in range(n):
        try:
            held.append(connect_from(sock, k, aliases) if aliases else connect(sock))
        except OSError:
            refused += 1
    # Those the server answered at once (a limit) are not held: count the ones still open.
    time.sleep(0.5)
    open_ = 0
    for s in held:
        s.setblocking(False)
        try:
            data = s.recv(1)
            if not data:
                continue  # closed
            continue      # answered (503): closing
        except BlockingIOError:
            open_ += 1
        except OSError:
            continue
    print(f"conns open {open_} of {n} (connect refused {refused})")
    hold()


def streams(sock, n):
    held, ok, other = [], 0, {}
    for _ in range(n):
        try:
            s = connect(sock)
            s.sendall(request("GET", "/gpu/stream_power"))
            s.settimeout(3)
            head = b""
            while b"\r\n" not in head:
                c = s.recv(1)
                if not c:
                    break
                head += c
            parts = head.split()
            code = int(parts[1]) if len(parts) > 1 else 0
        except OSError as e:
            code = type(e).__name__
        if code == 200:
            ok += 1
            held.append(s)
        else:
            other[code] = other.get(code, 0) + 1
    print(f"streams {ok} of {n} others {sorted(other.items(), key=str)}")
    hold()


def trickle(where):
    s = connect(where)
    t0 = time.monotonic()
    msg = request("GET", "/discover")
    try:
        for b in msg[:-2]:  # never quite complete
            s.sendall(bytes([b]))
            s.settimeout(1.0)
            try:
                if not s.recv(1024):
                    break
            except socket.timeout:
                pass
            if time.monotonic() - t0 > 60:
                break
    except OSError:
        pass
    print(f"closed after {time.monotonic() - t0:.1f} s")


def trickles(where, n):
    held = []
    for _ in range(n):
        try:
            held.append(connect(where))
        except OSError:
            pass
    print(f"trickles {len(held)}")
    sys.stdout.flush()
    line = 0
    end = time.monotonic() + 120  # bounded: it stops by itself, even if nobody kills it
    while held and time.monotonic() < end:
        for s in list(held):
            try:
                s.sendall(b"GET /metrics HTTP/1.1\r\n" if line == 0 else b"X-Slow-%d: 1\r\n" % line)
            except OSError:
                held.remove(s)
                try:
                    held.append(connect(where))  # reconnect: keep the slots held
                except OSError:
                    pass
        line += 1
        time.sleep(4)


def deadholder(sock, gpu, mw):
    s = connect(sock)
    r, w = os.pipe()
    pid = os.fork()
    if pid:  # the parent: the connection's owner by SO_PEERCRED, gone at once
        os._exit(0)
    os.close(w)
    os.read(r, 1)  # EOF: the parent has exited
    time.sleep(0.2)
    s.sendall(request("POST", f"/gpu/set_power_limit?gpu_ids={gpu}&power_limit_mw={mw}&block=true"))
    code, body = read_reply(s)
    print(f"deadholder {code} {body}")
    sys.stdout.flush()
    os._exit(0)


def normal(sock, gpu, mw):
    s = connect(sock)
    s.settimeout(10)

    def ask(method, path, lease=None):
        extra = f"X-Zeus-Lease: {lease}\r\n" if lease else ""
        s.sendall(f"{method} {path} HTTP/1.1\r\nHost: localhost\r\n{extra}Content-Length: 0\r\n\r\n".encode())
        code, body = read_reply(s)
        if code != 200:
            print(f"normal: {method} {path}: {code} {body}")
            sys.exit(1)
        return body

    body = ask("POST", "/leases")
    tok = body.split('"lease":"')[1].split('"')[0]
    ask("POST", f"/gpu/set_power_limit?gpu_ids={gpu}&power_limit_mw={mw}&block=true&override=true", tok)
    ask("POST", "/leases/renew", tok)
    ask("POST", "/leases/release", tok)
    ask("GET", f"/gpu/get_power_limit?gpu_ids={gpu}")
    print("normal ok")


def main(argv):
    cmd, args = argv[1], argv[2:]
    if cmd == "leases":
        leases(args[0], int(args[1]))
    elif cmd == "conns":
        conns(args[0], int(args[1]))
    elif cmd == "streams":
        streams(args[0], int(args[1]))
    elif cmd == "trickle":
        trickle(args[0])
    elif cmd == "trickles":
        trickles(args[0], int(args[1]))
    elif cmd == "normal":
        normal(args[0], args[1], args[2])
    elif cmd == "deadholder":
        deadholder(args[0], args[1], args[2])
    elif cmd == "aliasleases":
        aliasleases(args[0], int(args[1]), int(args[2]))
    elif cmd == "aliasjobs":
        aliasjobs(args[0], int(args[1]), int(args[2]))
    elif cmd == "aliasconns":
        conns(args[0], int(args[1]), int(args[2]))
    else:
        sys.exit(f"unknown subcommand {cmd}")


if __name__ == "__main__":
    main(sys.argv)
