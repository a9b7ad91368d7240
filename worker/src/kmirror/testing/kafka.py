"""Apache Kafka clusters for the tests, the demo and the benchmarks: real KRaft brokers from Kafka's own jars.

A :class:`KafkaCluster` is one or three nodes (each node broker and controller, static quorum), started
from the pinned jars of :mod:`kmirror.testing.jars` on free loopback ports. Every node has a PLAINTEXT
client listener (:attr:`KafkaCluster.bootstrap`); :class:`Security` adds SSL, SASL_PLAINTEXT and
SASL_SSL listeners (SCRAM-SHA-256/512 users, GSSAPI with a keytab), mutual TLS and the standard
authorizer with a super user. ``wan=True`` gives every node a second PLAINTEXT listener, ``WAN``, that
advertises another port (:attr:`KafkaCluster.wan_routes`): a proxy listening there
(:mod:`kmirror.testing.links`) is the only way a client bootstrapped on :attr:`KafkaCluster.wan_bootstrap`
reaches the cluster, while the tests seed and read through PLAINTEXT.

Start cost, measured on the 2-core test machine: a node is ready (metadata answered) about 3-4 s after
its JVM starts and holds about 300 MB RSS (``bench/brokers.py``). Storage is formatted without a JVM:
the ``bootstrap.checkpoint`` of each Kafka line is made once by Kafka's own StorageTool and cached beside
the jars; each node then gets a ``meta.properties`` of its own.
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from kmirror.errors import KmirrorError
from kmirror.testing import jars

READY_TIMEOUT_S = 120.0  # a JVM under a loaded 2-core machine (tests beside molecule) can take a minute

# JVM options of a test node: a small heap, the quick C1 compiler, one GC thread. Benchmarks that want the
# broker at full speed give their own (KMIRROR_TEST_BROKER_JVM overrides both).
TEST_JVM = ("-Xms128m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData")
BENCH_JVM = ("-Xms1g", "-Xmx1g", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:-UsePerfData")


PORT_ATTEMPTS = 3  # starts of a cluster whose node found a port taken (see KafkaCluster.start)


class KafkaError(KmirrorError):
    pass


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """`count` distinct free ports (held open together while they are picked: ports picked one at a time
    may repeat, and two listeners of a node on one port stop it at start)."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for s in socks:
            s.bind((host, 0))
        return [int(s.getsockname()[1]) for s in socks]


def _kafka_uuid() -> str:
    """A Kafka Uuid in its text form (URL-safe base64 of 16 bytes, no padding)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def _answers(host: str, port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
        return True
    return False


@dataclass(frozen=True)
class ScramUser:
    name: str
    password: str
    mechanism: str = "SCRAM-SHA-512"


@dataclass(frozen=True)
class Security:
    """Listeners beside PLAINTEXT, and who may do what.

    ``tls`` is (keystore, truststore, password) in PKCS12 for the SSL and SASL_SSL listeners;
    ``client_auth`` makes TLS clients show a certificate (mutual TLS). ``scram`` users are created on the
    cluster once it is up. ``kerberos`` is (broker keytab, broker principal, krb5.conf path).
    ``super_users`` turns the standard authorizer on (everyone else is denied what no ACL allows);
    PLAINTEXT clients are ``User:ANONYMOUS``.
    """

    ssl: bool = False
    sasl_plaintext: bool = False
    sasl_ssl: bool = False
    tls: tuple[Path, Path, str] | None = None
    client_auth: bool = False
    scram: tuple[ScramUser, ...] = ()
    kerberos: tuple[Path, str, Path] | None = None
    super_users: tuple[str, ...] = ()

    @property
    def mechanisms(self) -> list[str]:
        m = (
            sorted({u.mechanism for u in self.scram} | {"SCRAM-SHA-512"})
            if (self.sasl_plaintext or self.sasl_ssl)
            else []
        )
        return [*m, "GSSAPI"] if self.kerberos else m


@dataclass
class Node:
    node_id: int
    host: str
    ports: dict[str, int]
    directory: Path
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    # Listeners advertised on another port than they listen on (WAN: the proxy's port).
    advertised: dict[str, int] = field(default_factory=dict)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.ports['PLAINTEXT']}"

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


@dataclass
class KafkaCluster:
    """An Apache Kafka cluster of ``size`` KRaft nodes on ``host``; :meth:`start` waits until it serves."""

    name: str
    host: str = "127.0.0.1"
    size: int = 1
    line: str = jars.MAIN_LINE
    security: Security = field(default_factory=Security)
    broker_config: Mapping[str, str] = field(default_factory=dict)
    jvm: tuple[str, ...] = TEST_JVM
    wan: bool = False  # a WAN listener per node, advertised on a proxy's port (see the module's docstring)
    nodes: list[Node] = field(default_factory=list)
    log_dir: Path | None = None
    cluster_id: str = field(default_factory=_kafka_uuid)
    _tmp: tempfile.TemporaryDirectory[str] | None = field(default=None, repr=False)

    # ----------------------------------------------------------------------------------- addresses

    @property
    def bootstrap(self) -> str:
        """The PLAINTEXT bootstrap list (every node)."""
        return ",".join(n.address for n in self.nodes)

    def listener(self, protocol: str) -> str:
        """The bootstrap list of one listener: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL."""
        return ",".join(f"{n.host}:{n.ports[protocol]}" for n in self.nodes)

    @property
    def wan_bootstrap(self) -> str:
        """The WAN listener's advertised addresses (the proxies'): a client bootstrapped here talks to the
        cluster only through them."""
        return ",".join(f"{n.host}:{n.advertised['WAN']}" for n in self.nodes)

    @property
    def wan_routes(self) -> list[tuple[int, str, str]]:
        """Per node, (node id, the address a proxy must listen on, the node's WAN listener it forwards to)."""
        return [
            (n.node_id, f"{n.host}:{n.advertised['WAN']}", f"{n.host}:{n.ports['WAN']}") for n in self.nodes
        ]

    @property
    def port(self) -> int:
        return self.nodes[0].ports["PLAINTEXT"]

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        return self.nodes[0].process if self.nodes else None

    @property
    def pid(self) -> int:
        p = self.process
        assert p is not None, f"cluster {self.name} is not running"
        return p.pid

    @property
    def pids(self) -> list[int]:
        return [n.process.pid for n in self.nodes if n.alive() and n.process is not None]

    @property
    def log_path(self) -> Path | None:
        return self._log(self.nodes[0]) if self.nodes else None

    def _log(self, node: Node) -> Path:
        return node.directory / "server.log"

    # --------------------------------------------------------------------------------- life cycle

    def start(self, log_dir: Path | None = None) -> KafkaCluster:
        if log_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix=f"kafka-{self.name}-")
            log_dir = Path(self._tmp.name)
        self.log_dir = log_dir / f"kafka-{self.name}"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        protocols = ["PLAINTEXT", "CONTROLLER"]
        sec = self.security
        protocols += [
            p
            for p, on in (
                ("SSL", sec.ssl),
                ("SASL_PLAINTEXT", sec.sasl_plaintext),
                ("SASL_SSL", sec.sasl_ssl),
            )
            if on
        ]
        if self.wan:
            protocols.append("WAN")
        checkpoint = _bootstrap_checkpoint(self.line)
        for attempt in range(PORT_ATTEMPTS):
            # A port found free is closed again before Kafka binds it: another process on the machine
            # (a parallel test, a guest) can take it in between. Such a start is tried again, new ports.
            per_node = len(protocols) + (1 if self.wan else 0)  # the WAN proxy's advertised port too
            ports = iter(free_ports(per_node * self.size, self.host))
            self.nodes = [
                Node(
                    i + 1,
                    self.host,
                    {p: next(ports) for p in protocols},
                    self.log_dir / f"node-{i + 1}",
                    advertised={"WAN": next(ports)} if self.wan else {},
                )
                for i in range(self.size)
            ]
            for node in self.nodes:
                self._prepare(node, checkpoint)
            try:
                for node in self.nodes:
                    self._launch(node)
                self.wait_ready()
                if sec.scram:
                    self._create_scram_users()
                return self
            except KafkaError:
                taken = any(
                    "Address already in use" in self._log(n).read_text(errors="replace")
                    for n in self.nodes
                    if self._log(n).exists()
                )
                if taken and attempt + 1 < PORT_ATTEMPTS:
                    self._kill_nodes()
                    continue
                self.stop()
                raise
            except BaseException:
                self.stop()
                raise
        return self

    def _prepare(self, node: Node, checkpoint: Path) -> None:
        data = node.directory / "data"
        shutil.rmtree(data, ignore_errors=True)  # a fresh cluster, even in a directory used before
        data.mkdir(parents=True)
        (data / "meta.properties").write_text(
            f"node.id={node.node_id}\ndirectory.id={_kafka_uuid()}\nversion=1\ncluster.id={self.cluster_id}\n"
        )
        shutil.copyfile(checkpoint, data / "bootstrap.checkpoint")
        (node.directory / "server.properties").write_text(
            "".join(f"{k}={v}\n" for k, v in self._config(node).items())
        )
        _write_log_config(self.line, node.directory, self._log(node))
        if self.security.kerberos:
            keytab, principal, _ = self.security.kerberos
            (node.directory / "jaas.conf").write_text(
                "KafkaServer {\n  com.sun.security.auth.module.Krb5LoginModule required\n"
                f'  useKeyTab=true storeKey=true keyTab="{keytab}" principal="{principal}";\n}};\n'
            )

    def _config(self, node: Node) -> dict[str, str]:
        sec = self.security
        rf = str(min(3, self.size))
        listeners = {p: f"{p}://{node.host}:{port}" for p, port in node.ports.items()}
        advertised = {
            p: f"{p}://{node.host}:{node.advertised.get(p, port)}" for p, port in node.ports.items()
        }
        # CONTROLLER and WAN speak PLAINTEXT.
        protocol = {p: p if p not in ("CONTROLLER", "WAN") else "PLAINTEXT" for p in node.ports}
        cfg = {
            "process.roles": "broker,controller",
            "node.id": str(node.node_id),
            "controller.quorum.voters": ",".join(
                f"{n.node_id}@{n.host}:{n.ports['CONTROLLER']}" for n in self.nodes
            ),
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listeners": ",".join(listeners.values()),
            "advertised.listeners": ",".join(v for p, v in advertised.items() if p != "CONTROLLER"),
            "listener.security.protocol.map": ",".join(f"{p}:{protocol[p]}" for p in node.ports),
            "log.dirs": str(node.directory / "data"),
            "offsets.topic.replication.factor": rf,
            "offsets.topic.num.partitions": "5",
            "transaction.state.log.replication.factor": rf,
            "transaction.state.log.min.isr": str(min(2, self.size)),
            "transaction.state.log.num.partitions": "5",
            "default.replication.factor": rf,
            "min.insync.replicas": str(min(2, self.size)),
            "group.initial.rebalance.delay.ms": "0",
            # Test records carry fixed CreateTimes of 2023: the default 7-day retention would delete them
            # 30 s after start. Tests of retention set it per topic.
            "log.retention.ms": "-1",
            "log.cleaner.dedupe.buffer.size": str(8 << 20),
            "num.network.threads": "2",
            "num.io.threads": "4",
            "num.recovery.threads.per.data.dir": "1",
            "controlled.shutdown.enable": "true",
        }
        if sec.tls:
            keystore, truststore, password = sec.tls
            cfg.update(
                {
                    "ssl.keystore.type": "PKCS12",
                    "ssl.keystore.location": str(keystore),
                    "ssl.keystore.password": password,
                    "ssl.key.password": password,
                    "ssl.truststore.type": "PKCS12",
                    "ssl.truststore.location": str(truststore),
                    "ssl.truststore.password": password,
                    "ssl.client.auth": "required" if sec.client_auth else "none",
                    "ssl.endpoint.identification.algorithm": "",
                }
            )
        if sec.mechanisms:
            cfg["sasl.enabled.mechanisms"] = ",".join(sec.mechanisms)
            # A SASL listener needs a server-side login module per mechanism, even SCRAM (whose users live
            # in the metadata log): without one the broker exits at start ("Could not find a 'KafkaServer'
            # ... entry in the JAAS configuration"). GSSAPI keeps the KafkaServer section of jaas.conf.
            for p in node.ports:
                if p.startswith("SASL_"):
                    for m in sec.mechanisms:
                        if m.startswith("SCRAM-"):
                            cfg[f"listener.name.{p.lower()}.{m.lower()}.sasl.jaas.config"] = (
                                "org.apache.kafka.common.security.scram.ScramLoginModule required;"
                            )
        if sec.kerberos:
            cfg["sasl.kerberos.service.name"] = "kafka"
        if sec.super_users:
            cfg["authorizer.class.name"] = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
            cfg["super.users"] = ";".join(sec.super_users)
            cfg["allow.everyone.if.no.acl.found"] = "false"
            # The brokers and controllers talk PLAINTEXT to each other as ANONYMOUS: let them.
            if "User:ANONYMOUS" not in sec.super_users:
                cfg["super.users"] += ";User:ANONYMOUS"
        cfg.update(self.broker_config)
        return cfg

    def _launch(self, node: Node) -> None:
        env = dict(os.environ)
        jvm = list(os.environ.get("KMIRROR_TEST_BROKER_JVM", "").split() or self.jvm)
        if self.security.kerberos:
            jvm += [
                f"-Djava.security.auth.login.config={node.directory / 'jaas.conf'}",
                f"-Djava.security.krb5.conf={self.security.kerberos[2]}",
            ]
        cmd = [
            jars.java(),
            *jvm,
            "-Djava.awt.headless=true",
            *_log_flags(self.line, node.directory),
            "-cp",
            jars.classpath(self.line),
            "kafka.Kafka",
            str(node.directory / "server.properties"),
        ]
        out: IO[bytes] = (node.directory / "stdout.log").open("ab")
        node.process = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        out.close()

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        """Until every live node answers and the cluster's metadata lists them all."""
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + timeout
        live = [n for n in self.nodes if n.alive() or n.process is not None]
        for node in live:
            while not _answers(node.host, node.ports["PLAINTEXT"]):
                if node.process is not None and node.process.poll() is not None:
                    raise KafkaError(
                        f"Kafka node {node.node_id} of cluster {self.name} exited at start "
                        f"(code {node.process.returncode}); see {self._log(node)}"
                    )
                if time.monotonic() > deadline:
                    raise KafkaError(
                        f"Kafka cluster {self.name} did not answer on {node.address} "
                        f"within {timeout:.0f} s; see {self._log(node)}"
                    )
                time.sleep(0.05)
        want = {n.node_id for n in self.nodes if n.alive()}
        admin = AdminClient(
            {"bootstrap.servers": ",".join(n.address for n in self.nodes if n.alive()), "logger": _QUIET}
        )
        while True:
            with contextlib.suppress(Exception):
                md = admin.list_topics(timeout=1)
                if {b for b in md.brokers} >= want:
                    return
            if time.monotonic() > deadline:
                raise KafkaError(
                    f"Kafka cluster {self.name} gives no metadata for nodes {sorted(want)} "
                    f"within {timeout:.0f} s; see {self.log_dir}"
                )
            time.sleep(0.05)

    def _create_scram_users(self) -> None:
        from confluent_kafka.admin import (
            AdminClient,
            ScramCredentialInfo,
            ScramMechanism,
            UserScramCredentialUpsertion,
        )

        admin = AdminClient({"bootstrap.servers": self.bootstrap, "logger": _QUIET})
        upserts = [
            UserScramCredentialUpsertion(
                u.name,
                ScramCredentialInfo(getattr(ScramMechanism, u.mechanism.replace("-", "_")), 4096),
                u.password.encode(),
            )
            for u in self.security.scram
        ]
        for f in admin.alter_user_scram_credentials(upserts).values():
            f.result()

    # ------------------------------------------------------------------------------------- faults

    def node(self, node_id: int) -> Node:
        return next(n for n in self.nodes if n.node_id == node_id)

    def kill_node(self, node_id: int, sig: int = signal.SIGKILL) -> None:
        """Kill one node (SIGKILL: a crash; SIGTERM: a controlled shutdown, waited for)."""
        n = self.node(node_id)
        if n.process is None or n.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(n.process.pid, signal.SIGCONT)
            os.kill(n.process.pid, sig)
        n.process.wait(timeout=120)

    def start_node(self, node_id: int, timeout: float = READY_TIMEOUT_S, *, in_sync: bool = True) -> None:
        """Start a stopped node again on its ports and data, and wait until the cluster lists it and every
        partition with a replica on it has it in its ISR again (caught up: the next fault may follow).
        ``in_sync=False``: only until the node answers (other nodes may be down, and a partition may take it
        back only by an unclean election).

        The metadata may still list a SIGKILLed node until the controller fences it (the broker session
        timeout), so being listed alone does not mean it is back; an ISR that includes it does, once it
        had been dropped from the ISR (fenced or shut down in a controlled way)."""
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + timeout
        node = self.node(node_id)
        self._launch(node)
        if not in_sync:
            while not _answers(node.host, node.ports["PLAINTEXT"]):
                if not node.alive() or time.monotonic() > deadline:
                    raise KafkaError(
                        f"Kafka node {node_id} of cluster {self.name} did not answer again within "
                        f"{timeout:.0f} s; see {self._log(node)}"
                    )
                time.sleep(0.05)
            return
        self.wait_ready(timeout)
        admin = AdminClient(
            {"bootstrap.servers": ",".join(n.address for n in self.nodes if n.alive()), "logger": _QUIET}
        )
        lagging: list[str] = []
        while True:
            with contextlib.suppress(Exception):
                md = admin.list_topics(timeout=2)
                lagging = ["(the node is not in the metadata)"]
                if node_id in md.brokers:
                    lagging = [
                        f"{t}/{p}"
                        for t, tm in md.topics.items()
                        for p, pm in tm.partitions.items()
                        if node_id in pm.replicas and node_id not in pm.isrs
                    ]
                    if not lagging:
                        return
            if time.monotonic() > deadline:
                raise KafkaError(
                    f"Kafka node {node_id} of cluster {self.name} not back in the ISR of "
                    f"{len(lagging)} partitions ({', '.join(lagging[:5])}) within {timeout:.0f} s; "
                    f"see {self._log(self.node(node_id))}"
                )
            time.sleep(0.1)

    def pause(self) -> None:
        """Freeze every node (SIGSTOP): clients see a stalled, not a restarted, cluster."""
        for pid in self.pids:
            os.kill(pid, signal.SIGSTOP)

    def resume(self) -> None:
        for pid in self.pids:
            os.kill(pid, signal.SIGCONT)

    def stop(self) -> None:
        self._kill_nodes()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def _kill_nodes(self) -> None:
        for n in self.nodes:
            p = n.process
            if p is None or p.poll() is not None:
                continue
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.pid, signal.SIGCONT)
                p.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=20)


def _quiet_logger() -> object:
    import logging

    log = logging.getLogger("kmirror.testing.kafka.client")
    log.addHandler(logging.NullHandler())
    log.propagate = False
    return log


_QUIET = _quiet_logger()


# ----------------------------------------------------------------------------------------- storage


def _bootstrap_checkpoint(line: str) -> Path:
    """The ``bootstrap.checkpoint`` Kafka's StorageTool writes for ``line``, made once and cached."""
    lib = jars.fetch(line)
    done = lib.parent / f"{lib.name}.bootstrap.checkpoint"
    if done.exists():
        return done
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        port, client = free_port(), free_port()
        (t / "server.properties").write_text(
            f"process.roles=broker,controller\nnode.id=1\ncontroller.quorum.voters=1@127.0.0.1:{port}\n"
            f"controller.listener.names=CONTROLLER\n"
            f"listeners=PLAINTEXT://127.0.0.1:{client},CONTROLLER://127.0.0.1:{port}\n"
            f"log.dirs={t / 'data'}\n"
        )
        _write_log_config(line, t, t / "format.log")
        proc = subprocess.run(
            [
                jars.java(),
                "-XX:TieredStopAtLevel=1",
                *_log_flags(line, t),
                "-cp",
                jars.classpath(line),
                "kafka.tools.StorageTool",
                "format",
                "-t",
                _kafka_uuid(),
                "-c",
                str(t / "server.properties"),
            ],
            capture_output=True,
            text=True,
        )
        made = t / "data" / "bootstrap.checkpoint"
        if proc.returncode != 0 or not made.exists():
            raise KafkaError(f"Kafka {line} StorageTool format failed: {(proc.stdout + proc.stderr)[-400:]}")
        staged = done.with_suffix(".partial")
        shutil.copyfile(made, staged)
        staged.rename(done)
    return done


def _write_log_config(line: str, directory: Path, log_file: Path) -> None:
    if line.startswith("3."):
        (directory / "log4j.properties").write_text(
            "log4j.rootLogger=INFO, F\nlog4j.appender.F=org.apache.log4j.FileAppender\n"
            f"log4j.appender.F.File={log_file}\nlog4j.appender.F.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.F.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
            "log4j.logger.kafka.request.logger=WARN\nlog4j.logger.state.change.logger=WARN\n"
        )
    else:
        (directory / "log4j2.properties").write_text(
            "appender.f.type=File\nappender.f.name=F\n"
            f"appender.f.fileName={log_file}\nappender.f.layout.type=PatternLayout\n"
            "appender.f.layout.pattern=[%d] %p %m (%c)%n\n"
            "rootLogger.level=INFO\nrootLogger.appenderRef.f.ref=F\n"
            "logger.state.name=state.change.logger\nlogger.state.level=WARN\n"
        )


def _log_flags(line: str, directory: Path) -> list[str]:
    if line.startswith("3."):
        return [f"-Dlog4j.configuration=file:{directory / 'log4j.properties'}"]
    return [f"-Dlog4j2.configurationFile={directory / 'log4j2.properties'}"]


@contextlib.contextmanager
def kafka_clusters(
    *names: str, host: str = "127.0.0.1", log_dir: Path | None = None, **options: object
) -> Iterator[dict[str, KafkaCluster]]:
    """Start one cluster per name (their JVMs side by side); stop them all on exit, whatever happened."""
    cs = {name: KafkaCluster(name, host, **options) for name in names}  # type: ignore[arg-type]
    with running(cs, log_dir):
        yield cs


@contextlib.contextmanager
def running(cs: dict[str, KafkaCluster], log_dir: Path | None) -> Iterator[dict[str, KafkaCluster]]:
    """Start clusters configured each their own way (side by side); stop them all on exit, whatever
    happened."""
    try:
        start_together(list(cs.values()), log_dir)
        yield cs
    finally:
        for c in cs.values():
            c.stop()


def start_together(cs: list[KafkaCluster], log_dir: Path | None) -> None:
    """Start several clusters at once: every JVM is launched before any is waited for. If one fails,
    every one is stopped and the first error raised."""
    import threading

    errors: list[BaseException] = []

    def one(c: KafkaCluster) -> None:
        try:
            c.start(log_dir)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(c,)) for c in cs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        for c in cs:
            c.stop()
        raise errors[0]
