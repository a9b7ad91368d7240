#!/usr/bin/env python3
"""Real test hosts for kmirror: systemd-nspawn guests in network namespaces.

The project's one host tool: molecule create/destroy playbooks, Terraform's local environment
(terraform_data provisioners), the demo and tests/hosts run it.  Stdlib only, Python 3.11+, run
as root.  Its parts are the package tools/nspawn_hosts/: system.py (commands, locks, mounts),
rootfs.py (the cached guest root filesystem and SSH key), guests.py (one guest: state, network,
boot, teardown), cli.py (the commands below).

    hosts.py prereqs                         install controller packages (only if missing)
    hosts.py rootfs [--dir DIR]              build the bookworm rootfs once + root SSH key
    hosts.py up --name NAME --index I        start a guest at 10.213.I.2 (prints a JSON line)
    hosts.py down --name NAME                stop and remove a guest (idempotent)
    hosts.py list                            JSON array of the hosts in the state dir
    hosts.py down-all [--keep-loopback]      stop every host, then drop 10.213.0.1 from lo
    hosts.py loopback [--remove]             add (or remove) 10.213.0.1/32 on the controller's lo
    hosts.py ssh --name NAME [-- CMD...]     ssh into a guest as root

Networking per host I (1..254): netns ``kmh-I`` holding ``eth0`` = 10.213.I.2/30 with a default
route via the host-side veth ``kmh-I-h`` = 10.213.I.1/30.  The controller also carries
10.213.0.1/32 on ``lo``; services bound there are reachable from every guest.

IP forwarding is NOT needed and is never enabled: a guest's packet to 10.213.0.1 (or to its
10.213.I.1) is addressed to the controller itself, so the kernel delivers it locally
(ip_local_deliver) and the reply leaves through the connected /30 route of that guest's veth.
Forwarding would only matter for guest-to-guest or guest-to-outside traffic, which these hosts
deliberately do not have (guests install from wheels shipped by the controller).

Environment overrides: KMIRROR_HOSTS_STATE_DIR (default /run/kmirror-hosts),
KMIRROR_HOSTS_CACHE_DIR (default /var/cache/kmirror-hosts).
"""

from __future__ import annotations

import sys

from nspawn_hosts.cli import main

if __name__ == "__main__":
    sys.exit(main())
