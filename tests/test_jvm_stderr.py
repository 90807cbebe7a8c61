"""What reaches the user from Spark's JVM: everything but the lines that say nothing to them."""

from __future__ import annotations

import io

from streaming.job.spark_session import forward_jvm_stderr

WORKER = "Streaming TransformWithStateInPandas Python worker"


def test_pyspark_worker_prints_and_their_blank_lines_are_dropped_everything_else_kept():
    jvm = io.BytesIO("\n".join([
        "WARNING: Using incubator modules: jdk.incubator.vector",
        "2026-11-25 10:00:00,000 INFO rebalance_monitor.metrics: metrics at http://127.0.0.1:9108/metrics",
        f"Starting {WORKER}.", "",
        f"{WORKER} finish init stage of Python runner. Received UDF from JVM: <bound method ...>", "",
        f"{WORKER} Starting execution of UDF: <bound method ...>.", "",
        "10:00:01 ERROR TaskSetManager: Task 0 in stage 3.0 failed 1 times; aborting job",
        "",  # a blank line that follows a kept line is kept
        "java.lang.OutOfMemoryError: Java heap space",
    ]).encode() + b"\n")
    user = io.BytesIO()
    forward_jvm_stderr(jvm, user.write)
    assert user.getvalue().decode().splitlines() == [
        "2026-11-25 10:00:00,000 INFO rebalance_monitor.metrics: metrics at http://127.0.0.1:9108/metrics",
        "10:00:01 ERROR TaskSetManager: Task 0 in stage 3.0 failed 1 times; aborting job",
        "",
        "java.lang.OutOfMemoryError: Java heap space",
    ]


def test_a_line_that_merely_mentions_the_worker_is_kept():
    jvm = io.BytesIO(f"10:00:02 ERROR PythonRunner: {WORKER} crashed\n".encode())
    user = io.BytesIO()
    forward_jvm_stderr(jvm, user.write)
    assert user.getvalue() == f"10:00:02 ERROR PythonRunner: {WORKER} crashed\n".encode()


def test_the_pipe_is_drained_to_the_end_even_when_writing_fails():
    lines = [f"10:00:{i:02d} WARN Something: line {i}\n".encode() for i in range(50)]
    jvm = io.BytesIO(b"".join(lines))
    written = []

    def flaky(data: bytes) -> None:
        written.append(data)
        if len(written) % 2:
            raise OSError("stderr closed")

    forward_jvm_stderr(jvm, flaky)
    assert written == lines and jvm.read() == b""
