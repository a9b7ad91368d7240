// Remove static members (KIP-345) from a consumer group at once: the streams of a kmirror instance removed
// for good, so that the other instances get its partitions now instead of after session.timeout.ms.
// It is Kafka's Admin API RemoveMembersFromConsumerGroup, which kafka-consumer-groups.sh has no option for
// and confluent-kafka does not expose, so this runs Kafka's own Java client (a JDK 11+, Kafka's libs/).
// Compile it beforehand, so that the step itself is one JVM start and one request:
//
//   javac -cp "$KAFKA_HOME/libs/*" -d ~/kmirror-tools tools/RemoveStaticMembers.java
//   java -cp "$KAFKA_HOME/libs/*:$HOME/kmirror-tools" RemoveStaticMembers ADMIN_CONFIG GROUP INSTANCE_ID...
//
// (or in one go, compiling each time: java -cp "$KAFKA_HOME/libs/*" tools/RemoveStaticMembers.java ...).
//
// ADMIN_CONFIG: a Java client properties file (bootstrap.servers and security, as for
// kafka-consumer-groups.sh --command-config); the principal needs READ on the group.
// Exit 0: removed; 1: not removed, the reason printed (UNKNOWN_MEMBER_ID: an id not in the group); 2: usage.
// docs/runbooks/remove-instance.md.

import java.io.FileInputStream;
import java.util.Arrays;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.MemberToRemove;
import org.apache.kafka.clients.admin.RemoveMembersFromConsumerGroupOptions;

public class RemoveStaticMembers {
    public static void main(String[] args) throws Exception {
        if (args.length < 3) {
            System.err.println("usage: RemoveStaticMembers ADMIN_CONFIG GROUP INSTANCE_ID...");
            System.exit(2);
        }
        Properties props = new Properties();
        try (FileInputStream in = new FileInputStream(args[0])) {
            props.load(in);
        }
        String group = args[1];
        List<MemberToRemove> members = Arrays.stream(args, 2, args.length).map(MemberToRemove::new).toList();
        try (Admin admin = Admin.create(props)) {
            admin.removeMembersFromConsumerGroup(group, new RemoveMembersFromConsumerGroupOptions(members))
                .all()
                .get(60, TimeUnit.SECONDS);
            System.out.println("removed " + members.size() + " static member(s) from group " + group);
        } catch (Exception e) {
            System.out.println("not removed from group " + group + ": " + (e.getCause() != null ? e.getCause() : e));
            System.exit(1);
        }
    }
}
