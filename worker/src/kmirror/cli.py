"""The ``kmirror`` command: thin; parses options, calls the modules, maps errors to exit codes."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict

from kmirror import __version__, audit
from kmirror.config import ClientConfig, kerberos, load_client_config, safety, translation
from kmirror.config.filters import TopicFilter
from kmirror.errors import (
    Command,
    ConfigError,
    Problems,
    one_line,
    printable,
    run_command,
    stdout_closed_quietly,
)
from kmirror.failover import command as failover
from kmirror.health import lagcheck
from kmirror.mirror.plan import (
    MirrorOptions,
    build_plan,
    check_process,
    source_names,
    topic_filter,
)
from kmirror.options import build_parser

EXIT_UNSAFE = 1


def _options(a: argparse.Namespace) -> MirrorOptions:
    if a.java_only:
        raise ConfigError(
            "Java message handlers and rebalance listeners cannot be loaded",
            key="--message.handler/--consumer.rebalance.listener",
            fix="remove the option; kmirror copies records unchanged (same topic, key, value, "
            "headers, timestamp)",
        )
    return MirrorOptions(
        consumer_configs=a.consumer_configs,
        producer_config=a.producer_config,
        include=a.include,
        exclude=a.exclude,
        num_streams=a.num_streams,
        num_producers=a.num_producers,
        queue_size=a.queue_size,
        offset_commit_interval_ms=a.commit_ms,
        abort_on_send_failure=a.abort,
        allow_unsafe=a.allow_unsafe,
        topic_refresh_interval_ms=a.refresh_ms,
        stats_interval_ms=a.stats_ms,
        replication_factor=a.replication_factor,
        static_membership=a.static_membership,
        gap_policy=a.gap_policy,
        provenance_header=a.provenance_header,
        topic_rename_format=a.topic_rename_format,
        target_name=a.target_name,
        heartbeats_interval_ms=a.heartbeats_ms,
        groups=a.groups,
        sync_group_offsets_interval_ms=a.sync_groups_ms,
        initial_offsets=a.initial_offsets,
        source_names=a.source_names,
    )


def cmd_run(a: argparse.Namespace) -> int:
    from kmirror.mirror import cutover, runner

    runner.setup_logging(a.log_level, a.log_format)
    plan = build_plan(_options(a))
    # The metrics port is taken first, before anything connects or starts: a port in use or an address not
    # of this host is one line and exit 2, and nothing has started.
    collector = runner.serve_metrics(a.metrics_port, a.metrics_address) if a.metrics_port else None
    for s in plan.sources:
        for note in s.config.notes:
            runner.log.info("%s: %s", s.config.origin, note)
    for note in plan.producer.notes:
        runner.log.info("%s: %s", plan.producer.origin, note)
    for v in [*plan.producer.violations, *(v for s in plan.sources for v in s.config.violations)]:
        runner.log.warning("UNSAFE (allowed by --allow.unsafe): %s", v.render())
    runner.log.info(
        "kmirror %s: %d source cluster(s) x %d stream(s) -> %s",
        __version__,
        len(plan.sources),
        plan.streams_per_source,
        plan.producer.settings.get("bootstrap.servers"),
    )
    return runner.run(
        plan.stream_specs(),
        a.log_level,
        collector,
        group_syncs=plan.group_syncs(),
        heartbeats=plan.heartbeats(),
        log_format=a.log_format,
        # Before any stream joins: a group another mirror still uses is refused, --initial.offsets applied.
        preflight=lambda: cutover.preflight(
            cutover.sources_of(plan), plan.producer.settings, plan.options.initial_offsets
        ),
    )


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
        print(f"client: {client.describe()}")
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
    return EXIT_UNSAFE if unsafe else 0


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


def cmd_config_keys(a: argparse.Namespace) -> int:
    if a.markdown:
        sys.stdout.write(translation.markdown())
        return 0
    for r in sorted(translation.RULES, key=lambda r: r.key):
        print(f"{r.key:45} {r.action:8} {r.target or '':38} {r.note}")
    return 0


def cmd_defaults(a: argparse.Namespace) -> int:
    if a.markdown:
        sys.stdout.write(safety.markdown())
        return 0
    print(json.dumps(safety.table(), indent=2))
    return 0


COMMANDS = {
    "run": Command(cmd_run),
    "check-config": Command(cmd_check_config),
    "config-keys": Command(cmd_config_keys),
    "defaults": Command(cmd_defaults),
    **lagcheck.COMMANDS,
    **audit.COMMANDS,
    **failover.COMMANDS,
}


def main(argv: Sequence[str] | None = None) -> int:
    with stdout_closed_quietly():  # --help and --version write to stdout too
        args = build_parser().parse_args(argv)
    return run_command(args.command, COMMANDS[args.command], args)


if __name__ == "__main__":
    sys.exit(main())
