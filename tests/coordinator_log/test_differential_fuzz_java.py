"""Damaged records through both decoders: Kafka's Java classes and ours must take the same side.

Real and synthesized fixture records are damaged at random (seeded: bit flips, a byte replaced,
truncations, inserted bytes) and decoded by Kafka 4.1.1's own classes (jvm/coordinator-reference)
and by :func:`decode`. Required: whatever both accept decodes identically field by field, and
nothing Kafka refuses is accepted here. Where Kafka accepts and we refuse, the reason must be one
of the documented strictnesses (docs/coordinator-log.md): trailing bytes, bad UTF-8 (Java
substitutes U+FFFD), a known tagged field that does not fill its declared size (Java reads it
regardless of the size), a Streams assignment naming a topic index its dictionary lacks (Java
makes a partition of a null topic). A JVM: marked integration by the ``test_differential*java*`` name.
"""

from __future__ import annotations

import base64
import random
from collections import Counter

from streaming.coordinator_log import CoordinatorRecordError, decode
from tests.coordinator_log.fixture import ensure_built, kafka_decoding, load
from tests.coordinator_log.kafka_json import as_kafka_json, compare

SAMPLES = 3000
STRICTER = ("trailing byte", "bad UTF-8", "tagged field", "topic dictionary")


def _damaged(rng: random.Random, value: bytes) -> bytes:
    value = bytearray(value)
    kind = rng.choice(("flip", "flip", "byte", "truncate", "insert"))
    if kind == "flip":
        for _ in range(rng.randint(1, 3)):
            value[rng.randrange(2, len(value))] ^= 1 << rng.randrange(8)
    elif kind == "byte":
        value[rng.randrange(2, len(value))] = rng.randrange(256)
    elif kind == "truncate":
        value = value[:rng.randrange(len(value))]
    else:
        at = rng.randrange(2, len(value) + 1)
        value[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 4)))
    return bytes(value)


def test_damaged_records_are_refused_or_decoded_as_kafka_decodes_them():
    ensure_built()
    rng = random.Random(17)
    rows = [r for r in load() if r["value"] is not None and len(r["value"]) > 2]
    samples = [(r["key"], _damaged(rng, r["value"])) for r in (rng.choice(rows) for _ in range(SAMPLES))]
    answers = kafka_decoding([{"key": base64.b64encode(k).decode(), "value": base64.b64encode(v).decode()}
                              for k, v in samples])
    outcome = Counter()
    for (key, value), kafka in zip(samples, answers):
        kafka_refuses = "error" in kafka or any("error" in m for m in kafka.get("members", []))
        try:
            ours = as_kafka_json(decode(key, value))
        except CoordinatorRecordError as e:
            if kafka_refuses:
                outcome["both refuse"] += 1
            else:
                assert any(reason in str(e) for reason in STRICTER), f"refused, Kafka accepts: {e}"
                outcome["stricter"] += 1
            continue
        assert not kafka_refuses, f"accepted what Kafka refuses: {kafka}"
        assert compare(kafka, ours).differences == []
        outcome["both decode, same fields"] += 1
    # The damage is varied enough to exercise every side.
    assert min(outcome["both refuse"], outcome["stricter"], outcome["both decode, same fields"]) > 50, outcome
