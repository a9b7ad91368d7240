"""`make demo`: the real main job, end to end on this machine.

1. Starts three embedded Kafka clusters on the controller address the guests can reach (10.213.0.1):
   two sources, `east` and `west`, and a `target`; fills the sources with keyed records with headers.
2. `terraform apply` of terraform/envs/local: two worker hosts (systemd-nspawn guests) and the Ansible
   inventory for them, generated from the clusters' addresses.
3. `ansible-playbook -i <generated inventory> playbooks/site.yml`: wheels built on the controller and
   installed on the hosts, configs rendered and checked, destination topics created, one
   `kmirror@<source>.service` per source cluster on every worker host.
4. Writes more records while the mirror runs, shows each mirror group's lag (and which host owns which
   partitions) until both have caught up, then compares every source topic with the target record by
   record.
5. `terraform destroy` and stops the clusters, also when a step fails.

Needs root on Debian 12 (guests); the first run builds the guests' root filesystem (a few minutes).
Exit 0 only when the target is an exact copy of both sources.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from records import add, compare_table, create_topics, fill, held_client_lines, mirrored, say

from kmirror.health import lag
from kmirror.testing.embedded import clusters

REPO = Path(__file__).resolve().parents[1]
HOSTS_PY = REPO / "tools" / "hosts.py"
TF_ENV = REPO / "terraform" / "envs" / "local"
BIN = Path(sys.executable).parent
CONTROLLER = "10.213.0.1"  # hosts.py: the controller's address as every guest sees it
SOURCES = {"east": {"orders": 6, "payments": 3}, "west": {"clickstream": 4, "inventory": 2}}


def run(cmd: list[str], *, env: dict[str, str] | None = None, quiet: bool = False) -> str:
    say("$ " + " ".join(str(c) for c in cmd))
    proc = subprocess.run(
        cmd, cwd=REPO, env=env, text=True, stdout=subprocess.PIPE if quiet else None, stderr=subprocess.STDOUT
    )
    if proc.returncode != 0:
        if quiet and proc.stdout:
            print(proc.stdout[-4000:])
        raise SystemExit(f"[demo] failed (exit {proc.returncode}): {' '.join(str(c) for c in cmd)}")
    return proc.stdout or ""


class Terraform:
    """terraform/envs/local with the demo's own state, plugin dir and inventory (the tree stays clean)."""

    def __init__(self, work: Path, bootstrap: dict[str, str]) -> None:
        self.env = {**os.environ, "TF_DATA_DIR": str(work / "tf-data"), "TF_IN_AUTOMATION": "1"}
        self.state = work / "terraform.tfstate"
        self.inventory = work / "inventory.yml"
        varfile = work / "demo.tfvars.json"
        varfile.write_text(
            json.dumps(
                {
                    "bootstrap_servers": bootstrap,
                    "sources": {
                        name: {"whitelist": ",".join(topics), "offset_commit_interval_ms": 2000}
                        for name, topics in SOURCES.items()
                    },
                    "worker_count": 2,
                    "inventory_path": str(self.inventory),
                },
                indent=2,
            )
        )
        self.args = [f"-var-file={varfile}", "-input=false", "-no-color"]
        self.tf = [str(BIN / "terraform"), f"-chdir={TF_ENV}"]

    def apply(self) -> None:
        init = ["init", f"-backend-config=path={self.state}", "-input=false", "-no-color"]
        run([*self.tf, *init], env=self.env, quiet=True)
        run([*self.tf, "apply", "-auto-approve", *self.args], env=self.env, quiet=True)

    def hosts(self) -> list[str]:
        out = run([*self.tf, "output", "-json", "hosts"], env=self.env, quiet=True)
        return sorted(json.loads(out))

    def destroy(self) -> None:
        if self.state.exists():
            run([*self.tf, "destroy", "-auto-approve", *self.args], env=self.env, quiet=True)


def live_traffic(
    bootstraps: dict[str, str], written: dict[str, dict[str, int]], start: int, count: int
) -> None:
    """Keep writing to both sources for a while, in small rounds (the counts grow as records are acked)."""
    step = max(1, count // 10)
    for first in range(start, start + count, step):
        n = min(step, start + count - first)
        for name, topics in SOURCES.items():
            add(written[name], fill(bootstraps[name], topics, n, start=first))
        time.sleep(0.5)


def show_lag(bootstraps: dict[str, str], written: dict[str, dict[str, int]], t0: float) -> bool:
    """One progress line per source (mirrored of what its log holds); True when every group has committed
    every record the demo wrote."""
    caught_up = True
    for name, topics in SOURCES.items():
        rows = lag.group_lag({"bootstrap.servers": bootstraps[name]}, f"kmirror-{name}", topics)
        done, behind = mirrored(rows)
        owners = sorted({r.owner.split("@")[-1] for r in rows if r.owner != "none"})
        where = f"  consumers on {', '.join(owners)}" if owners else ""
        say(
            f"{time.monotonic() - t0:5.1f} s  {name:5} mirrored {done:>6}/{done + behind}"
            f"  lag {behind:>6}{where}"
        )
        caught_up &= bool(rows) and behind == 0 and done == sum(written[name].values())
    return caught_up


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=3000, help="records per topic before the deployment")
    ap.add_argument("--live", type=int, default=3000, help="records per topic written while it runs")
    ap.add_argument("--keep", action="store_true", help="leave hosts and clusters up (Ctrl-C ends it)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("[demo] make demo starts systemd-nspawn guests and needs root (try make demo-local)")
    work = Path(tempfile.mkdtemp(prefix="kmirror-deploy-demo-"))
    started = time.monotonic()
    run([sys.executable, str(HOSTS_PY), "prereqs"])
    run([sys.executable, str(HOSTS_PY), "loopback"])
    with held_client_lines() as held, clusters("east", "west", "target", host=CONTROLLER, log_dir=work) as c:
        bootstraps = {name: cluster.bootstrap for name, cluster in c.items()}
        say(
            "Apache Kafka clusters: "
            + ", ".join(f"{n} {b}" for n, b in bootstraps.items())
            + f" (logs in {work})"
        )
        written: dict[str, dict[str, int]] = {}
        for name, topics in SOURCES.items():
            create_topics(bootstraps[name], topics)
            written[name] = fill(bootstraps[name], topics, args.records)
            say(f"{name}: {sum(written[name].values())} keyed records with headers in {', '.join(topics)}")

        tf = Terraform(work, bootstraps)
        try:
            say("provisioning two worker hosts with terraform/envs/local")
            tf.apply()
            say(f"generated inventory {tf.inventory}:")
            print(tf.inventory.read_text())
            ansible_env = {
                **os.environ,
                "PATH": f"{BIN}:{os.environ.get('PATH', '')}",
                "ANSIBLE_FORCE_COLOR": "0",
            }
            run(
                [str(BIN / "ansible-playbook"), "-i", str(tf.inventory), "playbooks/site.yml"],
                env=ansible_env,
            )

            units = [f"kmirror@{name}" for name in SOURCES]
            for host in tf.hosts():
                out = run(
                    [
                        sys.executable,
                        str(HOSTS_PY),
                        "ssh",
                        "--name",
                        host,
                        "--",
                        "systemctl",
                        "is-active",
                        *units,
                    ],
                    quiet=True,
                )
                say(
                    f"{host}: "
                    + ", ".join(f"{u} {state}" for u, state in zip(units, out.split(), strict=False))
                )

            say(f"writing {args.live} more records per topic to both sources while the mirror runs")
            traffic = threading.Thread(
                target=live_traffic, args=(bootstraps, written, args.records, args.live)
            )
            t0 = time.monotonic()
            traffic.start()
            while True:
                time.sleep(1)
                caught_up = show_lag(bootstraps, written, t0)
                if caught_up and not traffic.is_alive():
                    break
                if time.monotonic() - t0 > 300:
                    say("the mirror did not catch up within 300 s")
                    held.dump()
                    return 1
            say(f"caught up {time.monotonic() - t0:.1f} s after the deployment; comparing record by record")
            identical = True
            for name in SOURCES:
                say(f"{name} -> target")
                identical &= compare_table(bootstraps[name], bootstraps["target"], written[name])
            if not identical:
                held.dump()
            say(
                "the target holds every record written to both sources, once, in order"
                if identical
                else "TARGET DIFFERS FROM A SOURCE"
            )
            if args.keep:
                say(f"--keep: hosts and clusters stay up; inventory {tf.inventory}; Ctrl-C to tear down")
                while True:
                    time.sleep(3600)
            return 0 if identical else 1
        except KeyboardInterrupt:
            return 130
        finally:
            say("tearing down: terraform destroy, then the clusters")
            tf.destroy()
            say(f"done in {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    sys.exit(main())
