#!/usr/bin/env bash
# Set up for the tests (deploy/local/setup.sh --tests: also the tests' Debian packages, gssapi and their
# Schema Registry, rivven-schema, built once per machine with cargo) and run the test suite: the JVM pieces'
# JUnit tests (deploy/local/test-jvm.sh) first, then pytest: unit, statistical, Kafka and Flink tests.
# The Kafka tests start their own broker with deploy/local/kafka.sh and stop it by its pid.
# Extra arguments go to pytest: `-m "not slow"` is the fast loop (JUnit and the unit tests, under
# two minutes on 2 cores; README, "Tests"), a path a file of its own (JUnit runs all the same).
# pytest runs PWEVENT_TEST_WORKERS (default 3) workers (pytest-xdist), each test file on one worker
# with its own broker and registry, handed out in collection order; the tests' JVMs (jobs, brokers,
# clusters) run with JAVA_TOOL_OPTIONS (default: C1 compiler only, serial GC), which saves CPU in
# short runs and changes no result. pytest's exit code 5 (no test collected) is turned into a
# failure.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bash "$REPO_ROOT/deploy/local/setup.sh" --tests
cd "$REPO_ROOT"
set +e
export JAVA_TOOL_OPTIONS="${JAVA_TOOL_OPTIONS:--XX:TieredStopAtLevel=1 -XX:+UseSerialGC}"
bash "$REPO_ROOT/deploy/local/test-jvm.sh"
jvm=$?
# Files in collection order (the integration tests' folder sorts early), not by their number of
# tests (xdist's default, which hands out the single-test cluster file, the longest, last).
"$REPO_ROOT/.venv/bin/python" -m pytest -n "${PWEVENT_TEST_WORKERS:-3}" --dist loadfile --no-loadscope-reorder "$@"
code=$?
set -e
if [[ $code -eq 5 ]]; then
  echo "test.sh: pytest collected no tests: failing the run" >&2
  exit 1
fi
if [[ $jvm -ne 0 ]]; then
  echo "test.sh: the JUnit tests (deploy/local/test-jvm.sh) failed" >&2
  [[ $code -ne 0 ]] || code=1
fi
exit $code
