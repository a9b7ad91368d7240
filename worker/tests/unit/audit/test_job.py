"""kmirror.audit.job: the audit command refuses bad options before any cluster or Spark, default
cluster names."""

from __future__ import annotations

import pytest

from kmirror.audit import job, report

pytestmark = pytest.mark.audit


def test_command_refuses_bad_options_in_one_line_before_any_cluster_or_spark(tmp_path, capsys):
    from kmirror import cli

    files = []
    for name in ("source", "target"):
        files.append(tmp_path / f"{name}.properties")
        files[-1].write_text("bootstrap.servers=127.0.0.1:1\n")
    base = ["audit", "--source.config", str(files[0]), "--target.config", str(files[1])]
    out = str(tmp_path / "out")
    cases = [
        (["--topics", "orders", "--exclude", "(", "--output", out], "--blacklist"),
        (["--topics", "orders", "--from", "-1h", "--to", "-2h", "--output", out], "--from must be before"),
        (["--topics", "orders", "--grace", "5", "--output", out], "--grace"),
        (["--topics", "orders", "--conf", "novalue", "--output", out], "KEY=VALUE"),
    ]
    for args, expected in cases:
        assert cli.main([*base, *args]) == report.EXIT_ERROR
        err = capsys.readouterr().err
        assert err.startswith("kmirror audit: error: ") and err.count("\n") == 1, err
        assert expected in err
    assert not (tmp_path / "out").exists()


def test_default_cluster_names_follow_the_ansible_layout(tmp_path):
    east = tmp_path / "east"
    assert job.default_name(str(east / "consumer.properties"), "consumer", None) == "east"
    assert job.default_name(str(east / "producer.properties"), "producer", "target") == "target"
    assert job.default_name(str(tmp_path / "dc1.properties"), "consumer", None) == "dc1"
