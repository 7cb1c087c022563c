"""What the python benchmarks share: a free loopback port, and how busy the machine is.

Imported by the scripts beside it (`python3 benchmarks/X.py` puts this folder on sys.path).
"""

import os
import socket
import time


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def busy_cores(secs=1.0):
    """Cores the machine kept busy over `secs` (from /proc/stat: all but idle and iowait)."""
    def stat():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return sum(v) - v[3] - v[4], sum(v)
    b0, t0 = stat()
    time.sleep(secs)
    b1, t1 = stat()
    return (b1 - b0) / max(t1 - t0, 1) * os.cpu_count()
