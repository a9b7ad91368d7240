"""kmirror.health.lagcheck: the evaluation of a group, the offset checker's table, the watch options."""

from __future__ import annotations

import argparse

import pytest

from kmirror.health import lagcheck
from kmirror.health import rules as health
from kmirror.health.lag import LagError
from kmirror.health.rules import Sample, Window

pytestmark = pytest.mark.health


def test_evaluation_marks_a_group_without_commits_notfound():
    from kmirror.health.lag import PartitionLag

    rows = [PartitionLag("g", "t", 0, -1, 10, 10, "none")]
    w = Window(3)
    w.add({("t", 0): Sample(1, -1, 10, 10, False)})
    result = lagcheck.evaluation("g", rows, "EMPTY", w, 1.0)
    assert result["status"] == "NOTFOUND"
    assert result["exit_code"] == health.EXIT_UNKNOWN
    assert lagcheck.evaluation("g", [], "DEAD", Window(3), 1.0)["exit_code"] == 3


def test_table_has_the_reference_columns():
    from kmirror.health.lag import PartitionLag

    rows = [PartitionLag("KafkaMirror", "test-topic", 2, 6, 9, 3, "none")]
    text = lagcheck.table(rows)
    assert text.splitlines()[0].split() == ["Group", "Topic", "Pid", "Offset", "logSize", "Lag", "Owner"]
    assert text.splitlines()[1].split() == ["KafkaMirror", "test-topic", "2", "6", "9", "3", "none"]
    rows = [PartitionLag("g", "t", 0, -1, 9, 9, "none")]
    assert lagcheck.table(rows, {("t", 0): "STOP"}).splitlines()[1].split() == [
        "g",
        "t",
        "0",
        "unknown",
        "9",
        "9",
        "none",
        "STOP",
    ]


def test_watch_options_are_checked(capsys):
    top = argparse.ArgumentParser()
    lagcheck.register(top.add_subparsers(dest="command"))
    a = top.parse_args(["lag", "--bootstrap-server", "x:1", "--group", "g", "--watch", "--window", "1"])
    with pytest.raises(LagError) as err:
        lagcheck.cmd_lag(a)
    assert err.value.exit_code == 3
