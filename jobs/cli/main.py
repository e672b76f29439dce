"""The `pwevent` command line. Every subcommand explains itself with --help."""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import traceback
from importlib.metadata import version
from pathlib import Path

from pwevent.jobs.common.avro_format import RegistryUnavailable
from pwevent.jobs.common.config import ConfigError, load_config, parse_config
from pwevent.jobs.common.extras import MissingExtraError
from pwevent.jobs.common.files import DEMO_ORIGIN, write_synthetic
from pwevent.jobs.common.progress import progress_printer
from pwevent.jobs.common.slots import SlotClock, duration_arg, parse_time_ms
from pwevent.jobs.common.synthetic import STREAMS, SyntheticStream
from pwevent.jobs.evaluation.evaluate import add_evaluate_parser
from pwevent.jobs.offline.audit import AuditInputError, AuditReport, audit_file
from pwevent.jobs.offline.privacy_test import add_privacy_test_parser
from pwevent.jobs.offline.release_topic import TopicAudit, audit_release_topic, read_release_topic
from pwevent.jobs.offline.replay import run_replay
from pwevent.jobs.streaming import job as flink_job
from pwevent.jobs.streaming import produce, stop, tail
from pwevent.jobs.streaming.config_schema import config_schema
from pwevent.jobs.streaming.kafka_io import BrokerUnavailableError
from pwevent.jobs.streaming.kafka_kerberos import KerberosLoginError
from pwevent.jobs.streaming.settings import load_settings
from pwevent.operators.registry import REGISTRY

#: Exit code of `replay` and `audit` when an input held records none of which was usable (README).
EXIT_UNUSABLE = 6


def horizon_slot(raw: str, clock: SlotClock) -> int:
    """`--through`: a slot number (from 1), or a time (ISO-8601 or epoch ms) whose slot is the last."""
    if raw.isdigit() and int(raw) >= 1 and len(raw) < 10:
        return int(raw)
    try:
        slot = clock.slot_of(parse_time_ms(raw, "--through"))
    except ValueError as err:
        raise ConfigError(f"--through must be a slot number (from 1) or a time, got {raw!r} ({err})") from None
    if slot < 1:
        raise ConfigError(f"--through {raw} lies before the configured origin")
    return slot


def cmd_replay(args: argparse.Namespace) -> int:
    config, _ = load_settings(args.config)
    summary = run_replay(
        config, args.events, args.requirements, args.releases_out, args.spend_log,
        args.truth_out, args.rejects_out, args.seed, None if args.quiet else progress_printer("replay"),
        horizon_slot(args.through, config.clock),
    )
    print(summary.render())
    return EXIT_UNUSABLE if summary.unusable else 0


def _audit_usage(args: argparse.Namespace) -> str | None:
    """What is wrong with the audit's arguments, if anything."""
    if args.release_topic:
        if args.releases or not args.config:
            return ("--release-topic reads the releases from the topic of --config's kafka: section, instead of "
                    "--releases")
        if args.requirements and not args.spend_log:
            return "the full audit needs --spend-log and --requirements together"
        return None
    if not args.spend_log:
        return "--spend-log is required (or --release-topic with --config)"
    full = (args.requirements, args.releases, args.config)
    if any(full) and not all(full):
        return "the full audit needs --requirements, --releases and --config together"
    if args.erased and not args.requirements:
        return "--erased goes with the full audit (--requirements, --releases and --config)"
    return None


def erased_users(path: str | None) -> frozenset[str]:
    """`--erased FILE`: the erased users' ids as the spend log names them, one per line (blank lines
    and `#` comments skipped)."""
    if path is None:
        return frozenset()
    try:
        with open(path, encoding="utf-8") as handle:
            lines = [line.split("#", 1)[0].strip() for line in handle]
    except OSError as err:
        raise AuditInputError(f"cannot read --erased {path}: {err.strerror}") from None
    return frozenset(line for line in lines if line)


def cmd_audit(args: argparse.Namespace) -> int:
    usage = _audit_usage(args)
    if usage:
        print(f"pwevent audit: {usage}", file=sys.stderr)
        return 2
    settings = load_settings(args.config) if args.config else None  # a ConfigError: exit 2, not the auditor's 3
    config = settings[0] if settings else None
    # the topic read before the auditor runs: no broker or no topic is exit 4, not the auditor's 3
    read = read_release_topic(settings[1].kafka, settings[1].release, settings[0]) \
        if settings and args.release_topic else None
    try:
        erased = erased_users(args.erased)
        if settings and read is not None:
            report: AuditReport | TopicAudit = audit_release_topic(settings[1].kafka, settings[0], args.spend_log,
                                                                   args.requirements, read, erased,
                                                                   dead_letters=args.dead_letters)
        else:
            report = audit_file(args.spend_log, args.requirements, args.releases, config, erased=erased,
                                dead_letters=args.dead_letters)
    except AuditInputError as err:
        print(f"pwevent audit: cannot audit: {err}", file=sys.stderr)
        return 2
    except RegistryUnavailable:  # the registry an Avro release topic needs did not answer: exit 4
        raise
    except Exception:  # exit 1 means violations found: a failure of the auditor itself must not say that
        traceback.print_exc()
        print("pwevent audit: the auditor failed (a bug, not a verdict on the log); exit code 3", file=sys.stderr)
        return 3
    print(report.render())
    return 1 if not report.ok else EXIT_UNUSABLE if report.unusable else 0


def cmd_generate(args: argparse.Namespace) -> int:
    stream = SyntheticStream(args.stream, args.users, args.slots, args.seed)
    signature = load_settings(args.config)[0].requirements.signature if args.config else None
    events, requirements = write_synthetic(
        stream, args.out, args.epsilon, args.window, args.slot, args.dynamic,
        args.types, args.change_every, signature,
    )
    print(f"wrote {events} and {requirements}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Generate a small stream, replay it with secure noise, show true vs released, audit."""
    work = Path(args.out or tempfile.mkdtemp(prefix="pwevent-demo-"))
    stream = SyntheticStream("Sin", args.users, args.slots, seed=7)
    write_synthetic(stream, str(work), 0.6, 120, 60_000)
    config = parse_config(  # a baseline's global (w, E): the strictest requirement write_synthetic declares
        {"mechanism": args.mechanism, "slot": "60s", "origin": DEMO_ORIGIN, "domain": {"type": "binary"},
         **REGISTRY.get(args.mechanism).global_keys(120, 0.6)}
    )
    paths = {name: str(work / f"{name}.jsonl") for name in ("releases", "spend", "truth", "rejects")}
    summary = run_replay(
        config, str(work / "events.jsonl"), str(work / "requirements.jsonl"), paths["releases"], paths["spend"],
        paths["truth"], paths["rejects"], None, progress_printer("demo replay"),
    )
    print(summary.render())
    with open(paths["releases"]) as rel, open(paths["truth"]) as tru:
        rows = [(json.loads(a), json.loads(b)) for a, b in zip(rel, tru, strict=True)]
    print("\nper cell (0, 1): the true count, the released smoothed value with its 95% interval (what to read), "
          "and the raw noisy count")
    print(f"{'slot':>5} {'kind':>8} {'true':>13} {'smoothed [95% interval]':>54} {'raw':>15}")
    step = max(1, len(rows) // 15)
    for release, truth in rows[::step]:
        cells = "  ".join(f"{m:7.1f} [{lo:7.1f}, {hi:7.1f}]" for m, (lo, hi) in
                          zip(release["smoothed"], release["interval"], strict=True))
        print(f"{release['slot']:>5} {release['kind']:>8} {truth['counts'][0]:>6} {truth['counts'][1]:>6} {cells} "
              f"{release['counts'][0]:>7} {release['counts'][1]:>7}")
    report = audit_file(paths["spend"], str(work / "requirements.jsonl"), paths["releases"], config)
    print("\naudit: " + report.render())
    print(f"files in {work}")
    return 0 if report.ok else 1


#: Package data of the wheel (pyproject.toml, tool.setuptools.package-data): the repository's
#: deploy/examples and docs/schemas, one copy.
PACKAGED_FILES = {"examples": ("pwevent.examples", (".yaml",)), "schemas": ("pwevent.schemas", (".json", ".avsc"))}


def cmd_examples(args: argparse.Namespace) -> int:
    """Copy the example configurations and the record schemas the package carries into --out."""
    out = Path(args.out)
    copies = []
    for folder, (package, suffixes) in PACKAGED_FILES.items():
        # Data-only folders are namespace packages: an editable install's search path also holds
        # a placeholder of its import hook, which importlib.resources cannot walk; real folders only.
        spec = importlib.util.find_spec(package)
        places = [Path(p) for p in (spec.submodule_search_locations or []) if Path(p).is_dir()] if spec else []
        copies += [(item, out / folder / item.name) for place in places for item in sorted(place.iterdir())
                   if item.name.endswith(suffixes)]
    existing = [str(target) for _, target in copies if target.exists()]
    if existing:
        print(f"pwevent examples: not overwriting {', '.join(sorted(existing))}", file=sys.stderr)
        return 2
    for item, target in sorted(copies, key=lambda pair: str(pair[1])):
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(item.read_bytes())
        print(target)
    return 0


def cmd_pseudonym(args: argparse.Namespace) -> int:
    """Print the pseudonym of each user id read from standard input (one per line), under the
    configuration's `pseudonymise` key: the id as the job's state and audit name it."""
    config = load_config(args.config)
    if config.pseudonyms is None:
        raise ConfigError("pseudonymise: not configured in --config (user ids are kept as they are)")
    for line in sys.stdin:
        if line.strip():
            print(config.pseudonyms.of(line.rstrip("\r\n")))
    return 0


def cmd_config_schema(args: argparse.Namespace) -> int:
    """Print (or write to --out) the configuration's JSON Schema, generated from its models."""
    text = json.dumps(config_schema(), indent=2) + "\n"
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pwevent",
        description="Personalized w-event differentially private release of per-slot histograms "
        f"from user event streams (mechanisms: {', '.join(REGISTRY.names())}).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {version('pwevent')}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    replay = sub.add_parser(
        "replay", help="run a mechanism over input files (no Flink, no Kafka)",
        description="Run a mechanism over event and requirement files (JSON lines, or framed-records files of Avro "
        "or Protobuf records), slot by slot, and write "
        "the releases, the spend log (for `pwevent audit`) and optionally the true histograms and the rejects. "
        "Exit 0 when every input that held records had a usable one; 6 (after writing everything) when an input "
        "held records and none was usable: no event counted in any slot, or no requirement record applied (the "
        "summary's NO USABLE RECORD line says which; the rejects say why), so a CI check on a sample fails; "
        "2 a configuration or input error. A requirement record dated before the origin is in force from slot 1 "
        "(the latest one per user). Formats: docs/formats.md.",
    )
    replay.add_argument("--config", required=True, help="YAML configuration (mechanism, slot, origin, domain, ...)")
    replay.add_argument("--events", required=True, help="events file in events.format: one {user, time, value} per "
                        "line (JSON), or for Avro and Protobuf a framed-records file (one base64 Kafka value a "
                        "line; for plain Avro also an Avro object container file); when a mapping names a part of "
                        "the Kafka record, $key, $timestamp or $headers.<name>, a whole-records file: docs/formats.md")
    replay.add_argument("--requirements", required=True, help="requirements file in requirements.format (as "
                        "--events): {user, time, w, epsilon} or {user, time, backward: {w, epsilon}, forward: "
                        "{w, epsilon}} per record, each field at its configured path (requirements: in the "
                        "configuration)")
    replay.add_argument("--releases-out", required=True, help="where to write one release per slot (per "
                        "statistic and slot with several statistics, each naming its statistic)")
    replay.add_argument("--spend-log", required=True, help="where to write the spend log")
    replay.add_argument("--truth-out", help="where to write the true histogram of each slot (evaluation only)")
    replay.add_argument("--rejects-out", help="where to write rejected records with their reasons")
    replay.add_argument("--through", required=True, metavar="SLOT|TIME",
                        help="the public horizon: release every slot from 1 to this slot number, or to the slot "
                             "of this time (ISO-8601 or epoch ms), whether or not anything arrived, as the job's "
                             "schedule does; never a bound read from the data (docs/streaming.md, \"Time\")")
    replay.add_argument("--seed", type=int, help="TEST/REPRODUCTION ONLY: seeded numpy noise instead of the "
                        "secure default, which draws from the operating system")
    replay.add_argument("--quiet", action="store_true", help="no progress line")
    replay.set_defaults(func=cmd_replay)

    audit = sub.add_parser(
        "audit", help="check a spend log against every user's requirement and the releases",
        description="Recompute every window sum from raw records: each ledger's from the spend log, and, with "
        "--requirements, --releases and --config, each user's (followed through its member lines) against the "
        "requirements the user declared in the input, plus membership, gaps and every line against its slot's "
        "release. With several statistics under one budget each statistic is audited against its share, and every "
        "user's windows summed over all of them against its declared requirement. Every utilisation record (the "
        "budget in view) is recomputed from the spend lines. "
        "With --spend-log alone only the ledger-level checks run, and the report says what it skipped. "
        "Exit 0: no violation; 1: violations (each with its rule, slot, ledger/user); 2: unreadable or corrupt "
        "input (or a usage error); 3: the auditor itself failed (a bug, never a verdict); 6: no violation, but the "
        "requirements input held records and none was a valid requirement record (NO USABLE RECORD). "
        "Rules: docs/mechanisms.md, 'What the auditor proves'.",
    )
    audit.add_argument("--spend-log", help="spend log written by replay or the streaming job (required unless "
                       "--release-topic)")
    audit.add_argument("--requirements", help="the requirements input the run read, in requirements.format (JSON "
                       "lines, or a framed-records file for Avro and Protobuf, a whole-records file when a mapping "
                       "names a part of the Kafka record; a dump of the requirements topic for the streaming job)")
    audit.add_argument("--releases", help="the releases the run wrote (JSON lines, one per "
                       "slot, or per statistic and slot)")
    audit.add_argument("--config", help="the run's YAML configuration (mechanism, slot clock, caps, field names)")
    audit.add_argument("--release-topic", action="store_true",
                       help="read the releases from the release topic of --config's kafka: section as an analyst "
                       "may, read_uncommitted (aborted transactions included): a slot with two different "
                       "records is release_redrawn; the committed releases stand for --releases (with "
                       "--spend-log, and --requirements for the full audit). Every release format (json, "
                       "json-confluent, avro-confluent: the Avro schema from --config's release.schema_registry). "
                       "Exit 4: no broker, no topic, or no registry answering")
    audit.add_argument("--erased", metavar="FILE",
                       help="users erased from the requirements input, one id per line as the spend log names "
                       "them (pseudonyms under pseudonymise:): reported UNVERIFIABLE, not unregistered_member "
                       "(docs/operations.md, 'Retention and erasure')")
    audit.add_argument("--dead-letters", metavar="FILE",
                       help="the run's dead letters (JSON lines; a dump of the dead-letter topic taken before the "
                       "releases are read): each requirement record the job refused as late declares nothing, as "
                       "in the job, and its slot must have been decided; full audit only (docs/operations.md, "
                       "'Audit what analysts read')")
    audit.set_defaults(func=cmd_audit)

    pseudonym = sub.add_parser(
        "pseudonym", help="print the pseudonym of user ids (read from standard input) under pseudonymise:",
        description="Read user ids from standard input, one per line (so they stay out of the shell's history), "
        "and print each one's pseudonym under the pseudonymise: key of --config: the id the job's state, audit "
        "and dead letters hold. Used to list an erased user for pwevent audit --erased.",
    )
    pseudonym.add_argument("--config", required=True, help="the job's YAML configuration (with pseudonymise:)")
    pseudonym.set_defaults(func=cmd_pseudonym)

    generate = sub.add_parser(
        "generate", help="write a synthetic stream (TLNS, Sin, Log) as input files",
        description="Write events.jsonl and requirements.jsonl of one of the paper's synthetic streams, with "
        "personalized requirements (E_i from {E..1.0} step 0.2, w_i from {40..w} step 40).",
    )
    generate.add_argument("--stream", choices=STREAMS, default="Sin")
    generate.add_argument("--users", type=int, default=1000)
    generate.add_argument("--slots", type=int, default=1000)
    generate.add_argument("--epsilon", type=float, default=0.6, help="lowest personalized budget E")
    generate.add_argument("--window", type=int, default=120, help="largest personalized window w")
    generate.add_argument("--slot", default="60s", type=duration_arg, help="slot length used for the event times")
    generate.add_argument("--dynamic", action="store_true", help="dynamic backward/forward requirements")
    generate.add_argument("--types", type=int, default=10, help="dynamic: requirement types sharing one sequence")
    generate.add_argument("--change-every", type=int, default=500, help="dynamic: slots between forward redraws")
    generate.add_argument("--seed", type=int, default=0, help="seed of the generated data")
    generate.add_argument("--out", required=True, help="output folder")
    generate.add_argument("--config", help="YAML configuration; with requirements.signature the requirement "
                          "records are signed with the key from its environment variable")
    generate.set_defaults(func=cmd_generate)

    demo = sub.add_parser(
        "demo", help="replay a generated stream and print true vs released counts",
        description="Generate a Sin stream, replay it with secure noise, print a table of true vs released "
        "counts and audit the spend log.",
    )
    demo.add_argument("--mechanism", choices=[e.name for e in REGISTRY if not e.dynamic], default="Adaptive",
                      help="a mechanism with fixed requirements (the demo's stream declares w/epsilon)")
    demo.add_argument("--users", type=int, default=2000)
    demo.add_argument("--slots", type=int, default=600)
    demo.add_argument("--out", help="folder for the files (default: a new temporary folder)")
    demo.set_defaults(func=cmd_demo)
    examples = sub.add_parser(
        "examples", help="copy the example configurations and the record schemas into a folder",
        description="Write the example YAML configurations (examples/) and the JSON Schemas of every record "
        "(schemas/) that the installed package carries into --out; existing files are never overwritten.",
    )
    examples.add_argument("--out", required=True, help="folder to write examples/ and schemas/ into")
    examples.set_defaults(func=cmd_examples)
    schema = sub.add_parser(
        "config-schema", help="print the JSON Schema of the YAML configuration",
        description="Print the JSON Schema (draft 2020-12) of the configuration file, generated from the models "
        "that validate it; docs/schemas/config.schema.json is this output. It checks keys, types and ranges; "
        "rules across keys and ${NAME} resolution are checked by pwevent only.",
    )
    schema.add_argument("--out", help="write the schema to this file instead of standard output")
    schema.set_defaults(func=cmd_config_schema)
    flink_job.register(sub)
    produce.register(sub)
    stop.register(sub)
    tail.register(sub)

    add_evaluate_parser(sub)
    add_privacy_test_parser(sub, lambda label: progress_printer(label, "trial"))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except ConfigError as err:
        print(f"pwevent: configuration error: {err}", file=sys.stderr)
        return 2
    except MissingExtraError as err:
        print(f"pwevent: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"pwevent: {err}", file=sys.stderr)
        return 2
    except (BrokerUnavailableError, RegistryUnavailable, KerberosLoginError) as err:
        print(f"pwevent: {err}", file=sys.stderr)
        return 4


if __name__ == "__main__":
    sys.exit(main())
