#!/usr/bin/env bash
# Lint (ruff) and type-check (mypy) the project's Python, then lint its Java with Checkstyle
# (deploy/local/lint-jvm.sh, rules in deploy/local/checkstyle.xml). The packages install as
# pwevent.jobs etc. from top-level folders, a mapping mypy cannot follow, so it checks them through a
# folder of links.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO_ROOT"
.venv/bin/ruff check jobs operators state tests benchmarks
links="$(mktemp -d)"
trap 'rm -rf "$links"' EXIT
mkdir "$links/pwevent"
for package in jobs operators state; do ln -s "$REPO_ROOT/$package" "$links/pwevent/$package"; done
(cd "$links" && "$REPO_ROOT/.venv/bin/mypy" --config-file "$REPO_ROOT/pyproject.toml" \
  -p pwevent.state -p pwevent.operators -p pwevent.jobs)
bash "$REPO_ROOT/deploy/local/lint-jvm.sh"
