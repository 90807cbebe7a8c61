package rebalancemonitor.coordinatorreference;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Subscription;
import org.apache.kafka.clients.consumer.StickyAssignor;
import org.apache.kafka.clients.consumer.internals.AbstractStickyAssignor.MemberData;
import org.apache.kafka.clients.consumer.internals.ConsumerProtocol;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.message.ConsumerProtocolAssignment;
import org.apache.kafka.common.message.ConsumerProtocolAssignmentJsonConverter;
import org.apache.kafka.common.message.ConsumerProtocolSubscription;
import org.apache.kafka.common.message.ConsumerProtocolSubscriptionJsonConverter;
import org.apache.kafka.connect.runtime.distributed.ConnectProtocol;
import org.apache.kafka.connect.runtime.distributed.ConnectProtocolCompatibility;
import org.apache.kafka.connect.runtime.distributed.ExtendedAssignment;
import org.apache.kafka.connect.runtime.distributed.ExtendedWorkerState;
import org.apache.kafka.connect.runtime.distributed.IncrementalCooperativeConnectProtocol;
import org.apache.kafka.connect.util.ConnectorTaskId;
import org.apache.kafka.coordinator.common.runtime.CoordinatorRecord;
import org.apache.kafka.coordinator.group.GroupCoordinatorRecordSerde;
import org.apache.kafka.coordinator.group.generated.CoordinatorRecordJsonConverters;
import org.apache.kafka.coordinator.group.generated.GroupMetadataValue;
import org.apache.kafka.server.common.ApiMessageAndVersion;
import org.apache.kafka.streams.processor.TaskId;
import org.apache.kafka.streams.processor.internals.assignment.AssignmentInfo;
import org.apache.kafka.streams.processor.internals.assignment.SubscriptionInfo;
import org.apache.kafka.streams.state.HostInfo;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * Kafka 4.1.1's own decoding of {@code __consumer_offsets} records, as JSON Lines.
 *
 * <p>Decode (default): each input line is {@code {"key": base64, "value": base64 or null}}; each
 * output line is {@code {"type", "key", "version", "value", "members"}} where key and value are what
 * Kafka's generated {@code CoordinatorRecordJsonConverters} write, and "members" (type 2 only) holds,
 * per member, what the member's leader would decode from its protocol bytes: the consumer protocol
 * ({@code ConsumerProtocol} + generated JSON converters; {@code StickyAssignor}'s user data; Kafka
 * Streams' {@code SubscriptionInfo}/{@code AssignmentInfo}) or Connect's ({@code ConnectProtocol},
 * {@code IncrementalCooperativeConnectProtocol}). A record Kafka refuses gives {@code {"error": msg}}.
 *
 * <p>Benchmark: {@code --bench FILE SECONDS} decodes the records of FILE (the same JSON Lines) in a
 * loop, the coordinator serde plus the consumer protocol of type-2 members (what the Python decoder
 * does), after a warm-up of the same length, and prints {@code {"records_per_s": ...}}.
 */
public final class CoordinatorReference {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final GroupCoordinatorRecordSerde SERDE = new GroupCoordinatorRecordSerde();

    private CoordinatorReference() { }

    public static void main(String[] args) throws Exception {
        if (args.length == 3 && args[0].equals("--bench")) {
            bench(Path.of(args[1]), Double.parseDouble(args[2]));
            return;
        }
        if (args.length == 1 && args[0].equals("--synthesize")) {
            Synthesized.print(System.out);
            return;
        }
        if (args.length > 1 && args[0].equals("--member")) {
            RealMembers.run(Arrays.copyOfRange(args, 1, args.length));
            return;
        }
        if (args.length > 0) {
            System.err.println("usage: CoordinatorReference < records.jsonl   |   --bench FILE SECONDS   |   --synthesize"
                               + "   |   --member consumer|streams ...");
            System.exit(2);
        }
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) continue;
            JsonNode input = JSON.readTree(line);
            out.println(JSON.writeValueAsString(decodeToJson(bytes(input, "key"), bytes(input, "value"))));
        }
        out.flush();
    }

    private static byte[] bytes(JsonNode node, String field) {
        JsonNode v = node.get(field);
        return v == null || v.isNull() ? null : Base64.getDecoder().decode(v.asText());
    }

    static ObjectNode decodeToJson(byte[] key, byte[] value) {
        ObjectNode result = JSON.createObjectNode();
        CoordinatorRecord record;
        try {
            record = SERDE.deserialize(ByteBuffer.wrap(key), value == null ? null : ByteBuffer.wrap(value));
        } catch (RuntimeException e) {
            result.put("error", String.valueOf(e.getMessage()));
            return result;
        }
        result.put("type", record.key().apiKey());
        result.set("key", CoordinatorRecordJsonConverters.writeRecordKeyAsJson(record.key()));
        ApiMessageAndVersion v = record.value();
        if (v == null) {
            result.putNull("version");
            result.putNull("value");
            return result;
        }
        result.put("version", v.version());
        result.set("value", CoordinatorRecordJsonConverters.writeRecordValueAsJson(v.message(), v.version()));
        if (v.message() instanceof GroupMetadataValue group) {
            ArrayNode members = result.putArray("members");
            for (GroupMetadataValue.MemberMetadata m : group.members()) {
                members.add(member(group.protocolType(), group.protocol(), m));
            }
        }
        return result;
    }

    /** What the group's leader (and the member itself) decodes from one member's protocol bytes. */
    private static ObjectNode member(String protocolType, String protocol, GroupMetadataValue.MemberMetadata m) {
        ObjectNode node = JSON.createObjectNode();
        node.put("memberId", m.memberId());
        try {
            if (protocolType.equals("consumer")) {
                if (m.subscription().length > 0) node.set("subscription", consumerSubscription(m.subscription(), protocol));
                if (m.assignment().length > 0) node.set("assignment", consumerAssignment(m.assignment(), protocol));
            } else if (protocolType.equals("connect") && connectProtocolKnown(protocol)) {
                if (m.subscription().length > 0) node.set("subscription", connectMetadata(m.subscription(), protocol));
                if (m.assignment().length > 0) node.set("assignment", connectAssignment(m.assignment(), protocol));
            }
        } catch (RuntimeException e) {
            node.put("error", e.getClass().getSimpleName() + ": " + e.getMessage());
        }
        return node;
    }

    // -- the consumer protocol -----------------------------------------------------------------------

    private static ObjectNode consumerSubscription(byte[] bytes, String protocol) {
        ByteBuffer buffer = ByteBuffer.wrap(bytes);
        short version = ConsumerProtocol.deserializeVersion(buffer);
        ConsumerProtocolSubscription data = ConsumerProtocol.deserializeConsumerProtocolSubscription(buffer, version);
        short readAs = (short) Math.min(version, ConsumerProtocolSubscription.HIGHEST_SUPPORTED_VERSION);
        ObjectNode node = (ObjectNode) ConsumerProtocolSubscriptionJsonConverter.write(data, readAs);
        node.put("version", version);
        ByteBuffer userData = data.userData();
        if (userData != null && userData.hasRemaining()) {
            if ("sticky".equals(protocol)) {
                node.set("sticky", sticky(ConsumerProtocol.deserializeSubscription(ByteBuffer.wrap(bytes))));
            } else if ("stream".equals(protocol)) {
                node.set("streams", streamsSubscription(SubscriptionInfo.decode(userData.duplicate())));
            }
        }
        return node;
    }

    private static ObjectNode consumerAssignment(byte[] bytes, String protocol) {
        ByteBuffer buffer = ByteBuffer.wrap(bytes);
        short version = ConsumerProtocol.deserializeVersion(buffer);
        ConsumerProtocolAssignment data = ConsumerProtocol.deserializeConsumerProtocolAssignment(buffer, version);
        short readAs = (short) Math.min(version, ConsumerProtocolAssignment.HIGHEST_SUPPORTED_VERSION);
        ObjectNode node = (ObjectNode) ConsumerProtocolAssignmentJsonConverter.write(data, readAs);
        node.put("version", version);
        ByteBuffer userData = data.userData();
        if (userData != null && userData.hasRemaining() && "stream".equals(protocol)) {
            node.set("streams", streamsAssignment(AssignmentInfo.decode(userData.duplicate())));
        }
        return node;
    }

    /** StickyAssignor's memberData is protected: a subclass reaches it, exactly as the leader runs it. */
    private static final class StickyProbe extends StickyAssignor {
        MemberData of(Subscription subscription) {
            return memberData(subscription);
        }
    }

    private static ObjectNode sticky(Subscription subscription) {
        MemberData data = new StickyProbe().of(subscription);
        ObjectNode node = JSON.createObjectNode();
        node.set("partitions", topicPartitions(data.partitions));
        if (data.generation.isPresent()) node.put("generation", data.generation.get());
        else node.putNull("generation");
        return node;
    }

    // -- Kafka Streams -------------------------------------------------------------------------------

    private static ObjectNode streamsSubscription(SubscriptionInfo info) {
        ObjectNode node = JSON.createObjectNode();
        node.put("version", info.version());
        node.put("latestSupportedVersion", info.latestSupportedVersion());
        if (info.version() > 11) return node;  // Streams reads nothing else of a newer version
        node.put("processId", info.processId().id().toString());
        node.put("userEndPoint", info.userEndPoint());
        node.put("errorCode", info.errorCode());
        ObjectNode sums = node.putObject("taskOffsetSums");
        new TreeMap<>(info.taskOffsetSums()).forEach((task, sum) -> sums.put(task(task), sum));
        node.set("prevTasks", tasks(info.prevTasks()));
        node.set("standbyTasks", tasks(info.standbyTasks()));
        ObjectNode tags = node.putObject("clientTags");
        new TreeMap<>(info.clientTags()).forEach(tags::put);
        return node;
    }

    private static ObjectNode streamsAssignment(AssignmentInfo info) {
        ObjectNode node = JSON.createObjectNode();
        node.put("version", info.version());
        node.put("commonlySupportedVersion", info.commonlySupportedVersion());
        ArrayNode active = node.putArray("activeTasks");
        info.activeTasks().forEach(t -> active.add(task(t)));
        ObjectNode standby = node.putObject("standbyTasks");
        new TreeMap<>(info.standbyTasks()).forEach((t, tps) -> standby.set(task(t), topicPartitions(tps)));
        node.set("partitionsByHost", hosts(info.partitionsByHost()));
        node.set("standbyPartitionsByHost", hosts(info.standbyPartitionByHost()));
        node.put("errorCode", info.errCode());
        node.put("nextRebalanceMs", info.nextRebalanceMs());
        return node;
    }

    private static String task(TaskId t) {
        return (t.topologyName() == null ? "" : t.topologyName() + "__") + t.subtopology() + "_" + t.partition();
    }

    private static ArrayNode tasks(Set<TaskId> tasks) {
        ArrayNode node = JSON.createArrayNode();
        tasks.stream().map(CoordinatorReference::task).sorted().forEach(node::add);
        return node;
    }

    private static ObjectNode hosts(Map<HostInfo, Set<TopicPartition>> byHost) {
        ObjectNode node = JSON.createObjectNode();
        TreeMap<String, Set<TopicPartition>> sorted = new TreeMap<>();
        byHost.forEach((h, tps) -> sorted.put(h.host() + ":" + h.port(), tps));
        sorted.forEach((h, tps) -> node.set(h, topicPartitions(tps)));
        return node;
    }

    private static ArrayNode topicPartitions(Collection<TopicPartition> partitions) {
        ArrayNode node = JSON.createArrayNode();
        partitions.stream().map(tp -> tp.topic() + "-" + tp.partition()).sorted().forEach(node::add);
        return node;
    }

    // -- Kafka Connect -------------------------------------------------------------------------------

    /** Connect's own choice of reader (WorkerCoordinator): by protocol name, case-insensitively. */
    private static boolean connectProtocolKnown(String protocol) {
        try {
            ConnectProtocolCompatibility.fromProtocol(protocol);
            return true;
        } catch (IllegalArgumentException e) {
            return false;  // a group of protocol type connect with a protocol Connect does not know
        }
    }

    private static boolean eager(String protocol) {
        return ConnectProtocolCompatibility.fromProtocol(protocol) == ConnectProtocolCompatibility.EAGER;
    }

    private static ObjectNode connectMetadata(byte[] bytes, String protocol) {
        ObjectNode node = JSON.createObjectNode();
        node.put("version", ByteBuffer.wrap(bytes).getShort());
        if (eager(protocol)) {
            ConnectProtocol.WorkerState state = ConnectProtocol.deserializeMetadata(ByteBuffer.wrap(bytes));
            node.put("url", state.url());
            node.put("configOffset", state.offset());
        } else {
            ExtendedWorkerState state = IncrementalCooperativeConnectProtocol.deserializeMetadata(ByteBuffer.wrap(bytes));
            node.put("url", state.url());
            node.put("configOffset", state.offset());
            ExtendedAssignment allocation = state.assignment();
            // A null allocation in the bytes becomes Kafka's shared empty() placeholder, which Kafka
            // itself recognises by reference (IncrementalCooperativeConnectProtocol.serializeAssignment).
            if (allocation == null || allocation == ExtendedAssignment.empty()) node.putNull("allocation");
            else node.set("allocation", connectAssignmentNode(allocation, allocation.version()));
        }
        return node;
    }

    private static ObjectNode connectAssignment(byte[] bytes, String protocol) {
        if (eager(protocol)) {
            ConnectProtocol.Assignment a = ConnectProtocol.deserializeAssignment(ByteBuffer.wrap(bytes));
            return connectAssignmentNode(a, ByteBuffer.wrap(bytes).getShort());
        }
        ExtendedAssignment a = IncrementalCooperativeConnectProtocol.deserializeAssignment(ByteBuffer.wrap(bytes));
        return connectAssignmentNode(a, a.version());
    }

    private static ObjectNode connectAssignmentNode(ConnectProtocol.Assignment a, short version) {
        ObjectNode node = JSON.createObjectNode();
        node.put("version", version);
        node.put("error", a.error());
        node.put("leader", a.leader());
        node.put("leaderUrl", a.leaderUrl());
        node.put("configOffset", a.offset());
        node.set("connectors", strings(a.connectors()));
        node.set("tasks", connectorTasks(a.tasks()));
        if (a instanceof ExtendedAssignment e) {
            node.set("revokedConnectors", strings(e.revokedConnectors()));
            node.set("revokedTasks", connectorTasks(e.revokedTasks()));
            node.put("delay", e.delay());
        }
        return node;
    }

    private static ArrayNode strings(Collection<String> values) {
        ArrayNode node = JSON.createArrayNode();
        values.stream().sorted().forEach(node::add);
        return node;
    }

    private static ArrayNode connectorTasks(Collection<ConnectorTaskId> tasks) {
        ArrayNode node = JSON.createArrayNode();
        tasks.stream().map(t -> t.connector() + "-" + t.task()).sorted().forEach(node::add);
        return node;
    }

    // -- benchmark -----------------------------------------------------------------------------------

    private static void bench(Path file, double seconds) throws Exception {
        List<byte[][]> records = new ArrayList<>();
        for (String line : Files.readAllLines(file, StandardCharsets.UTF_8)) {
            if (line.isBlank()) continue;
            JsonNode input = JSON.readTree(line);
            records.add(new byte[][] {bytes(input, "key"), bytes(input, "value")});
        }
        long sink = 0;
        double[] rates = new double[2];
        double cpuRate = 0;
        // CPU time of this thread as well as wall time: on a shared machine the wall clock also
        // counts the time other processes held the core.
        java.lang.management.ThreadMXBean threads = java.lang.management.ManagementFactory.getThreadMXBean();
        for (int round = 0; round < 2; round++) {  // round 0 warms the JIT up
            long decoded = 0;
            long start = System.nanoTime();
            long cpuStart = threads.getCurrentThreadCpuTime();
            long deadline = start + (long) (seconds * 1e9);
            while (System.nanoTime() < deadline) {
                for (byte[][] r : records) {
                    sink += decodeForBench(r[0], r[1]);
                }
                decoded += records.size();
            }
            rates[round] = decoded / ((System.nanoTime() - start) / 1e9);
            cpuRate = decoded / ((threads.getCurrentThreadCpuTime() - cpuStart) / 1e9);
        }
        ObjectNode result = JSON.createObjectNode();
        result.put("records", records.size());
        result.put("warmup_records_per_s", rates[0]);
        result.put("records_per_s", rates[1]);
        result.put("records_per_cpu_s", cpuRate);
        result.put("checksum", sink);
        System.out.println(JSON.writeValueAsString(result));
    }

    private static long decodeForBench(byte[] key, byte[] value) {
        CoordinatorRecord record = SERDE.deserialize(ByteBuffer.wrap(key), value == null ? null : ByteBuffer.wrap(value));
        ApiMessageAndVersion v = record.value();
        if (v != null && v.message() instanceof GroupMetadataValue group && group.protocolType().equals("consumer")) {
            long n = 0;
            for (GroupMetadataValue.MemberMetadata m : group.members()) {
                if (m.subscription().length > 0) n += ConsumerProtocol.deserializeSubscription(ByteBuffer.wrap(m.subscription())).topics().size();
                if (m.assignment().length > 0) n += ConsumerProtocol.deserializeAssignment(ByteBuffer.wrap(m.assignment())).partitions().size();
            }
            return n;
        }
        return v == null ? 0 : v.version();
    }
}
