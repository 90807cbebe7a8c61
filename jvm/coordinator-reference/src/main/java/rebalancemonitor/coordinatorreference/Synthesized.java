package rebalancemonitor.coordinatorreference;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Assignment;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Subscription;
import org.apache.kafka.clients.consumer.StickyAssignor;
import org.apache.kafka.clients.consumer.internals.AbstractStickyAssignor.MemberData;
import org.apache.kafka.clients.consumer.internals.ConsumerProtocol;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.types.RawTaggedField;
import org.apache.kafka.connect.runtime.distributed.ConnectProtocol;
import org.apache.kafka.connect.runtime.distributed.ExtendedAssignment;
import org.apache.kafka.connect.runtime.distributed.ExtendedWorkerState;
import org.apache.kafka.connect.runtime.distributed.IncrementalCooperativeConnectProtocol;
import org.apache.kafka.connect.util.ConnectorTaskId;
import org.apache.kafka.coordinator.common.runtime.CoordinatorRecord;
import org.apache.kafka.coordinator.group.GroupCoordinatorRecordSerde;
import org.apache.kafka.coordinator.group.generated.*;
import org.apache.kafka.server.common.ApiMessageAndVersion;
import org.apache.kafka.streams.processor.TaskId;
import org.apache.kafka.streams.processor.assignment.ProcessId;
import org.apache.kafka.streams.processor.internals.assignment.AssignmentInfo;
import org.apache.kafka.streams.processor.internals.assignment.SubscriptionInfo;
import org.apache.kafka.streams.state.HostInfo;

import java.io.PrintStream;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.UUID;

/**
 * Records that real groups on a 4.1 broker do not produce, built with Kafka's own classes and
 * serialized with its own serde: every value version Kafka 4.1 reads (GroupMetadataValue v0-4,
 * OffsetCommitValue v0-4, the legacy type 0), the share-group records, the KIP-1071 Streams-group
 * records, and classic-group members of every consumer-protocol, Streams and Connect version.
 * Printed as JSON Lines {"source", "key", "value"} for the decoding mode to decode.
 */
final class Synthesized {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final GroupCoordinatorRecordSerde SERDE = new GroupCoordinatorRecordSerde();
    private static final Uuid TOPIC_A = Uuid.fromString("b3Bnu0eFQC-vXJ-4YMxk7w");
    private static final Uuid TOPIC_B = Uuid.fromString("Hn4f1ZWWSoKnuvVzv0yt1Q");

    private Synthesized() { }

    static void print(PrintStream out) throws Exception {
        // -- offset commits, every version
        emit(out, "legacy offset commit v0", new LegacyOffsetCommitKey().setGroup("g-légacy").setTopic("t").setPartition(3),
             new LegacyOffsetCommitValue().setOffset(42).setMetadata("meta").setCommitTimestamp(1700000000000L), (short) 0);
        for (short v = 0; v <= 4; v++) {
            OffsetCommitValue value = new OffsetCommitValue().setOffset(1000 + v).setMetadata(v == 2 ? "" : "m" + v)
                .setCommitTimestamp(1700000000000L + v).setLeaderEpoch(v >= 3 ? 7 : -1).setExpireTimestamp(v == 1 ? 1800000000000L : -1);
            if (v == 4) value.setTopicId(TOPIC_A);
            emit(out, "offset commit v" + v, new OffsetCommitKey().setGroup("g").setTopic("orders").setPartition(v), value, v);
        }
        emit(out, "offset commit v4 without topic id", new OffsetCommitKey().setGroup("g").setTopic("orders").setPartition(9),
             new OffsetCommitValue().setOffset(5).setMetadata("").setCommitTimestamp(1L), (short) 4);
        tombstone(out, "offset commit tombstone", new OffsetCommitKey().setGroup("g").setTopic("orders").setPartition(0));

        // -- classic groups, every GroupMetadataValue version, every embedded protocol version
        for (short v = 0; v <= 4; v++) {
            emit(out, "group metadata v" + v + ", consumer range", new GroupMetadataKey().setGroup("classic-" + v),
                 group("consumer", "range", v, List.of(
                     member("m1-" + v, v >= 3 ? "static-1" : null, consumerSubscription((short) 0, null), consumerAssignment((short) 0)),
                     member("m2-" + v, null, consumerSubscription((short) 1, null), consumerAssignment((short) 1)),
                     member("m3-ü-" + v, null, consumerSubscription((short) 2, null), consumerAssignment((short) 2)),
                     member("m4-" + v, null, consumerSubscription((short) 3, "rack-a"), consumerAssignment((short) 3)))), v);
        }
        emit(out, "group metadata v3, empty group", new GroupMetadataKey().setGroup("empty"),
             new GroupMetadataValue().setProtocolType("consumer").setGeneration(5).setProtocol(null).setLeader(null)
                 .setCurrentStateTimestamp(1700000000000L), (short) 3);
        emit(out, "group metadata v3, sticky user data", new GroupMetadataKey().setGroup("sticky"),
             group("consumer", "sticky", (short) 3, List.of(
                 member("s1", null, consumerSubscription((short) 3, null, stickyUserData(true)), consumerAssignment((short) 3)),
                 member("s2", null, consumerSubscription((short) 1, null, stickyUserData(false)), consumerAssignment((short) 1)),
                 member("s3", null, consumerSubscription((short) 3, null, ByteBuffer.wrap(new byte[] {1, 2, 3})), new byte[0]))),
             (short) 3);
        emit(out, "group metadata v3, unknown protocol type", new GroupMetadataKey().setGroup("other"),
             group("my-protocol", "mine", (short) 3, List.of(member("x1", null, new byte[] {9, 9}, new byte[] {8}))), (short) 3);
        // Kafka Streams: SubscriptionInfo v1-11 and AssignmentInfo v1-11
        for (int v = 1; v <= 11; v++) {
            emit(out, "group metadata v3, Streams subscription and assignment v" + v, new GroupMetadataKey().setGroup("streams-v" + v),
                 group("consumer", "stream", (short) 3, List.of(
                     member("app-1", null, consumerSubscription((short) 3, null, streamsSubscription(v)), consumerAssignment((short) 3, streamsAssignment(v))))),
                 (short) 3);
        }
        // Kafka Connect: eager (default), compatible (v1) and sessioned (v2)
        emit(out, "group metadata v3, Connect eager", new GroupMetadataKey().setGroup("connect-eager"),
             group("connect", "default", (short) 3, List.of(
                 member("w1", null, bytes(ConnectProtocol.serializeMetadata(new ConnectProtocol.WorkerState("http://w1:8083/", 12))),
                        bytes(ConnectProtocol.serializeAssignment(new ConnectProtocol.Assignment((short) 0, "w1", "http://w1:8083/", 12,
                            List.of("c1"), List.of(new ConnectorTaskId("c1", 0), new ConnectorTaskId("c2", 1)))))))), (short) 3);
        for (boolean sessioned : new boolean[] {false, true}) {
            ExtendedAssignment previous = new ExtendedAssignment(sessioned ? (short) 2 : (short) 1, (short) 0, "w1", "http://w1:8083/", 10,
                List.of("c1"), List.of(new ConnectorTaskId("c1", 0)), List.of(), List.of(), 0);
            ExtendedAssignment next = new ExtendedAssignment(sessioned ? (short) 2 : (short) 1, (short) 0, "w1", "http://w1:8083/", 12,
                List.of("c2"), List.of(new ConnectorTaskId("c2", 0), new ConnectorTaskId("c2", 1)),
                List.of("c1"), List.of(new ConnectorTaskId("c1", 0)), 30000);
            String protocol = sessioned ? "sessioned" : "compatible";
            emit(out, "group metadata v3, Connect " + protocol, new GroupMetadataKey().setGroup("connect-" + protocol),
                 group("connect", protocol, (short) 3, List.of(
                     member("w1", null, bytes(IncrementalCooperativeConnectProtocol.serializeMetadata(
                         new ExtendedWorkerState("http://w1:8083/", 12, previous), sessioned)),
                         bytes(IncrementalCooperativeConnectProtocol.serializeAssignment(next, sessioned))),
                     member("w2", null, bytes(IncrementalCooperativeConnectProtocol.serializeMetadata(
                         new ExtendedWorkerState("http://w2:8083/", 12, null), sessioned)), new byte[0]))), (short) 3);
        }
        tombstone(out, "group metadata tombstone", new GroupMetadataKey().setGroup("gone"));
        // Forward compatibility as the readers practise it: newer embedded versions, extra trailing
        // bytes, Connect fields missing at the end, Streams version probing, unknown tagged fields.
        emit(out, "group metadata v3, consumer protocol v4 from a newer client", new GroupMetadataKey().setGroup("newer-client"),
             group("consumer", "range", (short) 3, List.of(
                 member("n1", null, newerVersion(consumerSubscription((short) 3, "r")), newerVersion(consumerAssignment((short) 3))))),
             (short) 3);
        emit(out, "group metadata v3, Streams version probing (v12 subscription)", new GroupMetadataKey().setGroup("streams-probing"),
             group("consumer", "stream", (short) 3, List.of(
                 member("p1", null, consumerSubscription((short) 3, null, ByteBuffer.wrap(new byte[] {0, 0, 0, 12, 0, 0, 0, 12, 7, 7, 7})),
                        new byte[0]))), (short) 3);
        byte[] full = bytes(IncrementalCooperativeConnectProtocol.serializeAssignment(new ExtendedAssignment((short) 2, (short) 0,
            "w1", "http://w1:8083/", 12, List.of("c1"), List.of(new ConnectorTaskId("c1", 0)), List.of(), List.of(), 0), true));
        int headerAndFixed = 2 + 2 + (2 + 2) + (2 + 15) + 8;  // version, error, leader "w1", url, config offset
        emit(out, "group metadata v3, Connect sessioned with fields missing at the end and a newer version",
             new GroupMetadataKey().setGroup("connect-short"),
             group("connect", "sessioned", (short) 3, List.of(
                 member("w1", null, bytes(IncrementalCooperativeConnectProtocol.serializeMetadata(
                     new ExtendedWorkerState("http://w1:8083/", 12, null), true)), java.util.Arrays.copyOf(full, headerAndFixed)),
                 member("w2", null, bytes(ConnectProtocol.serializeMetadata(new ConnectProtocol.WorkerState("http://w2:8083/", 12))),
                        newerVersion(full)))), (short) 3);
        GroupMetadataValue tagged = group("consumer", "range", (short) 4, List.of(
            member("t1", null, consumerSubscription((short) 3, null), consumerAssignment((short) 3))));
        tagged.unknownTaggedFields().add(new RawTaggedField(7, new byte[] {1, 2, 3}));
        tagged.members().get(0).unknownTaggedFields().add(new RawTaggedField(3, new byte[] {}));
        emit(out, "group metadata v4 with unknown tagged fields", new GroupMetadataKey().setGroup("tagged"), tagged, (short) 4);
        ConsumerGroupMetadataValue taggedEpoch = new ConsumerGroupMetadataValue().setEpoch(9).setMetadataHash(5);
        taggedEpoch.unknownTaggedFields().add(new RawTaggedField(1, new byte[] {0, 0, 0, 0, 0, 0, 0, 1}));
        emit(out, "consumer group metadata with an unknown tagged field", new ConsumerGroupMetadataKey().setGroupId("cg-tagged"),
             taggedEpoch, (short) 0);

        // -- KIP-848 consumer groups, including what 4.1 no longer writes (type 4) and tagged fields
        emit(out, "consumer group metadata with hash", new ConsumerGroupMetadataKey().setGroupId("cg"),
             new ConsumerGroupMetadataValue().setEpoch(7).setMetadataHash(-1234567890123L), (short) 0);
        emit(out, "consumer group metadata without hash", new ConsumerGroupMetadataKey().setGroupId("cg"),
             new ConsumerGroupMetadataValue().setEpoch(8), (short) 0);
        emit(out, "consumer group partition metadata", new ConsumerGroupPartitionMetadataKey().setGroupId("cg"),
             new ConsumerGroupPartitionMetadataValue().setTopics(List.of(
                 new ConsumerGroupPartitionMetadataValue.TopicMetadata().setTopicId(TOPIC_A).setTopicName("a").setNumPartitions(2)
                     .setPartitionMetadata(List.of(new ConsumerGroupPartitionMetadataValue.PartitionMetadata().setPartition(0)
                         .setRacks(List.of("r1", "r2")))),
                 new ConsumerGroupPartitionMetadataValue.TopicMetadata().setTopicId(TOPIC_B).setTopicName("b").setNumPartitions(1))), (short) 0);
        emit(out, "consumer group member, classic member metadata", new ConsumerGroupMemberMetadataKey().setGroupId("cg").setMemberId("m1"),
             new ConsumerGroupMemberMetadataValue().setInstanceId("i1").setRackId("r1").setClientId("c").setClientHost("/127.0.0.1")
                 .setSubscribedTopicNames(List.of("a", "b")).setRebalanceTimeoutMs(30000).setServerAssignor(null)
                 .setClassicMemberMetadata(new ConsumerGroupMemberMetadataValue.ClassicMemberMetadata().setSessionTimeoutMs(45000)
                     .setSupportedProtocols(List.of(new ConsumerGroupMemberMetadataValue.ClassicProtocol().setName("range")
                         .setMetadata(consumerSubscription((short) 3, null))))), (short) 0);
        emit(out, "consumer group member, regex", new ConsumerGroupMemberMetadataKey().setGroupId("cg").setMemberId("m2"),
             new ConsumerGroupMemberMetadataValue().setClientId("c2").setClientHost("/127.0.0.2").setSubscribedTopicNames(List.of())
                 .setSubscribedTopicRegex("orders-.*").setServerAssignor("uniform"), (short) 0);
        emit(out, "consumer group target assignment epoch", new ConsumerGroupTargetAssignmentMetadataKey().setGroupId("cg"),
             new ConsumerGroupTargetAssignmentMetadataValue().setAssignmentEpoch(7), (short) 0);
        emit(out, "consumer group target member", new ConsumerGroupTargetAssignmentMemberKey().setGroupId("cg").setMemberId("m1"),
             new ConsumerGroupTargetAssignmentMemberValue().setTopicPartitions(List.of(
                 new ConsumerGroupTargetAssignmentMemberValue.TopicPartition().setTopicId(TOPIC_A).setPartitions(List.of(0, 1)),
                 new ConsumerGroupTargetAssignmentMemberValue.TopicPartition().setTopicId(TOPIC_B).setPartitions(List.of()))), (short) 0);
        emit(out, "consumer group current member", new ConsumerGroupCurrentMemberAssignmentKey().setGroupId("cg").setMemberId("m1"),
             new ConsumerGroupCurrentMemberAssignmentValue().setMemberEpoch(7).setPreviousMemberEpoch(6).setState((byte) 1)
                 .setAssignedPartitions(List.of(new ConsumerGroupCurrentMemberAssignmentValue.TopicPartitions().setTopicId(TOPIC_A).setPartitions(List.of(0))))
                 .setPartitionsPendingRevocation(List.of(new ConsumerGroupCurrentMemberAssignmentValue.TopicPartitions().setTopicId(TOPIC_A).setPartitions(List.of(1))))
             , (short) 0);
        emit(out, "consumer group regular expression", new ConsumerGroupRegularExpressionKey().setGroupId("cg").setRegularExpression("orders-.*"),
             new ConsumerGroupRegularExpressionValue().setTopics(List.of("orders-1", "orders-2")).setVersion(3).setTimestamp(1700000000000L), (short) 0);
        tombstone(out, "consumer group member tombstone", new ConsumerGroupMemberMetadataKey().setGroupId("cg").setMemberId("m2"));

        // -- share groups
        emit(out, "share group member", new ShareGroupMemberMetadataKey().setGroupId("sg").setMemberId("s1"),
             new ShareGroupMemberMetadataValue().setRackId(null).setClientId("c").setClientHost("/h").setSubscribedTopicNames(List.of("a")), (short) 0);
        emit(out, "share group metadata", new ShareGroupMetadataKey().setGroupId("sg"),
             new ShareGroupMetadataValue().setEpoch(3).setMetadataHash(99), (short) 0);
        emit(out, "share group target epoch", new ShareGroupTargetAssignmentMetadataKey().setGroupId("sg"),
             new ShareGroupTargetAssignmentMetadataValue().setAssignmentEpoch(3), (short) 0);
        emit(out, "share group target member", new ShareGroupTargetAssignmentMemberKey().setGroupId("sg").setMemberId("s1"),
             new ShareGroupTargetAssignmentMemberValue().setTopicPartitions(List.of(
                 new ShareGroupTargetAssignmentMemberValue.TopicPartition().setTopicId(TOPIC_A).setPartitions(List.of(0, 2)))), (short) 0);
        emit(out, "share group current member", new ShareGroupCurrentMemberAssignmentKey().setGroupId("sg").setMemberId("s1"),
             new ShareGroupCurrentMemberAssignmentValue().setMemberEpoch(3).setPreviousMemberEpoch(2).setState((byte) 0)
                 .setAssignedPartitions(List.of(new ShareGroupCurrentMemberAssignmentValue.TopicPartitions().setTopicId(TOPIC_B).setPartitions(List.of(0)))), (short) 0);
        emit(out, "share group state partition metadata", new ShareGroupStatePartitionMetadataKey().setGroupId("sg"),
             new ShareGroupStatePartitionMetadataValue()
                 .setInitializingTopics(List.of(new ShareGroupStatePartitionMetadataValue.TopicPartitionsInfo().setTopicId(TOPIC_A).setTopicName("a").setPartitions(List.of(1))))
                 .setInitializedTopics(List.of(new ShareGroupStatePartitionMetadataValue.TopicPartitionsInfo().setTopicId(TOPIC_B).setTopicName("b").setPartitions(List.of(0, 1))))
                 .setDeletingTopics(List.of(new ShareGroupStatePartitionMetadataValue.TopicInfo().setTopicId(TOPIC_A).setTopicName("a"))), (short) 0);

        // -- KIP-1071 Streams groups
        emit(out, "streams group metadata", new StreamsGroupMetadataKey().setGroupId("stg"),
             new StreamsGroupMetadataValue().setEpoch(4).setMetadataHash(123456789L), (short) 0);
        emit(out, "streams group member", new StreamsGroupMemberMetadataKey().setGroupId("stg").setMemberId("sm1"),
             new StreamsGroupMemberMetadataValue().setInstanceId(null).setRackId("r").setClientId("c").setClientHost("/h")
                 .setRebalanceTimeoutMs(1000).setTopologyEpoch(2).setProcessId("p-1")
                 .setUserEndpoint(new StreamsGroupMemberMetadataValue.Endpoint().setHost("h1").setPort(65000))
                 .setClientTags(List.of(new StreamsGroupMemberMetadataValue.KeyValue().setKey("zone").setValue("z1"))), (short) 0);
        emit(out, "streams group member without endpoint", new StreamsGroupMemberMetadataKey().setGroupId("stg").setMemberId("sm2"),
             new StreamsGroupMemberMetadataValue().setClientId("c").setClientHost("/h").setProcessId("p-2"), (short) 0);
        emit(out, "streams group target epoch", new StreamsGroupTargetAssignmentMetadataKey().setGroupId("stg"),
             new StreamsGroupTargetAssignmentMetadataValue().setAssignmentEpoch(4), (short) 0);
        emit(out, "streams group target member", new StreamsGroupTargetAssignmentMemberKey().setGroupId("stg").setMemberId("sm1"),
             new StreamsGroupTargetAssignmentMemberValue()
                 .setActiveTasks(List.of(new StreamsGroupTargetAssignmentMemberValue.TaskIds().setSubtopologyId("0").setPartitions(List.of(0, 1))))
                 .setStandbyTasks(List.of(new StreamsGroupTargetAssignmentMemberValue.TaskIds().setSubtopologyId("1").setPartitions(List.of(2))))
                 .setWarmupTasks(List.of()), (short) 0);
        emit(out, "streams group current member", new StreamsGroupCurrentMemberAssignmentKey().setGroupId("stg").setMemberId("sm1"),
             new StreamsGroupCurrentMemberAssignmentValue().setMemberEpoch(4).setPreviousMemberEpoch(3).setState((byte) 2)
                 .setActiveTasks(List.of(new StreamsGroupCurrentMemberAssignmentValue.TaskIds().setSubtopologyId("0").setPartitions(List.of(0))))
                 .setWarmupTasks(List.of(new StreamsGroupCurrentMemberAssignmentValue.TaskIds().setSubtopologyId("0").setPartitions(List.of(3))))
                 .setActiveTasksPendingRevocation(List.of(new StreamsGroupCurrentMemberAssignmentValue.TaskIds().setSubtopologyId("0").setPartitions(List.of(1)))), (short) 0);
        emit(out, "streams group topology", new StreamsGroupTopologyKey().setGroupId("stg"),
             new StreamsGroupTopologyValue().setEpoch(2).setSubtopologies(List.of(
                 new StreamsGroupTopologyValue.Subtopology().setSubtopologyId("0").setSourceTopics(List.of("in"))
                     .setSourceTopicRegex(List.of("in-.*")).setRepartitionSinkTopics(List.of("app-repartition"))
                     .setStateChangelogTopics(List.of(new StreamsGroupTopologyValue.TopicInfo().setName("app-store-changelog")
                         .setTopicConfigs(List.of(new StreamsGroupTopologyValue.TopicConfig().setKey("cleanup.policy").setValue("compact")))))
                     .setRepartitionSourceTopics(List.of(new StreamsGroupTopologyValue.TopicInfo().setName("app-rep").setPartitions(4)
                         .setReplicationFactor((short) 3)))
                     .setCopartitionGroups(List.of(new StreamsGroupTopologyValue.CopartitionGroup().setSourceTopics(List.of((short) 0))
                         .setRepartitionSourceTopics(List.of((short) 0, (short) 1)))))), (short) 0);
        tombstone(out, "streams group topology tombstone", new StreamsGroupTopologyKey().setGroupId("stg"));
    }

    // -- building blocks -------------------------------------------------------------------------------

    private static GroupMetadataValue group(String protocolType, String protocol, short version,
                                            List<GroupMetadataValue.MemberMetadata> members) {
        return new GroupMetadataValue().setProtocolType(protocolType).setGeneration(3 + version).setProtocol(protocol)
            .setLeader(members.get(0).memberId()).setCurrentStateTimestamp(version >= 2 ? 1700000000000L + version : -1)
            .setMembers(members);
    }

    private static GroupMetadataValue.MemberMetadata member(String id, String instanceId, byte[] subscription, byte[] assignment) {
        return new GroupMetadataValue.MemberMetadata().setMemberId(id).setGroupInstanceId(instanceId).setClientId("client-" + id)
            .setClientHost("/127.0.0.1").setRebalanceTimeout(300000).setSessionTimeout(45000)
            .setSubscription(subscription).setAssignment(assignment);
    }

    private static byte[] consumerSubscription(short version, String rack) {
        return consumerSubscription(version, rack, version == 0 ? null : ByteBuffer.wrap("ud".getBytes(StandardCharsets.UTF_8)));
    }

    private static byte[] consumerSubscription(short version, String rack, ByteBuffer userData) {
        Subscription s = new Subscription(List.of("orders", "payments"), userData,
            List.of(new TopicPartition("orders", 1), new TopicPartition("orders", 0), new TopicPartition("payments", 2)),
            version >= 2 ? 4 : -1, Optional.ofNullable(rack));
        return bytes(ConsumerProtocol.serializeSubscription(s, version));
    }

    private static byte[] consumerAssignment(short version) {
        return consumerAssignment(version, version >= 2 ? ByteBuffer.wrap(new byte[] {0, 1}) : null);
    }

    private static byte[] consumerAssignment(short version, ByteBuffer userData) {
        return bytes(ConsumerProtocol.serializeAssignment(new Assignment(
            List.of(new TopicPartition("orders", 0), new TopicPartition("payments", 1), new TopicPartition("orders", 3)), userData), version));
    }

    private static ByteBuffer stickyUserData(boolean withGeneration) throws Exception {
        Method serialize = StickyAssignor.class.getDeclaredMethod("serializeTopicPartitionAssignment", MemberData.class);
        serialize.setAccessible(true);
        ByteBuffer v1 = (ByteBuffer) serialize.invoke(null, new MemberData(
            List.of(new TopicPartition("orders", 2), new TopicPartition("payments", 0)), Optional.of(6)));
        // Kafka no longer writes the V0 layout (no generation): it is V1 without its last int32.
        return withGeneration ? v1 : ByteBuffer.wrap(bytes(v1), 0, v1.remaining() - 4).slice();
    }

    private static ByteBuffer streamsSubscription(int version) {
        Map<TaskId, Long> sums = new LinkedHashMap<>();
        sums.put(new TaskId(0, 0), -2L);
        sums.put(new TaskId(0, 1), 1234L);
        sums.put(new TaskId(1, 3), 0L);
        return new SubscriptionInfo(version, version >= 3 ? 11 : -1,
            new ProcessId(UUID.fromString("6b2d3c8e-0d6c-4f0e-9d55-2f3c7a1e9b10")), version >= 2 ? "host-" + version + ":7070" : null,
            sums, (byte) version, 0, version >= 11 ? ordered("zone", "eu-1", "rack", "r2") : Map.of()).encode();
    }

    private static ByteBuffer streamsAssignment(int version) {
        Map<TaskId, Set<TopicPartition>> standby = new LinkedHashMap<>();
        standby.put(new TaskId(1, 3), Set.of(new TopicPartition("app-store-changelog", 3)));
        // Ordered collections throughout: Map.of and Set.of iterate in a per-JVM random order, which
        // would make the encoded bytes, and so the committed fixture, differ from run to run.
        Map<HostInfo, Set<TopicPartition>> byHost = Map.of(new HostInfo("host-1", 7070),
            new java.util.LinkedHashSet<>(List.of(new TopicPartition("in", 0), new TopicPartition("in", 1))));
        Map<HostInfo, Set<TopicPartition>> standbyByHost = Map.of(new HostInfo("host-2", 7071), Set.of(new TopicPartition("in", 3)));
        AssignmentInfo info = new AssignmentInfo(version, version >= 3 ? 11 : -1, List.of(new TaskId(0, 0), new TaskId(0, 1)),
            standby, version >= 2 ? byHost : Map.of(), version >= 6 ? standbyByHost : Map.of(), 0);
        info.setNextRebalanceTime(version >= 7 ? 1700000600000L : Long.MAX_VALUE);
        return info.encode();
    }

    /** The same bytes as written by a client one version ahead: version + 1, and a field appended. */
    private static byte[] newerVersion(byte[] bytes) {
        byte[] out = java.util.Arrays.copyOf(bytes, bytes.length + 5);
        ByteBuffer.wrap(out).putShort((short) (ByteBuffer.wrap(bytes).getShort() + 1));
        out[bytes.length] = 42;
        return out;
    }

    private static Map<String, String> ordered(String... keysAndValues) {
        Map<String, String> map = new LinkedHashMap<>();
        for (int i = 0; i < keysAndValues.length; i += 2) map.put(keysAndValues[i], keysAndValues[i + 1]);
        return map;
    }

    private static byte[] bytes(ByteBuffer buffer) {
        ByteBuffer b = buffer.duplicate();
        byte[] out = new byte[b.remaining()];
        b.get(out);
        return out;
    }

    private static void emit(PrintStream out, String source, ApiMessage key, ApiMessage value, short version) throws Exception {
        CoordinatorRecord record = CoordinatorRecord.record(key, new ApiMessageAndVersion(value, version));
        write(out, source, SERDE.serializeKey(record), SERDE.serializeValue(record));
    }

    private static void tombstone(PrintStream out, String source, ApiMessage key) throws Exception {
        CoordinatorRecord record = CoordinatorRecord.tombstone(key);
        write(out, source, SERDE.serializeKey(record), null);
    }

    private static void write(PrintStream out, String source, byte[] key, byte[] value) throws Exception {
        ObjectNode node = JSON.createObjectNode();
        node.put("source", "synthesized: " + source);
        node.put("key", Base64.getEncoder().encodeToString(key));
        if (value == null) node.putNull("value");
        else node.put("value", Base64.getEncoder().encodeToString(value));
        out.println(JSON.writeValueAsString(node));
    }
}
