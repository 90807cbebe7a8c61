"""Delta tables as the job writes them, without the job: stories through the engine, rows to Delta.

The engine (``streaming.testing.run_story``) turns each group's story into the typed rows the job
would write, and delta-rs appends them with the tables' Arrow schemas, as the job's sink does. So
the SQL and report tests read real Delta tables of real engine rows in milliseconds, without a
broker or Spark; tests/integration/ checks the same against the tables of the real job.
"""

from __future__ import annotations

from pathlib import Path

from schemas.arrow import table_arrow_schema
from streaming.testing import run_story
from tests import stories

START = 1_700_000_000_000  # 2023-11-14T22:13:20Z


def at(story, start_ms: int = START):
    """The story's events at absolute times (stories count from 0)."""
    moved = []
    for e in story:
        if isinstance(e, dict):
            moved.append({**e, "event_time": start_ms + e["event_time"]})
        else:
            moved.append((e[0], e[1], start_ms + e[2], *e[3:]))
    return moved


def engine_rows(groups: dict[str, list]) -> dict[str, list[dict]]:
    """Table -> rows the engine writes for each group's story (one batch per group)."""
    out: dict[str, list[dict]] = {}
    for group_id, story in groups.items():
        rows, _ = run_story([at(story)], group_id=group_id)
        for row in rows:
            out.setdefault(row.table, []).append(row.as_dict())
    return out


def write_tables(root: Path, rows: dict[str, list[dict]]) -> Path:
    """Append ``rows`` (table -> rows) to Delta tables under ``root``, as the job's sink does."""
    import pyarrow as pa
    from deltalake import write_deltalake

    for table, table_rows in rows.items():
        schema = table_arrow_schema(table)
        write_deltalake(str(root / table), pa.Table.from_pylist(table_rows, schema=schema), mode="append")
    return root


def scenario_groups() -> dict[str, list]:
    """The stories of the end-to-end tests: eager with an expiry, cooperative, a static bounce, and a
    live group (collector events) whose second observation disagrees with the computed assignment."""
    live = [e for e in stories.real_range_group() if not (isinstance(e, dict) and e["event_time"] == 5_500)]
    live += [stories.collector_observation(5_500, "update", "a", (0, 1, 2, 3)),
             stories.collector_observation(5_500, "update", "b", (4, 5))]
    return {
        "eager": stories.eager_range_story(),
        "coop": stories.cooperative_story() + stories.heartbeats(["c1", "c2"], 12_000, 32_000),
        "static": stories.static_bounce_story() + stories.heartbeats(["a2", "b"], 14_000, 32_000),
        "live": stories.in_time_order(live),
    }
