"""The committed fixture: real and synthesized records with Kafka's own decoding of each.

``python -m tests.coordinator_log.fixture --records DIR/records.jsonl`` takes the raw records the
capture script copied from a live broker, adds the records that Kafka's own serde writes for the
versions and types a 4.1 broker does not write (the reference's ``--synthesize``), keeps every
record but the offset commits (of which it keeps the first two per group and every tombstone: they
are the bulk of the topic and all alike), has the Java reference decode them, and writes
``fixtures/coordinator_records.jsonl``: one ``{"source", "key", "value", "kafka"}`` per record,
``kafka`` being the reference's JSON. The fast test checks the Python decoder against it.
"""

from __future__ import annotations

import argparse
import base64
import json
import subprocess
from collections import Counter
from pathlib import Path

from tests.coordinator_log.capture import MAIN_CLASS, REFERENCE_DIR, REPO, _java

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "coordinator_records.jsonl"
OFFSET_COMMITS_KEPT_PER_GROUP = 2


def ensure_built() -> None:
    subprocess.run(["bash", str(REPO / "scripts" / "build-coordinator-reference")], cwd=REPO, check=True,
                   capture_output=True)


def kafka_decoding(records: list[dict]) -> list[dict]:
    """The Java reference's answer for each record (``{"key", "value"}`` base64), in order."""
    lines = "".join(json.dumps({"key": r["key"], "value": r["value"]}) + "\n" for r in records)
    proc = subprocess.run([_java(), "-cp", str(REFERENCE_DIR / "*"), MAIN_CLASS], input=lines, text=True,
                          capture_output=True, check=True)
    answers = [json.loads(line) for line in proc.stdout.splitlines()]
    if len(answers) != len(records):
        raise RuntimeError(f"the reference answered {len(answers)} of {len(records)} records:\n{proc.stderr[-2000:]}")
    return answers


def synthesized() -> list[dict]:
    proc = subprocess.run([_java(), "-cp", str(REFERENCE_DIR / "*"), MAIN_CLASS, "--synthesize"], text=True,
                          capture_output=True, check=True)
    return [json.loads(line) for line in proc.stdout.splitlines()]


def _group_of(kafka: dict) -> str:
    key = kafka.get("key") or {}
    return key.get("group") or key.get("groupId") or "?"


def select(records: list[dict], answers: list[dict]) -> list[tuple[dict, dict]]:
    """Every record but the offset commits beyond the first few per group (tombstones all kept)."""
    kept, commits = [], Counter()
    for record, kafka in zip(records, answers):
        if kafka.get("type") in (0, 1) and kafka.get("value") is not None:
            group = _group_of(kafka)
            commits[group] += 1
            if commits[group] > OFFSET_COMMITS_KEPT_PER_GROUP:
                continue
        kept.append((record, kafka))
    return kept


def build(records_file: Path) -> Counter:
    ensure_built()
    captured = [json.loads(line) for line in records_file.read_text().splitlines() if line.strip()]
    answers = kafka_decoding(captured)
    rows = []
    for record, kafka in select(captured, answers):
        rows.append({"source": f"captured: {_group_of(kafka)}", "key": record["key"], "value": record["value"],
                     "kafka": kafka})
    made = synthesized()
    for record, kafka in zip(made, kafka_decoding(made)):
        rows.append({"source": record["source"], "key": record["key"], "value": record["value"], "kafka": kafka})
    FIXTURE.parent.mkdir(exist_ok=True)
    with open(FIXTURE, "w") as f:
        for row in rows:
            f.write(json.dumps(row, sort_keys=True) + "\n")
    return Counter((r["source"].split(":")[0], r["kafka"].get("type"), r["kafka"].get("version")) for r in rows)


def load() -> list[dict]:
    """The fixture's rows, with key and value as bytes."""
    rows = []
    for line in FIXTURE.read_text().splitlines():
        row = json.loads(line)
        row["key"] = base64.b64decode(row["key"])
        row["value"] = None if row["value"] is None else base64.b64decode(row["value"])
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", required=True, type=Path, help="records.jsonl from the capture script")
    args = parser.parse_args()
    counts = build(args.records)
    for (origin, record_type, version), n in sorted(counts.items(), key=str):
        print(f"{origin:12} type {record_type} v{version}: {n}")
    print(f"{sum(counts.values())} records in {FIXTURE}")


if __name__ == "__main__":
    main()
