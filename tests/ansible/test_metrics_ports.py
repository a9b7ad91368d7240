"""The Prometheus metrics port of each kmirror instance (role kmirror_service, filter kmirror_metrics_ports)
and its place on the instance's command line (templates/kmirror-instance.conf.j2)."""

from __future__ import annotations

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_harness import ROLES, ROOT, load_module
from test_templates import exec_start, source

ports = load_module(
    ROLES / "kmirror_service/filter_plugins/kmirror_service.py", "kmirror_service_filters"
).kmirror_metrics_ports
BASE = yaml.safe_load((ROLES / "kmirror_service/defaults/main.yml").read_text())[
    "kmirror_service_metrics_port_base"
]


def test_the_documented_default_base_is_an_unprivileged_port():
    assert BASE == 9570


def test_base_plus_position_unless_a_source_sets_its_own():
    sources = [{"name": "east"}, {"name": "west", "metrics_port": 9700}, {"name": "north"}]
    assert ports(sources, BASE) == {"east": 9570, "west": 9700, "north": 9572}


def test_positions_count_over_the_whole_list_not_the_sources_a_run_touches():
    # add_source_cluster.yml renders only the new source's unit: its port must be the one site.yml gives it
    sources = [{"name": "east"}, {"name": "west"}, {"name": "north"}]
    assert ports(sources, BASE)["north"] == ports(sources[:3], BASE)["north"] == 9572


@pytest.mark.parametrize("base", [0, "0", None, ""])
def test_base_0_means_only_explicit_ports(base):
    assert ports([{"name": "east"}, {"name": "west", "metrics_port": "9600"}], base) == {
        "east": None,
        "west": 9600,
    }


@pytest.mark.parametrize(
    ("sources", "base", "needle"),
    [
        (
            [{"name": "east"}, {"name": "west", "metrics_port": 9570}],
            9570,
            "kmirror_source_clusters[west].metrics_port: port 9570 is also the metrics port of kmirror@east",
        ),
        (
            [{"name": "east", "metrics_port": 9571}, {"name": "west"}],
            9570,
            "kmirror_source_clusters[west].metrics_port: port 9571 is also the metrics port of kmirror@east",
        ),
        ([{"name": "east", "metrics_port": 70000}], 9570, "70000 is not a port number"),
        ([{"name": "east", "metrics_port": "http"}], 9570, "'http' is not a port number"),
        ([{"name": "east"}], 65536, "kmirror_service_metrics_port_base: 65536 is not a port number"),
    ],
)
def test_colliding_or_invalid_ports_are_refused_with_the_fix(sources, base, needle):
    with pytest.raises(AnsibleFilterError) as err:
        ports(sources, base)
    assert needle in str(err.value)
    assert "\n" not in str(err.value)


def test_the_port_is_on_the_instance_command_line(render):
    argv = exec_start(render, source(), kmirror_metrics_port=9571)
    assert argv[argv.index("--metrics.port") + 1] == "9571"
    # and the worker accepts the command line as rendered
    from kmirror.options import build_parser

    assert build_parser().parse_args(argv[1:]).metrics_port == 9571


@pytest.mark.parametrize("port", [None, ""])
def test_no_port_no_option(render, port):
    assert "--metrics.port" not in exec_start(render, source(), kmirror_metrics_port=port)


def test_inventory_example_gives_each_instance_its_own_port():
    inv = yaml.safe_load((ROOT / "inventory.example").read_text())
    sources = inv["all"]["children"]["kmirror_workers"]["vars"]["kmirror_source_clusters"]
    assert ports(sources, BASE) == {"east": 9570, "west": 9571}


ROLE_DEFAULTS = yaml.safe_load((ROLES / "kmirror_service/defaults/main.yml").read_text())
ROLE_SPEC = yaml.safe_load((ROLES / "kmirror_service/meta/argument_specs.yml").read_text())


def test_the_role_sets_the_metrics_address_explicitly_and_documents_it():
    # Prometheus scrapes the workers from another host: the role listens on every address by default (kmirror
    # run's own default is 127.0.0.1), through a documented, prefixed variable with an argument spec entry
    default = ROLE_DEFAULTS["kmirror_service_metrics_address"]
    assert default == "0.0.0.0"
    spec = ROLE_SPEC["argument_specs"]["main"]["options"]["kmirror_service_metrics_address"]
    assert (spec["type"], spec["default"]) == ("str", default)
    tasks = (ROLES / "kmirror_service/tasks/main.yml").read_text()
    assert 'kmirror_metrics_address: "{{ kmirror_service_metrics_address }}"' in tasks


@pytest.mark.parametrize("address", ["0.0.0.0", "10.0.3.7", "::"])
def test_the_address_is_on_the_instance_command_line(render, address):
    argv = exec_start(render, source(), kmirror_metrics_port=9571, kmirror_metrics_address=address)
    assert argv[argv.index("--metrics.address") + 1] == address
    from kmirror.options import build_parser

    parsed = build_parser().parse_args(argv[1:])
    assert (parsed.metrics_port, parsed.metrics_address) == (9571, address)


@pytest.mark.parametrize("port", [None, ""])
def test_no_port_no_address(render, port):
    argv = exec_start(render, source(), kmirror_metrics_port=port, kmirror_metrics_address="0.0.0.0")
    assert "--metrics.address" not in argv
