"""One confluent-kafka (librdkafka) group member in its own process, for the capture script.

Run as ``python -m tests.coordinator_log.member CONFIG_JSON TOPICS``: it subscribes and polls
until its standard input closes, then closes the consumer (a clean LeaveGroup). Killing the
process instead is a crash: the coordinator expels the member after its session timeout. It
prints ``assigned t-0,t-1`` whenever its assignment changes.
"""

from __future__ import annotations

import json
import select
import sys

from confluent_kafka import Consumer


def main() -> None:
    config = json.loads(sys.argv[1])
    topics = sys.argv[2].split(",")
    consumer = Consumer(config)
    consumer.subscribe(topics)
    last = None
    try:
        while True:
            consumer.poll(0.1)
            current = sorted(f"{tp.topic}-{tp.partition}" for tp in consumer.assignment())
            if current != last:
                print("assigned " + ",".join(current), flush=True)
                last = current
            ready, _, _ = select.select([sys.stdin], [], [], 0)
            if ready and not sys.stdin.buffer.read1(4096):
                break
    finally:
        consumer.close()


if __name__ == "__main__":
    main()
