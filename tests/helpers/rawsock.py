"""The raw-socket opening that the hostile test clients share (flood.py, folded_header.py): a
connection to a Unix socket path or to host:port, with nothing sent yet. Imported from beside
them (python3 puts a script's own folder first on sys.path)."""
import socket


def connect(address, timeout=None):
    """A stream socket connected to ADDRESS: a Unix socket when it starts with '/', else host:port
    over TCP. TIMEOUT, when given, becomes the socket's timeout for what follows (seconds)."""
    if address.startswith("/"):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(address)
    else:
        host, port = address.rsplit(":", 1)
        s = socket.create_connection((host, int(port)))
    if timeout is not None:
        s.settimeout(timeout)
    return s
