"""The bare Flink SQL pipeline `bench_stream.py --ceiling` measures the job against (issue 8).

    .venv/bin/python benchmarks/ceiling.py --config FILE --counts-topic TOPIC
        [--format raw|json|avro-confluent] [--format-jar JAR] [--ready-file FILE] [--explain]

Same Flink configuration as the job (`make_environment` of jobs/streaming/job.py from the config's
`flink:` section: thread mode, parallelism, exactly-once checkpoints, state backend), no Python
operator on the data path:

    events topic (read_committed, earliest)
      raw:  `value` STRING -> JSON_VALUE/TRY_CAST per field; event time from the `time` field as a
            computed column, watermark declared on the source (per partition)
      json: `format json` with the fields as columns (same event time and watermark)
      avro-confluent: Flink's `avro-confluent` format (the config's events.schema_registry url and its
            basic auth, if any; the format's jar, flink-sql-avro-confluent-registry, given by
            --format-jar), the three fields as columns (the schema's others are skipped)
      -> TUMBLE(slot length, aligned to the origin) -> window deduplication: the latest event per
         user and window -> count per (window, cell) -> exactly-once Kafka sink (the job's sink
         table), one JSON record {"window_end": "...", "cell": c, "users": n} per (window, cell).

Runs until killed; with --ready-file, writes the job id there once the job is RUNNING.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pwevent.jobs.common.config import SchemaRegistrySection

REPO = Path(__file__).resolve().parents[1]


def _sql_str(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _interval_ms(ms: int) -> str:
    return f"INTERVAL '{ms / 1000:.3f}' SECOND"


def source_ddl(fmt: str, topic: str, bootstrap: str, group_id: str, properties: dict[str, str],
               out_of_orderness_ms: int, registry: SchemaRegistrySection | None = None) -> str:
    """The events table of the `fmt` variant, event time `ts` with its watermark."""
    options = {"connector": "kafka", "topic": topic, "properties.bootstrap.servers": bootstrap,
               "properties.group.id": group_id, "properties.isolation.level": "read_committed",
               "scan.startup.mode": "earliest-offset"}
    options.update({f"properties.{k}": v for k, v in properties.items()})
    if fmt == "raw":
        options["format"] = "raw"
        columns = ("`value` STRING, "
                   "`ts` AS TO_TIMESTAMP_LTZ(TRY_CAST(JSON_VALUE(`value`, '$.time') AS BIGINT), 3)")
    else:
        if fmt == "avro-confluent":
            assert registry is not None
            options.update({"format": "avro-confluent", "avro-confluent.url": registry.url})
            if registry.username is not None and registry.password is not None:  # the format's basic auth
                user_info = f"{registry.username}:{registry.password.reveal()}"
                options.update({"avro-confluent.basic-auth.credentials-source": "USER_INFO",
                                "avro-confluent.basic-auth.user-info": user_info})
        else:
            options.update({"format": "json", "json.ignore-parse-errors": "true"})
        columns = "`user` STRING, `time` BIGINT, `value` INT, `ts` AS TO_TIMESTAMP_LTZ(`time`, 3)"
    with_ = ", ".join(f"{_sql_str(k)} = {_sql_str(v)}" for k, v in options.items())
    return (f"CREATE TEMPORARY TABLE `events` ({columns}, "
            f"WATERMARK FOR `ts` AS `ts` - {_interval_ms(out_of_orderness_ms)}) WITH ({with_})")


def counts_sql(fmt: str, slot_ms: int, origin_ms: int) -> str:
    """Latest event per user and slot window, then users per (window, cell), as JSON text `v`."""
    if fmt == "raw":
        fields = ("JSON_VALUE(`value`, '$.user') AS `user`, "
                  "TRY_CAST(JSON_VALUE(`value`, '$.value') AS INT) AS cell, `ts`")
    else:
        fields = "`user`, `value` AS cell, `ts`"
    window = (f"TUMBLE(TABLE parsed, DESCRIPTOR(`ts`), {_interval_ms(slot_ms)}, "
              f"{_interval_ms(origin_ms % slot_ms)})")
    return (
        f"WITH parsed AS (SELECT {fields} FROM `events`), "
        "latest AS (SELECT * FROM ("
        " SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end, `user` ORDER BY `ts` DESC) AS rn"
        f" FROM TABLE({window})) WHERE rn = 1) "
        "SELECT JSON_OBJECT('window_end' VALUE CAST(window_end AS STRING), 'cell' VALUE cell, "
        "'users' VALUE COUNT(*)) AS v "
        "FROM latest GROUP BY window_start, window_end, cell"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, help="the job's YAML (kafka: and flink: sections, slot, origin)")
    parser.add_argument("--counts-topic", required=True, help="topic of the per-(window, cell) counts")
    parser.add_argument("--format", choices=("raw", "json", "avro-confluent"), default="raw",
                        help="raw: STRING value + JSON_VALUE per field (default); json: `format json`; "
                        "avro-confluent: Flink's format of that name")
    parser.add_argument("--format-jar", help="a jar the format needs (avro-confluent)")
    parser.add_argument("--ready-file", help="write the job id here once the job is RUNNING")
    parser.add_argument("--explain", action="store_true", help="print the plan and exit")
    args = parser.parse_args(argv)

    from pwevent.jobs.common.config import load_config
    from pwevent.jobs.streaming.job import announce_running, make_environment
    from pwevent.jobs.streaming.settings import stream_settings
    from pwevent.jobs.streaming.sink_tables import sink_ddl

    config = load_config(args.config)
    settings = stream_settings(config, str(Path(args.config).resolve().parent))
    kafka = settings.kafka
    env, t_env = make_environment(settings, None)
    if args.format_jar:
        env.add_jars(Path(args.format_jar).resolve().as_uri())
    t_env.get_config().set("table.local-time-zone", "UTC")  # windows align in UTC, as in the job
    registry = config.events.schema_registry
    t_env.execute_sql(source_ddl(args.format, kafka.topics["events"], kafka.require_bootstrap(),
                                 f"{kafka.group_id}-events", kafka.jvm_properties(),
                                 settings.flink.out_of_orderness_ms, registry))
    t_env.execute_sql(sink_ddl("counts", args.counts_topic, "counts", settings))
    query = counts_sql(args.format, config.slot_ms, config.origin_ms)
    if args.explain:
        print(t_env.explain_sql(f"INSERT INTO counts {query}"))
        return 0
    result = t_env.execute_sql(f"INSERT INTO counts {query}")
    client = result.get_job_client()
    if args.ready_file:
        announce_running(client, Path(args.ready_file))
    result.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
