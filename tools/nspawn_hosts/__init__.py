"""The parts of tools/hosts.py, the project's host tool (systemd-nspawn guests in network namespaces)."""
