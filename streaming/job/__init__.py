"""The Spark Structured Streaming job: Kafka sources, the stateful operator around the engine, the
Delta sink, and the run loop (``streaming/job/main.py`` is the ``spark-submit`` entry point)."""
