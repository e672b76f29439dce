"""A free port on loopback for the servers a local run and the test and deploy scripts start (the
local REST endpoint, Prometheus, ZooKeeper, brokers, registries, session clusters). One rule for
Python and for deploy/local/pids.sh, which runs this file as a script (stdlib only).

    python3 jobs/streaming/loopback.py    # prints one port
"""

from __future__ import annotations

import os
import random
import socket
import tempfile
import time
from pathlib import Path

#: Where `free_loopback_port` looks: below the kernel's ephemeral range, whose ports the OS hands to
#: outgoing connections (a Kafka client's, say) at any moment, so that a port found free there can be
#: taken again before the mini-cluster binds it (seen: "Could not start rest endpoint").
PORT_RANGE_FILE = "/proc/sys/net/ipv4/ip_local_port_range"
LOWEST_PORT = 20_000
#: A port handed out is claimed here (one empty file per port) for `CLAIM_SECONDS`, the time its
#: server may take to bind it (a JVM starting on a loaded machine): no other caller on this machine
#: gets it meanwhile, even before anything listens on it (seen: two local runs started 9 s apart
#: drew the same port, and the second one's REST endpoint could not bind).
CLAIMS = Path(tempfile.gettempdir()) / "pwevent-loopback-ports"
CLAIM_SECONDS = 180.0


def _claim(port: int) -> bool:
    """Claim `port` for this caller: False if another caller claimed it less than CLAIM_SECONDS ago.
    Where the claims folder cannot be written, every port counts as unclaimed."""
    path = CLAIMS / str(port)
    try:
        CLAIMS.mkdir(exist_ok=True)
        descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        try:
            if time.time() - path.stat().st_mtime < CLAIM_SECONDS:
                return False
            path.unlink()  # an expired claim: whoever made it has bound the port by now, or never will
            descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except OSError:  # another caller renewed or took it in between
            return False
    except OSError:
        return True
    os.close(descriptor)
    return True


def free_loopback_port() -> int:
    """A port nothing listens on at 127.0.0.1 now and no other caller was handed in the last
    CLAIM_SECONDS: a random one below the ephemeral range (which no outgoing connection takes),
    else, where that range is unknown or leaves no room, the OS's choice."""
    try:
        first_ephemeral = int(Path(PORT_RANGE_FILE).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        first_ephemeral = LOWEST_PORT
    candidates = list(range(LOWEST_PORT, first_ephemeral))
    random.shuffle(candidates)
    for port in [*candidates[:200], 0]:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            found = int(probe.getsockname()[1])
        if port == 0 or _claim(found):
            return found
    raise OSError("no free port on 127.0.0.1")


if __name__ == "__main__":
    print(free_loopback_port())
