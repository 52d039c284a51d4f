#!/usr/bin/env python3
"""Requests with an obs-fold header line placed where libmicrohttpd 0.9.75 copies it over itself
(issue 36, finding 10; cli/sanitizer/mhd_memcpy.c says how): the header section fills the read
buffer (half the connection memory) exactly, and its last lines are a field name ending within
16 bytes of the buffer's end, then a continuation line that ends where the buffer ends.

  folded_header.py ADDRESS PATH HALF...

ADDRESS is host:port or a Unix socket path; PATH a GET target the server answers keeping the
connection open (the small request in front of the pipelined ones); HALF a read buffer size to
aim at (a server's connection memory / 2). For each HALF, each distance d of the name's end from the buffer's end
(7..16 bytes), line ends LF, CRLF, and a tab before the continuation: one request on a fresh
connection, and the same request pipelined behind a small one on a kept-alive connection (it
then starts the buffer again, after libmicrohttpd's pool reset). Every one must be answered with
an HTTP status line. Prints one line per unanswered request and a summary; exit 0 when all were
answered, 1 otherwise."""
import re
import sys

from rawsock import connect

STATUS = re.compile(rb"HTTP/1\.[01] [1-5][0-9][0-9]")


def folded(half, d, eol, ws):
    head = b"GET /folded HTTP/1.1\r\nHost: localhost\r\n"
    # after the colon: [eol] [ws] tail [eol], d - 1 bytes, so that the colon is at half - d
    tail_len = d - 1 - 2 * len(eol) - len(ws)
    if tail_len < 1:
        return None
    after = eol + ws + b"y" * tail_len + eol
    pad = (half - d) - len(head) - len(b"X-Pad: ") - 2 - 1  # then "F"
    req = head + b"X-Pad: " + b"p" * pad + b"\r\n" + b"F:" + after
    assert len(req) == half and req[half - d] == ord(":")
    return req + b"X-After: 1\r\n\r\n"


def statuses(s, want):
    """Status lines read until `want` came, the peer closed or 10 s passed."""
    data = b""
    try:
        while len(STATUS.findall(data)) < want:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    # (a pipelined reply follows the previous body directly, not on a line of its own)
    return [m.decode() for m in STATUS.findall(data)]


def main():
    address, path, halves = sys.argv[1], sys.argv[2].encode(), [int(h) for h in sys.argv[3:]]
    sent = answered = 0
    small = b"GET " + path + b" HTTP/1.1\r\nHost: localhost\r\n\r\n"
    for half in halves:
        for d in range(7, 17):
            for eol, ws in ((b"\n", b" "), (b"\r\n", b" "), (b"\n", b"\t")):
                req = folded(half, d, eol, ws)
                if req is None:
                    continue
                for pipelined in (False, True):
                    sent += 1
                    err = None
                    try:
                        s = connect(address, timeout=10)
                        s.sendall(small + req if pipelined else req)
                        got = statuses(s, 2 if pipelined else 1)
                        s.close()
                    except OSError as e:  # no connection: nothing answered (the error is not a reply)
                        got, err = [], e
                    want = 2 if pipelined else 1
                    if len(got) >= want:
                        answered += 1
                    else:
                        print("unanswered: half %d, name ending %d bytes before, eol %r, ws %r%s: %s"
                              % (half, d, eol, ws, ", pipelined" if pipelined else "", got or err or "nothing"))
    print("answered %d of %d folded-header requests" % (answered, sent))
    return 0 if answered == sent else 1


if __name__ == "__main__":
    sys.exit(main())
