"""The deployment docs agree with the toolkit: the ACL table is the one generated from the module's bindings,
every playbook is documented, and every playbook and variable the docs and runbooks name exists."""

from __future__ import annotations

import re
import subprocess
import sys

import yaml
from ansible_harness import ROOT, load_module

DOCS = [ROOT / "README.md", *sorted(ROOT.glob("docs/*.md")), *sorted(ROOT.glob("docs/runbooks/*.md"))]
PLAYBOOKS = sorted(p.name for p in (ROOT / "playbooks").glob("*.yml"))
# The selection variables kmirror_sources_selected replaced: still read, but no doc may tell to set them.
RENAMED = load_module(ROOT / "roles/kmirror_common/filter_plugins/kmirror_common.py", "kmirror_filters")


def test_the_acl_table_is_generated_from_the_bindings() -> None:
    table = load_module(ROOT / "roles/kmirror_acls/files/acl_table.py", "kmirror_acl_table")
    doc = (ROOT / "docs/deployment.md").read_text(encoding="utf-8")
    assert table.table() in doc, "docs/deployment.md: the ACL table is stale: run make docs"
    # The generator's check (make lint) agrees.
    check = subprocess.run(
        [sys.executable, str(ROOT / "roles/kmirror_acls/files/acl_table.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert check.returncode == 0, check.stdout + check.stderr


def test_the_acl_table_names_every_operation_the_module_grants() -> None:
    table = load_module(ROOT / "roles/kmirror_acls/files/acl_table.py", "kmirror_acl_table")
    bindings = table.load_bindings()
    generated = table.table()
    target_topics = next(
        line for line in generated.splitlines() if line.startswith("| target | TOPIC: the whitelisted")
    )
    for op in bindings.TARGET_TOPIC_OPERATIONS:
        assert f"{op}: " in target_topics, op
    source_topics = next(
        line for line in generated.splitlines() if line.startswith("| source | TOPIC: the whitelisted")
    )
    for op in bindings.SOURCE_TOPIC_OPERATIONS:
        assert f"{op}: " in source_topics, op
    sync_topic = next(
        line for line in generated.splitlines() if f"| TOPIC LITERAL `{bindings.SYNC_TOPIC}` |" in line
    )
    for op in bindings.SYNC_TOPIC_OPERATIONS:
        assert f"{op}: " in sync_topic, op


def test_a_grant_without_a_reason_stops_the_generator(monkeypatch) -> None:
    table = load_module(ROOT / "roles/kmirror_acls/files/acl_table.py", "kmirror_acl_table")
    bindings = table.load_bindings()
    monkeypatch.setattr(bindings, "TARGET_TOPIC_OPERATIONS", (*bindings.TARGET_TOPIC_OPERATIONS, "DELETE"))
    try:
        table.table(bindings)
    except SystemExit as exc:
        assert "grants DELETE on the target's topics: add the reason to REASONS" in str(exc)
    else:
        raise AssertionError("a grant without a reason reached the table")


def test_every_playbook_is_in_the_playbook_table_and_the_readme() -> None:
    deployment = (ROOT / "docs/deployment.md").read_text(encoding="utf-8")
    section = deployment.split("## Playbooks", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `playbooks/([\w.-]+\.yml)` \|", section, re.M)
    assert sorted(rows) == PLAYBOOKS, "docs/deployment.md's playbook table must list every file of playbooks/"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    listed = re.search(r"^Playbooks: (.*?)\. Details:", readme, re.M | re.S)
    assert listed, "README.md: the line 'Playbooks: ...' is gone"
    assert sorted(re.findall(r"`([\w.-]+\.yml)`", listed.group(1))) == PLAYBOOKS


def test_every_playbook_the_docs_name_exists() -> None:
    for doc in DOCS:
        for name in re.findall(r"playbooks/([\w.-]+\.yml)", doc.read_text(encoding="utf-8")):
            assert name in PLAYBOOKS, f"{doc.relative_to(ROOT)} names playbooks/{name}, which does not exist"


def _variables_read() -> str:
    """The roles, playbooks, templates and the example inventory: where variables are read."""
    parts = [
        p.read_text(encoding="utf-8")
        for pattern in (
            "roles/**/*.yml",
            "roles/**/*.j2",
            "playbooks/*.yml",
            "templates/*.j2",
            "inventory.example",
        )
        for p in ROOT.glob(pattern)
    ]
    return "\n".join(parts)


def test_every_extra_variable_the_docs_give_is_read_and_current() -> None:
    read = _variables_read()
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        given = set(re.findall(r"-e '?\{?\"?(kmirror_\w+)", text))
        for name in sorted(given):
            assert name not in RENAMED.SELECTION_RENAMED, (
                f"{doc.relative_to(ROOT)} tells to set {name}: use kmirror_sources_selected"
            )
            assert re.search(rf"\b{name}\b", read), (
                f"{doc.relative_to(ROOT)} gives -e {name}, which nothing reads"
            )


def test_no_playbook_or_role_reads_a_replaced_selection_variable() -> None:
    """The replaced names appear only where kmirror_common reads them for one more release."""
    allowed = {
        ROOT / "roles/kmirror_common/defaults/main.yml",  # the regex kmirror_common_sources_selected reads
    }
    for path in [
        *ROOT.glob("roles/**/*.yml"),
        *ROOT.glob("playbooks/*.yml"),
        *ROOT.glob("molecule/**/*.yml"),
    ]:
        if path in allowed or path.name == "argument_specs.yml":
            continue
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        text = yaml.safe_dump(data)  # comments dropped: they may explain the rename
        for name in RENAMED.SELECTION_RENAMED:
            assert not re.search(rf"\b{name}\b", text), f"{path.relative_to(ROOT)} still uses {name}"
