package rebalancemonitor.streamsreference;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.streams.processor.TaskId;
import org.apache.kafka.streams.processor.assignment.ProcessId;

import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.Map;
import java.util.Set;
import java.util.UUID;

/**
 * The walk of a {@code java.util.HashMap}/{@code HashSet} of Kafka's {@code TaskId} or {@code ProcessId}
 * keys after a sequence of operations ({@code "kind":"java_hash"} lines): the ground truth for
 * assignors/streams/java_hash.py, which reproduces the order Kafka Streams walks such containers in.
 *
 * <pre>
 * {"kind": "java_hash", "id": "h1", "key_type": "task" | "process",
 *  "construct": {"kind": "default"} | {"kind": "presized", "capacity": 40}
 *             | {"kind": "copy", "of": [keys]} | {"kind": "put_all", "of": [keys]},
 *  "ops": [["put", key], ["remove", key], ["iterator_remove", key], ...]}
 * </pre>
 *
 * <p>{@code copy} is {@code new HashSet<>(collection)} of the keys in the given order, {@code put_all}
 * a {@code new HashMap<>()} given {@code putAll} of them in that order; {@code remove} is
 * {@code HashSet.remove}, {@code iterator_remove} an iterator's {@code remove()} on that key. Answer:
 * {@code {"id": ..., "walk": [keys]}}.
 */
final class JavaHashReference {

    private JavaHashReference() {
    }

    static ObjectNode answer(JsonNode id, JsonNode root) throws StreamsReference.SpecException {
        String keyType = root.path("key_type").asText("task");
        if (!keyType.equals("task") && !keyType.equals("process")) {
            throw new StreamsReference.SpecException("key_type must be \"task\" or \"process\", got \"" + keyType + "\"");
        }
        boolean tasks = keyType.equals("task");
        JsonNode construct = root.path("construct");
        String how = construct.path("kind").asText("default");
        Set<Object> set;
        switch (how) {
            case "default" -> set = new HashSet<>();
            case "presized" -> set = new HashSet<>(construct.path("capacity").asInt(16));
            case "copy" -> set = new HashSet<>(keys(construct.path("of"), tasks));
            case "put_all" -> {
                Map<Object, Boolean> source = new LinkedHashMap<>();
                for (Object k : keys(construct.path("of"), tasks)) {
                    source.put(k, Boolean.TRUE);
                }
                Map<Object, Boolean> map = new HashMap<>();
                map.putAll(source);
                set = map.keySet();
            }
            default -> throw new StreamsReference.SpecException("construct.kind must be default, presized, copy or put_all");
        }
        boolean mapBacked = how.equals("put_all");
        for (JsonNode op : root.path("ops")) {
            String verb = op.path(0).asText();
            Object key = key(op.path(1).asText(), tasks);
            switch (verb) {
                case "put" -> {
                    if (mapBacked) {
                        throw new StreamsReference.SpecException("put after put_all is not supported");
                    }
                    set.add(key);
                }
                case "remove" -> set.remove(key);
                case "iterator_remove" -> {
                    for (Iterator<Object> it = set.iterator(); it.hasNext(); ) {
                        if (it.next().equals(key)) {
                            it.remove();
                            break;
                        }
                    }
                }
                default -> throw new StreamsReference.SpecException("unknown op " + verb);
            }
        }
        ObjectNode out = StreamsReference.JSON.createObjectNode();
        out.set("id", id);
        ArrayNode walk = out.putArray("walk");
        for (Object k : set) {
            walk.add(k instanceof TaskId t ? t.subtopology() + "_" + t.partition() : k.toString());
        }
        return out;
    }

    private static Set<Object> keys(JsonNode list, boolean tasks) throws StreamsReference.SpecException {
        Set<Object> out = new LinkedHashSet<>();
        for (JsonNode k : list) {
            out.add(key(k.asText(), tasks));
        }
        return out;
    }

    private static Object key(String text, boolean tasks) throws StreamsReference.SpecException {
        if (tasks) {
            return StreamsReference.task(text, "java_hash");
        }
        try {
            return new ProcessId(UUID.fromString(text));
        } catch (IllegalArgumentException e) {
            throw new StreamsReference.SpecException("java_hash: " + text + " is not a UUID");
        }
    }
}
