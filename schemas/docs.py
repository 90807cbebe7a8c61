"""Write the generated contract files: ``python -m schemas.docs`` (a test checks they are current).

- schemas/membership-event.schema.json, schemas/heartbeat-event.schema.json
- docs/events.md, docs/tables.md
- schemas/assign_consumer.schema.json, schemas/assign_streams.schema.json,
  schemas/assign_connect.schema.json (``rebalance-monitor assign`` inputs for consumer, Streams and
  Connect groups, from the field definitions in the codecs)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from assignors.codec import consumer_spec_schema
from assignors.connect.codec import connect_spec_schema
from assignors.streams.codec import streams_spec_schema

from .events import HEARTBEAT_FIELDS, MEMBERSHIP_FIELDS, Array, Field, FieldType, Map, example_event
from .json_schema import heartbeat_schema, membership_schema
from .tables import TABLES

ROOT = Path(__file__).resolve().parent.parent


def _type_name(t: FieldType) -> str:
    if isinstance(t, str):
        return t
    if isinstance(t, Array):
        return f"array<{_type_name(t.element)}>"
    if isinstance(t, Map):
        return f"map<string, {_type_name(t.value)}>"
    return "struct<" + ", ".join(f"{n}: {_type_name(ft)}" for n, ft in t.fields) + ">"


def _field_table(fields: tuple[Field, ...]) -> str:
    lines = ["| field | type | required | rules | meaning |", "|---|---|---|---|---|"]
    for f in fields:
        rules = []
        if f.enum:
            rules.append("one of " + ", ".join(f"`{v}`" for v in f.enum))
        if f.minimum is not None:
            rules.append(f">= {f.minimum}")
        if f.non_empty:
            rules.append("not empty")
        lines.append(f"| `{f.name}` | `{_type_name(f.type)}` | {'yes' if f.required else ''} | "
                     f"{'; '.join(rules)} | {f.doc} |")
    return "\n".join(lines)


def events_md() -> str:
    membership = example_event(MEMBERSHIP_FIELDS)
    membership.pop("workload")
    workload = {k: membership[k] for k in ("schema_version", "event_id", "event_time", "group_id", "group_type")}
    workload.update(event_id="m-000043", type="workload",
                    workload={"topics": [{"name": "orders", "partitions": 12, "racks": None}]})
    return f"""# Events (input contract, schema version 1)

Generated from `schemas/events.py` by `python -m schemas.docs`; do not edit by hand.
JSON Schema files: `schemas/membership-event.schema.json`, `schemas/heartbeat-event.schema.json`.

Two Kafka topics carry JSON values; the record key is the group id (so one group's events stay in
order in one partition). Defaults: `rebalance.membership` and `rebalance.heartbeats`.
A record that breaks any rule below is not dropped: it lands in `rejected_events` with the raw
value, topic, partition, offset and the reason. Records larger than `kafka.max_record_bytes`
(default 1 MiB) are refused unread. Redelivered membership events (same `event_id`) are refused as
duplicates. Unknown extra fields are ignored.

## Membership events (`rebalance.membership`)

`member_id` is required for `join`, `leave` and `update`; `workload` is required for `workload`.

{_field_table(MEMBERSHIP_FIELDS)}

A member joins:

```json
{json.dumps(membership, indent=2)}
```

The group's topics change (a workload event replaces the group's whole topic list):

```json
{json.dumps(workload, indent=2)}
```

## Heartbeats (`rebalance.heartbeats`)

{_field_table(HEARTBEAT_FIELDS)}

```json
{json.dumps(example_event(HEARTBEAT_FIELDS), indent=2)}
```

Heartbeats set the group's event time (see [time.md](time.md)); they never cause assignment work.

**The fast shape.** A heartbeat written as compact JSON (no whitespace), its fields in the order of
the table above, strings without escapes, `generation` (if any) last and no `task_lags`, is read
without the job's full JSON parse (`job.screen_heartbeats`, streaming/job/heartbeat_screen.py):
about 3x cheaper per record. It is exactly the same heartbeat to the job. The collector and the
simulator write this shape; `json.dumps(event, separators=(",", ":"), ensure_ascii=False)` of a dict
built in this order does too. Any other valid form is read the same, through the full parse.
"""


def tables_md() -> str:
    parts = ["# Tables (output, Delta Lake)", "",
             "Generated from `schemas/tables.py` by `python -m schemas.docs`; do not edit by hand.", "",
             "Each table lives at `<output.root>/<name>` (default `./data/<name>`). Times are epoch "
             "milliseconds of event time, so replaying the same topics writes the same rows; "
             "`balance_metrics.assignor_ms` is the one measured value.", ""]
    for name, fields in TABLES.items():
        parts += [f"## `{name}`", "", "| column | type | meaning |", "|---|---|---|"]
        parts += [f"| `{f.name}` | `{_type_name(f.type)}` | {f.doc} |" for f in fields]
        parts.append("")
    return "\n".join(parts)


def generated_files() -> dict[Path, str]:
    return {
        ROOT / "schemas" / "membership-event.schema.json": json.dumps(membership_schema(), indent=2) + "\n",
        ROOT / "schemas" / "heartbeat-event.schema.json": json.dumps(heartbeat_schema(), indent=2) + "\n",
        ROOT / "docs" / "events.md": events_md(),
        ROOT / "docs" / "tables.md": tables_md(),
        ROOT / "schemas" / "assign_consumer.schema.json": json.dumps(consumer_spec_schema(), indent=2) + "\n",
        ROOT / "schemas" / "assign_streams.schema.json": json.dumps(streams_spec_schema(), indent=2) + "\n",
        ROOT / "schemas" / "assign_connect.schema.json": json.dumps(connect_spec_schema(), indent=2) + "\n",
    }


def main() -> int:
    for path, text in generated_files().items():
        path.write_text(text)
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
