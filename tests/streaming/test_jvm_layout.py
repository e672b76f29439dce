"""docs/architecture.md's table of the JVM packages ("The JVM pieces") lists every Java class of
jobs/streaming/jvm in its package, and nothing else; every test class sits in its class's package; no
product class is over MAX_LINES lines."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
JVM = REPO / "jobs" / "streaming" / "jvm" / "pwevent" / "flink"
JVM_TEST = REPO / "jobs" / "streaming" / "jvm-test" / "pwevent" / "flink"
#: The most lines a product class may have: a longer one holds more than one concern to split out.
MAX_LINES = 300


def documented() -> dict[str, set[str]]:
    text = (REPO / "docs" / "architecture.md").read_text()
    section = text.split("### The JVM pieces", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `pwevent\.flink\.(\w+)` \| [^|]+ \| ([^|]+) \|$", section, flags=re.M)
    return {package: {name.strip() for name in names.split(",")} for package, names in rows}


def on_disk(root: Path) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for path in root.rglob("*.java"):
        out.setdefault(path.parent.relative_to(root).as_posix(), set()).add(path.stem)
    return out


def test_the_table_lists_every_class_in_its_package() -> None:
    assert documented() == on_disk(JVM)


def test_every_class_declares_its_folder_as_its_package() -> None:
    for root in (JVM, JVM_TEST):
        for path in root.rglob("*.java"):
            package = "pwevent.flink." + path.parent.relative_to(root).as_posix().replace("/", ".")
            assert f"package {package};" in path.read_text(), path


def test_tests_sit_in_the_package_of_what_they_test() -> None:
    product = on_disk(JVM)
    for package, tests in on_disk(JVM_TEST).items():
        assert package in product, package
        for name in tests:
            tested = name.removesuffix("Test")
            assert tested in product[package] or any(tested.startswith(c) for c in product[package]), name


def test_no_product_class_is_over_max_lines() -> None:
    lengths = {path.relative_to(JVM).as_posix(): len(path.read_text().splitlines()) for path in JVM.rglob("*.java")}
    assert {name: n for name, n in lengths.items() if n > MAX_LINES} == {}
