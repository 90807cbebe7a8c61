package rebalancemonitor.reference;

import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Subscription;
import org.apache.kafka.clients.consumer.StickyAssignor;
import org.apache.kafka.clients.consumer.internals.AbstractStickyAssignor.MemberData;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.protocol.types.ArrayOf;
import org.apache.kafka.common.protocol.types.Field;
import org.apache.kafka.common.protocol.types.Schema;
import org.apache.kafka.common.protocol.types.Struct;
import org.apache.kafka.common.protocol.types.Type;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * The eager StickyAssignor's userData, schema V1: {@code [{topic: string, partitions: [int32]}],
 * generation: int32} (spec section 3.0). StickyAssignor reads a member's owned partitions and
 * generation only from here, never from {@code Subscription.ownedPartitions}. Its own encoder
 * ({@code serializeTopicPartitionAssignment}) is package-private, so the schema is rebuilt from
 * Kafka's public protocol types; {@link #selfCheck()} decodes with StickyAssignor's own
 * {@code memberData} to prove the bytes mean what we think.
 */
final class StickyUserData {

    // Field names are not serialized; only the types and their order are. They mirror Kafka's.
    private static final Schema TOPIC_ASSIGNMENT = new Schema(
            new Field("topic", Type.STRING),
            new Field("partitions", new ArrayOf(Type.INT32)));
    private static final Schema USER_DATA_V1 = new Schema(
            new Field("previous_assignment", new ArrayOf(TOPIC_ASSIGNMENT)),
            new Field("generation", Type.INT32));

    private StickyUserData() {
    }

    /**
     * What a real StickyAssignor consumer sends: nothing before its first assignment (no owned
     * partitions, no generation), otherwise its last assignment with the generation it came with.
     */
    static ByteBuffer encode(List<TopicPartition> owned, int generation) {
        if (owned.isEmpty() && generation < 0) {
            return null;
        }
        // Grouped by topic in first-seen order, like StickyAssignor's own encoder (partitionsByTopic).
        Map<String, List<Integer>> byTopic = new LinkedHashMap<>();
        for (TopicPartition tp : owned) {
            byTopic.computeIfAbsent(tp.topic(), t -> new ArrayList<>()).add(tp.partition());
        }
        List<Struct> topics = new ArrayList<>();
        for (Map.Entry<String, List<Integer>> e : byTopic.entrySet()) {
            Struct s = new Struct(TOPIC_ASSIGNMENT);
            s.set("topic", e.getKey());
            s.set("partitions", e.getValue().toArray());
            topics.add(s);
        }
        Struct struct = new Struct(USER_DATA_V1);
        struct.set("previous_assignment", topics.toArray());
        struct.set("generation", generation);
        ByteBuffer buffer = ByteBuffer.allocate(USER_DATA_V1.sizeOf(struct));
        USER_DATA_V1.write(buffer, struct);
        buffer.flip();
        return buffer;
    }

    /** StickyAssignor's protected decoder, reached through a subclass. */
    private static final class Decoder extends StickyAssignor {
        MemberData decode(Subscription subscription) {
            return memberData(subscription);
        }
    }

    /** Round-trips a few member states through StickyAssignor's decoder; throws if one differs. */
    static void selfCheck() {
        Decoder decoder = new Decoder();
        List<TopicPartition> owned = List.of(new TopicPartition("t1", 2), new TopicPartition("t0", 0),
                new TopicPartition("t1", 0));
        check(decoder.decode(new Subscription(List.of("t0", "t1"), encode(owned, 7))), owned, Optional.of(7));
        check(decoder.decode(new Subscription(List.of("t0"), encode(List.of(), 3))), List.of(), Optional.of(3));
        check(decoder.decode(new Subscription(List.of("t0"), encode(owned, -1))), owned, Optional.of(-1));
        check(decoder.decode(new Subscription(List.of("t0"), encode(List.of(), -1))), List.of(), Optional.empty());
    }

    private static void check(MemberData decoded, List<TopicPartition> owned, Optional<Integer> generation) {
        if (!new java.util.HashSet<>(decoded.partitions).equals(new java.util.HashSet<>(owned))
                || decoded.partitions.size() != owned.size() || !decoded.generation.equals(generation)) {
            throw new IllegalStateException("StickyAssignor decoded " + decoded.partitions + " generation "
                    + decoded.generation + ", expected " + owned + " generation " + generation);
        }
    }
}
