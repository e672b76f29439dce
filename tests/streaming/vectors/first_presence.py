"""Shared scenarios of the JVM's FirstPresence filter (tests/streaming/data/first-presence.tsv): one
user's presences, requirement records, slot closes and restarts, and the presences the filter passes
on, by its rule stated here (`passed_on`; jobs/streaming/jvm/pwevent/flink/membership/FirstPresence.java).
jobs/streaming/jvm-test/pwevent/flink/membership/FirstPresenceTest.java checks that the Java operator
passes on exactly those; tests/jobs/test_first_presence.py that the membership rule
(`UserMembership`) fed only those ends as when fed every presence, which is what makes the rule
right. Named scenarios for the cases the operator's comment argues, then random ones.

Steps: pS the user is present at slot S (a row of `latest`); rS a requirement record of slot S (not
the default); RS a record of slot S declaring the default itself; cS the watermark passes the end of
slot S; off / on: the job restarts from the state it has with the default off / on (no presence is
fed while it is off).
"""

from __future__ import annotations

import random

NAME = "first-presence.tsv"
NAMED: list[tuple[str, str]] = [
    ("first-of-a-backlog", "p1 p2 p3 c1 p4 c4"),
    ("earlier-slot-arrives-later", "p5 p3 p4 c5"),
    ("record-of-the-same-slot-first", "r2 p2 p3 c3"),
    ("presence-then-record-of-the-same-slot", "p2 r2 c2"),
    ("record-after-registration", "p2 c2 r5 p5 p6 c6"),
    ("record-before-presence", "r1 c1 p3 p4 c4"),
    ("earlier-record-while-pending", "p4 r3 c4"),
    ("default-declared-later", "p1 c1 R3 c3"),
    ("late-record", "p2 c2 r2 c3"),
    ("out-of-order-slots", "p7 p9 p6 p8 p6 c9"),
    ("off-closes-the-pending-presence", "p3 off c3 on p5 p6 c6"),
    ("off-after-registration", "p2 c2 off c3 on p4 c4"),
    ("failover-with-the-default-on", "p3 on p4 c4"),
    ("off-and-on-before-the-slot-closes", "p2 off on p2 c2"),
    ("record-while-off", "p3 off r4 c4 on p5 c5"),
    ("started-off", "off r1 c1 on p2 c2"),
    ("off-twice", "p2 off c2 on p3 off c3 on p4 p5 c5"),
]
RANDOM_SCENARIOS = 60


def passed_on(steps: list[str]) -> list[int]:
    """The indices of the presences FirstPresence passes on: a presence at slot s when no presence of
    the user was passed on before in the current epoch, or only ones of slots after s; every restart
    with the default off starts a new epoch."""
    epoch, held, passed = 0, None, []
    for i, step in enumerate(steps):
        if step in ("off", "on"):
            epoch += step == "off"
        elif step[0] == "p":
            slot = int(step[1:])
            if held is None or held[1] != epoch or slot < held[0]:
                held = (slot, epoch)
                passed.append(i)
    return passed


def random_steps(rng: random.Random) -> list[str]:
    """A random scenario the job can produce: presences only of open slots and while the default is
    on, slot closes in order."""
    steps, closed, on = [], 0, True
    for _ in range(rng.randint(2, 16)):
        kind = rng.choice(["p", "p", "p", "r", "R", "c", "restart"])
        if kind == "p" and on:
            steps.append(f"p{rng.randint(closed + 1, closed + 4)}")
        elif kind in "rR":
            steps.append(f"{kind}{rng.randint(max(1, closed - 1), closed + 3)}")
        elif kind == "c":
            closed = rng.randint(closed + 1, closed + 3)
            steps.append(f"c{closed}")
        elif kind == "restart":
            on = rng.random() < 0.6
            steps.append("on" if on else "off")
    return steps


def scenarios() -> list[tuple[str, list[str], list[int]]]:
    """(name, steps, the presences passed on) of every scenario; random ones that pass none on left out."""
    named = [(name, steps.split(" ")) for name, steps in NAMED]
    rng = random.Random("first-presence")
    drawn = [(f"random-{n}", random_steps(rng)) for n in range(RANDOM_SCENARIOS)]
    return [(name, steps, passed_on(steps)) for name, steps in named + drawn if passed_on(steps)]


def text() -> str:
    """The file's text."""
    return ("# name\tsteps (one user, in arrival order)\tstep indices FirstPresence passes on\n"
            + "".join(f"{name}\t{' '.join(steps)}\t{','.join(map(str, passed))}\n"
                      for name, steps, passed in scenarios()))
