"""kmirror.config.filters: MirrorMaker's whitelist/blacklist rules with Java regex semantics."""

from __future__ import annotations

import pickle

import pytest

from kmirror.config.filters import TopicFilter, mirrormaker_pattern
from kmirror.errors import ConfigError

TOPICS = ["app_log", "app_log2", "orders", "orders.eu", "orders.tmp", "payments", "x", "Mixed-Case_1"]


def selected(include: str | None, exclude: str | None = None, topics: list[str] = TOPICS) -> list[str]:
    return TopicFilter(include, exclude).select(topics)


# --- MirrorMaker's preprocessing and full-string match ---


def test_whole_name_must_match():
    assert selected("app_log") == ["app_log"]
    assert selected("orders") == ["orders"]
    assert not TopicFilter("app").matches("app_log")
    assert not TopicFilter("log").matches("app_log")


def test_comma_means_alternation():
    assert selected("app_log,payments") == ["app_log", "payments"]


def test_white_space_and_quotes_are_dropped():
    # --whitelist="topic1, topic2" as in the reference MirrorMaker command line.
    f = TopicFilter('"topic1, topic2"')
    assert f.matches("topic1")
    assert f.matches("topic2")
    assert not f.matches("topic3")
    assert not f.matches("topic1,topic2")
    assert TopicFilter("'orders.*'").matches("orders.eu")
    assert TopicFilter(" orders , payments ").select(TOPICS) == ["orders", "payments"]


def test_dot_star_matches_everything_but_internal_topics():
    assert selected(".*") == sorted(TOPICS)


def test_comma_inside_braces_and_classes_is_kept():
    assert mirrormaker_pattern("a{1,2}") == "a{1,2}"
    assert mirrormaker_pattern("[a,b]") == "[a,b]"
    assert mirrormaker_pattern("a,b") == "a|b"
    assert TopicFilter("x{1,2}").matches("xx")
    assert not TopicFilter("x{1,2}").matches("xxx")


def test_regex_wildcards():
    assert selected("orders\\..*") == ["orders.eu", "orders.tmp"]
    assert selected("app_log\\d?") == ["app_log", "app_log2"]


# --- include and exclude ---


def test_include_and_exclude_combined():
    assert selected("orders.*", "orders\\.tmp") == ["orders", "orders.eu"]


def test_exclude_alone_mirrors_everything_else():
    assert selected(None, "orders.*,x") == ["Mixed-Case_1", "app_log", "app_log2", "payments"]


def test_no_filter_matches_every_non_internal_topic():
    f = TopicFilter()
    assert f.matches("anything")
    assert not f.matches("__consumer_offsets")


def test_exclude_is_full_match_too():
    assert selected(".*", "orders") == [t for t in sorted(TOPICS) if t != "orders"]


# --- internal topics ---


@pytest.mark.parametrize("topic", ["__consumer_offsets", "__transaction_state", "__anything", "__"])
@pytest.mark.parametrize(
    "include", [".*", "__.*", "__consumer_offsets,__transaction_state,__anything,__", None]
)
def test_internal_topics_never_match(topic, include):
    assert not TopicFilter(include).matches(topic)


def test_single_underscore_topics_are_not_internal():
    assert TopicFilter(".*").matches("_schemas")


# --- Java regex constructs ---


def test_quoted_literal():
    f = TopicFilter("\\Qorders.eu\\E")
    assert f.matches("orders.eu")
    assert not f.matches("ordersXeu")


def test_quoted_literal_then_regex():
    f = TopicFilter("\\Qa.b\\E.*")
    assert f.matches("a.b")
    assert f.matches("a.bcd")
    assert not f.matches("axb")


def test_named_group():
    f = TopicFilter("(?<env>prod|dev)\\.orders")
    assert f.matches("prod.orders")
    assert f.matches("dev.orders")
    assert not f.matches("qa.orders")


def test_lookbehind_is_not_mistaken_for_a_named_group():
    f = TopicFilter(".*(?<!\\.tmp)")
    assert f.matches("orders.eu")
    assert not f.matches("orders.tmp")


@pytest.mark.parametrize(
    ("pattern", "yes", "no"),
    [
        ("\\p{Alpha}+", "Orders", "orders1"),
        ("\\p{Lower}+", "orders", "Orders"),
        ("\\p{Upper}+", "ORDERS", "Orders"),
        ("\\p{Digit}+", "123", "12a"),
        ("\\p{Alnum}+", "abc123", "abc-123"),
        ("\\p{IsAlphabetic}+", "abc", "ab1"),
        ("\\P{Digit}+", "abc", "ab1"),
        ("[\\p{Alpha}_]+", "ab_c", "ab1"),
        ("\\p{javaLowerCase}+", "abc", "aBc"),
    ],
)
def test_java_character_properties(pattern, yes, no):
    f = TopicFilter(pattern)
    assert f.matches(yes)
    assert not f.matches(no)


def test_java_end_of_input():
    assert TopicFilter("orders\\z").matches("orders")


def test_possessive_quantifier():
    assert TopicFilter("a++b").matches("aab")
    assert not TopicFilter("a*+a").matches("aaa")


def test_inline_flags_at_the_start():
    assert TopicFilter("(?i)ORDERS").matches("orders")


def test_inline_flags_after_an_alternative():
    """Java applies (?i) from where it stands; `orders,(?i)LOGS` is orders|(?i)LOGS."""
    f = TopicFilter("orders,(?i)LOGS")
    assert f.matches("orders")
    assert f.matches("logs")
    assert f.matches("LOGS")
    assert not f.matches("ORDERS")


# --- refusals ---


@pytest.mark.parametrize("pattern", ["[a-z&&[^x]]+", "[a-z&&b]"])
def test_class_intersection_is_refused(pattern):
    with pytest.raises(ConfigError) as err:
        TopicFilter(pattern)
    assert err.value.key == "--whitelist"
    assert "&&" in str(err.value)
    assert "\n" not in str(err.value)


def test_nested_class_union_is_refused():
    with pytest.raises(ConfigError) as err:
        TopicFilter("[a-d[m-p]]")
    assert err.value.key == "--whitelist"


def test_unknown_property_class_is_refused():
    with pytest.raises(ConfigError) as err:
        TopicFilter("\\p{InGreek}+")
    assert err.value.key == "--whitelist"


@pytest.mark.parametrize("pattern", ["[abc", "(orders", "*orders", "orders)"])
def test_invalid_include_names_the_option(pattern):
    with pytest.raises(ConfigError) as err:
        TopicFilter(pattern)
    msg = str(err.value)
    assert err.value.key == "--whitelist"
    assert msg.startswith("--whitelist: ")
    assert pattern in msg
    assert "\n" not in msg


def test_invalid_exclude_names_the_option():
    with pytest.raises(ConfigError) as err:
        TopicFilter("orders.*", "(tmp")
    assert err.value.key == "--blacklist"
    assert str(err.value).startswith("--blacklist: ")


@pytest.mark.parametrize("pattern", ['""', "  ", "' '"])
def test_empty_pattern_is_refused(pattern):
    with pytest.raises(ConfigError):
        TopicFilter(pattern)


# --- pickling (streams run in their own processes) ---


def test_topic_filter_pickles():
    f = TopicFilter("orders.*,(?<env>prod|dev)\\.x", "orders\\.tmp")
    g = pickle.loads(pickle.dumps(f))
    assert g == f
    assert g.include == f.include
    assert g.exclude == f.exclude
    topics = [*TOPICS, "prod.x", "qa.x", "__consumer_offsets"]
    assert g.select(topics) == f.select(topics) == ["orders", "orders.eu", "prod.x"]


def test_unpickled_exclude_only_filter():
    f = pickle.loads(pickle.dumps(TopicFilter(None, "x")))
    assert f.matches("y")
    assert not f.matches("x")


def test_describe():
    text = TopicFilter("orders.*", "tmp").describe()
    assert "orders.*" in text
    assert "tmp" in text
    assert "__" in text


# --- inline flags switched off, empty patterns (issue 20) ---


def test_negated_inline_flag_is_case_sensitive():
    assert not TopicFilter("(?-i)orders").matches("ORDERS")
    assert TopicFilter("(?-i)orders").matches("orders")
    f = TopicFilter("(?i)orders(?-i)X")
    assert f.matches("ORDERSX")
    assert not f.matches("ordersx")
    assert not TopicFilter("(?i-i)a").matches("A")


@pytest.mark.parametrize("pattern", ["", ",", "''"])
def test_empty_whitelist_mirrors_nothing_so_it_is_refused(pattern):
    with pytest.raises(ConfigError) as err:
        TopicFilter(pattern)
    assert "give --whitelist '.*' for every topic" in str(err.value)
