package rebalancemonitor.reference;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Assignment;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.GroupSubscription;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Subscription;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.consumer.RoundRobinAssignor;
import org.apache.kafka.clients.consumer.StickyAssignor;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.Supplier;

/**
 * Kafka's own assignors behind the project's JSON Lines contract (see {@code assignors/codec.py}):
 * one group spec per input line, one answer line per spec, in order. The client-side assignors
 * ({@code range}, {@code roundrobin}, {@code sticky}, {@code cooperative-sticky}) run through
 * {@code ConsumerPartitionAssignor.assign(Cluster, GroupSubscription)}; the server-side (KIP-848)
 * ones ({@code uniform}, {@code server-range}) through the group coordinator's own input classes,
 * see {@link ServerAssignors}.
 *
 * <pre>
 * java -cp '.cache/jars/reference/*' rebalancemonitor.reference.AssignorReference \
 *     [--assignor NAME] [--input PATH|-] [--output PATH|-] [--repeat N] [--warmup W] [--warmup-seconds S]
 * </pre>
 *
 * <p>Timing: {@code elapsed_ms} is the median of {@code --repeat} timed calls of
 * the assign call alone, after {@code --warmup}
 * untimed calls (default: none for a single repetition, otherwise as many as the timed ones, at most
 * 5, like JMH's 5 warm-up iterations) and, with {@code --warmup-seconds S}, further untimed calls
 * until S seconds of warm-up have passed (the benchmark uses this so that the JIT has compiled the
 * assignor before small cells are timed). Every call gets a fresh assignor instance and, for the
 * client assignors, freshly built subscriptions outside the clock: Kafka's sticky assignors keep
 * {@code maxGeneration} across calls (spec section 8) and StickyAssignor reads its userData buffer in
 * place. The server-side assignors change nothing they are given, so their inputs are built once.
 *
 * <p>{@code transferring}: CooperativeStickyAssignor withholds partitions that change owner but does
 * not say who will get them, so each withheld partition (owned by some member in the spec, assigned
 * to no one in the answer) is reported with a {@code null} owner.
 */
public final class AssignorReference {

    private static final ObjectMapper JSON = new ObjectMapper();
    private static final int DEFAULT_GENERATION = -1;

    private AssignorReference() {
    }

    /** A rejected input line; its message names the field, like the Python codec's. */
    static final class SpecException extends Exception {
        SpecException(String message) {
            super(message);
        }
    }

    /** One parsed member, in spec order. */
    record Member(String memberId, String groupInstanceId, String rack, List<String> topics,
                  List<TopicPartition> owned, int generation) {
    }

    /** One parsed line; {@code topicIds} holds the topic ids the spec gives (optional per topic). */
    record Spec(JsonNode id, String assignor, Cluster cluster, Map<String, Integer> partitionCounts,
                Map<String, Uuid> topicIds, List<Member> members) {
    }

    /** One assignor ready to run on one spec. */
    interface Runner {
        /** Fresh inputs for one call, built here, outside the clock; the returned call is what is timed. */
        Supplier<Object> prepare();

        /** The raw result of a call as each member's partitions. */
        Map<String, List<TopicPartition>> partitions(Object raw);
    }

    public static void main(String[] args) throws IOException {
        String assignorOverride = null;
        String input = "-";
        String output = "-";
        int repeat = 1;
        Integer warmup = null;
        double warmupSeconds = 0;
        if (args.length == 1 && args[0].equals("--self-check")) {
            StickyUserData.selfCheck();
            System.out.println("self-check ok");
            return;
        }
        for (int i = 0; i < args.length; i++) {
            String arg = args[i];
            if (arg.equals("--help") || arg.equals("-h")) {
                usage("Kafka's client assignors over JSON Lines group specs (see assignors/codec.py)");
            }
            if (i + 1 >= args.length) {
                usage("missing value for " + arg);
            }
            String value = args[++i];
            switch (arg) {
                case "--assignor" -> assignorOverride = value;
                case "--input" -> input = value;
                case "--output" -> output = value;
                case "--repeat" -> repeat = parsePositive(arg, value, 1);
                case "--warmup" -> warmup = parsePositive(arg, value, 0);
                case "--warmup-seconds" -> warmupSeconds = parsePositive(arg, value, 0);
                default -> usage("unknown option " + arg);
            }
        }
        int warmupRuns = warmup != null ? warmup : (repeat == 1 ? 0 : Math.min(repeat, 5));

        boolean failed = false;
        try (BufferedReader reader = input.equals("-")
                ? new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))
                : Files.newBufferedReader(Path.of(input), StandardCharsets.UTF_8);
             PrintWriter writer = new PrintWriter(new BufferedWriter(output.equals("-")
                     ? new OutputStreamWriter(System.out, StandardCharsets.UTF_8)
                     : Files.newBufferedWriter(Path.of(output), StandardCharsets.UTF_8)))) {
            String line;
            int number = 0;
            while ((line = reader.readLine()) != null) {
                number++;
                if (line.isBlank()) {
                    continue;
                }
                ObjectNode answer = answerLine(line, number, assignorOverride, repeat, warmupRuns, warmupSeconds);
                failed |= answer.has("error");
                writer.println(JSON.writeValueAsString(answer));
                // Flushed per line so that a driver reading through a pipe sees each answer at once.
                writer.flush();
            }
        }
        System.exit(failed ? 1 : 0);
    }

    private static int parsePositive(String option, String value, int min) {
        try {
            int n = Integer.parseInt(value);
            if (n >= min) {
                return n;
            }
        } catch (NumberFormatException ignored) {
            // reported below
        }
        usage(option + " must be an integer >= " + min + ", got " + value);
        return -1;
    }

    private static void usage(String problem) {
        System.err.println("assignor-reference: " + problem);
        System.err.println("usage: AssignorReference [--assignor NAME] [--input PATH|-] [--output PATH|-]"
                + " [--repeat N] [--warmup W] [--warmup-seconds S]");
        System.exit(2);
    }

    static ObjectNode answerLine(String line, int number, String assignorOverride, int repeat, int warmup,
                                 double warmupSeconds) {
        JsonNode root;
        try {
            root = JSON.readTree(line);
        } catch (JsonProcessingException e) {
            return error(null, "line " + number + ": invalid JSON: " + e.getOriginalMessage());
        }
        JsonNode id = root != null && root.isObject() && (root.path("id").isTextual() || root.path("id").isIntegralNumber())
                ? root.get("id") : null;
        try {
            Spec spec = parseSpec(root, assignorOverride);
            Runner runner = ServerAssignors.NAMES.contains(spec.assignor())
                    ? ServerAssignors.runner(spec) : clientRunner(spec);
            // At least `warmup` calls, and more until `warmupSeconds` have passed: a few calls do not
            // get a small cell's code through the JIT, while a large cell needs no more than a few.
            long warmupEnd = System.nanoTime() + (long) (warmupSeconds * 1e9);
            for (int i = 0; i < warmup || System.nanoTime() < warmupEnd; i++) {
                runner.prepare().get();
            }
            long[] nanos = new long[repeat];
            Object result = null;
            for (int i = 0; i < repeat; i++) {
                Supplier<Object> call = runner.prepare();
                long start = System.nanoTime();
                result = call.get();
                nanos[i] = System.nanoTime() - start;
            }
            return answer(id, spec, runner.partitions(result), median(nanos) / 1e6);
        } catch (SpecException e) {
            return error(id, "line " + number + ": " + e.getMessage());
        } catch (RuntimeException e) {
            // Kafka's own failures (IllegalStateException, NullPointerException on the known general-path
            // bug, PartitionAssignorException) are part of what this reference reports.
            return error(id, "line " + number + ": Kafka assignor failed: " + e);
        }
    }

    private static double median(long[] values) {
        long[] sorted = values.clone();
        Arrays.sort(sorted);
        int n = sorted.length;
        return n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0;
    }

    private static ObjectNode error(JsonNode id, String message) {
        ObjectNode out = JSON.createObjectNode();
        out.set("id", id);
        out.put("error", message);
        return out;
    }

    private static Supplier<ConsumerPartitionAssignor> assignorFactory(String name) throws SpecException {
        return switch (name) {
            case "range" -> RangeAssignor::new;
            case "roundrobin" -> RoundRobinAssignor::new;
            case "sticky" -> StickyAssignor::new;
            case "cooperative-sticky" -> CooperativeStickyAssignor::new;
            default -> throw new SpecException("assignor: unknown assignor '" + name
                    + "'; the Java reference knows range, roundrobin, sticky, cooperative-sticky, uniform,"
                    + " server-range");
        };
    }

    private static void checkAssignor(String name) throws SpecException {
        if (!ServerAssignors.NAMES.contains(name)) {
            assignorFactory(name);
        }
    }

    static Runner clientRunner(Spec spec) throws SpecException {
        Supplier<ConsumerPartitionAssignor> factory = assignorFactory(spec.assignor());
        return new Runner() {
            @Override
            public Supplier<Object> prepare() {
                ConsumerPartitionAssignor assignor = factory.get();
                GroupSubscription subscriptions = subscriptions(spec);
                return () -> assignor.assign(spec.cluster(), subscriptions).groupAssignment();
            }

            @Override
            @SuppressWarnings("unchecked")
            public Map<String, List<TopicPartition>> partitions(Object raw) {
                Map<String, List<TopicPartition>> out = new HashMap<>();
                ((Map<String, Assignment>) raw).forEach((member, a) -> out.put(member, a.partitions()));
                return out;
            }
        };
    }

    // --- building Kafka's inputs -----------------------------------------------------------------

    /**
     * A fresh HashMap filled in spec order: the sticky assignors iterate it, and its iteration order
     * (which depends on insertion order within a bucket) is part of the contract (spec section 0.3).
     */
    static GroupSubscription subscriptions(Spec spec) {
        Map<String, Subscription> map = new HashMap<>();
        boolean eagerSticky = spec.assignor().equals("sticky");
        for (Member m : spec.members()) {
            Subscription subscription = new Subscription(
                    m.topics(),
                    eagerSticky ? StickyUserData.encode(m.owned(), m.generation()) : null,
                    m.owned(),
                    m.generation(),
                    Optional.ofNullable(m.rack()));
            subscription.setGroupInstanceId(Optional.ofNullable(m.groupInstanceId()));
            map.put(m.memberId(), subscription);
        }
        return new GroupSubscription(map);
    }

    /**
     * Metadata with one broker per rack, so that a partition's replica racks (KIP-881) are what the
     * assignors see through {@code PartitionInfo.replicas()}. Topics without racks get replicas on a
     * rack-less broker: there is a leader, as in real metadata, but no rack information.
     */
    static Cluster cluster(Map<String, List<List<String>>> racksByTopic, Map<String, Integer> counts) {
        Map<String, Node> rackNodes = new LinkedHashMap<>();
        Node rackless = new Node(0, "broker-0", 9092);
        List<Node> nodes = new ArrayList<>();
        nodes.add(rackless);
        List<PartitionInfo> partitions = new ArrayList<>();
        for (Map.Entry<String, Integer> topic : counts.entrySet()) {
            List<List<String>> racks = racksByTopic.get(topic.getKey());
            for (int p = 0; p < topic.getValue(); p++) {
                Node[] replicas;
                if (racks == null) {
                    replicas = new Node[] {rackless};
                } else {
                    List<String> partitionRacks = racks.get(p);
                    replicas = new Node[partitionRacks.size()];
                    for (int r = 0; r < replicas.length; r++) {
                        replicas[r] = rackNodes.computeIfAbsent(partitionRacks.get(r), rack -> {
                            Node node = new Node(rackNodes.size() + 1, "broker-" + (rackNodes.size() + 1), 9092, rack);
                            nodes.add(node);
                            return node;
                        });
                    }
                }
                Node leader = replicas.length > 0 ? replicas[0] : null;
                partitions.add(new PartitionInfo(topic.getKey(), p, leader, replicas, replicas));
            }
        }
        return new Cluster("reference", nodes, partitions, Collections.emptySet(), Collections.emptySet());
    }

    // --- answers ---------------------------------------------------------------------------------

    static ObjectNode answer(JsonNode id, Spec spec, Map<String, List<TopicPartition>> result, double elapsedMs) {
        ObjectNode out = JSON.createObjectNode();
        out.set("id", id);
        out.put("assignor", spec.assignor());
        ObjectNode assignment = out.putObject("assignment");
        Set<TopicPartition> assigned = new HashSet<>();
        for (Member m : spec.members()) {
            List<TopicPartition> partitions = result.get(m.memberId());
            ArrayNode list = assignment.putArray(m.memberId());
            if (partitions == null) {
                continue; // Kafka always lists every member; an absence shows up as an empty list
            }
            for (TopicPartition tp : partitions) {
                list.addArray().add(tp.topic()).add(tp.partition());
                assigned.add(tp);
            }
        }
        // Withheld = claimed by someone in the spec (and existing) but given to no one this round.
        TreeSet<TopicPartition> withheld = new TreeSet<>(
                Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition));
        for (Member m : spec.members()) {
            for (TopicPartition tp : m.owned()) {
                Integer count = spec.partitionCounts().get(tp.topic());
                if (count != null && tp.partition() < count && !assigned.contains(tp)
                        && subscribedBySomeone(spec, tp.topic())) {
                    withheld.add(tp);
                }
            }
        }
        ArrayNode transferring = out.putArray("transferring");
        for (TopicPartition tp : withheld) {
            transferring.addArray().add(tp.topic()).add(tp.partition()).addNull();
        }
        out.put("elapsed_ms", Math.round(elapsedMs * 10000.0) / 10000.0);
        return out;
    }

    private static boolean subscribedBySomeone(Spec spec, String topic) {
        for (Member m : spec.members()) {
            if (m.topics().contains(topic)) {
                return true;
            }
        }
        return false;
    }

    // --- parsing (the same checks as assignors/codec.py, so both sides reject the same lines) ------

    static Spec parseSpec(JsonNode root, String assignorOverride) throws SpecException {
        if (root == null || !root.isObject()) {
            throw new SpecException("a group spec must be a JSON object");
        }
        rejectUnknown(root, Set.of("id", "assignor", "topics", "members"), "");
        JsonNode idNode = root.get("id");
        if (idNode != null && !idNode.isNull() && !idNode.isTextual() && !idNode.isIntegralNumber()) {
            throw new SpecException("id: must be a string, an integer or null, got " + idNode);
        }
        String assignor = assignorOverride;
        if (assignor == null) {
            JsonNode a = root.get("assignor");
            if (a == null || a.isNull()) {
                throw new SpecException("assignor: missing (give it on the line or with --assignor)");
            }
            if (!a.isTextual()) {
                throw new SpecException("assignor: must be a string, got " + a);
            }
            assignor = a.asText();
        }
        checkAssignor(assignor); // reject unknown names before doing any work

        JsonNode topicsNode = root.get("topics");
        if (topicsNode == null || !topicsNode.isObject()) {
            throw new SpecException("topics: must be an object of topic name -> {\"partitions\": N}, got " + topicsNode);
        }
        Map<String, Integer> counts = new LinkedHashMap<>();
        Map<String, Uuid> topicIds = new HashMap<>();
        Map<Uuid, String> topicOfId = new HashMap<>();
        Map<String, List<List<String>>> racks = new HashMap<>();
        for (Iterator<Map.Entry<String, JsonNode>> it = topicsNode.fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> e = it.next();
            String path = "topics['" + e.getKey() + "']";
            if (e.getKey().isEmpty()) {
                throw new SpecException(path + ": a topic name must not be empty");
            }
            JsonNode t = e.getValue();
            if (!t.isObject()) {
                throw new SpecException(path + ": must be an object like {\"partitions\": 3}, got " + t);
            }
            rejectUnknown(t, Set.of("partitions", "racks", "topic_id"), path);
            JsonNode p = t.get("partitions");
            if (p == null || !p.isIntegralNumber()) {
                throw new SpecException(path + ".partitions: must be an integer, got " + p);
            }
            int n = p.asInt();
            if (n < 0) {
                throw new SpecException(path + ".partitions: partition count " + n + " is negative");
            }
            counts.put(e.getKey(), n);
            JsonNode topicIdNode = t.get("topic_id");
            if (topicIdNode != null && !topicIdNode.isNull()) {
                Uuid topicId = parseTopicId(topicIdNode, path + ".topic_id");
                String other = topicOfId.putIfAbsent(topicId, e.getKey());
                if (other != null) {
                    throw new SpecException(path + ".topic_id: " + topicId + " is already the id of topic '" + other + "'");
                }
                topicIds.put(e.getKey(), topicId);
            }
            JsonNode r = t.get("racks");
            if (r != null && !r.isNull()) {
                if (!r.isArray()) {
                    throw new SpecException(path + ".racks: must be a list (one list of racks per partition)");
                }
                if (r.size() != n) {
                    throw new SpecException(path + ".racks: has " + r.size() + " entries but the topic has "
                            + n + " partitions (give one list of replica racks per partition)");
                }
                List<List<String>> perPartition = new ArrayList<>();
                for (int i = 0; i < n; i++) {
                    JsonNode list = r.get(i);
                    if (!list.isArray()) {
                        throw new SpecException(path + ".racks[" + i + "]: must be a list of rack names");
                    }
                    // Each rack once: a replica set names distinct brokers, and the Python side keeps a set.
                    Set<String> distinct = new TreeSet<>();
                    for (int j = 0; j < list.size(); j++) {
                        JsonNode rack = list.get(j);
                        if (!rack.isTextual() || rack.asText().isEmpty()) {
                            throw new SpecException(path + ".racks[" + i + "][" + j + "]: a rack must be a non-empty string");
                        }
                        distinct.add(rack.asText());
                    }
                    perPartition.add(new ArrayList<>(distinct));
                }
                racks.put(e.getKey(), perPartition);
            }
        }

        JsonNode membersNode = root.get("members");
        if (membersNode == null || !membersNode.isArray()) {
            throw new SpecException("members: must be a list of member objects, got " + membersNode);
        }
        if (membersNode.isEmpty()) {
            throw new SpecException("members: a group needs at least one member");
        }
        List<Member> members = new ArrayList<>();
        Map<String, Integer> memberIndex = new HashMap<>();
        Map<String, Integer> instanceIndex = new HashMap<>();
        for (int i = 0; i < membersNode.size(); i++) {
            Member m = parseMember(membersNode.get(i), "members[" + i + "]");
            Integer previous = memberIndex.putIfAbsent(m.memberId(), i);
            if (previous != null) {
                throw new SpecException("members[" + i + "].member_id: '" + m.memberId()
                        + "' is already used by members[" + previous + "]");
            }
            if (m.groupInstanceId() != null) {
                previous = instanceIndex.putIfAbsent(m.groupInstanceId(), i);
                if (previous != null) {
                    throw new SpecException("members[" + i + "].group_instance_id: '" + m.groupInstanceId()
                            + "' is already used by members[" + previous + "]");
                }
            }
            members.add(m);
        }
        return new Spec(idNode, assignor, cluster(racks, counts), counts, topicIds, members);
    }

    private static Member parseMember(JsonNode node, String path) throws SpecException {
        if (node == null || !node.isObject()) {
            throw new SpecException(path + ": must be an object with member_id and topics, got " + node);
        }
        rejectUnknown(node, Set.of("member_id", "group_instance_id", "rack", "topics", "owned_partitions", "generation"), path);
        String memberId = requiredString(node.get("member_id"), path + ".member_id");
        String instanceId = optionalString(node.get("group_instance_id"), path + ".group_instance_id");
        String rack = optionalString(node.get("rack"), path + ".rack");
        JsonNode topicsNode = node.get("topics");
        if (topicsNode == null || !topicsNode.isArray()) {
            throw new SpecException(path + ".topics: must be a list of topic names, got " + topicsNode);
        }
        List<String> topics = new ArrayList<>();
        Set<String> seen = new HashSet<>();
        for (int j = 0; j < topicsNode.size(); j++) {
            String topic = requiredString(topicsNode.get(j), path + ".topics[" + j + "]");
            if (!seen.add(topic)) {
                throw new SpecException(path + ".topics[" + j + "]: topic '" + topic + "' is listed twice");
            }
            topics.add(topic);
        }
        List<TopicPartition> owned = new ArrayList<>();
        JsonNode ownedNode = node.get("owned_partitions");
        if (ownedNode != null && !ownedNode.isNull()) {
            if (!ownedNode.isArray()) {
                throw new SpecException(path + ".owned_partitions: must be a list of [topic, partition] pairs");
            }
            Set<TopicPartition> ownedSeen = new HashSet<>();
            for (int j = 0; j < ownedNode.size(); j++) {
                String where = path + ".owned_partitions[" + j + "]";
                JsonNode pair = ownedNode.get(j);
                if (!pair.isArray() || pair.size() != 2) {
                    throw new SpecException(where + ": must be a [topic, partition] pair, got " + pair);
                }
                String topic = requiredString(pair.get(0), where);
                if (!pair.get(1).isIntegralNumber()) {
                    throw new SpecException(where + ": partition of topic '" + topic + "' must be an integer");
                }
                int partition = pair.get(1).asInt();
                if (partition < 0) {
                    throw new SpecException(where + ": partition " + partition + " of topic '" + topic + "' is negative");
                }
                TopicPartition tp = new TopicPartition(topic, partition);
                if (!ownedSeen.add(tp)) {
                    throw new SpecException(where + ": partition " + partition + " of topic '" + topic + "' is listed twice");
                }
                owned.add(tp);
            }
        }
        int generation = DEFAULT_GENERATION;
        JsonNode g = node.get("generation");
        if (g != null && !g.isNull()) {
            if (!g.isIntegralNumber()) {
                throw new SpecException(path + ".generation: must be an integer, got " + g);
            }
            generation = g.asInt();
            if (generation < DEFAULT_GENERATION) {
                throw new SpecException(path + ".generation: " + generation
                        + " is invalid (generations start at 0; -1 means unknown)");
            }
        }
        return new Member(memberId, instanceId, rack, topics, owned, generation);
    }

    /** Kafka's own string form of a Uuid (22 characters of URL-safe base64), canonical and not reserved. */
    private static Uuid parseTopicId(JsonNode node, String path) throws SpecException {
        if (!node.isTextual()) {
            throw new SpecException(path + ": must be a string (Kafka's base64 topic id), got " + node);
        }
        String text = node.asText();
        Uuid id;
        try {
            id = Uuid.fromString(text);
        } catch (IllegalArgumentException e) {
            throw new SpecException(path + ": '" + text + "' is not a Kafka topic id (22 characters of URL-safe base64)");
        }
        if (!id.toString().equals(text)) {
            throw new SpecException(path + ": '" + text + "' is not a Kafka topic id in canonical form (expected '" + id + "')");
        }
        if (Uuid.RESERVED.contains(id)) {
            throw new SpecException(path + ": '" + text + "' is a reserved id, never a topic's");
        }
        return id;
    }

    private static void rejectUnknown(JsonNode node, Set<String> allowed, String path) throws SpecException {
        List<String> unknown = new ArrayList<>();
        node.fieldNames().forEachRemaining(name -> {
            if (!allowed.contains(name)) {
                unknown.add(name);
            }
        });
        if (!unknown.isEmpty()) {
            Collections.sort(unknown);
            throw new SpecException((path.isEmpty() ? "" : path + ": ") + "unknown field(s) " + unknown
                    + "; allowed: " + new TreeSet<>(allowed));
        }
    }

    private static String requiredString(JsonNode node, String path) throws SpecException {
        if (node == null || !node.isTextual() || node.asText().isEmpty()) {
            throw new SpecException(path + ": must be a non-empty string, got " + node);
        }
        return node.asText();
    }

    private static String optionalString(JsonNode node, String path) throws SpecException {
        if (node == null || node.isNull()) {
            return null;
        }
        return requiredString(node, path);
    }
}
