"""The contract between Python and the JVM (jobs/streaming/jvm_contract): the checked-in Java package
`pwevent.flink.contract` is a fresh rendering of it (a forgotten `python -m
pwevent.jobs.streaming.jvm_contract --write` fails here), the job's PyFlink row types are its
layouts, and the layouts keep what the Java operators assume of them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pwevent.jobs.common.reasons import LATE_REQUIREMENT_DETAIL, Reason
from pwevent.jobs.streaming import jvm_contract, rows
from pwevent.jobs.streaming.jvm_contract import schemas
from pwevent.jobs.streaming.jvm_contract.__main__ import main
from pwevent.jobs.streaming.jvm_contract.java import FOLDER, HEADER, drift, rendered, write


def test_the_checked_in_java_is_a_fresh_rendering() -> None:
    assert drift() == [], "run `python -m pwevent.jobs.streaming.jvm_contract --write`"
    assert schemas.drift() == [], "run `python -m pwevent.jobs.streaming.jvm_contract --write`"
    assert main(["--check"]) == 0


def test_the_dead_letter_schema_lists_every_reason_in_order(tmp_path: Path) -> None:
    """Its `reason` enum is the declaration's; a schema with a reason missing is rendered again."""
    stale = tmp_path / "dead-letter.schema.json"
    template = json.loads(schemas.DEAD_LETTER_SCHEMA.read_text())
    template["properties"]["reason"]["enum"] = ["late"]
    stale.write_text(json.dumps(template))
    assert schemas.drift(stale) == [stale]
    assert schemas.write(stale) == [stale] and schemas.drift(stale) == []
    assert json.loads(stale.read_text())["properties"]["reason"]["enum"] == [reason.value for reason in Reason]


def test_check_names_a_changed_missing_or_extra_class(tmp_path: Path) -> None:
    assert write(tmp_path) == sorted(rendered())
    assert drift(tmp_path) == []
    (tmp_path / "Reasons.java").write_text("// edited\n")
    (tmp_path / "TimePaths.java").unlink()
    (tmp_path / "Stale.java").write_text(HEADER)
    assert drift(tmp_path) == ["Reasons.java", "Stale.java", "TimePaths.java"]
    write(tmp_path)
    assert drift(tmp_path) == [] and not (tmp_path / "Stale.java").exists()


def test_every_generated_class_says_how_it_is_made() -> None:
    for name, text in rendered().items():
        assert text.startswith(HEADER) and f"public final class {name.removesuffix('.java')} " in text
    assert {path.name for path in FOLDER.glob("*.java")} == set(rendered())


def test_a_detail_template_is_a_java_method_of_its_fields() -> None:
    java = rendered()["Reasons.java"]
    assert "public static String lateRequirementDetail(long slot) {" in java
    assert f'"{LATE_REQUIREMENT_DETAIL.split("{slot}")[0]}" + slot + "{LATE_REQUIREMENT_DETAIL.split("{slot}")[1]}"' \
        in java


@pytest.mark.parametrize(("declared", "layout"), [
    (rows.PARSED_EVENT, jvm_contract.PARSED), (rows.PARSED_REQUIREMENT, jvm_contract.PARSED),
    (rows.REJECTED_EVENT, jvm_contract.REJECTED_EVENT), (rows.POPULATION_IN, jvm_contract.POPULATION_IN),
    (rows.POPULATION_OUT, jvm_contract.POPULATION_OUT)])
def test_the_pyflink_rows_are_the_layouts(declared: object, layout: jvm_contract.RowLayout) -> None:
    assert declared.get_field_names() == layout.names  # type: ignore[attr-defined]


def test_the_layouts_keep_what_the_java_operators_assume() -> None:
    # ByUser keys on field 0: the user of every row it keys
    for layout in (jvm_contract.PRESENT, jvm_contract.TIMED, jvm_contract.CHANGE):
        assert layout.index("user") == 0, layout.names
    assert jvm_contract.PRESENCE.index("k") == 0
    # UserClassJoin copies a present event's fields up to `original` into its output row, in place
    shared = jvm_contract.CLASSED.index("original") + 1
    assert jvm_contract.PRESENT.names[:shared] == jvm_contract.CLASSED.names[:shared]


def test_a_row_by_field_names() -> None:
    assert rows.parsed_row(jvm_contract.TimePath.PENDING, 2, 7) == rows.Row(None, None, None, 2, 7, None, 1)
    with pytest.raises(KeyError):
        jvm_contract.PARSED.values(nope=1)
    assert jvm_contract.POPULATION_PRESENT.sql_type() == "ROW<`cls` STRING, `cell` INT, `n` BIGINT>"
    assert jvm_contract.SLOW_RECORD.sql_columns(ts_ms="0") == "`value`, `partition`, `offset`, 0 AS `ts_ms`"
