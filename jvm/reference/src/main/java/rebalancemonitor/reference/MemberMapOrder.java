package rebalancemonitor.reference;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.common.utils.LogContext;
import org.apache.kafka.timeline.SnapshotRegistry;
import org.apache.kafka.timeline.TimelineHashMap;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;

/**
 * The iteration order of the coordinator's member map (a {@code TimelineHashMap} created as
 * {@code ModernGroup} creates it) after a sequence of puts and removals, for the differential test
 * of assignors/timeline_order.py. One JSON object per line on stdin,
 * {@code {"id": ..., "ops": [["put", key], ["remove", key], ...]}}; one answer per line on stdout,
 * {@code {"id": ..., "order": [keys as members.forEach visits them]}}.
 */
public final class MemberMapOrder {
    private static final ObjectMapper JSON = new ObjectMapper();

    private MemberMapOrder() {
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintWriter out = new PrintWriter(System.out, false, StandardCharsets.UTF_8);
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            JsonNode root = JSON.readTree(line);
            TimelineHashMap<String, Boolean> members =
                new TimelineHashMap<>(new SnapshotRegistry(new LogContext()), 0);
            for (JsonNode op : root.get("ops")) {
                String key = op.get(1).asText();
                switch (op.get(0).asText()) {
                    case "put" -> members.put(key, Boolean.TRUE);
                    case "remove" -> members.remove(key);
                    default -> throw new IllegalArgumentException("unknown op " + op);
                }
            }
            ObjectNode answer = JSON.createObjectNode();
            answer.set("id", root.get("id"));
            ArrayNode order = answer.putArray("order");
            members.forEach((key, value) -> order.add(key));
            out.println(JSON.writeValueAsString(answer));
        }
        out.flush();
    }
}
