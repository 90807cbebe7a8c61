package rebalancemonitor.streamsreference;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.common.utils.Utils;
import org.apache.kafka.streams.processor.TaskId;
import org.apache.kafka.streams.processor.assignment.AssignmentConfigs;
import org.apache.kafka.streams.processor.assignment.ProcessId;
import org.apache.kafka.streams.processor.internals.TopologyMetadata.Subtopology;
import org.apache.kafka.streams.processor.internals.assignment.ClientState;
import org.apache.kafka.streams.processor.internals.assignment.FallbackPriorTaskAssignor;
import org.apache.kafka.streams.processor.internals.assignment.HighAvailabilityTaskAssignor;
import org.apache.kafka.streams.processor.internals.assignment.LegacyTaskAssignor;
import org.apache.kafka.streams.processor.internals.assignment.RackAwareTaskAssignor;
import org.apache.kafka.streams.processor.internals.assignment.SubscriptionInfo;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.SortedMap;
import java.util.SortedSet;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;

/**
 * Kafka Streams' {@code HighAvailabilityTaskAssignor} (and, for lines with {@code "kind":"connect"},
 * Kafka Connect's {@code IncrementalCooperativeAssignor}, see {@link ConnectReference}) over JSON Lines
 * specs: one spec per input line, one answer line per spec, in order. The JSON shapes are described in
 * docs/streams-connect-reference.md.
 *
 * <pre>
 * java -cp '.cache/jars/streams-reference/*' rebalancemonitor.streamsreference.StreamsReference \
 *     [--input PATH|-] [--output PATH|-] [--repeat N] [--warmup W]
 * </pre>
 *
 * <p>The answer comes from Kafka's real {@code assign(...)} call. That call keeps the warm-up
 * replicas it places in a local map and hands them to the clients as plain standbys, so to tell the
 * two apart a second, untimed run <em>replays</em> the body of {@code assign} step by step through the
 * same Kafka methods (reached by reflection: they are private or package-private) with a warm-up map
 * of our own. The replay must end in exactly the state the real call produced, or the line is
 * answered with an error: a Kafka release that changes {@code assign} then shows up at once instead of
 * giving a wrong warm-up split.
 *
 * <p>Kafka records only the warm-ups of <em>active</em> movements in that map: a standby movement that
 * keeps the old copy as a warm-up (budget left) records nothing anywhere, so those copies are
 * reported under {@code standby_tasks}. {@code warmup_tasks} are the recorded ones, and
 * {@code warmups_granted} counts all warm-ups the shared budget paid for (read off the budget counter,
 * which Kafka decrements on every attempt).
 *
 * <p>A spec whose clients report offset sums but that has no {@code task_end_offset_sums} is the case
 * where the leader could not fetch the changelog end offsets: {@code StreamsPartitionAssignor} then sets
 * every end offset sum to {@code UNKNOWN_OFFSET_SUM} and runs {@code FallbackPriorTaskAssignor}, and so
 * does this reference ({@code "fallback_used": true} in the answer). The task sets handed to the assignors
 * are built with the containers {@code StreamsPartitionAssignor} builds them with (see
 * {@link #kafkaTaskSets}), because the fallback walks them.
 *
 * <p>Timing: {@code elapsed_ms} is the median of {@code --repeat} timed {@code assign} calls, after
 * {@code --warmup} untimed ones (default: none for one repetition, otherwise as many as the timed
 * ones, at most 5). Every call gets freshly built client states outside the clock, because
 * {@code assign} writes its answer into them.
 */
public final class StreamsReference {

    static final ObjectMapper JSON = new ObjectMapper();

    private StreamsReference() {
    }

    /** A rejected input line; the message names the field at fault. */
    static final class SpecException extends Exception {
        SpecException(String message) {
            super(message);
        }
    }

    /** One client of a spec, as given (lags are turned into a ClientState per run). */
    record Client(String id, ProcessId processId, int capacity, Map<TaskId, Long> lags,
                  Map<TaskId, Long> offsetSums, Map<String, String> tags) {
    }

    record StreamsSpec(JsonNode id, List<Client> clients, Set<TaskId> statefulTasks, Set<TaskId> allTasks,
                       Map<TaskId, Long> endOffsetSums, boolean endOffsetsMissing, AssignmentConfigs configs,
                       long nowMs) {
    }

    /** What assign() left in the client states, plus the warm-ups that only the replay knows. */
    record Outcome(Map<ProcessId, SortedSet<TaskId>> active, Map<ProcessId, SortedSet<TaskId>> standby,
                   Map<ProcessId, Set<TaskId>> warmups, boolean probing, int warmupsGranted) {
    }

    public static void main(String[] args) throws IOException {
        String input = "-";
        String output = "-";
        int repeat = 1;
        Integer warmup = null;
        for (int i = 0; i < args.length; i++) {
            String arg = args[i];
            if (arg.equals("--help") || arg.equals("-h")) {
                usage("Kafka Streams' HA task assignor and Connect's incremental assignor over JSON Lines"
                        + " (docs/streams-connect-reference.md)");
            }
            if (i + 1 >= args.length) {
                usage("missing value for " + arg);
            }
            String value = args[++i];
            switch (arg) {
                case "--input" -> input = value;
                case "--output" -> output = value;
                case "--repeat" -> repeat = parseInt(arg, value, 1);
                case "--warmup" -> warmup = parseInt(arg, value, 0);
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
                ObjectNode answer = answerLine(line, number, repeat, warmupRuns);
                failed |= answer.has("error");
                writer.println(JSON.writeValueAsString(answer));
                // Per line, so that a driver reading a pipe sees each answer at once.
                writer.flush();
            }
        }
        System.exit(failed ? 1 : 0);
    }

    static int parseInt(String option, String value, int min) {
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

    static void usage(String problem) {
        System.err.println("streams-reference: " + problem);
        System.err.println("usage: StreamsReference [--input PATH|-] [--output PATH|-] [--repeat N] [--warmup W]");
        System.exit(2);
    }

    static ObjectNode answerLine(String line, int number, int repeat, int warmup) {
        JsonNode root;
        try {
            root = JSON.readTree(line);
        } catch (JsonProcessingException e) {
            return error(null, "line " + number + ": invalid JSON: " + e.getOriginalMessage());
        }
        JsonNode id = root != null && root.isObject() && (root.path("id").isTextual() || root.path("id").isIntegralNumber())
                ? root.get("id") : null;
        try {
            if (root == null || !root.isObject()) {
                throw new SpecException("a spec must be a JSON object");
            }
            String kind = root.path("kind").asText("streams");
            if (kind.equals("connect")) {
                return ConnectReference.answer(id, root, repeat, warmup);
            }
            if (kind.equals("java_hash")) {
                return JavaHashReference.answer(id, root);
            }
            if (!kind.equals("streams")) {
                throw new SpecException("kind must be \"streams\", \"connect\" or \"java_hash\", got \"" + kind + "\"");
            }
            return streamsAnswer(id, parseStreams(root), repeat, warmup);
        } catch (SpecException e) {
            return error(id, "line " + number + ": " + e.getMessage());
        } catch (RuntimeException e) {
            // Kafka's own exceptions (IllegalStateException for an impossible movement, ...) are an
            // answer too: the caller compares them with ours.
            return error(id, "line " + number + ": " + e.getClass().getSimpleName() + ": " + e.getMessage());
        }
    }

    static ObjectNode error(JsonNode id, String message) {
        ObjectNode out = JSON.createObjectNode();
        out.set("id", id);
        out.put("error", message);
        return out;
    }

    // --- Streams spec -------------------------------------------------------------------------------

    static TaskId task(String text, String where) throws SpecException {
        int cut = text.indexOf('_');
        try {
            if (cut > 0 && text.indexOf('_', cut + 1) < 0) {
                return new TaskId(Integer.parseInt(text.substring(0, cut)), Integer.parseInt(text.substring(cut + 1)));
            }
        } catch (NumberFormatException ignored) {
            // reported below
        }
        throw new SpecException(where + ": task id \"" + text + "\" is not of the form <subtopology>_<partition>");
    }

    static Map<TaskId, Long> taskLongs(JsonNode node, String where) throws SpecException {
        if (!node.isObject()) {
            throw new SpecException(where + " must be an object of task id -> integer");
        }
        Map<TaskId, Long> out = new HashMap<>();
        for (Iterator<Map.Entry<String, JsonNode>> it = node.fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> e = it.next();
            if (!e.getValue().isIntegralNumber()) {
                throw new SpecException(where + "[" + e.getKey() + "] must be an integer");
            }
            out.put(task(e.getKey(), where), e.getValue().asLong());
        }
        return out;
    }

    static Set<TaskId> taskSet(JsonNode node, String where) throws SpecException {
        Set<TaskId> out = new HashSet<>();
        if (node.isMissingNode() || node.isNull()) {
            return out;
        }
        if (!node.isArray()) {
            throw new SpecException(where + " must be a list of task ids");
        }
        for (JsonNode t : node) {
            if (!out.add(task(t.asText(), where))) {
                throw new SpecException(where + " lists " + t.asText() + " twice");
            }
        }
        return out;
    }

    static StreamsSpec parseStreams(JsonNode root) throws SpecException {
        JsonNode clientsNode = root.path("clients");
        if (!clientsNode.isArray() || clientsNode.isEmpty()) {
            throw new SpecException("clients must be a non-empty list");
        }
        Set<TaskId> stateful = taskSet(root.path("stateful_tasks"), "stateful_tasks");
        Set<TaskId> stateless = taskSet(root.path("stateless_tasks"), "stateless_tasks");
        for (TaskId t : stateless) {
            if (stateful.contains(t)) {
                throw new SpecException("task " + t + " is both stateful and stateless");
            }
        }
        Map<TaskId, Long> ends = root.hasNonNull("task_end_offset_sums")
                ? taskLongs(root.get("task_end_offset_sums"), "task_end_offset_sums") : null;

        List<Client> clients = new ArrayList<>();
        Set<ProcessId> seen = new HashSet<>();
        boolean offsetClients = false;
        for (JsonNode c : clientsNode) {
            String pid = c.path("process_id").asText(null);
            if (pid == null) {
                throw new SpecException("every client needs a process_id");
            }
            ProcessId processId;
            try {
                processId = new ProcessId(UUID.fromString(pid));
            } catch (IllegalArgumentException e) {
                // Kafka keys clients by a UUID; ids that are not UUIDs only exist on our side.
                throw new SpecException("client " + pid + ": process_id must be a UUID for Kafka's ProcessId");
            }
            if (!seen.add(processId)) {
                throw new SpecException("client " + pid + " appears twice");
            }
            int capacity = c.path("capacity").asInt(1);
            if (capacity < 1) {
                throw new SpecException("client " + pid + ": capacity must be >= 1");
            }
            Map<TaskId, Long> lags = null;
            Map<TaskId, Long> offsets = Map.of();
            if (c.hasNonNull("task_lags")) {
                lags = taskLongs(c.get("task_lags"), "client " + pid + " task_lags");
                for (TaskId t : stateful) {
                    if (!lags.containsKey(t)) {
                        throw new SpecException("client " + pid + " gives task_lags but none for stateful task " + t);
                    }
                }
            } else {
                offsetClients = true;
                if (c.hasNonNull("task_offset_sums")) {
                    offsets = taskLongs(c.get("task_offset_sums"), "client " + pid + " task_offset_sums");
                }
            }
            Map<String, String> tags = new TreeMap<>();
            for (Iterator<Map.Entry<String, JsonNode>> it = c.path("tags").fields(); it.hasNext(); ) {
                Map.Entry<String, JsonNode> e = it.next();
                tags.put(e.getKey(), e.getValue().asText());
            }
            clients.add(new Client(pid, processId, capacity, lags, offsets, tags));
        }
        if (ends != null) {
            for (TaskId t : stateful) {
                if (!ends.containsKey(t)) {
                    throw new SpecException("task_end_offset_sums has no end offset sum for stateful task " + t);
                }
            }
        }
        JsonNode cfg = root.path("config");
        List<String> tagKeys = new ArrayList<>();
        for (JsonNode k : cfg.path("rack_aware_assignment_tags")) {
            tagKeys.add(k.asText());
        }
        // The HA assignor's traffic and non-overlap cost defaults (10 / 1); with the strategy "none"
        // they are never read.
        AssignmentConfigs configs = new AssignmentConfigs(
                cfg.path("acceptable_recovery_lag").asLong(10_000L),
                cfg.path("max_warmup_replicas").asInt(2),
                cfg.path("num_standby_replicas").asInt(0),
                cfg.path("probing_rebalance_interval_ms").asLong(600_000L),
                tagKeys,
                HighAvailabilityTaskAssignor.DEFAULT_HIGH_AVAILABILITY_TRAFFIC_COST,
                HighAvailabilityTaskAssignor.DEFAULT_HIGH_AVAILABILITY_NON_OVERLAP_COST,
                "none");
        // The fetch of end offsets failed: StreamsPartitionAssignor sets every end offset sum to
        // UNKNOWN_OFFSET_SUM, and the lags it computes from them are unknown too.
        boolean missing = ends == null && offsetClients && !stateful.isEmpty();
        Map<TaskId, Long> endsForStateful = new HashMap<>();
        for (TaskId t : stateful) {
            if (ends != null) {
                endsForStateful.put(t, ends.get(t));
            } else if (missing) {
                endsForStateful.put(t, SubscriptionInfo.UNKNOWN_OFFSET_SUM);
            }
        }
        Set<TaskId>[] sets = kafkaTaskSets(stateful, stateless);
        return new StreamsSpec(root.get("id"), clients, sets[1], sets[0], endsForStateful, missing, configs,
                root.path("now_ms").asLong(0));
    }

    /**
     * Kafka's task sets, built with the containers StreamsPartitionAssignor builds them with (their walk
     * decides the fallback's answer): {allTasks, statefulTasks}. The topology's subtopologies (id order)
     * are {@code putAll} into a HashMap (TopologyMetadata.subtopologyTopicsInfoMapExcluding), copied into
     * another (sourceTopicsByGroup); PartitionGrouper fills partitionsForTask subtopology by subtopology,
     * partitions ascending; populateTasksForMaps fills a task set per subtopology from its walk;
     * ChangelogTopics fills its map walking the first subtopology map and those sets; the assignor's
     * statefulTasks is a HashSet filled from that map's keys.
     */
    @SuppressWarnings("unchecked")
    static Set<TaskId>[] kafkaTaskSets(Set<TaskId> stateful, Set<TaskId> stateless) {
        SortedSet<TaskId> sorted = new TreeSet<>(stateful);
        sorted.addAll(stateless);
        Map<Subtopology, List<TaskId>> bySubtopology = new LinkedHashMap<>();
        for (TaskId t : sorted) {
            bySubtopology.computeIfAbsent(new Subtopology(t.subtopology(), null), k -> new ArrayList<>()).add(t);
        }
        Map<Subtopology, List<TaskId>> topicGroups = new HashMap<>();
        topicGroups.putAll(bySubtopology);
        Map<Subtopology, List<TaskId>> sourceTopicsByGroup = new HashMap<>();
        for (Map.Entry<Subtopology, List<TaskId>> e : topicGroups.entrySet()) {
            sourceTopicsByGroup.put(e.getKey(), e.getValue());
        }
        Map<TaskId, Boolean> partitionsForTask = new HashMap<>();
        for (List<TaskId> tasks : sourceTopicsByGroup.values()) {
            for (TaskId t : tasks) {
                partitionsForTask.put(t, Boolean.TRUE);
            }
        }
        Map<Subtopology, Set<TaskId>> tasksForTopicGroup = new HashMap<>();
        for (TaskId t : partitionsForTask.keySet()) {
            tasksForTopicGroup.computeIfAbsent(new Subtopology(t.subtopology(), null), k -> new HashSet<>()).add(t);
        }
        Map<TaskId, Boolean> changelogPartitionsForStatefulTask = new HashMap<>();
        for (Subtopology s : topicGroups.keySet()) {
            for (TaskId t : tasksForTopicGroup.get(s)) {
                if (stateful.contains(t)) {
                    changelogPartitionsForStatefulTask.put(t, Boolean.TRUE);
                }
            }
        }
        Set<TaskId> statefulTasks = new HashSet<>();
        statefulTasks.addAll(changelogPartitionsForStatefulTask.keySet());
        return new Set[] {partitionsForTask.keySet(), statefulTasks};
    }

    /**
     * Fresh client states, built the way StreamsPartitionAssignor builds them: lags given directly go
     * through the ClientState constructor Kafka's own tests use; offset sums go through
     * addPreviousTasksAndOffsetSums + computeTaskLags, so Kafka computes the lags itself.
     */
    static Map<ProcessId, ClientState> clientStates(StreamsSpec spec) {
        Map<ProcessId, ClientState> states = new HashMap<>();
        for (Client c : spec.clients()) {
            ClientState state;
            if (c.lags() != null) {
                Set<TaskId> prevActive = new HashSet<>();
                Set<TaskId> prevStandby = new HashSet<>();
                c.lags().forEach((t, lag) -> {
                    if (lag == -2L) {
                        prevActive.add(t);
                    } else if (lag >= 0) {
                        prevStandby.add(t);
                    }
                });
                state = new ClientState(prevActive, prevStandby, new HashMap<>(c.lags()), c.tags(), c.capacity(), c.processId());
            } else {
                state = new ClientState(c.processId(), c.tags());
                // Capacity is the number of the client's consumers (stream threads) in the group.
                while (state.capacity() < c.capacity()) {
                    state.incrementCapacity();
                }
                state.addPreviousTasksAndOffsetSums("consumer-0", new HashMap<>(c.offsetSums()));
                // No owned partitions: previous actives are the tasks reported at -2, the other reported
                // tasks previous standbys (what the fallback assignor reads).
                state.initializePrevTasks(new HashMap<>(), false);
                state.computeTaskLags(c.processId(), spec.endOffsetSums());
            }
            states.put(c.processId(), state);
        }
        return states;
    }

    /**
     * Rack awareness off, as with Kafka's default rack.aware.assignment.strategy "none"; every client
     * is given a consumer without a rack so that the standby factory does not pick the rack-based
     * tag assignor (it does when all clients have racks).
     */
    static RackAwareTaskAssignor rackAwareness(StreamsSpec spec) {
        Map<ProcessId, Map<String, Optional<String>>> racks = new HashMap<>();
        for (Client c : spec.clients()) {
            racks.put(c.processId(), Map.of("consumer-0", Optional.empty()));
        }
        return new RackAwareTaskAssignor(Cluster.empty(), Map.of(), Map.of(), Map.of(), racks, null,
                spec.configs(), Time.SYSTEM);
    }

    static ObjectNode streamsAnswer(JsonNode id, StreamsSpec spec, int repeat, int warmup) throws SpecException {
        if (spec.endOffsetsMissing()) {
            return fallbackAnswer(id, spec, repeat, warmup);
        }
        Timed run = timedAssign(HighAvailabilityTaskAssignor::new, spec, repeat, warmup);
        Map<ProcessId, ClientState> states = run.states();
        boolean probing = run.probing();
        Outcome real = outcome(states, Map.of(), probing);
        Outcome replayed = Replay.run(spec);
        if (!real.active().equals(replayed.active()) || !real.standby().equals(replayed.standby())
                || real.probing() != replayed.probing()) {
            throw new IllegalStateException("the step-by-step replay of HighAvailabilityTaskAssignor.assign"
                    + " does not end where the real call did: this Kafka's assign() differs from 4.1.1's");
        }

        ObjectNode out = JSON.createObjectNode();
        out.set("id", id);
        ObjectNode clients = out.putObject("clients");
        for (Client c : spec.clients()) {
            SortedSet<TaskId> standby = new TreeSet<>(real.standby().get(c.processId()));
            SortedSet<TaskId> warm = new TreeSet<>(replayed.warmups().getOrDefault(c.processId(), Set.of()));
            warm.retainAll(standby);
            standby.removeAll(warm);
            ObjectNode client = clients.putObject(c.id());
            tasks(client.putArray("active_tasks"), real.active().get(c.processId()));
            tasks(client.putArray("standby_tasks"), standby);
            tasks(client.putArray("warmup_tasks"), warm);
        }
        // Warm-ups granted from the max.warmup.replicas budget, by active and by standby movements.
        out.put("warmups_granted", replayed.warmupsGranted());
        finish(out, spec, run, false);
        return out;
    }

    /** FallbackPriorTaskAssignor, as StreamsPartitionAssignor runs it when the end offsets are missing. */
    static ObjectNode fallbackAnswer(JsonNode id, StreamsSpec spec, int repeat, int warmup) {
        Timed run = timedAssign(FallbackPriorTaskAssignor::new, spec, repeat, warmup);
        Map<ProcessId, ClientState> states = run.states();
        boolean probing = run.probing();
        ObjectNode out = JSON.createObjectNode();
        out.set("id", id);
        ObjectNode clients = out.putObject("clients");
        for (Client c : spec.clients()) {
            ClientState state = states.get(c.processId());
            ObjectNode client = clients.putObject(c.id());
            tasks(client.putArray("active_tasks"), state.activeTasks());
            tasks(client.putArray("standby_tasks"), state.standbyTasks());
            client.putArray("warmup_tasks");
        }
        out.put("warmups_granted", 0);
        finish(out, spec, run, true);
        return out;
    }

    /** What one assignor call left: the client states it filled, its probing verdict, its times. */
    record Timed(Map<ProcessId, ClientState> states, boolean probing, long[] nanos) { }

    /** ``warmup`` untimed calls, then ``repeat`` timed ones, each on fresh client states (the
     * assignors fill them in place); the last call's states and verdict are the answer. */
    static Timed timedAssign(Supplier<LegacyTaskAssignor> assignors, StreamsSpec spec, int repeat, int warmup) {
        for (int i = 0; i < warmup; i++) {
            assignors.get().assign(clientStates(spec), spec.allTasks(), spec.statefulTasks(),
                    rackAwareness(spec), spec.configs());
        }
        long[] nanos = new long[repeat];
        Map<ProcessId, ClientState> states = null;
        boolean probing = false;
        for (int i = 0; i < repeat; i++) {
            states = clientStates(spec);
            RackAwareTaskAssignor racks = rackAwareness(spec);
            LegacyTaskAssignor assignor = assignors.get();
            long start = System.nanoTime();
            probing = assignor.assign(states, spec.allTasks(), spec.statefulTasks(), racks, spec.configs());
            nanos[i] = System.nanoTime() - start;
        }
        return new Timed(states, probing, nanos);
    }

    /** The fields every answer ends with: the probing verdict and when, which path, the time. */
    static void finish(ObjectNode out, StreamsSpec spec, Timed run, boolean fallbackUsed) {
        out.put("probing_rebalance_needed", run.probing());
        if (run.probing()) {
            // StreamsPartitionAssignor schedules the probing rebalance this far ahead of its clock.
            out.put("probing_rebalance_at_ms", spec.nowMs() + spec.configs().probingRebalanceIntervalMs());
        } else {
            out.putNull("probing_rebalance_at_ms");
        }
        out.put("fallback_used", fallbackUsed);
        out.put("elapsed_ms", median(run.nanos()) / 1e6);
    }

    static void tasks(ArrayNode array, Set<TaskId> tasks) {
        for (TaskId t : new TreeSet<>(tasks)) {
            array.add(t.subtopology() + "_" + t.partition());
        }
    }

    static Outcome outcome(Map<ProcessId, ClientState> states, Map<ProcessId, Set<TaskId>> warmups, boolean probing) {
        Map<ProcessId, SortedSet<TaskId>> active = new HashMap<>();
        Map<ProcessId, SortedSet<TaskId>> standby = new HashMap<>();
        states.forEach((pid, s) -> {
            active.put(pid, new TreeSet<>(s.activeTasks()));
            standby.put(pid, new TreeSet<>(s.standbyTasks()));
        });
        return new Outcome(active, standby, warmups, probing, -1);
    }

    static double median(long[] values) {
        long[] sorted = values.clone();
        Arrays.sort(sorted);
        int n = sorted.length;
        return n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0;
    }

    /**
     * The body of HighAvailabilityTaskAssignor.assign (4.1.1), step by step through Kafka's own methods,
     * with the warm-up map in our hands. Order and arguments follow the bytecode of assign exactly.
     */
    static final class Replay {
        private static final Class<?> HA = HighAvailabilityTaskAssignor.class;
        private static final Method ASSIGN_ACTIVE_STATEFUL;
        private static final Method ASSIGN_STANDBY_REPLICAS;
        private static final Method CAUGHT_UP_CLIENTS;
        private static final Method CLIENTS_BY_LAG;
        private static final Method ACTIVE_MOVEMENTS;
        private static final Method STANDBY_MOVEMENTS;
        private static final Method ASSIGN_STATELESS;

        static {
            try {
                Class<?> movement = Class.forName("org.apache.kafka.streams.processor.internals.assignment.TaskMovement");
                ASSIGN_ACTIVE_STATEFUL = open(HA.getDeclaredMethod("assignActiveStatefulTasks",
                        SortedMap.class, SortedSet.class, RackAwareTaskAssignor.class, AssignmentConfigs.class));
                ASSIGN_STANDBY_REPLICAS = open(HA.getDeclaredMethod("assignStandbyReplicaTasks",
                        TreeMap.class, Set.class, Set.class, RackAwareTaskAssignor.class, AssignmentConfigs.class));
                CAUGHT_UP_CLIENTS = open(HA.getDeclaredMethod("tasksToCaughtUpClients", Set.class, Map.class, long.class));
                CLIENTS_BY_LAG = open(HA.getDeclaredMethod("tasksToClientByLag", Set.class, Map.class));
                ACTIVE_MOVEMENTS = open(movement.getDeclaredMethod("assignActiveTaskMovements",
                        Map.class, Map.class, Map.class, Map.class, AtomicInteger.class));
                STANDBY_MOVEMENTS = open(movement.getDeclaredMethod("assignStandbyTaskMovements",
                        Map.class, Map.class, Map.class, AtomicInteger.class, Map.class));
                ASSIGN_STATELESS = open(HA.getDeclaredMethod("assignStatelessActiveTasks",
                        TreeMap.class, Iterable.class, RackAwareTaskAssignor.class));
            } catch (ReflectiveOperationException e) {
                throw new ExceptionInInitializerError(e);
            }
        }

        private static Method open(Method m) {
            m.setAccessible(true);
            return m;
        }

        static Outcome run(StreamsSpec spec) throws SpecException {
            Map<ProcessId, ClientState> clients = clientStates(spec);
            RackAwareTaskAssignor racks = rackAwareness(spec);
            AssignmentConfigs configs = spec.configs();
            try {
                SortedSet<TaskId> statefulTasks = new TreeSet<>(spec.statefulTasks());
                TreeMap<ProcessId, ClientState> sorted = new TreeMap<>(clients);
                ASSIGN_ACTIVE_STATEFUL.invoke(null, sorted, statefulTasks, racks, configs);
                ASSIGN_STANDBY_REPLICAS.invoke(new HighAvailabilityTaskAssignor(), sorted, spec.allTasks(),
                        statefulTasks, racks, configs);
                AtomicInteger remainingWarmups = new AtomicInteger(configs.maxWarmupReplicas());
                Object caughtUp = CAUGHT_UP_CLIENTS.invoke(null, statefulTasks, sorted, configs.acceptableRecoveryLag());
                Object byLag = CLIENTS_BY_LAG.invoke(null, statefulTasks, sorted);
                Map<ProcessId, Set<TaskId>> warmups = new TreeMap<>();
                int activeMoves = (Integer) ACTIVE_MOVEMENTS.invoke(null, caughtUp, byLag, sorted, warmups, remainingWarmups);
                int standbyMoves = (Integer) STANDBY_MOVEMENTS.invoke(null, caughtUp, byLag, sorted, remainingWarmups, warmups);
                ASSIGN_STATELESS.invoke(null, sorted, Utils.diff(TreeSet::new, spec.allTasks(), statefulTasks), racks);
                // getAndDecrement on every attempt: the first maxWarmupReplicas attempts got a warm-up.
                int granted = configs.maxWarmupReplicas() - Math.max(remainingWarmups.get(), 0);
                Outcome state = outcome(clients, warmups, activeMoves + standbyMoves > 0);
                return new Outcome(state.active(), state.standby(), warmups, state.probing(), granted);
            } catch (InvocationTargetException e) {
                if (e.getCause() instanceof RuntimeException r) {
                    throw r;
                }
                throw new IllegalStateException(e.getCause());
            } catch (IllegalAccessException e) {
                throw new IllegalStateException(e);
            }
        }
    }
}
