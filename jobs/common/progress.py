"""Progress lines on stderr for the long commands (replay, demo, evaluate, privacy-test).

One implementation (docs/architecture.md, "Dependencies", says why not tqdm or rich): at most one
line every `every_s` seconds, and one at the end; on a terminal the line is rewritten in place, in
a log or a pipe each update is a line of its own (no carriage returns); with elapsed time and an
estimate of the time left from the rate so far.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

#: What a progress callback gets: (done, total[, what is counted]).
Progress = Callable[..., None]


def progress_printer(label: str, unit: str = "slot", every_s: float = 2.0) -> Progress:
    """`show(done, total, what=unit)` printing 'label: what done/total (p%), elapsed, left'."""
    started = time.monotonic()
    last = [started - every_s]
    live = sys.stderr.isatty()

    def show(done: int, total: int, what: str = unit) -> None:
        now = time.monotonic()
        if now - last[0] < every_s and done != total:
            return
        last[0] = now
        elapsed = now - started
        left = f", ~{elapsed / done * (total - done):.0f}s left" if 0 < done < total else ""
        text = f"{label}: {what} {done}/{total} ({100 * done // max(total, 1)}%), {elapsed:.0f}s{left}"
        if live:
            print("\r" + text + "\x1b[K", end="\n" if done == total else "", file=sys.stderr, flush=True)
        else:
            print(text, file=sys.stderr, flush=True)

    return show
