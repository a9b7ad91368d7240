"""Filters of the kmirror_service role: the Prometheus metrics port of each instance."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError


def _port(value: object, where: str) -> int:
    try:
        port = int(str(value))
    except ValueError:
        raise AnsibleFilterError(f"{where}: {value!r} is not a port number; give 1-65535") from None
    if not 1 <= port <= 65535:
        raise AnsibleFilterError(f"{where}: {port} is not a port number; give 1-65535")
    return port


def kmirror_metrics_ports(sources: list[dict], base: object = None) -> dict[str, int | None]:
    """The --metrics.port of each instance (source name -> port, None: no metrics).

    A source's own metrics_port wins; otherwise base + the source's position in the list (base 0 or
    empty: none). Every instance of a host runs from the same list, so the ports must all differ.
    """
    use_base = base not in (None, "", False) and str(base).strip() != "0"
    if use_base:
        base_port = _port(base, "kmirror_service_metrics_port_base")
    ports: dict[str, int | None] = {}
    owner: dict[int, str] = {}
    for position, source in enumerate(sources):
        name = str(source.get("name"))
        where = f"kmirror_source_clusters[{name}].metrics_port"
        if source.get("metrics_port") not in (None, ""):
            port: int | None = _port(source["metrics_port"], where)
        elif use_base:
            port = _port(base_port + position, f"kmirror_service_metrics_port_base + position of {name}")
        else:
            port = None
        if port is not None and port in owner:
            raise AnsibleFilterError(
                f"{where}: port {port} is also the metrics port of kmirror@{owner[port]} on the same hosts; "
                "give each source its own metrics_port (or leave every one to the base + position)"
            )
        if port is not None:
            owner[port] = name
        ports[name] = port
    return ports


class FilterModule:
    def filters(self) -> dict:
        return {"kmirror_metrics_ports": kmirror_metrics_ports}
