"""Raw TCP goodput between two endpoints (the capacity the models use: runtime-notes §12.1).

:func:`sink` accepts ``flows`` connections and counts payload bytes over a window that skips the
first ``warmup_s``; :func:`source` sends as fast as the socket takes it. Goodput = bytes / window.
"""

from __future__ import annotations

import socket
import threading
import time

CHUNK = 1 << 20


def sink(listener: socket.socket, *, flows: int, duration_s: float, warmup_s: float = 0.3) -> float:
    """Receive ``flows`` connections for ``duration_s``; return the goodput in bits/s."""
    counts = [0] * flows
    marks: list[int] = [0] * flows
    socks = [listener.accept()[0] for _ in range(flows)]
    start = time.monotonic()
    stop = threading.Event()

    def drain(i: int, s: socket.socket) -> None:
        buf = bytearray(CHUNK)
        while not stop.is_set():
            n = s.recv_into(buf)
            if n == 0:
                return
            counts[i] += n

    threads = [threading.Thread(target=drain, args=(i, s), daemon=True) for i, s in enumerate(socks)]
    for t in threads:
        t.start()
    time.sleep(warmup_s)
    t0 = time.monotonic()
    marks[:] = counts
    time.sleep(max(0.1, duration_s - (t0 - start)))
    got = sum(counts) - sum(marks)
    t1 = time.monotonic()
    stop.set()
    for s in socks:
        s.close()
    # bytes -> bits
    return got * 8 / (t1 - t0)


def source(address: tuple[str, int], *, duration_s: float, bind: str | None = None) -> int:
    """Send to ``address`` (from address ``bind``) for ``duration_s`` seconds; return the bytes sent."""
    payload = memoryview(bytearray(CHUNK))
    sent = 0
    end = time.monotonic() + duration_s
    with socket.create_connection(address, timeout=10, source_address=(bind, 0) if bind else None) as s:
        try:
            while time.monotonic() < end:
                s.sendall(payload)
                sent += CHUNK
        except OSError:
            pass
    return sent
