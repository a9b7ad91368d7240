"""The ``kmirror`` command line: MirrorMaker's options (both ``--opt value`` and ``--opt=value``), kmirror's
own, and every sub-command's; the commands themselves are in :mod:`kmirror.cli`."""

from __future__ import annotations

import argparse

from kmirror import __version__, audit
from kmirror.commandline import add_command, top_parser
from kmirror.failover import command as failover
from kmirror.health import lagcheck
from kmirror.mirror import checkconfig
from kmirror.mirror.runoptions import add_run_options

RUN_DESCRIPTION = """\
Mirror topics from one or more source clusters to a target cluster, losing nothing.
Takes kafka.tools.MirrorMaker's options and its consumer/producer properties files (Java and legacy
keys are translated; see docs/config-translation.md). Offsets are committed only for records the target
acknowledged; a record the target refuses stops the mirror (exit 3) without committing past it.
SIGTERM/SIGINT: flush, commit, exit 0."""


def build_parser() -> argparse.ArgumentParser:
    top, sub = top_parser("kmirror: a drop-in MirrorMaker that loses nothing.")
    top.add_argument("--version", action="version", version=f"kmirror {__version__}")

    run = add_command(sub, "run", help="mirror topics (MirrorMaker's options)", description=RUN_DESCRIPTION)
    add_run_options(run)

    checkconfig.register(sub)

    keys = sub.add_parser(
        "config-keys",
        help="the Java/legacy key translation table",
        description="Print how each Java or legacy MirrorMaker key is handled.",
    )
    keys.add_argument("--markdown", action="store_true", help="the table as published in the docs")

    defaults = sub.add_parser(
        "defaults",
        help="the data-loss-safe client settings, as JSON",
        description="Print the required, default and engine-owned client settings as JSON "
        "(role kmirror_config renders them from the same module).",
    )
    defaults.add_argument("--markdown", action="store_true", help="the table as published in the docs")
    lagcheck.register(sub)
    audit.register(sub)
    failover.register(sub)
    return top
