"""README's "Offline" commands, run as written (in a temporary folder instead of /tmp/sin): each
exits 0, and the audit finds no violation."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def offline_block() -> str:
    text = (REPO / "README.md").read_text()
    section = text.split("## Offline: replay files, audit the spend", 1)[1]
    return re.search(r"```bash\n(.*?)```", section, flags=re.S).group(1)  # type: ignore[union-attr]


def test_the_readme_offline_commands_run_as_written(tmp_path: Path) -> None:
    pwevent = str(Path(sys.executable).parent / "pwevent")
    script = offline_block().replace("/tmp/sin", str(tmp_path / "sin")).replace(".venv/bin/pwevent", pwevent)
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=REPO, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "no violation" in done.stdout, done.stdout[-3000:]
