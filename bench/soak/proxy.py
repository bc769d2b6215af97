"""A TCP proxy the soak puts between the instances and PostgreSQL, to cut the database off.

    python3 proxy.py LISTEN_PORT TARGET_HOST TARGET_PORT

SIGUSR1 starts an outage: every open connection is reset and new ones are refused (the
listening socket is closed). SIGUSR2 ends it. It runs in a process of its own so that the
soak's load generator never slows the database's traffic.
"""

import os
import selectors
import signal
import socket
import struct
import sys

LISTEN_PORT, TARGET_HOST, TARGET_PORT = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
BUFFER = 65536
selector = selectors.DefaultSelector()
peers = {}  # socket -> the socket it forwards to
listener = None
wanted = {"down": False}


def listen():
    global listener
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", LISTEN_PORT))
    listener.listen(256)
    listener.setblocking(False)
    selector.register(listener, selectors.EVENT_READ)


def reset(sock):
    """Closes with an RST, as a dead network path or a killed database would look."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    close(sock)


def close(sock):
    peer = peers.pop(sock, None)
    try:
        selector.unregister(sock)
    except (KeyError, ValueError):
        pass
    sock.close()
    if peer is not None and peers.pop(peer, None) is not None:
        try:
            selector.unregister(peer)
        except (KeyError, ValueError):
            pass
        peer.close()


def cut_off():
    global listener
    selector.unregister(listener)
    listener.close()
    listener = None
    for sock in list(peers):
        if sock in peers:
            reset(sock)


signal.signal(signal.SIGUSR1, lambda *_: wanted.update(down=True))
signal.signal(signal.SIGUSR2, lambda *_: wanted.update(down=False))
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
listen()
print("ready", flush=True)
while True:
    if wanted["down"] and listener is not None:
        cut_off()
    elif not wanted["down"] and listener is None:
        listen()
    for key, _ in selector.select(timeout=0.2):
        sock = key.fileobj
        if sock is listener:
            try:
                client, _ = listener.accept()
            except OSError:
                continue
            try:
                upstream = socket.create_connection((TARGET_HOST, TARGET_PORT), timeout=5)
            except OSError:
                reset(client)
                continue
            for end in (client, upstream):
                end.setblocking(False)
                end.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                selector.register(end, selectors.EVENT_READ)
            peers[client], peers[upstream] = upstream, client
            continue
        if sock not in peers:
            continue
        try:
            data = sock.recv(BUFFER)
        except (BlockingIOError, InterruptedError):
            continue
        except OSError:
            data = b""
        if not data:
            close(sock)
            continue
        try:
            peers[sock].setblocking(True)
            peers[sock].sendall(data)
            peers[sock].setblocking(False)
        except OSError:
            close(sock)
