package rebalancemonitor.coordinatorreference;

import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.source.SourceConnector;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.source.SourceTask;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * A source connector that produces nothing: its only purpose is to give a real Connect cluster
 * connectors and tasks to assign, so that the capture script records real Connect assignments
 * (registered through META-INF/services, so workers find it with plugin.discovery=service_load).
 */
public class IdleSourceConnector extends SourceConnector {
    private Map<String, String> config;

    @Override
    public void start(Map<String, String> props) {
        config = props;
    }

    @Override
    public Class<? extends Task> taskClass() {
        return IdleTask.class;
    }

    @Override
    public List<Map<String, String>> taskConfigs(int maxTasks) {
        List<Map<String, String>> configs = new ArrayList<>();
        for (int i = 0; i < maxTasks; i++) configs.add(config);
        return configs;
    }

    @Override
    public void stop() { }

    @Override
    public ConfigDef config() {
        return new ConfigDef();
    }

    @Override
    public String version() {
        return "0";
    }

    /** A task that sleeps in poll: nothing to produce. */
    public static class IdleTask extends SourceTask {
        @Override
        public String version() {
            return "0";
        }

        @Override
        public void start(Map<String, String> props) { }

        @Override
        public List<SourceRecord> poll() throws InterruptedException {
            Thread.sleep(500);
            return null;
        }

        @Override
        public void stop() { }
    }
}
