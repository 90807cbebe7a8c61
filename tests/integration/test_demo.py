"""The README's first command, `make demo`, twice in a row: each run starts clean."""

from __future__ import annotations

import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from schemas import tables
from streaming.config import Config

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def test_a_second_demo_gives_a_history_of_its_own_not_the_first_ones_continued(spark, kafka_broker, tmp_path):
    from tests.integration.jobs import read

    command = [sys.executable, "-m", "streaming.cli.main", "demo", "--port", str(kafka_broker.port),
               "--output", str(tmp_path / "data"), "--checkpoint", str(tmp_path / "checkpoint"),
               "--groups", "4", "--minutes", "1"]
    for run in (1, 2):
        done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, f"demo {run}: {done.stderr[-3000:]}"
    assert "starting clean: removed 3 topic(s)" in done.stdout, done.stdout[-2000:]
    config = Config().with_overrides(output=str(tmp_path / "data"), checkpoint=str(tmp_path / "checkpoint"))
    generations: dict[str, list[int]] = defaultdict(list)
    group_types: dict[str, set[str]] = defaultdict(set)
    for row in read(spark, config, tables.BALANCE_METRICS):
        generations[row["group_id"]].append(row["generation"])
        group_types[row["group_id"]].add(row["group_type"])
    assert generations, "the second demo wrote no generations"
    # Each group's history is the second run's alone: generations 1..n, one group type each.
    assert {g: sorted(gens) for g, gens in generations.items()} == \
        {g: list(range(1, len(gens) + 1)) for g, gens in generations.items()}
    assert all(len(types) == 1 for types in group_types.values()), group_types
    # The real librdkafka groups (range, cooperative-sticky), recorded from __consumer_offsets: the
    # second demo's only, its offsets-topic source starting where the log ended before it played them.
    assert len({g for g in generations if g.startswith("demo-real-")}) == 2, sorted(generations)
