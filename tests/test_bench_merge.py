"""bench/assignors.py --merge: re-measured cells replace their old selves, the rest stay, and
every cell keeps the run that measured it (pure: no Java, no timing)."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[1] / "bench" / "assignors.py"


@pytest.fixture(scope="module")
def harness():
    # Loaded by path: as "assignors" it would shadow the assignors package.
    spec = importlib.util.spec_from_file_location("bench_assignors_harness", _PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _cell(h, members, python_ms, java_ms=1.0, status="ok", reason=None):
    return h.Cell("range", "homogeneous", "full", members, 5, 10, members // 2, members * 5,
                  python=h.Side(status=status, ms=python_ms, reason=reason), java=h.Side(status="ok", ms=java_ms))


def _result(h, commit, cells, **extra):
    return {"started": f"start-{commit}", "argv": [commit], "settings": {"repeat": 3}, "versions": {"commit": commit},
            "cells": [dict(asdict(c), key=c.key) for c in cells], **extra}


def test_merge_replaces_measured_cells_keeps_the_others_and_records_each_cells_run(harness):
    h = harness
    previous = _result(h, "old", [_cell(h, 100, 2.0), _cell(h, 500, 3.0)], notes="kept notes")
    current = _result(h, "new", [])
    merged, cells = h.merge_results(previous, current, [_cell(h, 500, 0.5), _cell(h, 1000, 0.7)])

    by_members = {c.members: c for c in cells}
    assert {m: c.python.ms for m, c in by_members.items()} == {100: 2.0, 500: 0.5, 1000: 0.7}
    assert [r["commit"] for r in merged["runs"]] == ["old", "new"]
    assert {m: c.run for m, c in by_members.items()} == {100: 0, 500: 1, 1000: 1}
    assert merged["notes"] == "kept notes"
    assert len(merged["cells"]) == 3


def test_a_cell_cut_by_the_deadline_keeps_its_old_measurement_and_unused_runs_are_dropped(harness):
    h = harness
    previous = _result(h, "old", [_cell(h, 100, 2.0)])
    cut = _cell(h, 100, None, status="skipped", reason=h.DEADLINE_REASON + " (22 min)")
    merged, cells = h.merge_results(previous, _result(h, "new", []), [cut])

    assert cells[0].python.ms == 2.0 and cells[0].run == 0
    assert [r["commit"] for r in merged["runs"]] == ["old"]  # the new run measured nothing kept
