"""The Python work of one registration in the streaming job, step by step, without Flink
(docs/benchmarks.md, "Where a registration's time goes"): the calls the hosts of
jobs/streaming/hosts.py make for a user's first requirement record, on the classes they host.
Reports microseconds per registration for each step and their sum, each as a ratio to a bare
`orjson.loads` of the same records measured in the same run, best of `--repeat` passes.

Steps: ParseRequirements (parse and validate the record, the pending record pickled for Membership);
MembershipHost's element (unpickle, buffer in the user's empty state, save the state) and timer
(load the state, close the slot, the change as JSON, save); PopulationHost's element (the change row
as the operator's typed row) and slot end (typed again from list state, applied to the engine,
the slot decided with its `member` audit lines).

    .venv/bin/python benchmarks/bench_registration.py [--records 50000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import pickle
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from pyflink.common import Row

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pwevent.jobs.common.config import Config, parse_config  # noqa: E402
from pwevent.jobs.common.jsonl import dumps  # noqa: E402
from pwevent.jobs.common.membership import Membership, PendingRequirement, UserMembership  # noqa: E402
from pwevent.jobs.common.population_operator import PopulationOperator  # noqa: E402
from pwevent.jobs.common.records import parse_requirement_update  # noqa: E402
from pwevent.jobs.common.requirement_rules import RequirementRules  # noqa: E402
from pwevent.jobs.streaming.rows import population_row  # noqa: E402
from pwevent.operators.noise import make_randomness  # noqa: E402

#: Before any watermark (a Flink timer service's start value).
NO_WATERMARK = -(2**63)


def config() -> Config:
    """The benchmark job's configuration (benchmarks/bench_stream.py): PBD, binary domain, one-minute slots."""
    return parse_config({"domain": {"type": "binary"}, "mechanism": "PBD", "slot": "60s",
                         "origin": "2024-01-01T00:00:00Z", "noise": "numpy-fast", "caps": {"max_w": 200}})


def requirement_lines(n: int) -> list[bytes]:
    """`n` first requirement records at slot 1, the 3 x 3 levels of bench_stream.py."""
    return [f'{{"user":"u{i}","time":"2024-01-01T00:00:00Z","w":{(40, 80, 120)[i % 3]},'
            f'"epsilon":{(0.6, 0.8, 1.0)[i // 3 % 3]}}}'.encode() for i in range(n)]


def timed(step: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """(best seconds over `repeat` runs of `step`, the last run's result)."""
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = step()
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=50_000, help="registrations (default 50,000)")
    parser.add_argument("--repeat", type=int, default=3, help="passes per step; the best counts (default 3)")
    args = parser.parse_args()
    cfg, n = config(), args.records
    clock = cfg.clock
    lines = requirement_lines(n)
    rules = RequirementRules(cfg.mechanism_spec(), cfg.caps.max_w)
    membership = Membership(rules, cfg.default_requirement)

    def parse() -> list[bytes]:
        out = []
        for offset, line in enumerate(lines):
            update = parse_requirement_update(line, cfg.requirements, cfg.caps, cfg.max_record_bytes)
            position = {"topic": "requirements", "partition": 0, "offset": offset}
            pending = PendingRequirement(clock.slot_of(update.time_ms), (update.time_ms, 0, offset),
                                         update.requirement, position, line.decode("utf-8", errors="replace"))
            rules.registers(update.requirement)
            out.append(pickle.dumps(pending, protocol=pickle.HIGHEST_PROTOCOL))
        return out

    def membership_element(pickled: list[bytes]) -> list[bytes]:
        out = []
        for value in pickled:
            user = UserMembership()
            user.receive(pickle.loads(value), NO_WATERMARK, clock)  # noqa: S301 (made above)
            out.append(orjson.dumps(user.to_json()))
        return out

    def membership_timer(states: list[bytes]) -> list[str]:
        out = []
        for index, stored in enumerate(states):
            user = UserMembership.from_json(orjson.loads(stored))
            for change in user.close(1, f"u{index}", membership):
                out.append(dumps(change.to_json()))
            orjson.dumps(user.to_json())
        return out

    def change_row(text: str) -> Row:
        return Row(slot=1, present=None, change=text, rejected=None)  # rows.POPULATION_IN, as SQL makes it

    def population_slot_end(texts: list[str]) -> int:
        operator = PopulationOperator(cfg, make_randomness(cfg.noise, 7), "events")
        closed = operator.on_slot_end(1, [population_row(change_row(t)) for t in texts], ended=False)
        return len(closed.emitted.audit)

    reference, _ = timed(lambda: [orjson.loads(line) for line in lines], args.repeat)
    steps: dict[str, float] = {}
    steps["ParseRequirements"], pickled = timed(parse, args.repeat)
    steps["Membership element"], states = timed(lambda: membership_element(pickled), args.repeat)
    steps["Membership timer"], texts = timed(lambda: membership_timer(states), args.repeat)
    assert len(texts) == n, f"{len(texts)} changes for {n} registrations"
    steps["Population element"], _ = timed(lambda: [population_row(change_row(t)) for t in texts], args.repeat)
    steps["Population slot end"], audit = timed(lambda: population_slot_end(texts), args.repeat)
    assert audit >= n, f"{audit} audit lines for {n} registrations"

    print(f"{n:,} registrations, best of {args.repeat}; reference: orjson.loads of the same records "
          f"{reference / n * 1e6:.2f} us per record")
    print(f"{'step':24s} {'us/registration':>16s} {'x reference':>12s}")
    for name, seconds in [*steps.items(), ("sum", sum(steps.values()))]:
        print(f"{name:24s} {seconds / n * 1e6:16.1f} {seconds / reference:12.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
