# kmirror: every entry point installs what it needs first (see README.md).
SHELL := /bin/bash
.DEFAULT_GOAL := help

# ansible-core (deployment) needs Python >= 3.12 on the controller; the worker itself supports 3.11+.
PYTHON ?= $(firstword $(wildcard /root/.pyenv/versions/3.12*/bin/python3) $(shell command -v python3.12 2>/dev/null) python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed


.PHONY: help install lock lock-check kafka-install toxiproxy-install demo demo-local test unit integration lint docs bench bench-groups bench-provenance bench-revisions bench-outage \
	bench-restarts bench-peers bench-behaviour clean cluster-definition

# Every target has a one-line `## ` comment after its prerequisites; help lists them all (Makefile and mk/*.mk).
help: ## this list: every target with one line
	@awk 'BEGIN { FS = ":[^#]*## " } /^[a-z][a-zA-Z0-9_.-]*:[^=]*## / { printf "  make %-22s %s\n", $$1, $$2 }' \
		$(MAKEFILE_LIST)

# Every package comes from a lock in locks/ with the SHA-256 of each file (pip --require-hashes refuses any
# other file): pip and the build backend first (locks/bootstrap.txt), then the worker's dependencies and the
# test tools; pyspark, which PyPI has only as source, is built with that setuptools (no build isolation: no
# build step fetches anything unpinned); then the worker itself, editable, without dependencies.
# docs/security.md, Supply chain; make lock rewrites the locks from the requirements-*.txt files.
PIP_LOCKED := -m pip install --quiet --disable-pip-version-check --require-hashes
$(STAMP): worker/pyproject.toml locks/bootstrap.txt locks/dev.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python $(PIP_LOCKED) --only-binary :all: -r locks/bootstrap.txt
	$(BIN)/python $(PIP_LOCKED) --no-build-isolation -r locks/dev.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e worker
	touch $@

install: $(STAMP) kafka-install toxiproxy-install ## the project venv (.venv): the worker with its audit extra, test tools, Apache Kafka's jars, Toxiproxy

# Apache Kafka's jars (4.3 for the brokers, tools and MirrorMaker 2; 3.9 for MirrorMaker 1 and the version
# tests), pinned in worker/src/kmirror/testing/poms/ and fetched once by Maven into ~/.cache/kmirror/kafka.
KAFKA_STAMP := $(VENV)/.kafka-$(shell cat worker/src/kmirror/testing/poms/*.xml | sha256sum | cut -c1-12)
$(KAFKA_STAMP): $(STAMP)
	command -v mvn >/dev/null && command -v java >/dev/null \
		|| { apt-get update -qq && apt-get install -y -qq --no-install-recommends maven openjdk-17-jdk-headless; }
	$(BIN)/python -m kmirror.testing.jars fetch
	touch $@

kafka-install: $(KAFKA_STAMP) ## Apache Kafka's pinned jars (Maven Central, cached in ~/.cache/kmirror/kafka)

# Toxiproxy, the shaped links of the link tests (kmirror.testing.links), pinned there (VERSION) and built
# once from the Go module proxy into ~/.cache/kmirror/toxiproxy/<version>/; later runs find it and build
# nothing. Go from Debian's golang-go when the machine has none.
toxiproxy-install: $(STAMP) ## Toxiproxy for the link tests (go install, once; cached in ~/.cache/kmirror/toxiproxy)
	command -v go >/dev/null || test -x /usr/local/go/bin/go \
		|| { apt-get update -qq && apt-get install -y -qq --no-install-recommends golang-go; }
	$(BIN)/python -m kmirror.testing.links install

# Molecule scenarios run by make test (mk/ansible.mk runs them one after another; the audit role's is
# molecule/audit).
MOLECULE_SCENARIOS := default tls kerberos audit bidirectional

# Fragments owned by the deployment, health/audit and Terraform parts (see each file's header).
include mk/ansible.mk mk/terraform.mk
-include mk/audit.mk

# The main job: embedded clusters, hosts from terraform/envs/local, ansible-playbook playbooks/site.yml.
demo: install $(ANSIBLE_STAMP) $(TERRAFORM_STAMP) ## deploy onto local hosts (Terraform + Ansible), mirror two embedded sources, show it caught up
	$(BIN)/python demo/deploy.py

# The same mirror without hosts, Terraform or Ansible: kmirror run on this machine (no root needed).
demo-local: install ## the same mirror with kmirror run on this machine, no hosts
	$(BIN)/python demo/local.py

lint: install ## ruff on all Python, mypy and the import layers (lint-imports) on the worker package; the generated docs are current
	$(BIN)/ruff check worker demo bench molecule tools tests roles terraform/bin
	$(BIN)/mypy --config-file worker/pyproject.toml worker/src/kmirror
	$(BIN)/lint-imports --config worker/pyproject.toml --no-cache --no-logo
	$(BIN)/python -m kmirror config-keys --markdown | diff -u docs/config-translation.md - \
		|| { echo "docs/config-translation.md is stale: run make docs"; exit 1; }
	$(BIN)/python -m kmirror defaults --markdown | diff -u docs/safe-defaults.md - \
		|| { echo "docs/safe-defaults.md is stale: run make docs"; exit 1; }
	$(BIN)/python roles/kmirror_config/files/cluster_definition.py --check
	$(BIN)/python roles/kmirror_acls/files/acl_table.py --check
	$(BIN)/python tools/role_readme.py --check

# pytest-xdist workers, one test file each at a time. Most integration tests wait (restart loops, a target
# frozen past librdkafka's timeouts, sessions expiring), so more workers than cores overlap those waits. The
# test files that boot hosts hold a lock for their guests' lifetime (tests/conftest.py), and so does each
# molecule scenario of make test: hosts never boot or tear down at the same time.
PYTEST_WORKERS ?= 3
PYTEST_PARALLEL := -n $(PYTEST_WORKERS) --dist loadfile

unit: install ## the worker's unit tests (no brokers, ~20 s)
	$(BIN)/pytest -q --timeout 60 worker/tests/unit

integration: install ## the worker's integration tests against real embedded brokers
	$(BIN)/pytest -q $(PYTEST_PARALLEL) --timeout 900 worker/tests/integration

# Everything CI runs (.ci/run). One pytest run collects every test tree (pytest.ini: worker/tests, tests/ansible,
# tests/hosts, tests/terraform, tests/demo). Needs root on Debian 12: tests/hosts, tests/terraform and molecule
# boot real systemd-nspawn guests (the first run builds their root filesystem); tls/kerberos/audit use apt.
# The molecule scenarios run beside pytest (one after another, their output in .state/molecule.log, shown
# whole when one fails); the run fails when either fails. docs/testing.md: where the time goes.
test: install ansible-install terraform-install lint lint-ansible wheelhouse ## linters, then every pytest tree (embedded brokers, real hosts) with every molecule scenario beside it
	python3 tools/hosts.py prereqs
	tools/test_lanes.sh $(BIN) -q $(PYTEST_PARALLEL) --timeout 1800 --durations=30 $(PYTEST_ARGS)

# The cluster options of roles/kmirror_config/meta/argument_specs.yml and terraform/modules/inventory/
# cluster_definition.tf, from roles/kmirror_config/files/cluster_definition.yml (checked by make lint).
cluster-definition: install ## regenerate the cluster options of the argument specs and Terraform's checks from cluster_definition.yml
	$(BIN)/python roles/kmirror_config/files/cluster_definition.py

docs: install ## regenerate the generated docs (config key table, safe defaults, the ACL table of deployment.md, the roles' READMEs)
	$(BIN)/python -m kmirror config-keys --markdown > docs/config-translation.md
	$(BIN)/python -m kmirror defaults --markdown > docs/safe-defaults.md
	$(BIN)/python roles/kmirror_acls/files/acl_table.py
	$(BIN)/python tools/role_readme.py

# The benchmarks run on Apache Kafka 4.3 clusters (kafka-install) and take the bench lock: one at a time.
BENCH = flock /tmp/kmirror-bench.lock $(BIN)/python

bench: install ## throughput benchmark (kmirror vs loop vs read/write alone) -> docs/benchmarks.md
	$(BENCH) bench/throughput.py --write docs/benchmarks.md

bench-groups: install ## cost of the failover offset sync (--groups on vs off) -> docs/benchmarks.md
	$(BENCH) bench/groups.py --write docs/benchmarks.md

bench-provenance: install ## cost of provenance headers (--provenance.header.enable on vs off) -> docs/benchmarks.md
	$(BENCH) bench/provenance.py --write docs/benchmarks.md

bench-revisions: install ## the hot path across a change: kmirror at BASE (a git revision, default HEAD) vs the working tree -> docs/benchmarks.md
	$(BENCH) bench/revisions.py --base $(or $(BASE),HEAD) --write docs/benchmarks.md

bench-outage: install ## memory of a stream during a target outage -> docs/benchmarks.md
	$(BENCH) bench/outage_memory.py --write docs/benchmarks.md

bench-peers: install ## kmirror vs MirrorMaker 1 (3.9) and MirrorMaker 2 (4.3), uncompressed and lz4 (hours) -> docs/benchmarks.md
	$(BENCH) bench/peers.py --write docs/benchmarks.md
	$(BENCH) bench/peers.py --compression lz4 --write docs/benchmarks.md

bench-behaviour: install ## kill -9 and a target outage: kmirror vs MirrorMaker 1 and 2, records missing/duplicated -> docs/benchmarks.md
	$(BENCH) bench/behaviour.py --write docs/benchmarks.md

bench-restarts: install ## clean restart: streams leave one at a time, all at once, static -> docs/benchmarks.md
	$(BENCH) bench/restarts.py --write docs/benchmarks.md

# The locks' sources: worker/pyproject.toml and requirements-*.txt (terraform/requirements-checkov.txt); the
# managed hosts' Python and platform come from roles/kmirror_worker/defaults/main.yml. tools/locks.py.
LOCK_STAMP := $(VENV)/.lock-installed
$(LOCK_STAMP): locks/lock.txt $(STAMP)
	$(BIN)/python $(PIP_LOCKED) --only-binary :all: -r locks/lock.txt
	touch $@

lock: $(LOCK_STAMP) ## rewrite the hashed Python locks (locks/) from their sources; UPGRADE=1 moves what no source pins to its newest release
	$(BIN)/python tools/locks.py compile $(if $(UPGRADE),--upgrade)

lock-check: $(LOCK_STAMP) ## fail when a lock in locks/ is not what its sources give now (asks PyPI, ~1 min)
	$(BIN)/python tools/locks.py check

clean: ## remove the project venv and pytest's cache
	rm -rf $(VENV) .pytest_cache
