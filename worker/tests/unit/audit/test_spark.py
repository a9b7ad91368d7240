"""The audit's driver JVM reads a log4j2 configuration of its own process, never one another local user
could have planted at a known path in the shared temporary directory."""

from __future__ import annotations

import stat
import tempfile
from pathlib import Path

import pytest

from kmirror.audit import spark

pytestmark = pytest.mark.audit

PLANTED = "appender.evil.type = File\nappender.evil.fileName = /home/operator/.bashrc\n"


@pytest.fixture
def shared_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
    assert tempfile.gettempdir() == str(tmp_path)
    return tmp_path


def test_a_file_planted_at_the_old_path_is_not_used(shared_tmp: Path) -> None:
    planted = shared_tmp / "kmirror-audit-log4j2.properties"  # the path the audit used to trust
    planted.write_text(PLANTED)
    used = spark.log4j_file()
    assert used != planted
    assert used.read_text() == spark._LOG4J
    assert planted.read_text() == PLANTED  # neither used nor overwritten


def test_the_file_is_private_and_new_each_time(shared_tmp: Path) -> None:
    first, second = spark.log4j_file(), spark.log4j_file()
    assert first != second
    for f in (first, second):
        st = f.stat()
        assert stat.S_IMODE(st.st_mode) == 0o600
        assert f.read_text() == spark._LOG4J


def test_a_planted_symlink_under_a_guessable_name_is_not_followed(shared_tmp: Path) -> None:
    victim = shared_tmp / "victim"
    victim.write_text("mine\n")
    for i in range(50):  # whatever name an attacker guesses, mkstemp creates a new file, never opens one
        (shared_tmp / f"kmirror-audit-log4j2-{i}.properties").symlink_to(victim)
    used = spark.log4j_file()
    assert not used.is_symlink()
    assert victim.read_text() == "mine\n"
