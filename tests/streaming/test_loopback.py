"""The free loopback port rule (jobs/streaming/loopback.py): ports handed out are claimed, so that
no two callers get the same port while its server has not bound it yet, in one process or across
processes; an expired claim frees its port again; without a writable claims folder the rule still
answers."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pwevent.jobs.streaming import loopback

SCRIPT = Path(loopback.__file__).resolve()


@pytest.fixture
def claims(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "claims"
    monkeypatch.setattr(loopback, "CLAIMS", folder)
    return folder


def test_no_port_is_handed_out_twice_within_a_claim(claims: Path) -> None:
    # 400 random draws from ~12,700 ports would repeat one with probability ~0.998 without the claims
    ports = [loopback.free_loopback_port() for _ in range(400)]
    assert len(set(ports)) == len(ports)
    assert {int(p.name) for p in claims.iterdir()} == set(ports)


def test_two_processes_drawing_at_once_get_different_ports(tmp_path: Path) -> None:
    draw = ("import runpy, sys; ns = runpy.run_path(sys.argv[1]);"
            "print(*(ns['free_loopback_port']() for _ in range(250)))")
    env = {**os.environ, "TMPDIR": str(tmp_path)}  # the children's claims folder: tmp_path/pwevent-loopback-ports
    children = [subprocess.Popen([sys.executable, "-c", draw, str(SCRIPT)], stdout=subprocess.PIPE, text=True,
                                 env=env) for _ in range(2)]
    drawn = [child.communicate(timeout=120)[0].split() for child in children]
    assert all(child.returncode == 0 for child in children)
    assert len(drawn[0]) == len(drawn[1]) == 250
    assert not set(drawn[0]) & set(drawn[1])
    assert len(list((tmp_path / "pwevent-loopback-ports").iterdir())) == 500


def test_an_expired_claim_frees_its_port(claims: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loopback.random, "shuffle", lambda candidates: None)  # lowest free port first
    first = loopback.free_loopback_port()
    assert loopback.free_loopback_port() != first
    expired = time.time() - loopback.CLAIM_SECONDS - 1
    os.utime(claims / str(first), (expired, expired))
    assert loopback.free_loopback_port() == first


def test_without_a_writable_claims_folder_ports_are_still_found(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a-file").write_text("")
    monkeypatch.setattr(loopback, "CLAIMS", tmp_path / "a-file" / "claims")
    assert loopback.LOWEST_PORT <= loopback.free_loopback_port()
