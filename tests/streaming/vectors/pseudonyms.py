"""Shared vectors of the pseudonym rule (tests/streaming/data/pseudonyms.tsv): keys of the shortest
allowed length and longer, ASCII and not, and user ids of every shape the parsers accept (the fast
paths' canonical strings and integers, the longest id, non-ASCII ids in NFC), each with the pseudonym
jobs/common/pseudonyms.py gives it. jobs/streaming/jvm-test/pwevent/flink/parsing/PseudonymsTest.java
checks the Java twin (`Pseudonyms`, used by the fast paths' splits) against every line; both columns
are hex of their UTF-8 bytes, so no id needs escaping.
"""

from __future__ import annotations

import random

from pwevent.jobs.common.pseudonyms import MIN_KEY_BYTES, Pseudonyms
from pwevent.jobs.common.records import MAX_USER_CHARS
from pwevent.jobs.common.secrets import Secret

NAME = "pseudonyms.tsv"
KEYS = ["k" * MIN_KEY_BYTES, "0123456789abcdef" * 4, "clé secrète — " * 4, "x" * 200]
USERS = ["u1", "0", "42", "999999999999999999", "alice@example.org", "a.b:c_d-e", "é", "用户", "\U0001f600",
         "u" * MAX_USER_CHARS]
RANDOM_USERS = 8


def users() -> list[str]:
    """The ids tried under every key: fixed shapes and random fast-path strings."""
    rng = random.Random("pseudonyms")
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:@-"
    return USERS + ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40))) for _ in range(RANDOM_USERS)]


def text() -> str:
    """The file's text."""
    lines = ["# key (hex of UTF-8)\tuser (hex of UTF-8)\tpseudonym   (jobs/common/pseudonyms.py)\n"]
    for key in KEYS:
        pseudonyms = Pseudonyms(Secret(key))
        for user in users():
            lines.append(f"{key.encode().hex()}\t{user.encode().hex()}\t{pseudonyms.of(user)}\n")
    return "".join(lines)
