package rebalancemonitor.streamsreference;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.common.utils.LogContext;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.connect.runtime.TargetState;
import org.apache.kafka.connect.runtime.distributed.IncrementalCooperativeAssignor;
import org.apache.kafka.connect.runtime.distributed.WorkerCoordinator.ConnectorsAndTasks;
import org.apache.kafka.connect.storage.ClusterConfigState;
import org.apache.kafka.connect.util.ConnectorTaskId;

import java.lang.reflect.Field;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.Supplier;

/**
 * Kafka Connect's {@code IncrementalCooperativeAssignor} over a sequence of rebalances led by one
 * leader (the assignor keeps state between them, so a spec is a list of rounds run on one instance).
 *
 * <p>What is driven: the package-private {@code performTaskAssignment(ClusterConfigState, int, int,
 * Map<String, ConnectorsAndTasks>)}, the whole assignment computation, as Kafka's own
 * {@code IncrementalCooperativeAssignorTest} drives it. What is not: the public
 * {@code performAssignment(leaderId, protocol, members, WorkerCoordinator)} around it, which needs a
 * live {@code WorkerCoordinator} (a consumer-group client with a network client, metrics and a
 * config backing store) only to read the config snapshot, the generation ids and the leader's
 * config offset, and to serialize the answer; those are given in the spec instead, and the
 * config-offset mismatch check that it does first is not run.
 */
final class ConnectReference {

    private static final Method PERFORM;
    private static final Map<String, Method> CLUSTER_ASSIGNMENT = new HashMap<>();
    private static final Field DELAY;

    static {
        try {
            PERFORM = IncrementalCooperativeAssignor.class.getDeclaredMethod("performTaskAssignment",
                    ClusterConfigState.class, int.class, int.class, Map.class);
            PERFORM.setAccessible(true);
            Class<?> result = PERFORM.getReturnType();
            for (String name : List.of("allAssignedConnectors", "allAssignedTasks", "newlyRevokedConnectors",
                    "newlyRevokedTasks")) {
                // Public methods of a package-private class: reflection needs them opened too.
                Method m = result.getDeclaredMethod(name);
                m.setAccessible(true);
                CLUSTER_ASSIGNMENT.put(name, m);
            }
            DELAY = IncrementalCooperativeAssignor.class.getDeclaredField("delay");
            DELAY.setAccessible(true);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private ConnectReference() {
    }

    /** The leader's clock: rounds set it, the assignor reads it for its delays. */
    static final class Clock implements Time {
        long now;

        @Override
        public long milliseconds() {
            return now;
        }

        @Override
        public long nanoseconds() {
            return now * 1_000_000L;
        }

        @Override
        public void sleep(long ms) {
            now += ms;
        }

        @Override
        public void waitObject(Object obj, Supplier<Boolean> condition, long deadlineMs) {
            throw new UnsupportedOperationException("the assignor does not wait");
        }
    }

    record Round(long nowMs, int generation, int lastCompleted, ClusterConfigState config,
                 List<String> workers, Map<String, ConnectorsAndTasks> reported) {
    }

    static ObjectNode answer(JsonNode id, JsonNode root, int repeat, int warmup) throws StreamsReference.SpecException {
        int maxDelay = root.path("scheduled_rebalance_max_delay_ms").asInt(300_000);
        JsonNode roundsNode = root.path("rounds");
        if (!roundsNode.isArray() || roundsNode.isEmpty()) {
            throw new StreamsReference.SpecException("rounds must be a non-empty list");
        }
        List<Round> rounds = new ArrayList<>();
        for (JsonNode r : roundsNode) {
            rounds.add(parseRound(r, rounds.size()));
        }
        int timed = root.path("timed_round").asInt(rounds.size() - 1);
        if (timed < 0 || timed >= rounds.size()) {
            throw new StreamsReference.SpecException("timed_round must index rounds");
        }
        // Each run is a fresh assignor (a new leader) going through every round; only the timed
        // round's performTaskAssignment call is on the clock.
        for (int i = 0; i < warmup; i++) {
            runAll(rounds, maxDelay, timed, null);
        }
        long[] nanos = new long[repeat];
        ArrayNode answers = null;
        for (int i = 0; i < repeat; i++) {
            long[] elapsed = new long[1];
            answers = runAll(rounds, maxDelay, timed, elapsed);
            nanos[i] = elapsed[0];
        }
        ObjectNode out = StreamsReference.JSON.createObjectNode();
        out.set("id", id);
        out.set("rounds", answers);
        out.put("elapsed_ms", StreamsReference.median(nanos) / 1e6);
        return out;
    }

    static Round parseRound(JsonNode r, int index) throws StreamsReference.SpecException {
        String where = "rounds[" + index + "]";
        Map<String, Integer> taskCounts = new HashMap<>();
        Map<String, Map<String, String>> connectorConfigs = new HashMap<>();
        Map<String, TargetState> targetStates = new HashMap<>();
        Map<ConnectorTaskId, Map<String, String>> taskConfigs = new HashMap<>();
        for (var it = r.path("connectors").fields(); it.hasNext(); ) {
            var e = it.next();
            int n = e.getValue().asInt(-1);
            if (n < 0) {
                throw new StreamsReference.SpecException(where + ".connectors[" + e.getKey() + "] must be a task count >= 0");
            }
            taskCounts.put(e.getKey(), n);
            connectorConfigs.put(e.getKey(), Map.of());
            targetStates.put(e.getKey(), TargetState.STARTED);
            for (int t = 0; t < n; t++) {
                taskConfigs.put(new ConnectorTaskId(e.getKey(), t), Map.of());
            }
        }
        ClusterConfigState config = new ClusterConfigState(r.path("leader_config_offset").asLong(0), null,
                taskCounts, connectorConfigs, targetStates, taskConfigs, Map.of(), Map.of(), Map.of(), Set.of(), Set.of());
        List<String> workers = new ArrayList<>();
        // Kafka builds this map with a HashMap from the JoinGroup members; insertion in spec order.
        Map<String, ConnectorsAndTasks> reported = new HashMap<>();
        for (JsonNode w : r.path("workers")) {
            String worker = w.path("worker_id").asText(null);
            if (worker == null) {
                throw new StreamsReference.SpecException(where + ": every worker needs a worker_id");
            }
            List<String> connectors = new ArrayList<>();
            w.path("connectors").forEach(c -> connectors.add(c.asText()));
            List<ConnectorTaskId> tasks = new ArrayList<>();
            for (JsonNode t : w.path("tasks")) {
                if (!t.isArray() || t.size() != 2) {
                    throw new StreamsReference.SpecException(where + ": worker " + worker + ": a task is [connector, number]");
                }
                tasks.add(new ConnectorTaskId(t.get(0).asText(), t.get(1).asInt()));
            }
            workers.add(worker);
            reported.put(worker, new ConnectorsAndTasks.Builder().with(connectors, tasks).build());
        }
        if (workers.isEmpty()) {
            throw new StreamsReference.SpecException(where + ": workers must be a non-empty list");
        }
        return new Round(r.path("now_ms").asLong(0), r.path("generation_id").asInt(0),
                r.path("last_completed_generation_id").asInt(-1), config, workers, reported);
    }

    @SuppressWarnings("unchecked")
    static ArrayNode runAll(List<Round> rounds, int maxDelay, int timed, long[] elapsed) {
        Clock clock = new Clock();
        IncrementalCooperativeAssignor assignor = new IncrementalCooperativeAssignor(new LogContext(), clock, maxDelay);
        ArrayNode answers = StreamsReference.JSON.createArrayNode();
        try {
            for (int i = 0; i < rounds.size(); i++) {
                Round round = rounds.get(i);
                clock.now = round.nowMs();
                // The assignor clears and rebuilds parts of what it is handed: a fresh copy per call.
                Map<String, ConnectorsAndTasks> reported = new HashMap<>();
                for (String w : round.workers()) {
                    ConnectorsAndTasks r = round.reported().get(w);
                    reported.put(w, new ConnectorsAndTasks.Builder()
                            .with(new ArrayList<>(r.connectors()), new ArrayList<>(r.tasks())).build());
                }
                long start = System.nanoTime();
                Object result = PERFORM.invoke(assignor, round.config(), round.lastCompleted(), round.generation(), reported);
                if (elapsed != null && i == timed) {
                    elapsed[0] = System.nanoTime() - start;
                }
                Map<String, Collection<String>> connectors = (Map<String, Collection<String>>) CLUSTER_ASSIGNMENT.get("allAssignedConnectors").invoke(result);
                Map<String, Collection<ConnectorTaskId>> tasks = (Map<String, Collection<ConnectorTaskId>>) CLUSTER_ASSIGNMENT.get("allAssignedTasks").invoke(result);
                Map<String, Collection<String>> revokedConnectors = (Map<String, Collection<String>>) CLUSTER_ASSIGNMENT.get("newlyRevokedConnectors").invoke(result);
                Map<String, Collection<ConnectorTaskId>> revokedTasks = (Map<String, Collection<ConnectorTaskId>>) CLUSTER_ASSIGNMENT.get("newlyRevokedTasks").invoke(result);
                ObjectNode answer = answers.addObject();
                answer.put("delay_ms", DELAY.getInt(assignor));
                ObjectNode workers = answer.putObject("workers");
                for (String w : round.workers()) {
                    ObjectNode worker = workers.putObject(w);
                    names(worker.putArray("connectors"), connectors.getOrDefault(w, List.of()));
                    taskIds(worker.putArray("tasks"), tasks.getOrDefault(w, List.of()));
                    names(worker.putArray("revoked_connectors"), revokedConnectors.getOrDefault(w, List.of()));
                    taskIds(worker.putArray("revoked_tasks"), revokedTasks.getOrDefault(w, List.of()));
                }
            }
        } catch (InvocationTargetException e) {
            if (e.getCause() instanceof RuntimeException r) {
                throw r;
            }
            throw new IllegalStateException(e.getCause());
        } catch (IllegalAccessException e) {
            throw new IllegalStateException(e);
        }
        return answers;
    }

    // Sorted: the answer is compared as sets (what a worker runs), not in Kafka's list order.
    static void names(ArrayNode array, Collection<String> names) {
        new TreeSet<>(names).forEach(array::add);
    }

    static void taskIds(ArrayNode array, Collection<ConnectorTaskId> tasks) {
        for (ConnectorTaskId t : new TreeSet<>(tasks)) {
            array.addArray().add(t.connector()).add(t.task());
        }
    }
}
