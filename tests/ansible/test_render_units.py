"""tools/render_units.py (docs/manual-install.md): the units of a host installed without Ansible are the
role's own, rendered from the same templates with the roles' defaults."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml
from ansible_harness import UNIT_DEFAULTS

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "render_units.py"
SOURCES = [
    {"name": "east", "whitelist": "orders.*,payments", "num_streams": 2},
    {"name": "west", "whitelist": "clicks.*", "blacklist": "clicks\\.private", "metrics_port": 9600},
]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True, timeout=60)


def test_units_are_what_the_role_installs(tmp_path, render):
    (tmp_path / "sources.yml").write_text(yaml.safe_dump(SOURCES))
    proc = run("--sources", str(tmp_path / "sources.yml"), "--out", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "out"
    assert (out / "kmirror@.service").read_text() == render("kmirror@.service.j2", **UNIT_DEFAULTS)
    for source, port in zip(SOURCES, (9570, 9600), strict=True):
        assert (out / f"kmirror@{source['name']}.service.d" / "10-kmirror.conf").read_text() == render(
            "kmirror-instance.conf.j2",
            kmirror_source=source,
            kmirror_bin="/opt/kmirror/venv/bin/kmirror",
            kmirror_conf_dir="/etc/kmirror",
            kmirror_log_level="INFO",
            kmirror_log_format="text",
            kmirror_metrics_port=port,
            kmirror_metrics_address="0.0.0.0",
        )
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
        "kmirror@.service",
        "kmirror@east.service.d/10-kmirror.conf",
        "kmirror@west.service.d/10-kmirror.conf",
    ]


def test_a_bad_sources_file_is_one_line_and_exit_2(tmp_path):
    (tmp_path / "sources.yml").write_text("name: east\n")
    proc = run("--sources", str(tmp_path / "sources.yml"), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "not a list of source definitions" in proc.stderr
    (tmp_path / "sources.yml").write_text(yaml.safe_dump([{**SOURCES[0], "metrics_port": 9600}, SOURCES[1]]))
    proc = run("--sources", str(tmp_path / "sources.yml"), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "port 9600 is also the metrics port of kmirror@east" in proc.stderr
