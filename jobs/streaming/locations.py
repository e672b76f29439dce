"""Where the streaming job finds and keeps its files, in a checkout or installed from the wheel
(docs/streaming.md, "Installing from the wheel").

- A *checkout* is the repository with `deploy/local/` next to the package folders (an editable
  install): jars go to `<repo>/.cache/jars`, run files to `<repo>/.run`, as the scripts there do.
- An *installed* package (site-packages/pwevent) has no such folders and must never write into
  site-packages: jars go to the user cache, `$XDG_CACHE_HOME/pwevent/jars` (default
  `~/.cache/pwevent/jars`), the default checkpoints to `$XDG_STATE_HOME/pwevent/checkpoints`
  (default `~/.local/state/pwevent/checkpoints`).
- `$PWEVENT_CACHE` overrides the jar cache in both cases (the scripts read the same variable).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

#: The folder holding `jobs/`, `operators/` and `state/`: the repository root in a checkout,
#: `site-packages/pwevent` when installed.
PACKAGE_ROOT = Path(__file__).resolve().parents[2]
#: The Python packages a Flink worker imports (`pwevent.<name>`).
PYTHON_PACKAGES = ("jobs", "operators", "state")


def checkout() -> Path | None:
    """The repository root when running from a checkout, else None (installed from the wheel)."""
    if (PACKAGE_ROOT / "deploy" / "local" / "fetch-jars.sh").is_file() and (PACKAGE_ROOT / "pyproject.toml").is_file():
        return PACKAGE_ROOT
    return None


def _xdg(variable: str, default: str) -> Path:
    value = os.environ.get(variable, "")
    return Path(value) if os.path.isabs(value) else Path.home() / default


def jar_cache() -> Path:
    """The folder of downloaded and built jars: $PWEVENT_CACHE, else the checkout's .cache/jars,
    else the user cache."""
    if os.environ.get("PWEVENT_CACHE"):
        return Path(os.environ["PWEVENT_CACHE"])
    repo = checkout()
    return repo / ".cache" / "jars" if repo else _xdg("XDG_CACHE_HOME", ".cache") / "pwevent" / "jars"


def run_dir() -> Path:
    """The folder of the job's run files (default checkpoints, Python files for the workers)."""
    repo = checkout()
    return repo / ".run" if repo else _xdg("XDG_STATE_HOME", ".local/state") / "pwevent"


def default_checkpoint_dir() -> str:
    return str(run_dir() / "checkpoints")


def default_log_dir() -> str:
    return str(run_dir() / "logs")


def _python_sources() -> list[Path]:
    return sorted(p for name in PYTHON_PACKAGES for p in (PACKAGE_ROOT / name).rglob("*.py")
                  if "__pycache__" not in p.parts)


#: Where the compiled JVM classes sit inside the package (the wheel's copy; jobs/streaming/jars.py).
JVM_JAR_IN_PACKAGE = Path("jobs") / "streaming" / "jvm" / "pwevent-jvm.jar"


def python_root(jvm_jar: Path) -> Path:
    """A folder holding `pwevent/{jobs,operators,state}` as real files, for Flink's Python workers,
    with the job's JVM classes `jvm_jar` where an installed package has them.

    Workers start with PYTHONPATH and never process `.pth` files, so an editable install's import
    hook does not reach them; a copy (not links into a checkout) is also what `-pyfs` can ship to a
    cluster, and what `flink run -py` imports the job from: the copy is a complete package, so that
    client finds the JVM classes in it as an installed job does. The folder is named by a digest of
    its content, so a run never sees a half-written or older copy; it is written once, into a
    temporary sibling renamed into place."""
    files = [(path, path.relative_to(PACKAGE_ROOT)) for path in _python_sources()] + [(jvm_jar, JVM_JAR_IN_PACKAGE)]
    digest = hashlib.sha256()
    for path, name in files:
        digest.update(str(name).encode() + b"\0" + path.read_bytes() + b"\0")
    root = run_dir() / "pyroot" / digest.hexdigest()[:16]
    if root.is_dir():
        return root
    tmp = root.with_name(f"{root.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    for path, name in files:
        target = tmp / "pwevent" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    try:
        tmp.rename(root)
    except OSError:  # another run wrote the same copy first
        shutil.rmtree(tmp, ignore_errors=True)
    return root
