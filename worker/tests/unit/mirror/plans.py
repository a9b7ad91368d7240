"""Plans built from a consumer file for the membership and supervisor tests (helpers, no tests)."""

from __future__ import annotations

from pathlib import Path

from kmirror.mirror.plan import MirrorOptions, build_plan

PRODUCER = "bootstrap.servers=127.0.0.1:1\n"


def plan_for(
    tmp_path: Path, consumer: str, *, static: bool | None = None, streams: int = 2, name: str = "east"
):
    """A plan from a consumer file NAME.properties in tmp_path; static None: the default."""
    c = tmp_path / f"{name}.properties"
    c.write_text("bootstrap.servers=127.0.0.1:1\ngroup.id=mirror\n" + consumer)
    p = tmp_path / "producer.properties"
    p.write_text(PRODUCER)
    chosen = {} if static is None else {"static_membership": static}
    return build_plan(
        MirrorOptions(
            consumer_configs=[str(c)],
            producer_config=str(p),
            include=".*",
            num_streams=streams,
            **chosen,
        )
    )
