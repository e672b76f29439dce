"""The release's version and its procedure (docs/releasing.md): one version, in pyproject.toml, that
`pwevent --version` prints and CHANGELOG.md's newest section names; deploy/local/release.sh, run in a
temporary clone of this repository (its HEAD), refuses a dirty tree and a version the CHANGELOG does
not name, and tags a clean one."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
IDENTITY = {"GIT_AUTHOR_NAME": "release test", "GIT_AUTHOR_EMAIL": "release@test.invalid",
            "GIT_COMMITTER_NAME": "release test", "GIT_COMMITTER_EMAIL": "release@test.invalid"}


def test_pwevent_version_prints_the_projects_version() -> None:
    done = subprocess.run([sys.executable, "-m", "pwevent.jobs.cli.main", "--version"], capture_output=True,
                          text=True, timeout=120, check=True)
    assert done.stdout.strip() == f"pwevent {VERSION}"


def test_the_changelogs_newest_release_is_the_version() -> None:
    changelog = (REPO / "CHANGELOG.md").read_text()
    headings = re.findall(r"^## \[([^]]+)\](?: - (\d{4}-\d{2}-\d{2}))?$", changelog, flags=re.MULTILINE)
    assert headings[0] == ("Unreleased", "")
    assert headings[1][0] == VERSION and headings[1][1], headings[:2]
    assert re.fullmatch(r"\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?", VERSION)


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """A clone of this repository's HEAD, with pyproject.toml and CHANGELOG.md as the working tree has them
    (committed there), so that the script sees what this checkout would release."""
    target = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO), str(target)], check=True, timeout=120)
    for name in ("pyproject.toml", "CHANGELOG.md", "deploy/local/release.sh"):
        (target / name).write_bytes((REPO / name).read_bytes())
    git(target, "add", "--all")
    git(target, "commit", "-q", "--allow-empty", "-m", "the working tree's release files")
    return target


def git(folder: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=folder, capture_output=True, text=True, timeout=60, check=True,
                          env={**os.environ, **IDENTITY}).stdout


def release(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(folder / "deploy" / "local" / "release.sh"), *args], cwd=folder,
                          capture_output=True, text=True, timeout=60, env={**os.environ, **IDENTITY})


def test_release_script_says_what_it_does() -> None:
    done = subprocess.run(["bash", str(REPO / "deploy" / "local" / "release.sh"), "--help"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and "annotated tag" in done.stdout and "--check" in done.stdout


def test_release_script_refuses_a_dirty_tree(clone: Path) -> None:
    (clone / "README.md").write_text("changed\n")
    (clone / "untracked.txt").write_text("new\n")
    refused = release(clone)
    assert refused.returncode == 1
    assert "the working tree is not clean" in refused.stderr
    assert "README.md" in refused.stderr and "untracked.txt" in refused.stderr
    assert git(clone, "tag", "--list") == ""


def test_release_script_refuses_a_version_the_changelog_does_not_name(clone: Path) -> None:
    pyproject = clone / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(f'version = "{VERSION}"', 'version = "99.0.0"'))
    git(clone, "commit", "-q", "-am", "bump without a CHANGELOG")
    refused = release(clone, "--check")
    assert refused.returncode == 1
    assert f"pyproject.toml says 99.0.0, CHANGELOG.md's newest release is {VERSION}" in refused.stderr


def test_release_script_tags_a_clean_tree_once(clone: Path) -> None:
    assert release(clone, "--check").returncode == 0
    assert git(clone, "tag", "--list") == ""
    done = release(clone)
    assert done.returncode == 0, done.stderr
    assert f"tagged v{VERSION}" in done.stdout and f"git push origin v{VERSION}" in done.stdout
    assert git(clone, "cat-file", "-t", f"v{VERSION}").strip() == "tag"
    assert git(clone, "rev-parse", f"v{VERSION}^{{commit}}") == git(clone, "rev-parse", "HEAD")
    message = git(clone, "tag", "--list", "--format=%(contents)", f"v{VERSION}")
    assert message.startswith(f"pwevent [{VERSION}] - ") and "### Added" in message
    again = release(clone)
    assert again.returncode == 1 and f"tag v{VERSION} exists already" in again.stderr


def test_the_wheel_lists_every_package_of_the_source() -> None:
    """pyproject.toml lists the packages by name (their folders install under `pwevent`): a package
    folder it leaves out would be missing from the wheel and the source distribution."""
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {f"pwevent.{Path(folder).as_posix().replace('/', '.')}"
               for top in ("jobs", "operators", "state") for folder in
               (p.parent.relative_to(REPO) for p in (REPO / top).rglob("__init__.py"))}
    assert folders <= set(setuptools["packages"]), sorted(folders - set(setuptools["packages"]))
