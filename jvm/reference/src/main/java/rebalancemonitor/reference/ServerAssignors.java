package rebalancemonitor.reference;

import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.ConsumerGroupPartitionAssignor;
import org.apache.kafka.coordinator.group.api.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.assignor.MemberAssignment;
import org.apache.kafka.coordinator.group.api.assignor.SubscribedTopicDescriber;
import org.apache.kafka.coordinator.group.api.assignor.SubscriptionType;
import org.apache.kafka.coordinator.group.assignor.RangeAssignor;
import org.apache.kafka.coordinator.group.assignor.UniformAssignor;
import org.apache.kafka.coordinator.group.modern.Assignment;
import org.apache.kafka.coordinator.group.modern.GroupSpecImpl;
import org.apache.kafka.coordinator.group.modern.MemberSubscriptionAndAssignmentImpl;
import org.apache.kafka.coordinator.group.modern.TopicIds;
import org.apache.kafka.image.TopicsImage;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.UUID;
import java.util.function.Supplier;
import java.util.stream.Collectors;

/**
 * Kafka 4.1's server-side (KIP-848) assignors, {@code UniformAssignor} ("uniform") and
 * {@code RangeAssignor} ("server-range"), fed the way the group coordinator feeds them.
 *
 * <p>The inputs are built as Kafka 4.1's {@code TargetAssignmentBuilder} builds them, so that every
 * Java hash structure the assignors iterate has the iteration order it has on a broker:
 * <ul>
 *   <li>the member specs: a fresh {@code HashMap} filled in spec order;</li>
 *   <li>a member's subscription: Kafka's own {@code TopicIds} over {@code new HashSet<>(topics)}
 *       (what {@code ConsumerGroupMember} keeps), resolving names to ids and skipping names that are
 *       not in the metadata;</li>
 *   <li>a member's previous target assignment ({@code owned_partitions}): what
 *       {@code Assignment.fromRecord} builds from a target-assignment record, i.e. a {@code HashMap}
 *       filled topic by topic in order of first appearance, each topic's partitions a
 *       {@code new HashSet<>(list)} in listed order;</li>
 *   <li>the subscription type: {@code ModernGroup.subscriptionType}, by topic names (a name missing
 *       from the metadata counts).</li>
 * </ul>
 *
 * <p>Topic ids: a topic's {@code topic_id} when the spec gives one; otherwise (and for a topic that
 * is owned but not in the metadata, i.e. deleted) an id derived from the name with
 * {@code UUID.nameUUIDFromBytes}, so runs are reproducible. Such ids are not the broker's: where
 * Kafka's answer depends on the iteration order of topic ids, a spec without ids fixes no order.
 *
 * <p>Answers list each member's partitions in the order Kafka's answer iterates them (topic ids in
 * map order, partitions in set order): the order in which the coordinator's target-assignment
 * record lists them, and so the order a later spec gives them in as {@code owned_partitions}.
 */
final class ServerAssignors {

    static final Set<String> NAMES = Set.of("uniform", "server-range");

    private ServerAssignors() {
    }

    static Supplier<ConsumerGroupPartitionAssignor> factory(String name) {
        return name.equals("uniform") ? UniformAssignor::new : RangeAssignor::new;
    }

    /** A spec turned into the coordinator's inputs, once: the assignors neither keep nor change them. */
    static AssignorReference.Runner runner(AssignorReference.Spec spec) {
        Map<String, Uuid> ids = new HashMap<>();
        Map<Uuid, String> names = new HashMap<>();
        for (String topic : spec.partitionCounts().keySet()) {
            Uuid id = spec.topicIds().getOrDefault(topic, derivedId(topic));
            ids.put(topic, id);
            names.put(id, topic);
        }
        TopicIds.TopicResolver resolver = new MapResolver(ids, names);
        Map<Uuid, Integer> counts = new HashMap<>();
        spec.partitionCounts().forEach((topic, count) -> counts.put(ids.get(topic), count));
        SubscribedTopicDescriber describer = new SubscribedTopicDescriber() {
            @Override
            public int numPartitions(Uuid topicId) {
                return counts.getOrDefault(topicId, -1);
            }

            @Override
            public Set<String> racksForPartition(Uuid topicId, int partition) {
                return Set.of();
            }
        };

        Map<String, MemberSubscriptionAndAssignmentImpl> members = new HashMap<>();
        Map<Uuid, Map<Integer, String>> inverted = new HashMap<>();
        Map<String, Integer> subscribers = new HashMap<>();
        for (AssignorReference.Member m : spec.members()) {
            Map<Uuid, List<Integer>> record = new LinkedHashMap<>();
            for (TopicPartition tp : m.owned()) {
                Uuid id = ids.getOrDefault(tp.topic(), derivedId(tp.topic()));
                record.computeIfAbsent(id, __ -> new ArrayList<>()).add(tp.partition());
                inverted.computeIfAbsent(id, __ -> new HashMap<>()).put(tp.partition(), m.memberId());
            }
            // Assignment.fromRecord: Collectors.toMap into a HashMap, each partition list into a HashSet.
            Map<Uuid, Set<Integer>> previous = record.entrySet().stream().collect(Collectors.toMap(
                    Map.Entry::getKey, e -> new HashSet<>(e.getValue())));
            Set<String> topicNames = new HashSet<>(m.topics());
            for (String topic : topicNames) {
                subscribers.merge(topic, 1, Integer::sum);
            }
            members.put(m.memberId(), new MemberSubscriptionAndAssignmentImpl(
                    Optional.ofNullable(m.rack()),
                    Optional.ofNullable(m.groupInstanceId()),
                    new TopicIds(topicNames, resolver),
                    new Assignment(previous)));
        }
        SubscriptionType type = SubscriptionType.HOMOGENEOUS;
        for (int count : subscribers.values()) {
            if (count != spec.members().size()) {
                type = SubscriptionType.HETEROGENEOUS;
                break;
            }
        }
        GroupSpecImpl groupSpec = new GroupSpecImpl(java.util.Collections.unmodifiableMap(members), type, inverted);
        Supplier<ConsumerGroupPartitionAssignor> factory = factory(spec.assignor());

        return new AssignorReference.Runner() {
            @Override
            public Supplier<Object> prepare() {
                ConsumerGroupPartitionAssignor assignor = factory.get();
                return () -> assignor.assign(groupSpec, describer);
            }

            @Override
            public Map<String, List<TopicPartition>> partitions(Object raw) {
                Map<String, MemberAssignment> result = ((GroupAssignment) raw).members();
                Map<String, List<TopicPartition>> out = new HashMap<>();
                for (AssignorReference.Member m : spec.members()) {
                    List<TopicPartition> list = new ArrayList<>();
                    MemberAssignment assignment = result.get(m.memberId());
                    if (assignment != null) {
                        assignment.partitions().forEach((id, parts) -> {
                            for (int p : parts) {
                                list.add(new TopicPartition(names.getOrDefault(id, "unknown-topic-id-" + id), p));
                            }
                        });
                    }
                    out.put(m.memberId(), list);
                }
                return out;
            }
        };
    }

    static Uuid derivedId(String topic) {
        UUID u = UUID.nameUUIDFromBytes(("rebalance-monitor topic " + topic).getBytes(StandardCharsets.UTF_8));
        return new Uuid(u.getMostSignificantBits(), u.getLeastSignificantBits());
    }

    /** The coordinator resolves names through its metadata image; here, through the spec's topics. */
    private record MapResolver(Map<String, Uuid> ids, Map<Uuid, String> names) implements TopicIds.TopicResolver {
        @Override
        public TopicsImage image() {
            return TopicsImage.EMPTY;
        }

        @Override
        public String name(Uuid id) {
            return names.get(id);
        }

        @Override
        public Uuid id(String name) {
            return ids.get(name);
        }

        @Override
        public void clear() {
        }
    }
}
