"""The ``kmirror`` command: thin; parses options, calls the modules, maps errors to exit codes."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from kmirror import __version__, audit
from kmirror.config import safety, translation
from kmirror.errors import Command, ConfigError, run_command, stdout_closed_quietly
from kmirror.failover import command as failover
from kmirror.health import lagcheck
from kmirror.mirror import checkconfig
from kmirror.mirror.plan import MirrorOptions, build_plan
from kmirror.mirror.runoptions import mirror_options
from kmirror.options import build_parser


def _options(a: argparse.Namespace) -> MirrorOptions:
    if a.java_only:
        raise ConfigError(
            "Java message handlers and rebalance listeners cannot be loaded",
            key="--message.handler/--consumer.rebalance.listener",
            fix="remove the option; kmirror copies records unchanged (same topic, key, value, "
            "headers, timestamp)",
        )
    return mirror_options(a)


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
    "config-keys": Command(cmd_config_keys),
    "defaults": Command(cmd_defaults),
    **checkconfig.COMMANDS,
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
