"""kmirror lag: ConsumerOffsetChecker's table for a group, and a Burrow-style watch of its health.

One shot: the committed offset, log end offset (logSize) and lag of every partition the group committed
(or of every partition of --topic), read from the brokers:

    kmirror lag --bootstrap-server HOST:PORT --group GROUP [--topic T[,T]] [--command-config FILE] [--json]

Watch (--watch): sample every --interval seconds, keep the last --window samples per partition, print
the status of every partition and of the group after each sample (OK, WARN, ERR; per partition also
STOP, STALL, REWIND: docs/health.md has the rules); stop after --count samples and exit with the last
group status. --state FILE keeps the window between runs, so a monitoring system can run
`--watch --count 1 --state FILE` once per interval.

Exit codes (the Nagios plugin convention): 0 OK, 1 WARN, 2 ERR (a partition is STOP, STALL or
REWIND), 3 UNKNOWN (the group cannot be read, has committed nothing, or a file or option is wrong).
Without --watch: 0, or 3 on an error. A usage error found by the option parser exits 2.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from confluent_kafka import Consumer, KafkaException
from confluent_kafka.admin import AdminClient

from kmirror.commandline import Parser, add_command, run_alone, seconds
from kmirror.config import connection_settings, load_client_config
from kmirror.coordinator import GroupAdmin
from kmirror.errors import Command, KmirrorError, one_line
from kmirror.failover.clusters import probe_conf, quiet, read_sync_data
from kmirror.failover.offsetsync import build_rows
from kmirror.health import lag
from kmirror.health import rules as health
from kmirror.health.lag import LagError, PartitionLag
from kmirror.kafkaio import LIVE_STATES, error_line, silenced, true_ends

# ConsumerOffsetChecker's own line format.
ROW_FORMAT = "%-15s %-30s %-3s %-15s %-15s %-15s %s"
HEADER = ("Group", "Topic", "Pid", "Offset", "logSize", "Lag", "Owner")


# ---------------------------------------------------------------------------------------- sampling


def _group_state(admin_conf: Mapping[str, str], group: str, timeout: float) -> tuple[str, bool]:
    """(state name, whether the broker listed members) of the group."""
    with GroupAdmin(admin_conf, f"cluster {admin_conf.get('bootstrap.servers', '?')}") as groups:
        state, members = groups.group_state(group, timeout)
    return state, members > 0


def sample(
    admin_conf: Mapping[str, str], group: str, topics: Sequence[str] | None, timeout: float
) -> tuple[list[lag.PartitionLag], dict[tuple[str, int], health.Sample], str, list[tuple[str, int]]]:
    """One reading of the group: its lag rows, one health sample per partition, its state, and the
    partitions no member owns (:func:`kmirror.health.rules.unowned`).

    A partition counts as consumed when a member owns it; brokers that list no members (the test
    broker) only tell whether the group has live members, which then stands for every partition."""
    now = time.time()
    try:
        rows = lag.group_lag(admin_conf, group, topics, timeout=timeout)
        state, listed = _group_state(admin_conf, group, timeout)
    except KmirrorError as exc:
        raise LagError(one_line(str(exc))) from None
    except Exception as exc:
        raise LagError(f"could not read group {group!r}: {one_line(str(exc))}") from None
    live = state in LIVE_STATES
    samples = {
        (r.topic, r.partition): health.Sample(
            now, r.offset, r.log_size, r.lag, r.owner != "none" if listed else live
        )
        for r in rows
    }
    unowned = health.unowned(state, listed, {(r.topic, r.partition): r.owner for r in rows})
    return rows, samples, state, unowned


# ---------------------------------------------------------------------------------------- output


def table(rows: Sequence[lag.PartitionLag], statuses: Mapping[tuple[str, int], str] | None = None) -> str:
    fmt = ROW_FORMAT + ("  %s" if statuses is not None else "")
    head = HEADER + (("Status",) if statuses is not None else ())
    lines = [fmt % head]
    for r in rows:
        cells: tuple[object, ...] = (
            r.group,
            r.topic,
            r.partition,
            r.offset if r.offset >= 0 else "unknown",
            r.log_size,
            r.lag,
            r.owner,
        )
        if statuses is not None:
            cells += (statuses.get((r.topic, r.partition), "-"),)
        lines.append(fmt % cells)
    return "\n".join(lines)


def evaluation(
    group: str,
    rows: Sequence[lag.PartitionLag],
    state: str,
    window: health.Window,
    now: float,
    *,
    unowned: Sequence[tuple[str, int]] = (),
) -> dict[str, object]:
    """The watch result of one sample: group status, worst partition, and every partition."""
    parts = window.evaluate(now)
    status, worst = health.group_status(parts.values())
    if not rows or (all(r.offset < 0 for r in rows) and state not in LIVE_STATES):
        status = worst = health.Status.NOTFOUND
    by_key = {(r.topic, r.partition): r for r in rows}
    return {
        "time": datetime.fromtimestamp(now, UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "group": group,
        "state": state,
        "status": status.name,
        "worst": worst.name,
        "exit_code": health.exit_code(status),
        "total_lag": lag.total(rows),
        "complete": round(min((p.complete for p in parts.values()), default=0.0), 3),
        "unowned": [{"topic": t, "partition": p} for t, p in unowned],
        "partitions": [{**by_key[k].as_dict(), **parts[k].as_dict()} for k in sorted(parts) if k in by_key],
    }


def _print_evaluation(result: Mapping[str, object], rows: Sequence[lag.PartitionLag], as_json: bool) -> None:
    if as_json:
        print(json.dumps(result), flush=True)
        return
    parts: list[dict[str, object]] = result["partitions"]  # type: ignore[assignment]
    statuses = {(str(p["topic"]), int(p["partition"])): str(p["status"]) for p in parts}  # type: ignore[call-overload]
    status = result["status"]
    worst = result["worst"]
    extra = f" (worst partition {worst})" if worst != status else ""
    print(
        f"{result['time']} group {result['group']}: {status}{extra}; {len(rows)} partitions, "
        f"total lag {result['total_lag']}, state {result['state']}, window {result['complete']:.0%} full"
    )
    print(table(rows, statuses))
    for p in parts:
        if p["status"] != "OK":
            print(f"  {p['topic']}/{p['partition']}: {p['status']}: {p['reason']}")
    unowned: list[dict[str, object]] = result["unowned"]  # type: ignore[assignment]
    if unowned:
        names = ", ".join(f"{u['topic']}/{u['partition']}" for u in unowned)
        print(f"  {len(unowned)} partitions no member owns: {names}")
    print(flush=True)


# ---------------------------------------------------------------------------------------- commands


def register(subparsers: argparse._SubParsersAction[Parser]) -> argparse.ArgumentParser:
    """Add `lag` to kmirror's sub-commands."""
    p = add_command(
        subparsers,
        "lag",
        help="consumer group lag (ConsumerOffsetChecker's table) and a Burrow-style health watch",
        description=__doc__,
    )
    p.add_argument(
        "--bootstrap-server",
        "--bootstrap.servers",
        dest="bootstrap",
        metavar="HOST:PORT",
        help="brokers of the cluster the group consumes from (wins over the --command-config file's)",
    )
    p.add_argument("--group", required=True, help="the consumer group (the mirror's group.id)")
    p.add_argument(
        "--topic",
        dest="topics",
        metavar="T[,T]",
        help="only these topics (comma-separated); default: every topic the group committed",
    )
    p.add_argument(
        "--command-config",
        "--consumer.config",
        dest="command_config",
        metavar="FILE",
        help="properties with the connection and security settings (Java keys are translated); "
        "the mirror's consumer file works too",
    )
    p.add_argument(
        "--translated-from",
        dest="translated_from",
        metavar="FILE",
        help="the consumer file of a mirror run with --groups: show the group's translated position on this "
        "(target) cluster from the mirror's last checkpoints (docs/failover.md)",
    )
    p.add_argument("--json", action="store_true", help="JSON output (one object per sample with --watch)")
    p.add_argument("--timeout", type=seconds(), default=10.0, metavar="S", help="broker request timeout")
    w = p.add_argument_group("watch")
    w.add_argument("--watch", action="store_true", help="sample repeatedly and evaluate the group's health")
    w.add_argument(
        "--interval",
        type=seconds(zero=True),
        default=60.0,
        metavar="S",
        help="seconds between samples (default 60; keep it at least the group's offset commit interval)",
    )
    w.add_argument(
        "--window", type=int, default=10, metavar="N", help="samples evaluated per partition (default 10)"
    )
    w.add_argument(
        "--count", type=int, metavar="K", help="stop after K samples and exit with the last status"
    )
    w.add_argument(
        "--state",
        type=Path,
        metavar="FILE",
        help="keep the window in FILE between runs (for a monitoring check run every interval)",
    )
    return p


def _settings(a: argparse.Namespace) -> dict[str, str]:
    if a.command_config:
        try:
            return connection_settings(a.command_config, a.bootstrap)
        except KmirrorError as exc:
            raise LagError(one_line(str(exc))) from None
    if not a.bootstrap:
        raise LagError("no brokers: give --bootstrap-server HOST:PORT (or a --command-config with them)")
    return {"bootstrap.servers": a.bootstrap}


def _topics(a: argparse.Namespace) -> list[str] | None:
    if not a.topics:
        return None
    return [t.strip() for t in a.topics.split(",") if t.strip()]


def translated_lag(
    target_conf: Mapping[str, str], mirror_file: str, group: str, topics: list[str] | None, timeout: float
) -> list[PartitionLag]:
    """`kmirror lag --translated-from F`: the group's translated position on the target, from the
    mirror's checkpoints, as ConsumerOffsetChecker rows (Offset = the translated offset, or the group's
    committed offset on the target when that is further)."""
    mirror = load_client_config(mirror_file, "consumer", allow_unsafe=True).settings["group.id"]
    try:
        data = read_sync_data(target_conf, mirror, timeout)
        admin = AdminClient({**dict(target_conf), "logger": quiet})
        with GroupAdmin(target_conf, "the target cluster") as groups:
            on_target = groups.committed_offsets(group, timeout)
        parts = [k for k in data.group_checkpoints(group) if topics is None or k[0] in topics]
        probe = Consumer(probe_conf(target_conf), logger=quiet)
        try:
            ends = true_ends(admin, probe, sorted(parts), timeout)
        finally:
            probe.close()
    except KafkaException as exc:
        raise LagError(f"target cluster: {error_line(exc)}") from None
    rows = [
        r
        for r in build_rows(
            data, group, source_committed=None, target_committed=on_target, log_ends=ends, now_ms=0
        )
        if topics is None or r.topic in topics
    ]
    if not rows:
        raise LagError(f"mirror {mirror!r} has no checkpoint of group {group!r} on this cluster")
    return [
        PartitionLag(
            group, r.topic, r.partition, r.committed_after, r.log_end, r.lag, f"translated:{r.action}"
        )
        for r in rows
    ]


def cmd_lag(a: argparse.Namespace) -> int:
    conf = _settings(a)
    topics = _topics(a)
    if a.translated_from:
        # librdkafka's own lines are not the operator's: the command says what failed in one line.
        with silenced("kmirror.librdkafka"):
            rows = translated_lag(conf, a.translated_from, a.group, topics, a.timeout)
        print(json.dumps([r.as_dict() for r in rows], indent=2) if a.json else table(rows))
        return 0
    if not a.watch:
        rows, _, state, _ = sample(conf, a.group, topics, a.timeout)
        if not rows and topics:
            raise LagError(f"no topic {', '.join(topics)} on {conf.get('bootstrap.servers')}")
        if not rows:
            raise LagError(f"group {a.group!r} has no committed offsets (state {state}); is the name right?")
        print(json.dumps([r.as_dict() for r in rows], indent=2) if a.json else table(rows))
        return 0
    if a.window < 2 or a.interval < 0 or (a.count is not None and a.count < 1):
        raise LagError("--window must be at least 2, --interval at least 0 and --count at least 1")
    window = _load_state(a)
    code = health.EXIT_UNKNOWN
    taken = 0
    next_at = time.monotonic()
    try:
        while a.count is None or taken < a.count:
            if taken:
                time.sleep(max(0.0, next_at - time.monotonic()))
            next_at = time.monotonic() + a.interval
            taken += 1
            try:
                rows, samples, state, unowned = sample(conf, a.group, topics, a.timeout)
            except LagError as exc:
                print(f"kmirror lag: error: {exc}", file=sys.stderr, flush=True)
                code = health.EXIT_UNKNOWN
                continue
            window.add(samples)
            result = evaluation(a.group, rows, state, window, time.time(), unowned=unowned)
            code = int(result["exit_code"])  # type: ignore[call-overload]
            _print_evaluation(result, rows, a.json)
            _save_state(a, window)
    except KeyboardInterrupt:
        pass
    return code


def _state_identity(a: argparse.Namespace) -> dict[str, object]:
    return {"group": a.group, "topics": _topics(a), "bootstrap": a.bootstrap}


def _load_state(a: argparse.Namespace) -> health.Window:
    if a.state is None or not a.state.exists():
        return health.Window(a.window)
    try:
        data = json.loads(a.state.read_text())
    except (OSError, ValueError) as exc:
        raise LagError(f"{a.state}: cannot read the saved window ({one_line(str(exc))}); delete it") from None
    if data.get("identity") != _state_identity(a):
        return health.Window(a.window)  # another group or cluster: start afresh
    return health.Window.from_json(data.get("window", {}), a.window)


def _save_state(a: argparse.Namespace, window: health.Window) -> None:
    if a.state is None:
        return
    tmp = a.state.with_name(a.state.name + ".tmp")
    try:
        a.state.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps({"identity": _state_identity(a), "window": window.to_json()}))
        tmp.replace(a.state)
    except OSError as exc:
        raise LagError(f"{a.state}: cannot save the window ({one_line(str(exc))})") from None


COMMANDS = {"lag": Command(cmd_lag)}


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m kmirror.health.lagcheck ...`: the same as `kmirror lag ...`."""
    return run_alone("lag", register, COMMANDS, argv)


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        sys.exit(main())
