# Deployment toolkit (roles/, playbooks/, templates/, molecule/): included by the Makefile after its
# VENV/BIN/STAMP definitions. Targets:
#   make ansible-install   ansible-core, ansible-lint, molecule, testinfra into the project venv, and
#                          promtool (checks monitoring/prometheus/ in tests/ansible/test_monitoring.py)
#   make lint-ansible      ansible-lint, production profile (its yaml rule runs yamllint's checks)
#   make test-ansible      fast tests (tests/ansible, no hosts): templates, plugins, inventory.example, and
#                          the modules against embedded brokers (kmirror.testing.embedded)
#   make wheelhouse        the controller's wheelhouse (playbooks/wheelhouse.yml), no hosts
#   make molecule          every molecule scenario on real systemd-nspawn guests, one after another;
#                          a failed scenario is still destroyed, the others still run, the target fails
# Needs root on Debian 12 (hosts.py prereqs installs systemd-container, debootstrap, ... with apt-get).

VENV ?= .venv
BIN ?= $(VENV)/bin
ANSIBLE_STAMP := $(VENV)/.ansible-installed
MOLECULE_SCENARIOS ?= default tls kerberos
ANSIBLE_LINT_PATHS := roles playbooks $(addprefix molecule/,$(MOLECULE_SCENARIOS))
# molecule shells out to ansible-playbook and ansible-config: run it as from an activated venv.
# tools/ansible_callbacks/task_seconds.py: each playbook's slowest tasks at its end (where a scenario's time goes).
MOLECULE_ENV := PATH="$(abspath $(BIN)):$$PATH" VIRTUAL_ENV="$(abspath $(VENV))" ANSIBLE_FORCE_COLOR=0 PY_COLORS=0 \
	ANSIBLE_CALLBACK_PLUGINS="$(abspath tools/ansible_callbacks)" ANSIBLE_CALLBACKS_ENABLED=task_seconds

# Held by each molecule scenario and by the pytest files that boot hosts (tests/conftest.py), so guests
# never boot or tear down at the same time when make test runs molecule beside pytest.
HOST_TESTS_LOCK := /tmp/kmirror-pytest-hosts.lock

.PHONY: ansible-install lint-ansible test-ansible molecule wheelhouse

# From its hashed lock (requirements-ansible.txt's pins and all they need; make lock), versions shared with
# the project venv's other sets as they are there.
$(ANSIBLE_STAMP): locks/ansible.txt $(STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --require-hashes --only-binary :all: \
		-r locks/ansible.txt
	touch $@

# promtool from Debian's prometheus package (apt-get download, unpacked into the venv): installing the
# package itself would also start a Prometheus server on this machine. A promtool on PATH is used as is.
PROMTOOL := $(BIN)/promtool
$(PROMTOOL):
	@if command -v promtool >/dev/null; then ln -sf "$$(command -v promtool)" $@; else \
		d=$$(mktemp -d) && trap 'rm -rf "$$d"' EXIT && cd "$$d" && \
		{ apt-get download prometheus 2>/dev/null || { apt-get update -qq && apt-get download prometheus; }; } && \
		dpkg-deb -x prometheus_*.deb x && install -m 0755 x/usr/bin/promtool $(abspath $@); fi
	$@ --version | head -1

ansible-install: $(ANSIBLE_STAMP) $(PROMTOOL) ## ansible-core, ansible-lint, molecule, testinfra into the venv; promtool

# The controller's wheelhouse as site.yml builds it (.state/wheelhouse), without hosts: the tests that install
# from it (tests/hosts/test_manual_install.py, tests/ansible/test_wheelhouse_version.py) run before molecule.
wheelhouse: ansible-install ## build the controller's wheelhouse (.state/wheelhouse) with playbooks/wheelhouse.yml, no hosts
	$(MOLECULE_ENV) $(BIN)/ansible-playbook -i localhost, playbooks/wheelhouse.yml

lint-ansible: ansible-install ## ansible-lint --profile production on roles, playbooks and molecule scenarios
	$(MOLECULE_ENV) $(BIN)/ansible-lint --profile production --offline $(ANSIBLE_LINT_PATHS)

test-ansible: ansible-install ## fast tests of the deployment toolkit (tests/ansible, no hosts)
	$(BIN)/pytest -q -p no:cacheprovider --basetemp=/tmp/kmirror-ansible-pt tests/ansible

molecule: ansible-install ## every molecule scenario on real systemd-nspawn guests, one after another (root)
	python3 tools/hosts.py prereqs
	@failed=""; passed=0; \
	for s in $(MOLECULE_SCENARIOS); do \
		echo "=== molecule scenario $$s"; \
		start=$$(date +%s); \
		if $(MOLECULE_ENV) flock $(HOST_TESTS_LOCK) $(BIN)/molecule test -s $$s; then \
			passed=$$((passed + 1)); \
			echo "=== molecule scenario $$s passed in $$(( $$(date +%s) - start )) s"; \
		else \
			failed="$$failed $$s"; \
			echo "=== molecule scenario $$s FAILED after $$(( $$(date +%s) - start )) s"; \
			$(MOLECULE_ENV) flock $(HOST_TESTS_LOCK) $(BIN)/molecule destroy -s $$s || true; \
		fi; \
	done; \
	echo "molecule: $$passed passed, $$(echo $$failed | wc -w) failed$${failed:+ (}$${failed# }$${failed:+)}"; \
	[ -z "$$failed" ]
