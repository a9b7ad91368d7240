"""checkov (offline, --skip-download) on the AWS module and the env that uses it: no failed check, and a
skip only with its justification in place (`# checkov:skip=CKV_...: why`)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from tfcli import ROOT, TERRAFORM_DIR

# checkov lives in a venv of its own (make terraform-install): it pins bc-python-hcl2, which installs the
# same import name as the python-hcl2 of the project venv.
CHECKOV = Path(os.environ.get("KMIRROR_CHECKOV", ROOT / ".state" / "venv-checkov" / "bin" / "checkov"))
# Checks the issue names (IMDSv2, encrypted volumes, no public IP, security groups, an IAM role) must be
# among the passed ones: a scan that silently stopped evaluating them must not look green.
MUST_PASS = {"CKV_AWS_79", "CKV_AWS_8", "CKV_AWS_88", "CKV_AWS_24", "CKV_AWS_23", "CKV_AWS_382",
             "CKV_AWS_126", "CKV_AWS_135", "CKV2_AWS_41", "CKV2_AWS_5"}


@pytest.mark.parametrize("d", ["modules/aws-mirror-hosts", "envs/aws"])
def test_checkov_finds_nothing_to_fix(d: str) -> None:
    assert CHECKOV.is_file(), f"{CHECKOV} is missing: run make terraform-install"
    proc = subprocess.run(
        [str(CHECKOV), "--skip-download", "--framework", "terraform", "--output", "json", "--directory",
         str(TERRAFORM_DIR / d)],
        capture_output=True, text=True, timeout=300, cwd=ROOT, env={**os.environ, "LOG_LEVEL": "WARNING"})
    report = json.loads(proc.stdout)
    summary = report["summary"]
    results = report["results"]
    failed = [f"{c['check_id']} {c['resource']} ({c['file_path']}:{c['file_line_range']})"
              for c in results.get("failed_checks", [])]
    assert summary["failed"] == 0 and not failed, f"checkov failed checks: {failed}"
    assert summary["parsing_errors"] == 0
    assert summary["resource_count"] >= 8
    passed = {c["check_id"] for c in results["passed_checks"]}
    assert passed >= MUST_PASS, f"not evaluated or not passed: {sorted(MUST_PASS - passed)}"
    for c in results.get("skipped_checks", []):
        reason = (c.get("check_result") or {}).get("suppress_comment", "")
        assert len(reason.strip()) >= 10, f"{c['check_id']} on {c['resource']} is skipped without a reason"
    assert proc.returncode == 0, proc.stderr
