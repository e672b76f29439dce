"""The optional extras of the package (pyproject.toml, `[project.optional-dependencies]`;
docs/architecture.md, "Dependencies"): whether one is installed, and an install command that works.

No package index serves pwevent, so `pip install 'pwevent[evaluate]'` finds nothing: the extra is
installed from where this installation came from (PEP 610's `direct_url.json`: the wheel file, or the
checkout of an editable install), or its requirements are installed directly (read from the
package's metadata, so that the message and pyproject.toml cannot disagree).
"""

from __future__ import annotations

import importlib
import json
import shlex
import sys
from dataclasses import dataclass
from importlib.metadata import distribution, distributions
from pathlib import Path
from urllib.parse import unquote, urlparse

DISTRIBUTION = "pwevent"


class MissingExtraError(RuntimeError):
    """A command needs an optional extra that is not installed; the CLI prints the message (which
    says how to install it) and exits with code 2."""


def extra_requirements(extra: str) -> list[str]:
    """The requirements the extra adds, as its metadata lists them (`matplotlib>=3.8`)."""
    marker = f'extra == "{extra}"'
    return [line.split(";")[0].strip() for line in distribution(DISTRIBUTION).requires or ()
            if line.partition(";")[2].strip() == marker]


def _source() -> tuple[str, bool] | None:
    """(where this installation came from, editable) when it is a local file or folder that still
    exists: the wheel file or the checkout (PEP 610); None for anything else. Every copy of the
    metadata on the path is asked (a checkout's own `pwevent.egg-info` has no `direct_url.json`)."""
    texts = [d.read_text("direct_url.json") for d in distributions(name=DISTRIBUTION)]
    text = next((t for t in texts if t), None)
    if text is None:
        return None
    record = json.loads(text)
    url = urlparse(str(record.get("url", "")))
    path = Path(unquote(url.path))
    if url.scheme != "file" or not path.exists():
        return None
    return str(path), bool(record.get("dir_info", {}).get("editable"))


def install_hint(extra: str) -> str:
    """The commands that install `extra` into this interpreter's environment."""
    pip = f"{shlex.quote(sys.executable)} -m pip install"
    direct = f"{pip} {shlex.join(extra_requirements(extra))}"
    source = _source()
    if source is None:
        return direct
    path, editable = source
    from_source = (f"{pip} -e {shlex.quote(f'{path}[{extra}]')}" if editable
                   else f"{pip} {shlex.quote(f'{DISTRIBUTION}[{extra}] @ {Path(path).as_uri()}')}")
    return f"{from_source}\n  (or only its requirements: {direct})"


@dataclass(frozen=True)
class Extra:
    """An optional extra: its name in pyproject.toml, a module it provides, and what needs it."""

    name: str
    module: str
    purpose: str

    def require(self) -> None:
        """Return if the extra's module imports; else MissingExtraError naming the extra and how to
        install it (no package index serves `pwevent[...]`). A module whose shared library is missing
        (OSError) counts as not installed."""
        try:
            importlib.import_module(self.module)
        except (ImportError, OSError):
            raise MissingExtraError(
                f"{self.purpose}: install the optional extra `{self.name}` (no package index serves "
                f"pwevent[{self.name}]):\n  {install_hint(self.name)}"
            ) from None


#: `pwevent evaluate` draws its plots with matplotlib.
EVALUATE = Extra("evaluate", "matplotlib", "pwevent evaluate draws its plots with matplotlib")
#: `pwevent run` (the streaming job) needs PyFlink; replay, audit, evaluate and the Kafka tools do not.
STREAM = Extra("stream", "pyflink", "pwevent run runs the streaming job on PyFlink (apache-flink)")
#: GSSAPI (Kerberos) for pwevent's Python Kafka clients (jobs/streaming/kafka_kerberos.py).
KERBEROS = Extra("kerberos", "gssapi", "kafka.security.sasl_mechanism GSSAPI: pwevent's Python Kafka clients log "
                 "in with the Python package gssapi, which builds against the system's Kerberos development "
                 "files (Debian: apt-get install libkrb5-dev)")
#: AWS_MSK_IAM for pwevent's Python Kafka clients: kafka-python signs the request with botocore's credentials.
AWS = Extra("aws", "botocore", "kafka.security.sasl_mechanism AWS_MSK_IAM: pwevent's Python Kafka clients "
            "(kafka-python) sign the mechanism's request with AWS credentials found by the Python package botocore")
