"""Every role's README.md is the one tools/role_readme.py renders from its meta/argument_specs.yml, with
the hand-written part between its markers kept."""

from __future__ import annotations

import subprocess
import sys

import yaml
from ansible_harness import ROOT, load_module

GENERATOR = ROOT / "tools/role_readme.py"


def test_every_role_has_a_current_readme() -> None:
    gen = load_module(GENERATOR, "kmirror_role_readme")
    roles = gen.roles()
    assert len(roles) == len(list((ROOT / "roles").glob("*/meta/argument_specs.yml"))) >= 9
    for role in roles:
        readme = (role / "README.md").read_text(encoding="utf-8")
        assert readme == gen.render(role, gen.hand_written(readme)), f"{role.name}: run make docs"
    check = subprocess.run(
        [sys.executable, str(GENERATOR), "--check"], capture_output=True, text=True, timeout=60
    )
    assert check.returncode == 0, check.stdout + check.stderr


def test_the_readme_lists_every_option_of_every_entry_point() -> None:
    gen = load_module(GENERATOR, "kmirror_role_readme")
    for role in gen.roles():
        readme = (role / "README.md").read_text(encoding="utf-8")
        spec_file = role / "meta/argument_specs.yml"
        specs = yaml.safe_load(spec_file.read_text(encoding="utf-8"))["argument_specs"]
        for entry, spec in specs.items():
            if len(specs) > 1:
                assert f"## Variables of `{entry}`" in readme, f"{role.name}: entry point {entry} missing"
            for name in spec.get("options") or {}:
                assert f"| `{name}` |" in readme, f"{role.name}: {name} missing"


def test_the_hand_written_part_survives_and_a_stale_readme_is_reported(tmp_path, monkeypatch) -> None:
    gen = load_module(GENERATOR, "kmirror_role_readme")
    role = tmp_path / "roles/kmirror_example"
    (role / "meta").mkdir(parents=True)
    (role / "defaults").mkdir()
    (role / "meta/argument_specs.yml").write_text(
        "argument_specs:\n  main:\n    short_description: An example\n    options:\n"
        "      kmirror_example_port:\n        description: The C(port) | <n>.\n        type: int\n",
        encoding="utf-8",
    )
    (role / "defaults/main.yml").write_text("kmirror_example_port: 9092\n", encoding="utf-8")
    old = f"old\n{gen.BEGIN}\nWhy it exists.\n{gen.END}\nold table\n"
    (role / "README.md").write_text(old, encoding="utf-8")
    monkeypatch.setattr(gen, "ROOT", tmp_path)
    monkeypatch.setattr(gen, "ROLES", tmp_path / "roles")
    assert gen.main(["--check"]) == 1
    assert gen.main([]) == 0
    text = (role / "README.md").read_text(encoding="utf-8")
    assert f"{gen.BEGIN}\nWhy it exists.\n{gen.END}" in text and "old table" not in text
    assert "| `kmirror_example_port` | int | `9092` | The `port` \\| &lt;n&gt;. |" in text
    assert gen.main(["--check"]) == 0
