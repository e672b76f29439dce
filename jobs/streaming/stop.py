"""`pwevent stop`: stop a running job over Flink's REST API, with a savepoint or without
(docs/operations.md, "Savepoints, upgrades and rescaling").

The same calls serve the local run (`pwevent run` prints its REST address, on loopback) and a
session or application cluster (its JobManager's REST address): stop-with-savepoint is
POST /jobs/<id>/stop, an asynchronous operation polled at /jobs/<id>/savepoints/<request id>;
without a savepoint the job is cancelled (PATCH /jobs/<id>?mode=cancel), which keeps its last
checkpoint (retention RETAIN_ON_CANCELLATION) for `pwevent run --restore latest`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from pwevent.jobs.common.slots import duration_arg

LIVE_STATES = ("CREATED", "INITIALIZING", "RUNNING", "RESTARTING")
ENDING_STATES = ("CANCELLING", "FAILING", "RECONCILING")  # on the way to a terminal state


class StopError(RuntimeError):
    """The job could not be found or stopped; the message says why."""


class RestUnreachable(StopError):
    """Nothing answers at the REST address (any more)."""


@dataclass(frozen=True)
class FlinkRest:
    """A JobManager's REST API at `address` (host:port, or an http(s):// URL)."""

    address: str
    timeout_s: float = 10.0

    @property
    def base(self) -> str:
        return self.address if "://" in self.address else f"http://{self.address}"

    def call(self, path: str, method: str = "GET", body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                text = response.read()
        except urllib.error.HTTPError as err:
            raise StopError(f"{method} {path}: HTTP {err.code}: {err.read()[:500].decode(errors='replace')}") from None
        except (urllib.error.URLError, OSError) as err:
            raise RestUnreachable(f"no Flink REST API at {self.base}: {err}") from None
        return json.loads(text) if text else None

    def job_state(self, job_id: str) -> str:
        return str(self.call(f"/jobs/{job_id}")["state"])

    def the_live_job(self) -> str:
        """The id of the one job that is not finished; refuse when there are none or several."""
        live = [j["id"] for j in self.call("/jobs")["jobs"] if j["status"] in LIVE_STATES]
        if len(live) != 1:
            raise StopError(f"{len(live)} live jobs at {self.base} ({', '.join(live) or 'none'}); name one with --job")
        return str(live[0])


def savepoint_target(directory: str) -> str:
    """A savepoint directory for the REST call: URIs as given, local paths made absolute."""
    return directory if "://" in directory else "file://" + os.path.abspath(directory)


def stop_with_savepoint(rest: FlinkRest, job_id: str, directory: str, drain: bool, timeout_s: float) -> str:
    """Stop the job, taking a savepoint into `directory`; returns the savepoint's path.

    `drain` (Flink's --drain) would first advance event time to the end, closing every open slot,
    so that a restored job would find them decided: only for a final stop, never before an upgrade."""
    request = rest.call(f"/jobs/{job_id}/stop", "POST",
                        {"targetDirectory": savepoint_target(directory), "drain": drain, "formatType": "CANONICAL"})
    trigger = request["request-id"]
    deadline = time.monotonic() + timeout_s
    while True:
        answer = rest.call(f"/jobs/{job_id}/savepoints/{trigger}")
        if answer["status"]["id"] == "COMPLETED":
            operation = answer.get("operation") or {}
            if "location" not in operation:
                cause = operation.get("failure-cause", {})
                raise StopError(f"the savepoint failed, the job keeps running: "
                                f"{cause.get('stack-trace', cause) if isinstance(cause, dict) else cause}"[:3000])
            location = str(operation["location"])
            # The operation completes with the savepoint; the job reaches FINISHED a moment later. An
            # upgrade must not start the next job while this one still runs, so wait for it. A local
            # run (`pwevent run`) ends its process, REST API included, as soon as its job has finished.
            try:
                wait_for_state(rest, job_id, "FINISHED", deadline, f"savepoint {location} written but ")
            except RestUnreachable:
                pass
            return location
        if time.monotonic() > deadline:
            raise StopError(f"no savepoint within {timeout_s:.0f}s (request {trigger}); the job may still stop")
        time.sleep(0.5)


def wait_for_state(rest: FlinkRest, job_id: str, want: str, deadline: float, context: str = "") -> None:
    """Poll the job until it is in state `want`; StopError when the deadline (time.monotonic()) passes
    or the job ends in another terminal state."""
    while (state := rest.job_state(job_id)) != want:
        if state not in LIVE_STATES + ENDING_STATES:
            raise StopError(f"{context}job {job_id} ended {state}, not {want}")
        if time.monotonic() > deadline:
            raise StopError(f"{context}job {job_id} still {state}, not {want}, at the timeout")
        time.sleep(0.5)


def cancel(rest: FlinkRest, job_id: str, timeout_s: float) -> None:
    rest.call(f"/jobs/{job_id}?mode=cancel", "PATCH")
    wait_for_state(rest, job_id, "CANCELED", time.monotonic() + timeout_s)


def cmd_stop(args: argparse.Namespace) -> int:
    rest = FlinkRest(args.jobmanager)
    try:
        job_id = args.job or rest.the_live_job()
        if args.savepoint:
            location = stop_with_savepoint(rest, job_id, args.savepoint, args.drain, args.timeout / 1000)
            print(f"pwevent stop: job {job_id} stopped; savepoint {location}", file=sys.stderr)
            print(location)  # stdout: the path for `pwevent run --restore`
        else:
            cancel(rest, job_id, args.timeout / 1000)
            print(f"pwevent stop: job {job_id} cancelled; its last checkpoint is kept (--restore latest)",
                  file=sys.stderr)
    except StopError as err:
        print(f"pwevent stop: {err}", file=sys.stderr)
        return 1
    return 0


def register(sub) -> None:  # type: ignore[no-untyped-def]
    p = sub.add_parser(
        "stop", help="stop a running job over Flink's REST API, with a savepoint (for upgrades) or without",
        description="Stop the streaming job through its JobManager's REST API. With --savepoint: "
        "stop-with-savepoint (the sources stop, a savepoint is written, the job finishes; the sinks commit "
        "what the savepoint covers); the savepoint's path is printed on stdout for `pwevent run --restore`. "
        "Without: cancel (the last checkpoint is kept). See docs/operations.md, 'Savepoints, upgrades and "
        "rescaling'.",
    )
    p.add_argument("--jobmanager", required=True, metavar="HOST:PORT",
                   help="REST address: the one `pwevent run` prints (local run), or the cluster's JobManager")
    p.add_argument("--job", help="job id (default: the only live job at that address)")
    p.add_argument("--savepoint", metavar="DIR", help="savepoint directory (a path the JobManager and "
                   "TaskManagers can write, or a URI such as s3://...)")
    p.add_argument("--drain", action="store_true", help="with --savepoint: end event time first, deciding "
                   "every open slot (a final stop; a job restored from such a savepoint has nothing left open)")
    p.add_argument("--timeout", type=duration_arg, default="300s", help="how long to wait for the savepoint or "
                   "cancellation, e.g. 5m (a bare number: seconds; default 300s)")
    p.set_defaults(func=cmd_stop)
