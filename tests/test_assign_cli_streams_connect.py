"""``rebalance-monitor assign`` for Kafka Streams and Kafka Connect group specs.

The real command as a subprocess, in-process through ``streaming.cli.main.main``, the round trip of an
answer into the next round's spec (``next_streams_spec``/``next_connect_spec``), error lines, and
the examples of docs/assign.md answered exactly as pasted.
"""

from __future__ import annotations

import copy
import io
import json
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

import streaming.cli.assign as assign_command
from assignors.connect.codec import CONNECT_SPEC_FIELDS, LEADER_STATE_FIELDS, WORKER_FIELDS, next_connect_spec
from assignors.streams.codec import CLIENT_FIELDS, CONFIG_FIELDS, STREAMS_SPEC_FIELDS, next_streams_spec
from schemas.docs import generated_files
from streaming.cli.main import main

REPO = Path(__file__).resolve().parent.parent

# Two clients ran everything, each with a caught-up standby of the other's tasks; p3 joins with no
# state. Kafka's HA assignor places p3's share as warm-ups and asks for a probing rebalance.
STREAMS_SCALE_OUT = {
    "id": "orders-app",
    "assignor": "streams-ha",
    "clients": [
        {"process_id": "p1", "capacity": 1, "previous_active_tasks": ["0_0", "0_1", "1_0"],
         "previous_standby_tasks": ["0_2", "0_3"], "task_lags": {"0_2": 20, "0_3": 35}},
        {"process_id": "p2", "capacity": 1, "previous_active_tasks": ["0_2", "0_3", "1_1"],
         "previous_standby_tasks": ["0_0", "0_1"], "task_lags": {"0_0": 10, "0_1": 0}},
        {"process_id": "p3", "capacity": 1, "task_lags": {"0_0": 5000, "0_1": 5000, "0_2": 5000, "0_3": 5000}},
    ],
    "stateful_tasks": ["0_0", "0_1", "0_2", "0_3"],
    "stateless_tasks": ["1_0", "1_1"],
    "config": {"acceptable_recovery_lag": 100, "num_standby_replicas": 1, "max_warmup_replicas": 2,
               "probing_rebalance_interval_ms": 600000},
    "now_ms": 1_000_000,
}
STREAMS_SCALE_OUT_CLIENTS = {
    "p1": {"active_tasks": ["0_0", "0_2", "0_3"], "standby_tasks": ["0_1"], "warmup_tasks": []},
    "p2": {"active_tasks": ["0_1", "1_1"], "standby_tasks": ["0_0", "0_2", "0_3"], "warmup_tasks": []},
    "p3": {"active_tasks": ["1_0"], "standby_tasks": [], "warmup_tasks": ["0_1", "0_2"]},
}

MAX_DELAY = 300_000
CONNECT_TWO_WORKERS = {
    "id": "connect-cluster",
    "assignor": "connect-incremental",
    "connectors": {"connector1": 4, "connector2": 4},
    "workers": [{"worker_id": "worker1", "url": "http://worker1:8083"}, {"worker_id": "worker2"}],
    "scheduled_rebalance_max_delay_ms": MAX_DELAY,
    "now_ms": 1_000_000,
}
# Connectors sorted by name go round-robin over the workers sorted by id, tasks continue the same
# circular order (first round: every item is new, so eager and incremental agree).
WORKER1_TASKS = [["connector1", 0], ["connector1", 2], ["connector2", 0], ["connector2", 2]]
WORKER2_TASKS = [["connector1", 1], ["connector1", 3], ["connector2", 1], ["connector2", 3]]

CONSUMER_SPEC = {
    "id": "range-1", "assignor": "range",
    "topics": {"t0": {"partitions": 2}},
    "members": [{"member_id": "C0", "topics": ["t0"]}, {"member_id": "C1", "topics": ["t0"]}],
}


def run_cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streaming.cli.main", "assign", *args],
        input=stdin, capture_output=True, text=True, cwd=REPO, timeout=120,
    )


def jsonl(*objs) -> str:
    return "".join((o if isinstance(o, str) else json.dumps(o)) + "\n" for o in objs)


def lines_of(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


def run_in_process(monkeypatch, capsys, stdin: str, *args: str) -> tuple[int, list[dict]]:
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    rc = main(["assign", *args])
    return rc, lines_of(capsys.readouterr().out)


def answer(spec: dict, assignor: str | None = None) -> dict:
    """One line answered in-process, without timing repeats."""
    return assign_command.answer_line(json.dumps(spec), 1, assignor, 1, 0)


def without_time(obj: dict) -> dict:
    assert obj["elapsed_ms"] >= 0
    return {k: v for k, v in obj.items() if k != "elapsed_ms"}


# --- the real command ------------------------------------------------------------------------------


class TestRealCommand:
    def test_mixed_group_types_are_answered_in_order_with_their_own_fields(self):
        eager = dict(CONNECT_TWO_WORKERS, id="eager", assignor="connect-eager")
        proc = run_cli(stdin=jsonl(CONSUMER_SPEC, STREAMS_SCALE_OUT, CONNECT_TWO_WORKERS, eager))
        assert proc.returncode == 0, proc.stderr
        consumer, streams, connect, eager_answer = lines_of(proc.stdout)
        assert consumer["assignment"] == {"C0": [["t0", 0]], "C1": [["t0", 1]]}

        assert streams["id"] == "orders-app" and streams["assignor"] == "streams-ha"
        assert streams["clients"] == STREAMS_SCALE_OUT_CLIENTS
        assert streams["probing_rebalance_needed"] is True
        assert streams["probing_rebalance_at_ms"] == 1_000_000 + 600_000
        assert streams["moved_tasks"] == [["0_1", "p1", "p2"], ["0_2", "p2", "p1"], ["0_3", "p2", "p1"],
                                          ["1_0", "p1", "p3"]]
        assert streams["fallback_used"] is False and streams["elapsed_ms"] >= 0

        for a, name in ((connect, "connect-incremental"), (eager_answer, "connect-eager")):
            assert a["assignor"] == name and a["assignment_error"] == "NONE"
            assert a["leader_id"] == "worker1" and a["config_offset"] == 0 and a["delay_ms"] == 0
            assert a["workers"]["worker1"]["connectors"] == ["connector1"]
            assert a["workers"]["worker1"]["tasks"] == WORKER1_TASKS
            assert a["workers"]["worker2"]["assigned_tasks"] == WORKER2_TASKS
            assert a["workers"]["worker2"]["revoked_tasks"] == []
        assert connect["leader_state"]["previous_members"] == ["worker1", "worker2"]
        assert connect["leader_state"]["previous_generation_id"] == 0
        assert "leader_state" not in eager_answer

    def test_the_assignor_flag_and_files(self, tmp_path):
        line = {k: v for k, v in STREAMS_SCALE_OUT.items() if k != "assignor"}
        (tmp_path / "in.jsonl").write_text(jsonl(line, dict(line, id="again")))
        proc = run_cli("--assignor", "streams-ha", "--input", str(tmp_path / "in.jsonl"),
                       "--output", str(tmp_path / "out.jsonl"), "--repeat", "3", "--warmup", "1")
        assert proc.returncode == 0, proc.stderr
        answers = lines_of((tmp_path / "out.jsonl").read_text())
        assert [a["id"] for a in answers] == ["orders-app", "again"]
        assert all(a["clients"] == STREAMS_SCALE_OUT_CLIENTS for a in answers)

    def test_bad_lines_are_error_lines_in_place_and_the_exit_code_is_1(self):
        bad_streams = copy.deepcopy(STREAMS_SCALE_OUT) | {"id": "bad-streams"}
        bad_streams["clients"][2]["task_lags"]["0_9"] = "far"
        bad_connect = dict(CONNECT_TWO_WORKERS, id="bad-connect", leader_id="worker9")
        proc = run_cli(stdin=jsonl(bad_streams, "{oops", CONNECT_TWO_WORKERS, bad_connect,
                                   {"id": "typo", "assignor": "streams-hq"}))
        assert proc.returncode == 1
        answers = lines_of(proc.stdout)
        assert [a["id"] for a in answers] == ["bad-streams", None, "connect-cluster", "bad-connect", "typo"]
        assert answers[0]["error"] == "line 1: clients[2].task_lags['0_9']: must be an integer, got 'far'"
        assert answers[1]["error"].startswith("line 2: invalid JSON")
        assert "workers" in answers[2]
        assert answers[3]["error"] == "line 4: leader_id: 'worker9' is not one of the workers"
        assert "unknown assignor 'streams-hq'" in answers[4]["error"] and "connect-incremental" in answers[4]["error"]


# --- in-process ------------------------------------------------------------------------------------


def test_repeat_and_warmup_call_the_streams_assignor_that_many_times(monkeypatch, capsys):
    calls = []
    real = assign_command.assign_streams_ha
    monkeypatch.setattr(assign_command, "assign_streams_ha", lambda spec: calls.append(1) or real(spec))
    rc, [a] = run_in_process(monkeypatch, capsys, jsonl(STREAMS_SCALE_OUT), "--repeat", "3", "--warmup", "2")
    assert rc == 0 and a["clients"] == STREAMS_SCALE_OUT_CLIENTS
    assert len(calls) == 5


def test_repeat_gives_the_incremental_assignor_the_same_leader_state_every_time(monkeypatch, capsys):
    seen = []
    real = assign_command.assign_connect_incremental

    def spy(spec, state, now_ms):
        seen.append((state, now_ms))
        return real(spec, state, now_ms)

    monkeypatch.setattr(assign_command, "assign_connect_incremental", spy)
    rc, [a] = run_in_process(monkeypatch, capsys, jsonl(CONNECT_TWO_WORKERS), "--repeat", "4")
    assert rc == 0 and a["workers"]["worker2"]["tasks"] == WORKER2_TASKS
    assert len(seen) == 4 and len(set(seen)) == 1 and seen[0][1] == 1_000_000


def test_an_assignor_crash_on_one_line_does_not_lose_the_next(monkeypatch, capsys):
    def crashes(spec):
        raise KeyError("p9")

    monkeypatch.setattr(assign_command, "assign_streams_ha", crashes)
    rc, answers = run_in_process(monkeypatch, capsys, jsonl(STREAMS_SCALE_OUT, CONNECT_TWO_WORKERS))
    assert rc == 1
    assert answers[0]["id"] == "orders-app" and "internal error in the assignor: KeyError" in answers[0]["error"]
    assert answers[1]["workers"]["worker1"]["tasks"] == WORKER1_TASKS


# --- round trips: an answer fed into the next round ------------------------------------------------


def test_streams_scale_out_converges_when_warm_ups_catch_up():
    spec, rounds = copy.deepcopy(STREAMS_SCALE_OUT), []
    while True:
        a = answer(spec)
        rounds.append(a)
        if not a["probing_rebalance_needed"] or len(rounds) == 5:
            break
        # During the probing interval every standby and warm-up restores to the end of its changelog.
        caught_up = {pid: {t: 0 for t in c["standby_tasks"] + c["warmup_tasks"]} for pid, c in a["clients"].items()}
        spec = next_streams_spec(spec, a, reported=caught_up)
        assert spec["now_ms"] == a["probing_rebalance_at_ms"]
    assert len(rounds) == 2, "one probing rebalance should finish a scale-out of two warm-ups"
    final = rounds[-1]["clients"]
    # The warmed-up task 0_2 is now active on p3; every client runs two tasks; still one standby each.
    assert "0_2" in final["p3"]["active_tasks"]
    assert sorted(len(c["active_tasks"]) for c in final.values()) == [2, 2, 2]
    standbys = [t for c in final.values() for t in c["standby_tasks"]]
    assert sorted(standbys) == ["0_0", "0_1", "0_2", "0_3"]
    assert all(not c["warmup_tasks"] for c in final.values())
    assert rounds[-1]["probing_rebalance_at_ms"] is None


def test_streams_next_spec_marks_previous_tasks_and_keeps_lags_valid():
    a = answer(STREAMS_SCALE_OUT)
    spec = next_streams_spec(STREAMS_SCALE_OUT, a)
    p1, p2, p3 = spec["clients"]
    assert p1["previous_active_tasks"] == ["0_0", "0_2", "0_3"] and p1["previous_standby_tasks"] == ["0_1"]
    assert p1["task_lags"] == {"0_1": 0}  # 0_1 left p1's active set while current
    assert p3["previous_standby_tasks"] == ["0_1", "0_2"]  # warm-ups are standby copies to Kafka
    assert p3["task_lags"] == STREAMS_SCALE_OUT["clients"][2]["task_lags"]  # nothing reported: unchanged
    assert STREAMS_SCALE_OUT["clients"][0]["previous_active_tasks"] == ["0_0", "0_1", "1_0"]  # input untouched
    # Unchanged lags: the warm-ups have not caught up, so the same warm-ups and another probing round.
    again = answer(spec)
    assert again["clients"]["p3"]["warmup_tasks"] == ["0_1", "0_2"]
    assert again["probing_rebalance_at_ms"] == a["probing_rebalance_at_ms"] + 600_000


def test_streams_offset_sum_clients_round_trip_through_end_offsets():
    spec = {
        "id": "sums", "assignor": "streams-ha",
        "clients": [{"process_id": "a", "task_offset_sums": {"0_0": -2, "0_1": -2}},
                    {"process_id": "b"}],
        "stateful_tasks": ["0_0", "0_1"],
        "task_end_offset_sums": {"0_0": 900, "0_1": 900},
        "config": {"acceptable_recovery_lag": 100, "max_warmup_replicas": 1},
    }
    a = answer(spec)
    assert a["clients"]["a"]["active_tasks"] == ["0_0", "0_1"]
    assert a["clients"]["b"]["warmup_tasks"] == ["0_1"]
    nxt = next_streams_spec(spec, a, reported={"b": {"0_1": 880}})  # b restored to 20 behind the end
    assert nxt["clients"][1]["task_offset_sums"] == {"0_1": 880}
    a2 = answer(nxt)
    assert a2["clients"] == {
        "a": {"active_tasks": ["0_0"], "standby_tasks": [], "warmup_tasks": []},
        "b": {"active_tasks": ["0_1"], "standby_tasks": [], "warmup_tasks": []},
    }
    assert a2["moved_tasks"] == [["0_1", "a", "b"]] and a2["probing_rebalance_needed"] is False
    # a stopped 0_1 while current: its offset sum is now the end offset sum (lag 0).
    assert next_streams_spec(nxt, a2)["clients"][0]["task_offset_sums"] == {"0_1": 900}


def test_connect_bounced_worker_gets_its_own_work_back_after_the_delay():
    """Spec scenario 41 through the JSON contract: leave, come back inside the delay, work returns."""
    first = answer(CONNECT_TWO_WORKERS)
    spec = next_connect_spec(CONNECT_TWO_WORKERS, first)
    assert spec["generation_id"] == 1 and spec["last_completed_generation_id"] == 0
    assert spec["workers"][1]["tasks"] == WORKER2_TASKS

    spec["workers"] = spec["workers"][:1]  # worker2 bounces
    gone = answer(spec)
    assert gone["delay_ms"] == MAX_DELAY and gone["workers"]["worker1"]["delay_ms"] == MAX_DELAY
    assert gone["lost_pending_connectors"] == ["connector2"] and gone["lost_pending_tasks"] == WORKER2_TASKS
    assert gone["leader_state"]["scheduled_rebalance_ms"] == 1_000_000 + MAX_DELAY

    spec = next_connect_spec(spec, gone, now_ms=1_000_000 + MAX_DELAY // 2)
    spec["workers"].append({"worker_id": "worker2"})  # back, empty, inside the delay
    back = answer(spec)
    assert back["delay_ms"] == MAX_DELAY // 2
    assert back["workers"]["worker2"]["tasks"] == [] and back["leader_state"]["candidate_workers"] == ["worker2"]

    spec = next_connect_spec(spec, back)
    assert spec["now_ms"] == 1_000_000 + MAX_DELAY  # the workers rejoin when the delay expires
    expired = answer(spec)
    assert expired["delay_ms"] == 0 and expired["lost_pending_tasks"] == []
    assert expired["workers"]["worker2"]["connectors"] == ["connector2"]
    assert expired["workers"]["worker2"]["assigned_tasks"] == WORKER2_TASKS
    assert all(not w["revoked_tasks"] for w in expired["workers"].values())


def test_connect_config_mismatch_then_the_leader_catches_up():
    spec = copy.deepcopy(CONNECT_TWO_WORKERS)
    spec["workers"][1]["config_offset"] = 9
    spec["leader_config_offset"] = 7  # the leader is behind worker2
    mismatch = answer(spec)
    assert mismatch["assignment_error"] == "CONFIG_MISMATCH" and mismatch["config_offset"] == 9
    assert all(w["tasks"] == [] for w in mismatch["workers"].values())
    assert mismatch["leader_state"]["previous_generation_id"] == -1  # untouched, as in Kafka
    nxt = next_connect_spec(spec, mismatch)
    assert nxt["leader_config_offset"] == 9
    ok = answer(nxt)
    assert ok["assignment_error"] == "NONE" and ok["workers"]["worker2"]["tasks"] == WORKER2_TASKS


def test_connect_scale_out_revokes_for_balance_and_the_next_round_reassigns():
    spec = next_connect_spec(CONNECT_TWO_WORKERS, answer(CONNECT_TWO_WORKERS))
    spec["workers"].append({"worker_id": "worker3"})
    revoking = answer(spec)
    revoked = [t for w in revoking["workers"].values() for t in w["revoked_tasks"]]
    assert len(revoked) == 2 and revoking["workers"]["worker3"]["tasks"] == []
    assert revoking["leader_state"]["revoked_in_previous"] is True
    settled = answer(next_connect_spec(spec, revoking))
    assert sorted(len(w["tasks"]) for w in settled["workers"].values()) == [2, 3, 3]
    assert sorted(t for w in settled["workers"].values() for t in w["assigned_tasks"]) == sorted(revoked)


def test_connect_eager_round_trip_reassigns_from_scratch():
    eager = dict(CONNECT_TWO_WORKERS, assignor="connect-eager")
    spec = next_connect_spec(eager, answer(eager))
    assert "leader_state" not in spec
    spec["workers"].append({"worker_id": "worker0"})
    a = answer(spec)
    assert a["workers"]["worker0"]["connectors"] == ["connector1"]  # worker0 sorts first
    assert sorted(len(w["tasks"]) for w in a["workers"].values()) == [2, 3, 3]


def test_connect_leader_state_survives_json_round_trips_exactly():
    """Random joins, leaves and clock steps fed through JSON give the model's answers with its state kept in Python."""
    from assignors.connect import assign_connect_incremental
    from assignors.connect.codec import format_connect_assignment, parse_connect_spec

    rng = random.Random(41)
    for _ in range(15):
        spec = {"id": "prop", "assignor": "connect-incremental",
                "connectors": {f"conn-{i}": rng.randint(0, 5) for i in range(rng.randint(1, 6))},
                "workers": [{"worker_id": "w0"}], "now_ms": 0,
                "scheduled_rebalance_max_delay_ms": rng.choice([0, 1_000, MAX_DELAY])}
        state, next_worker = None, 1
        for _ in range(12):
            parsed = parse_connect_spec(spec, "connect-incremental")
            assert parsed.state == (state or parsed.state), "leader_state read back differs from the model's"
            expected, state = assign_connect_incremental(parsed.spec, parsed.state, parsed.now_ms)
            got = answer(spec)
            assert without_time(got) == without_time(format_connect_assignment(parsed, expected, state, 0.0))
            spec = next_connect_spec(spec, got, now_ms=spec["now_ms"] + rng.choice([0, 500, 2_000, MAX_DELAY]))
            event = rng.random()
            if event < 0.35:
                spec["workers"].append({"worker_id": f"w{next_worker}"})
                next_worker += 1
            elif event < 0.6 and len(spec["workers"]) > 1:  # w0 stays: it is the leader
                spec["workers"].pop(rng.randrange(1, len(spec["workers"])))


def test_next_round_of_an_error_line_is_refused():
    from assignors.errors import InvalidGroupSpecError

    with pytest.raises(InvalidGroupSpecError, match="error line"):
        next_streams_spec(STREAMS_SCALE_OUT, {"id": "x", "error": "line 1: boom"})
    with pytest.raises(InvalidGroupSpecError, match="error line"):
        next_connect_spec(CONNECT_TWO_WORKERS, {"id": "x", "error": "line 1: boom"})


# --- error lines name what is wrong ----------------------------------------------------------------


def streams_with(**changes) -> dict:
    spec = copy.deepcopy(STREAMS_SCALE_OUT)
    for path, value in changes.items():
        target = spec
        *parents, last = path.split("__")
        for key in parents:
            target = target[int(key)] if key.isdigit() else target[key]
        if value is DELETE:
            del target[last]
        else:
            target[last] = value
    return spec


DELETE = object()

STREAMS_ERRORS = [
    (streams_with(clients=[]), "clients: a Streams group needs at least one client"),
    (streams_with(clients__0__capacity=0), "clients[0].capacity: must be >= 1, got 0"),
    (streams_with(clients__0__threads=2), "clients[0]: unknown field(s) 'threads'; allowed: capacity,"),
    (streams_with(clients__1__process_id="p1"), "clients[1].process_id: 'p1' is already used by clients[0]"),
    (streams_with(clients__0__process_id=DELETE), "clients[0].process_id: missing (required)"),
    (streams_with(stateful_tasks=["0_0", "0-1"]),
     "stateful_tasks[1]: task id '0-1' is not of the form '<subtopology>_<partition>'"),
    (streams_with(stateless_tasks=["0_0"]), "stateless_tasks[0]: task '0_0' is also listed in stateful_tasks"),
    (streams_with(stateful_tasks=["0_0", "0_0"]), "stateful_tasks[1]: task id '0_0' is already listed at [0]"),
    (streams_with(clients__0__task_lags={"0_0": 40, "0_2": 20, "0_3": 35}),
     "clients[0].previous_active_tasks[0]: task '0_0' ran as active, so its task_lags value is -2, but task_lags"
     " gives 40"),
    (streams_with(clients__2__task_lags={"0_0": 1}), "clients[2].task_lags: no lag for stateful task '0_1'"),
    (streams_with(clients__2__task_lags={"0_0": -1, "0_1": 0, "0_2": 0, "0_3": 0}),
     "clients[2].task_lags['0_0']: must be >= 0 or -2 or -3, got -1"),
    (streams_with(clients__2__task_lags={"0_0": 1, "0_1": 1, "0_2": 1, "0_3": 1, "0_x": 1}),
     "clients[2].task_lags['0_x']: task id '0_x' is not of the form '<subtopology>_<partition>'"),
    (streams_with(clients__2__task_offset_sums={}), "clients[2]: give task_lags or task_offset_sums, not both"),
    (streams_with(clients__1__previous_standby_tasks=["1_0"]),
     "clients[1].previous_standby_tasks[0]: task '1_0' is stateless; only stateful tasks have standbys"),
    (streams_with(clients__1__previous_standby_tasks=["0_2"]),
     "clients[1].previous_standby_tasks[0]: task '0_2' is also in previous_active_tasks"),
    (streams_with(task_end_offset_sums={"0_0": 1}), "task_end_offset_sums: no end offset sum for stateful task '0_1'"),
    (streams_with(config__probing_rebalance_interval_ms=1000),
     "config.probing_rebalance_interval_ms: must be >= 60000, got 1000"),
    (streams_with(config__balance_factor=1), "config: unknown field(s) 'balance_factor'"),
    (streams_with(clients__0__tags={"zone": 1}), "clients[0].tags: must be an object of tag key -> string value"),
    (streams_with(now_ms=-5), "now_ms: must be >= 0, got -5"),
    ([1, 2], "must be a JSON object (a Streams group spec), got [1, 2]"),
]


@pytest.mark.parametrize("spec, message", STREAMS_ERRORS, ids=[m[:40] for _, m in STREAMS_ERRORS])
def test_streams_error_lines_name_the_field(spec, message):
    got = answer(spec, assignor="streams-ha")
    assert set(got) == {"id", "error"}
    assert got["error"].startswith("line 1: " + message), got["error"]


def connect_with(**changes) -> dict:
    spec = copy.deepcopy(CONNECT_TWO_WORKERS)
    spec.update(changes)
    return spec


CONNECT_ERRORS = [
    (connect_with(workers=[]), "workers: a Connect group needs at least one worker"),
    (connect_with(workers=[{"worker_id": "w"}, {"worker_id": "w"}]),
     "workers[1].worker_id: 'w' is already used by workers[0]"),
    (connect_with(workers=[{"id": "w"}]), "workers[0]: unknown field(s) 'id'; allowed: config_offset,"),
    (connect_with(workers=[{"worker_id": "w", "tasks": [["connector1", "0"]]}]),
     "workers[0].tasks[0]: task number of connector 'connector1' must be an integer >= 0, got '0'"),
    (connect_with(workers=[{"worker_id": "w", "tasks": ["connector1-0"]}]),
     "workers[0].tasks[0]: must be a [connector, task] pair, got 'connector1-0'"),
    (connect_with(workers=[{"worker_id": "w", "connectors": ["c", "c"]}]),
     "workers[0].connectors[1]: connector 'c' is already listed at [0]"),
    (connect_with(connectors={"connector1": -1}), "connectors['connector1']: must be >= 0, got -1"),
    (connect_with(connectors=None), "connectors: must be an object of connector -> task count, got null"),
    (connect_with(leader_id="nobody"), "leader_id: 'nobody' is not one of the workers"),
    (connect_with(scheduled_rebalance_max_delay_ms=-1), "scheduled_rebalance_max_delay_ms: must be >= 0, got -1"),
    (connect_with(leader_state={"delay": 5}), "leader_state: unknown field(s) 'delay'"),
    (connect_with(leader_state={"previous_tasks": [["c", -1]]}),
     "leader_state.previous_tasks[0]: task number of connector 'c' must be an integer >= 0, got -1"),
    (connect_with(leader_state={"revoked_in_previous": 1}), "leader_state.revoked_in_previous: must be true or false"),
    (connect_with(assignor="connect-eager", leader_state={}),
     "leader_state: only connect-incremental keeps leader state between rebalances; connect-eager has none"),
    (connect_with(members=[]), "unknown field(s) 'members'"),
]


@pytest.mark.parametrize("spec, message", CONNECT_ERRORS, ids=[m[:40] for _, m in CONNECT_ERRORS])
def test_connect_error_lines_name_the_field(spec, message):
    got = answer(spec)
    assert got["id"] == "connect-cluster" and set(got) == {"id", "error"}
    assert got["error"].startswith("line 1: " + message), got["error"]


def test_a_streams_line_given_a_connect_assignor_fails_on_the_connect_fields():
    got = answer(STREAMS_SCALE_OUT, assignor="connect-eager")
    assert got["error"].startswith("line 1: unknown field(s) 'clients', 'config', 'stateful_tasks'")


# --- the published contract ------------------------------------------------------------------------


def test_a_java_reference_streams_spec_with_an_assignor_is_a_valid_line_for_the_same_spec():
    """docs/assign.md promises that the reference's spec (docs/streams-connect-reference.md) is accepted."""
    from assignors.streams.codec import parse_streams_spec
    from tests.assignors.test_differential_streams_java import random_spec, spec_to_json

    rng = random.Random(20261122)
    for i in range(150):
        spec = random_spec(rng)
        line = dict(spec_to_json(spec, f"r{i}"), assignor="streams-ha")
        assert parse_streams_spec(line, "streams-ha").spec == spec, line



def schema_file(name: str) -> dict:
    return json.loads((REPO / "schemas" / name).read_text())


@pytest.mark.parametrize("name, top, nested", [
    ("assign_streams.schema.json", STREAMS_SPEC_FIELDS,
     {("clients", "items"): CLIENT_FIELDS, ("config",): CONFIG_FIELDS}),
    ("assign_connect.schema.json", CONNECT_SPEC_FIELDS,
     {("workers", "items"): WORKER_FIELDS, ("leader_state",): LEADER_STATE_FIELDS}),
])
def test_schema_files_list_exactly_the_fields_the_parser_accepts(name, top, nested):
    schema = schema_file(name)
    assert (REPO / "schemas" / name) in generated_files()
    assert list(schema["properties"]) == [f.name for f in top]
    assert schema["required"] == [f.name for f in top if f.required] and schema["additionalProperties"] is False
    for (key, *rest), fields in nested.items():
        sub = schema["properties"][key]
        for step in rest:
            sub = sub[step]
        assert list(sub["properties"]) == [f.name for f in fields] and sub["additionalProperties"] is False


def doc_examples() -> list[tuple[str, dict, dict]]:
    """(title, input line, answer line) for each example pair in docs/assign.md."""
    text = (REPO / "docs" / "assign.md").read_text()
    pairs = re.findall(r"#### (.+?)\n.*?```json\n(.+?)\n```.*?```json\n(.+?)\n```", text, flags=re.S)
    return [(title, json.loads(spec), json.loads(out)) for title, spec, out in pairs]


def test_docs_have_an_example_per_assignor():
    assert {spec["assignor"] for _, spec, _ in doc_examples()} >= {"streams-ha", "connect-incremental", "connect-eager"}


@pytest.mark.parametrize("title, spec, expected", doc_examples(), ids=[t for t, _, _ in doc_examples()])
def test_docs_examples_are_answered_as_pasted(title, spec, expected):
    assert without_time(answer(spec)) == without_time(expected)
