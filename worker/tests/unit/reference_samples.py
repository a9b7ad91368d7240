"""The MirrorMaker properties samples of the reference documents, verbatim, for the tests that read them."""

# The reference MirrorMaker samples (Kafka Mirror Maker Best Practices; HDP "Mirroring data between
# Kafka clusters"), verbatim.
SAMPLE_CONSUMER = """\
bootstrap.servers=kafka-source-server1:6667,kafka-source-server2:6667,kafka-source-server3-6667
groupid=dp-MirrorMaker-group
exclude.internal.topics=true
mirror.topics.whitelist=app_log
client.id=mirror_maker_consumer
"""
SAMPLE_PRODUCER = """\
bootstrap.servers=kafka-target-server1:6667,kafka-target-server2:6667,kafka-target-server3-6667
acks=1
batch.size=100
client.id=mirror_maker_producer
"""
ZK_CONSUMER = """\
zk.connect=hdp1:2181/kafka
zk.connectiontimeout.ms=1000000
consumer.timeout.ms=-1
groupid=dp-MirrorMaker-test-datapl
shallow.iterator.enable=true
mirror.topics.whitelist=app_log
"""
ZK_PRODUCER = """\
zk.connect=hdp1:2181/kafka-test
producer.type=async
compression.codec=0
serializer.class=kafka.serializer.DefaultEncoder
max.message.size=10000000
queue.time=1000
queue.enqueueTimeout.ms=-1
"""
