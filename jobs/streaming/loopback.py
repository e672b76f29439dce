"""A free port on loopback for the servers a local run and the test and deploy scripts start (the
local REST endpoint, Prometheus, ZooKeeper, brokers, registries, session clusters). One rule for
Python and for deploy/local/pids.sh, which runs this file as a script (stdlib only).

    python3 jobs/streaming/loopback.py    # prints one port
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

#: Where `free_loopback_port` looks: below the kernel's ephemeral range, whose ports the OS hands to
#: outgoing connections (a Kafka client's, say) at any moment, so that a port found free there can be
#: taken again before the mini-cluster binds it (seen: "Could not start rest endpoint").
PORT_RANGE_FILE = "/proc/sys/net/ipv4/ip_local_port_range"
LOWEST_PORT = 20_000


def free_loopback_port() -> int:
    """A port nothing listens on at 127.0.0.1 now: a random one below the ephemeral range (which no
    outgoing connection takes), else, where that range is unknown or leaves no room, the OS's choice."""
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
            return int(probe.getsockname()[1])
    raise OSError("no free port on 127.0.0.1")


if __name__ == "__main__":
    print(free_loopback_port())
