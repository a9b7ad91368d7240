# kmirror: every entry point installs what it needs first (see README.md).
SHELL := /bin/bash
.DEFAULT_GOAL := help

# ansible-core (deployment) needs Python >= 3.12 on the controller; the worker itself supports 3.11+.
PYTHON ?= $(firstword $(wildcard /root/.pyenv/versions/3.12*/bin/python3) $(shell command -v python3.12 2>/dev/null) python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: help install demo demo-local test unit integration lint docs bench clean cluster-definition

help:
	@echo "make demo   - deploy onto local hosts (Terraform + Ansible), mirror two embedded sources, show it caught up"
	@echo "make demo-local - the same mirror with kmirror run on this machine, no hosts"
	@echo "make test   - linters, unit and integration tests against real embedded brokers"
	@echo "make bench  - throughput benchmark, written to docs/benchmarks.md"
	@echo "make docs   - regenerate the generated docs (config key table)"

$(STAMP): worker/pyproject.toml requirements-dev.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e 'worker[embedded,audit]' -r requirements-dev.txt
	touch $@

install: $(STAMP)

# Molecule scenarios run by make test (mk/ansible.mk runs them one after another; the audit role's is
# molecule/audit).
MOLECULE_SCENARIOS := default tls kerberos audit

# Fragments owned by the deployment, health/audit and Terraform parts (see each file's header).
include mk/ansible.mk mk/terraform.mk
-include mk/audit.mk

# The main job: embedded clusters, hosts from terraform/envs/local, ansible-playbook playbooks/site.yml.
demo: install $(ANSIBLE_STAMP) $(TERRAFORM_STAMP)
	$(BIN)/python demo/deploy.py

# The same mirror without hosts, Terraform or Ansible: kmirror run on this machine (no root needed).
demo-local: install
	$(BIN)/python demo/local.py

lint: install
	$(BIN)/ruff check worker demo bench molecule tests roles terraform/bin
	$(BIN)/python -m kmirror config-keys --markdown | diff -u docs/config-translation.md - \
		|| { echo "docs/config-translation.md is stale: run make docs"; exit 1; }
	$(BIN)/python -m kmirror defaults --markdown | diff -u docs/safe-defaults.md - \
		|| { echo "docs/safe-defaults.md is stale: run make docs"; exit 1; }
	$(BIN)/python roles/kmirror_config/files/cluster_definition.py --check

unit: install
	$(BIN)/pytest -q --timeout 60 worker/tests/unit

integration: install
	$(BIN)/pytest -q --timeout 900 worker/tests/integration

# Everything CI runs (.ci/run). Each test tree has its own conftest.py, imported by name: one pytest run each. Needs root on Debian 12: tests/hosts, tests/terraform and molecule boot real
# systemd-nspawn guests (the first run builds their root filesystem); tls/kerberos/audit scenarios use apt.
test: install ansible-install terraform-install lint lint-ansible
	$(BIN)/pytest -q -n 2 --dist loadfile --timeout 1800 worker/tests tests/hosts
	$(BIN)/pytest -q --timeout 900 tests/ansible
	$(BIN)/pytest -q --timeout 900 tests/terraform
	$(MAKE) molecule

# The cluster options of roles/kmirror_config/meta/argument_specs.yml and terraform/modules/inventory/
# cluster_definition.tf, from roles/kmirror_config/files/cluster_definition.yml (checked by make lint).
cluster-definition: install
	$(BIN)/python roles/kmirror_config/files/cluster_definition.py

docs: install
	$(BIN)/python -m kmirror config-keys --markdown > docs/config-translation.md
	$(BIN)/python -m kmirror defaults --markdown > docs/safe-defaults.md

bench: install
	$(BIN)/python bench/throughput.py --write docs/benchmarks.md

clean:
	rm -rf $(VENV) .pytest_cache
