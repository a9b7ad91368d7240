# Mirror health: `kmirror lag` and the Spark completeness audit (worker/src/kmirror/health/,
# worker/src/kmirror/audit/, roles/kmirror_audit, playbooks/audit.yml, molecule/audit). Included by the
# Makefile after its VENV/BIN/STAMP definitions. Targets:
#   make test-health      the tests marked health or audit (pytest.ini): unit tests of the rules and the audit
#                         logic, then lag and audit against Apache Kafka test clusters (kmirror.testing.kafka;
#                         Spark local[2], and a standalone cluster of a master and two workers; docs/health.md,
#                         Tests)
#   make bench-audit      the audit command (cold) and a warm session vs the raw two-process read of the same
#                         data and vs the same check with Spark's Kafka connector (bench/spark_kafka.py, cold
#                         and warm; its jars fetched once with mvn from bench/poms/spark-sql-kafka.xml into
#                         ~/.cache/kmirror) -> docs/benchmarks.md (its own section between
#                         <!-- audit:begin/end --> markers; 5 runs per contender; under flock
#                         /tmp/kmirror-bench.lock)
#   make lint-audit       ansible-lint --profile production on the audit role, playbook and scenario
#   make molecule-audit   the audit role on a real systemd-nspawn guest (root; Java via an apt proxy)

.PHONY: test-health bench-audit lint-audit molecule-audit

test-health: install ## lag and audit rules, then lag and the Spark audit against embedded brokers
	$(BIN)/pytest -q --timeout 900 -m "health or audit" worker/tests/unit worker/tests/integration

bench-audit: install ## audit command vs the raw read and Spark's Kafka connector -> docs/benchmarks.md (bench lock)
	$(BIN)/python bench/spark_kafka.py jars >/dev/null
	flock /tmp/kmirror-bench.lock $(BIN)/python bench/audit.py --write docs/benchmarks.md

lint-audit: ansible-install ## ansible-lint --profile production on the audit role, playbook and scenario
	$(MOLECULE_ENV) $(BIN)/ansible-lint --profile production --offline roles/kmirror_audit playbooks/audit.yml molecule/audit

molecule-audit: ansible-install ## the audit role's molecule scenario on a real systemd-nspawn guest (root)
	python3 tools/hosts.py prereqs
	$(MOLECULE_ENV) $(BIN)/molecule test -s audit
