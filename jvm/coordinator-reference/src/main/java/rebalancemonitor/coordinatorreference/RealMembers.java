package rebalancemonitor.coordinatorreference;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Produced;

import java.io.InputStream;
import java.time.Duration;
import java.util.Arrays;
import java.util.Collection;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Real Java group members for the capture script: they run until their standard input closes (a
 * clean leave) or the process is killed (a crash the coordinator notices after the session timeout).
 *
 * <pre>
 *   consumer BOOTSTRAP GROUP TOPICS ASSIGNOR INSTANCE_ID|- SESSION_TIMEOUT_MS
 *   streams  BOOTSTRAP APPLICATION_ID INPUT_TOPIC OUTPUT_TOPIC STATE_DIR INSTANCE_ID|-
 * </pre>
 * A consumer prints its assignment after every change as one line, "assigned t-0,t-1".
 */
final class RealMembers {
    private RealMembers() { }

    static void run(String[] args) throws Exception {
        switch (args[0]) {
            case "consumer" -> consumer(args);
            case "streams" -> streams(args);
            default -> throw new IllegalArgumentException("unknown member kind " + args[0]);
        }
    }

    /** Blocks until standard input reaches its end, then sets {@code stop}. */
    private static void stopOnStdinEnd(AtomicBoolean stop) {
        Thread t = new Thread(() -> {
            try {
                InputStream in = System.in;
                while (in.read() >= 0) { }
            } catch (Exception ignored) {
                // a closed stdin is the signal either way
            }
            stop.set(true);
        });
        t.setDaemon(true);
        t.start();
    }

    private static void consumer(String[] args) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[1]);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, args[2]);
        p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, switch (args[4]) {
            case "sticky" -> "org.apache.kafka.clients.consumer.StickyAssignor";
            case "cooperative-sticky" -> "org.apache.kafka.clients.consumer.CooperativeStickyAssignor";
            case "range" -> "org.apache.kafka.clients.consumer.RangeAssignor";
            case "roundrobin" -> "org.apache.kafka.clients.consumer.RoundRobinAssignor";
            default -> throw new IllegalArgumentException("unknown assignor " + args[4]);
        });
        if (!args[5].equals("-")) p.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, args[5]);
        p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, args[6]);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.AUTO_COMMIT_INTERVAL_MS_CONFIG, "1000");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        AtomicBoolean stop = new AtomicBoolean();
        stopOnStdinEnd(stop);
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            consumer.subscribe(Arrays.asList(args[3].split(",")), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) { }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                    TreeSet<String> names = new TreeSet<>();
                    consumer.assignment().forEach(tp -> names.add(tp.toString()));
                    System.out.println("assigned " + String.join(",", names));
                    System.out.flush();
                }
            });
            while (!stop.get()) {
                consumer.poll(Duration.ofMillis(100));
            }
        }
    }

    private static void streams(String[] args) throws Exception {
        Properties p = new Properties();
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[1]);
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, args[2]);
        p.put(StreamsConfig.STATE_DIR_CONFIG, args[5]);
        if (!args[6].equals("-")) p.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, args[6]);
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        p.put(StreamsConfig.NUM_STANDBY_REPLICAS_CONFIG, "1");
        p.put(StreamsConfig.APPLICATION_SERVER_CONFIG, "127.0.0.1:" + (7000 + Math.abs(args[5].hashCode() % 1000)));
        p.put(StreamsConfig.CLIENT_TAG_PREFIX + "zone", "zone-" + (args[5].hashCode() & 1));
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "500");
        p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "6000");
        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream(args[3]).groupByKey().count().toStream()
            .to(args[4], Produced.with(Serdes.String(), Serdes.Long()));
        AtomicBoolean stop = new AtomicBoolean();
        stopOnStdinEnd(stop);
        try (KafkaStreams streams = new KafkaStreams(builder.build(), p)) {
            streams.setStateListener((now, before) -> {
                System.out.println("state " + now);
                System.out.flush();
            });
            streams.start();
            while (!stop.get()) {
                Thread.sleep(100);
            }
        }
    }
}
