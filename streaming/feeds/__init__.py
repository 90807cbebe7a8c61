"""What feeds the monitor's Kafka topics: the collector (a live cluster's groups, polled through the
admin API), the simulator, and the producer helpers they share."""
