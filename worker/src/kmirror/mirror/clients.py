"""A stream's Kafka clients, in one place for the parts that use them: its consumer (replaced when the
stream joins its group again), its producers and the two admin clients."""

from __future__ import annotations

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient


class Clients:
    """The clients of one stream; the admin clients exist once the stream has started."""

    def __init__(self) -> None:
        self.consumer: Consumer | None = None
        self.producers: list[Producer] = []
        self._admins: tuple[AdminClient, AdminClient] | None = None

    def started(self, source_admin: AdminClient, target_admin: AdminClient) -> None:
        self._admins = (source_admin, target_admin)

    @property
    def source_admin(self) -> AdminClient:
        assert self._admins is not None, "the stream has not started"
        return self._admins[0]

    @property
    def target_admin(self) -> AdminClient:
        assert self._admins is not None, "the stream has not started"
        return self._admins[1]

    def the_consumer(self) -> Consumer:
        consumer = self.consumer
        assert consumer is not None, "the stream has no consumer"
        return consumer

    def queued(self) -> int:
        """Records handed to the producers and not yet acknowledged (or failed)."""
        return sum(len(p) for p in self.producers)

    def serve(self) -> None:
        """Serve every client's pending events (callbacks, errors) without waiting."""
        for p in self.producers:
            p.poll(0)
        if self.consumer is not None:
            self.consumer.poll(0)
