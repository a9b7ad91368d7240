"""``kmirror check-config``: translate and check consumer/producer files as ``run`` would (the same
:mod:`kmirror.mirror.plan` checks), print the effective settings with secrets masked and a verdict; every
problem of every file is reported in one run."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict

from kmirror.commandline import Parser
from kmirror.config import ClientConfig, kerberos, load_client_config, safety
from kmirror.config.filters import TopicFilter
from kmirror.errors import Command, ConfigError, Problems, one_line, printable
from kmirror.mirror.plan import check_process, source_names, topic_filter
from kmirror.mirror.runoptions import add_run_options, boolean

EXIT_UNSAFE = 1


def register(subparsers: argparse._SubParsersAction[Parser]) -> argparse.ArgumentParser:
    """Add `check-config` to kmirror's sub-commands."""
    check = subparsers.add_parser(
        "check-config",
        allow_abbrev=False,
        help="print the effective client settings (secrets masked) and a safety verdict",
        description="Translate and check consumer/producer files as `run` would, print the "
        "effective librdkafka settings with secrets masked, and a verdict. "
        "Exit 0 SAFE, 1 UNSAFE, 2 invalid.",
    )
    add_run_options(check, sources_only=True)
    check.add_argument(
        "--abort.on.send.failure", dest="abort", type=boolean, default=True, metavar="true|false"
    )
    check.add_argument("--json", action="store_true", help="machine-readable output")
    return check


def _report(cfg: ClientConfig, name: str | None, topics: TopicFilter | None = None) -> dict[str, object]:
    return {
        "file": cfg.origin,
        "role": cfg.role,
        "source": name,
        "settings": cfg.masked(),
        "notes": cfg.notes,
        "unsafe": [v.render() for v in cfg.violations],
        # The topic filter `run` would use for this source (command line first, then the file).
        "include": topics.include if topics else None,
        "exclude": topics.exclude if topics else None,
        "verdict": "SAFE" if cfg.safe else "UNSAFE",
    }


def cmd_check_config(a: argparse.Namespace) -> int:
    if not a.consumer_configs and not a.producer_config:
        raise ConfigError(
            "nothing to check",
            key="--consumer.config/--producer.config",
            fix="give at least one consumer or producer properties file",
        )
    # The same checks as `run` (build_plan), except that unsafe settings are reported, not refused, and
    # that every problem of every file is reported in one run.
    found = Problems()
    producer = None
    if a.producer_config:
        with found.check():
            producer = load_client_config(a.producer_config, "producer", allow_unsafe=True, problems=found)
    consumers: list[ClientConfig] = []
    reports: list[dict[str, object]] = []
    for n, path in zip(source_names(a.consumer_configs), a.consumer_configs, strict=True):
        cfg = None
        with found.check():
            cfg = load_client_config(path, "consumer", allow_unsafe=True, problems=found)
        if cfg is None:
            continue
        topics = None
        with found.check():
            topics = topic_filter(cfg, a.include, a.exclude)
            if topics is None:
                cfg.notes.append("no topic filter: kmirror run needs --whitelist REGEX (or --blacklist)")
        consumers.append(cfg)
        reports.append(_report(cfg, n, topics))
    if not found:
        # What `kmirror run` refuses of the files together (one Kerberos principal, a keytab that logs in).
        with found.check():
            check_process([*([producer] if producer else []), *consumers])
    if found:
        return _report_problems(found.found, a.json)
    if producer:
        reports.append(_report(producer, None))
    client = kerberos.client_info()
    unsafe = [u for r in reports for u in r["unsafe"]]  # type: ignore[attr-defined]
    if not a.abort:
        unsafe.append(f"--abort.on.send.failure=false: {safety.ABORT_ON_SEND_FAILURE_WHY}")
    verdict = "UNSAFE" if unsafe else "SAFE"
    if a.json:
        out = {"verdict": verdict, "unsafe": unsafe, "client": asdict(client), "files": reports}
        print(json.dumps(out, indent=2))
    else:
        _print_text(client.describe(), reports, unsafe, verdict)
    return EXIT_UNSAFE if unsafe else 0


def _print_text(client: str, reports: list[dict[str, object]], unsafe: list[str], verdict: str) -> None:
    print(f"client: {client}")
    for r in reports:
        print(f"{r['role']} {r['file']}" + (f" (source {r['source']})" if r["source"] else ""))
        for k, v in sorted(r["settings"].items()):  # type: ignore[attr-defined]
            print(f"  {k}={v}")
        for n in r["notes"]:  # type: ignore[attr-defined]
            print(f"  # {n}")
        if r["include"] is not None or r["exclude"] is not None:
            print(f"  # topic filter: include={r['include']} exclude={r['exclude']}")
    for u in unsafe:
        print(f"UNSAFE: {u}")
    print(f"verdict: {verdict}")


def _report_problems(problems: list[ConfigError], as_json: bool) -> int:
    """Every problem found, one line each on stderr as any command's error (``--json``: a document on
    stdout, verdict INVALID, nothing on stderr); exit 2."""
    if as_json:
        doc = {
            "verdict": "INVALID",
            "problems": [
                {"file": p.origin, "key": p.key, "problem": p.problem, "fix": p.fix, "message": p.render()}
                for p in problems
            ],
        }
        print(json.dumps(doc, indent=2))
    else:
        for p in problems:
            print(f"kmirror check-config: error: {printable(one_line(p.render()))}", file=sys.stderr)
    return ConfigError.exit_code


COMMANDS = {"check-config": Command(cmd_check_config)}
