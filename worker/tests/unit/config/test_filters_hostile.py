"""Hostile and mistaken filters: a clear ConfigError or an answer in bounded time, never a stalled mirror.

The patterns below take hours in a backtracking engine (Python's ``re``, java.util.regex) against a
40-character name; a stream runs the filter at every topic refresh, so a topic named to trigger it
would stop every stream. Without the bounded engine these tests hang until their timeout.

"At once" is measured in steps of the engine where it runs (deterministic) and in CPU time of this thread
(cpu_budget.py), never by the wall clock, which a busy machine stretches without any regression.
"""

from __future__ import annotations

import pytest
from cpu_budget import cpu_time_under
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kmirror.config import filters
from kmirror.config.filters import MAX_NESTING, STEP_BUDGET, JavaRegex, TopicFilter, compile_filter
from kmirror.errors import ConfigError

CATASTROPHIC = [
    "(\\w+\\.?)*-internal",
    "(a+)+b",
    "(a|a)*b",
    "(a|aa)*c",
    "(.*a){12}x",
    ".*a.*a.*a.*a.*a.*a.*a.*a.*a.*a.*b",
    "(?=(\\w+\\.?)*$)(\\w+\\.?)*-internal",
    "((?<=a)a|a)*b",
    "(?:a*)*b",
]
NAMES = ["a" * 40, "a" * 249, "ab." * 83, "a." * 20 + "!", "a" * 248 + "-"]


@pytest.fixture
def matches(monkeypatch: pytest.MonkeyPatch) -> list[filters._Run]:
    """Every match the filter engine runs in the test; each one's steps are STEP_BUDGET - run.budget."""
    runs: list[filters._Run] = []
    start = filters._Run.__init__

    def recorded(run: filters._Run, prog: list[tuple[object, ...]], s: str) -> None:
        start(run, prog, s)
        runs.append(run)

    monkeypatch.setattr(filters._Run, "__init__", recorded)
    return runs


def assert_polynomial_steps(runs: list[filters._Run]) -> None:
    """Each match stayed within the engine's bound (filters.py): each (instruction, position) state of a
    search at most once, one more factor of the name length with atomic groups or look-arounds; so the
    step budget, which ends a match it would answer wrongly, was never what ended one. A backtracking
    engine (the memo lost) spends the whole budget on these names: 2,000,000 steps for each."""
    assert runs
    for run in runs:
        steps = STEP_BUDGET - run.budget
        states = len(run.prog) * (len(run.s) + 1)
        if any(ins[0] in (filters._ATOMIC, filters._LOOK) for ins in run.prog):
            states *= len(run.s) + 1
        assert run.budget >= 0, f"the step budget ran out on a {len(run.s)}-character name"
        assert steps <= states, f"{steps:,} steps for a {len(run.s)}-character name, more than {states:,}"


@pytest.mark.timeout(20)
@pytest.mark.parametrize("pattern", CATASTROPHIC)
def test_a_catastrophic_exclude_answers_at_once(pattern: str, matches: list[filters._Run]) -> None:
    f = TopicFilter(".*", pattern)
    # The work counted, not the wall clock: steps of the engine, and CPU time (work outside the steps)
    with cpu_time_under(5, f"excluding {pattern!r} from {len(NAMES)} names"):
        assert f.select(NAMES) == sorted(NAMES)  # none of them matches the exclude: all are mirrored
    assert_polynomial_steps(matches)


@pytest.mark.timeout(20)
def test_the_catastrophic_exclude_still_excludes_what_it_names() -> None:
    f = TopicFilter(".*", "(\\w+\\.?)*-internal")
    assert not f.matches("orders.eu-internal")
    assert not f.matches("a" * 40 + "-internal")
    assert f.matches("a" * 40)


@pytest.mark.timeout(20)
def test_group_filter_with_a_catastrophic_pattern_answers_at_once(matches: list[filters._Run]) -> None:
    """--groups matches group ids (any string, no 249-character limit) with the same filter."""
    groups = TopicFilter("(\\w+\\.?)*-consumers")
    with cpu_time_under(5, "matching a 2,000-character group id"):  # steps and CPU time, not the clock
        assert not groups.matches("a" * 2000)
        assert groups.matches("billing.eu-consumers")
    assert_polynomial_steps(matches)


@pytest.mark.timeout(20)
def test_atomic_and_possessive_patterns_answer_at_once() -> None:
    f = TopicFilter(".*", "(?>(\\w+\\.?)*)x|(\\w++\\.?)*+-y|(?<!b)(\\w+\\.?)*z")
    assert f.select(NAMES) == sorted(NAMES)


@pytest.mark.timeout(20)
def test_a_long_list_of_topic_names_is_fast() -> None:
    topics = [f"orders.eu-{i}" for i in range(3000)]
    f = TopicFilter(",".join(topics[::2]))
    # Literal names never reach the engine (no steps to count): CPU time of this thread, not the clock
    with cpu_time_under(5, "selecting 1,500 of 3,000 topics by name"):
        assert f.select(topics) == sorted(topics[::2])


@pytest.mark.parametrize(
    "pattern",
    [
        "(" * 1000 + "a" + ")" * 1000,
        "(?:" * 1000 + "a" + ")" * 1000,
        "(?=" * 1000 + "a" + ")" * 1000,
        "(" * 1000,
        "[" * 1000,
        "(" * 100_000 + ")" * 100_000,
    ],
)
def test_deeply_nested_groups_are_one_config_error(pattern: str) -> None:
    with pytest.raises(ConfigError) as err:
        TopicFilter(pattern)
    message = str(err.value)
    assert message.startswith("--whitelist: ")
    assert "\n" not in message
    assert len(message) < 400 or "nested" in message


def test_nesting_up_to_the_limit_works() -> None:
    depth = MAX_NESTING - 1
    assert TopicFilter("(" * depth + "a" + ")" * depth).matches("a")


@pytest.mark.parametrize(
    ("option", "noun"), [("--whitelist", "topic"), ("--blacklist", "topic"), ("--groups", "group")]
)
@pytest.mark.parametrize("raw", ["", "   ", "''", '" "', ",", ",,", " , "])
def test_an_empty_pattern_is_refused_with_the_fix(raw: str, option: str, noun: str) -> None:
    """MirrorMaker matched nothing with an empty pattern (an unset shell variable); refused."""
    with pytest.raises(ConfigError) as err:
        compile_filter(raw, option)
    assert err.value.key == option
    assert f"give {option} '.*' for every {noun}" in str(err.value)
    assert "\n" not in str(err.value)


def test_an_empty_whitelist_is_not_every_topic() -> None:
    with pytest.raises(ConfigError):
        TopicFilter("")
    with pytest.raises(ConfigError):
        TopicFilter(None, "")


# --- property-based: only the documented outcomes, in bounded time ---
# deadline=None: the per-example bound is the 2 s of CPU time in check_outcome and
# test_topic_filter_selects_or_refuses (cpu_budget.py), which load on other processes cannot use up.

PIECES = [
    "a", "b", ".", "*", "+", "?", "{", "}", "{2}", "{1,3}", "(", ")", "(?:", "(?>", "(?=", "(?!", "(?<=",
    "(?<!", "(?<n>", "(?i)", "(?-i)", "(?s:", "[", "]", "^", "$", "|", ",", "\\", "\\d", "\\w", "\\Q",
    "\\E", "\\p{Lower}", "\\p{", "&&", "-", "\\x{", "\\u", "\\0", "\\1", " ", "'", '"', "é", "\n",
]  # fmt: skip


def check_outcome(raw: str, names: list[str]) -> None:
    with cpu_time_under(2, f"compiling {raw!r} and matching {len(names)} names"):
        try:
            regex = compile_filter(raw, "--whitelist")
        except ConfigError as exc:
            assert "\n" not in str(exc)
            assert str(exc).startswith("--whitelist: ")
            return
        assert isinstance(regex, JavaRegex)
        for name in names:
            assert regex.fullmatch(name) in (True, False)


@pytest.mark.timeout(120)
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    raw=st.lists(st.sampled_from(PIECES), max_size=30).map("".join),
    names=st.lists(st.text(alphabet="ab.-_é\n", max_size=60), max_size=5),
)
def test_any_piecewise_pattern_is_a_filter_or_a_config_error(raw: str, names: list[str]) -> None:
    check_outcome(raw, names)


@pytest.mark.timeout(120)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=st.text(max_size=80), names=st.lists(st.text(max_size=60), max_size=5))
def test_any_text_is_a_filter_or_a_config_error(raw: str, names: list[str]) -> None:
    check_outcome(raw, names)


@pytest.mark.timeout(120)
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    include=st.one_of(st.none(), st.lists(st.sampled_from(PIECES), max_size=20).map("".join)),
    exclude=st.one_of(st.none(), st.lists(st.sampled_from(PIECES), max_size=20).map("".join)),
    topics=st.lists(st.text(alphabet="ab._-", max_size=249), max_size=5),
)
def test_topic_filter_selects_or_refuses(include: str | None, exclude: str | None, topics: list[str]) -> None:
    with cpu_time_under(2, f"filtering {len(topics)} topics with {include!r} and {exclude!r}"):
        try:
            f = TopicFilter(include, exclude)
        except ConfigError as exc:
            assert "\n" not in str(exc)
            return
        chosen = f.select(topics)
    assert set(chosen) <= set(topics)
    assert not any(t.startswith("__") for t in chosen)
