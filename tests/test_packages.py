"""pyproject.toml's package list holds every Python package of the product folders (jobs/,
operators/, state/): a subpackage left out installs from the checkout (editable) but is missing
from the wheel, which only tests/integration/test_wheel_install.py, a slow test, would show."""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_every_product_package_is_in_the_wheel() -> None:
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    folders = {name: Path(path) for name, path in setuptools["package-dir"].items()}
    found = set()
    for name in ("pwevent.jobs", "pwevent.operators", "pwevent.state"):
        root = REPO / folders[name]
        for init in root.rglob("__init__.py"):
            relative = init.parent.relative_to(root)
            found.add(".".join([name, *relative.parts]))
    assert found - listed == set(), f"missing from pyproject.toml's packages: {sorted(found - listed)}"
