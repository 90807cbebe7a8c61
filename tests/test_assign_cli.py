"""``rebalance-monitor assign``: the real command as a subprocess, and in-process with stand-in assignors."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from assignors import AssignmentError, GroupAssignment, GroupSpec, TopicPartition
from assignors import registry
from streaming.cli.main import main

REPO = Path(__file__).resolve().parent.parent

# Spec scenario 1 (Range) and 8 (RoundRobin, ordered): Kafka's own expectations.
RANGE_SPEC = {
    "id": "range-1",
    "assignor": "range",
    "topics": {"t0": {"partitions": 3}, "t1": {"partitions": 3}},
    "members": [{"member_id": "C0", "topics": ["t0", "t1"]}, {"member_id": "C1", "topics": ["t0", "t1"]}],
}
RANGE_ANSWER = {"C0": [["t0", 0], ["t0", 1], ["t1", 0], ["t1", 1]], "C1": [["t0", 2], ["t1", 2]]}
ROUNDROBIN_ANSWER = {"C0": [["t0", 0], ["t0", 2], ["t1", 1]], "C1": [["t0", 1], ["t1", 0], ["t1", 2]]}


def run_cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streaming.cli.main", "assign", *args],
        input=stdin, capture_output=True, text=True, cwd=REPO, timeout=60,
    )


def lines_of(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


def as_sets(assignment: dict) -> dict:
    return {member: sorted(map(tuple, tps)) for member, tps in assignment.items()}


class TestRealCommand:
    def test_round_trip_through_stdin_and_stdout(self):
        proc = run_cli(stdin=json.dumps(RANGE_SPEC) + "\n")
        assert proc.returncode == 0, proc.stderr
        [answer] = lines_of(proc.stdout)
        assert answer["id"] == "range-1" and answer["assignor"] == "range"
        assert as_sets(answer["assignment"]) == as_sets(RANGE_ANSWER)
        assert answer["transferring"] == []
        assert answer["elapsed_ms"] >= 0

    def test_kip848_uniform_follows_the_topic_ids_given(self):
        # Kafka 4.1's UniformAssignor walks topic ids in hash order: Uuid(0, 3) ("b") before
        # Uuid(0, 5) ("a"), so the first member gets b.
        spec = {"id": "u", "assignor": "uniform",
                "topics": {"a": {"partitions": 2, "topic_id": "AAAAAAAAAAAAAAAAAAAABQ"},
                           "b": {"partitions": 2, "topic_id": "AAAAAAAAAAAAAAAAAAAAAw"}},
                "members": [{"member_id": "A", "topics": ["a", "b"]}, {"member_id": "B", "topics": ["a", "b"]}]}
        proc = run_cli(stdin=json.dumps(spec) + "\n")
        assert proc.returncode == 0, proc.stderr
        [answer] = lines_of(proc.stdout)
        assert answer["assignment"] == {"A": [["b", 0], ["b", 1]], "B": [["a", 0], ["a", 1]]}

    def test_files_the_assignor_flag_and_order_of_answers(self, tmp_path):
        specs = [dict(RANGE_SPEC, id=f"s{i}") for i in range(5)]
        (tmp_path / "in.jsonl").write_text("".join(json.dumps(s) + "\n" for s in specs))
        proc = run_cli("--assignor", "roundrobin", "--input", str(tmp_path / "in.jsonl"),
                       "--output", str(tmp_path / "out.jsonl"))
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == ""
        answers = lines_of((tmp_path / "out.jsonl").read_text())
        assert [a["id"] for a in answers] == ["s0", "s1", "s2", "s3", "s4"]
        assert all(a["assignor"] == "roundrobin" and a["assignment"] == ROUNDROBIN_ANSWER for a in answers)

    def test_bad_lines_become_error_lines_in_place_and_the_exit_code_is_1(self):
        bad_spec = dict(RANGE_SPEC, id="bad", topics={"t0": {"partitions": -1}})
        no_assignor = {k: v for k, v in RANGE_SPEC.items() if k != "assignor"} | {"id": "no-assignor"}
        stdin = "\n".join([
            json.dumps(RANGE_SPEC),
            "{not json",
            json.dumps(bad_spec),
            "",  # blank lines are skipped, not answered
            json.dumps(no_assignor),
            json.dumps(dict(RANGE_SPEC, id="last")),
        ]) + "\n"
        proc = run_cli(stdin=stdin)
        assert proc.returncode == 1
        answers = lines_of(proc.stdout)
        assert [a["id"] for a in answers] == ["range-1", None, "bad", "no-assignor", "last"]
        assert "assignment" in answers[0] and "assignment" in answers[4]
        assert answers[1]["error"].startswith("line 2: invalid JSON")
        assert answers[2]["error"] == "line 3: topics['t0'].partitions: partition count -1 is negative"
        assert "line 5: assignor: missing" in answers[3]["error"]

    def test_an_unknown_assignor_flag_fails_every_line_naming_the_assignor(self):
        proc = run_cli("--assignor", "fancy", stdin=json.dumps(RANGE_SPEC) + "\n")
        assert proc.returncode == 1
        [answer] = lines_of(proc.stdout)
        assert answer["id"] == "range-1" and "unknown assignor 'fancy'" in answer["error"]

    def test_repeat_reports_one_answer_per_line(self):
        proc = run_cli("--repeat", "5", "--warmup", "2", stdin=json.dumps(RANGE_SPEC) + "\n")
        assert proc.returncode == 0, proc.stderr
        [answer] = lines_of(proc.stdout)
        assert as_sets(answer["assignment"]) == as_sets(RANGE_ANSWER)

    def test_repeat_must_be_positive(self):
        proc = run_cli("--repeat", "0")
        assert proc.returncode == 2 and "--repeat" in proc.stderr

    def test_a_missing_input_file_is_a_usage_error(self, tmp_path):
        proc = run_cli("--input", str(tmp_path / "nope.jsonl"))
        assert proc.returncode == 2 and "cannot open --input" in proc.stderr

    def test_the_assign_module_does_not_load_pyspark(self):
        code = "import sys, streaming.cli.assign; sys.exit(3 if 'pyspark' in sys.modules else 0)"
        proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr

    def test_the_whole_assign_command_does_not_load_pyspark(self):
        code = (
            "import sys; from streaming.cli.main import main; "
            "rc = main(['assign', '--input', '/dev/null']); "
            "sys.exit(3 if 'pyspark' in sys.modules else rc)"
        )
        proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr


# --- in-process, with stand-in assignors (the real ones are tested against Kafka elsewhere) -------

CALLS: list[int] = []


def first_member_takes_all(spec: GroupSpec) -> GroupAssignment:
    """A stand-in: every partition to the first member, in order; counts its calls."""
    CALLS.append(1)
    first = spec.members[0].member_id
    assignment = {m.member_id: [] for m in spec.members}
    for topic in sorted({t for m in spec.members for t in m.topics if t in spec.topics}):
        assignment[first] += [TopicPartition(topic, p) for p in range(spec.topics[topic].partitions)]
    return GroupAssignment(assignment, {TopicPartition("t0", 9): first} if len(spec.members) > 2 else {})


def refuses(spec: GroupSpec) -> GroupAssignment:
    raise AssignmentError("topic 't0' is subscribed with an unknown topic id")


def crashes(spec: GroupSpec) -> GroupAssignment:
    return {}[spec.members[0].member_id]


@pytest.fixture
def stand_ins(monkeypatch):
    monkeypatch.setitem(registry._CONSUMER_ASSIGNORS, "range", (__name__, "first_member_takes_all"))
    monkeypatch.setitem(registry._CONSUMER_ASSIGNORS, "roundrobin", (__name__, "refuses"))
    monkeypatch.setitem(registry._CONSUMER_ASSIGNORS, "sticky", (__name__, "crashes"))
    CALLS.clear()


def run_in_process(monkeypatch, capsys, stdin: str, *args: str) -> tuple[int, list[dict]]:
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    rc = main(["assign", *args])
    return rc, lines_of(capsys.readouterr().out)


def test_in_process_answers_follow_spec_order_and_count_repeats(stand_ins, monkeypatch, capsys):
    spec = dict(RANGE_SPEC, members=[{"member_id": m, "topics": ["t0"]} for m in ("zz", "aa", "mm")])
    rc, [answer] = run_in_process(monkeypatch, capsys, json.dumps(spec) + "\n", "--repeat", "3", "--warmup", "2")
    assert rc == 0
    assert list(answer["assignment"]) == ["zz", "aa", "mm"]
    assert answer["assignment"]["zz"] == [["t0", 0], ["t0", 1], ["t0", 2]]
    assert answer["transferring"] == [["t0", 9, "zz"]]
    assert len(CALLS) == 5  # two warm-up calls, three timed


def test_warmup_seconds_keeps_making_untimed_calls_until_the_time_has_passed(stand_ins, monkeypatch, capsys):
    rc, [answer] = run_in_process(monkeypatch, capsys, json.dumps(RANGE_SPEC) + "\n",
                                  "--repeat", "1", "--warmup", "1", "--warmup-seconds", "0.05")
    assert rc == 0 and "assignment" in answer
    # A stand-in call takes microseconds: 50 ms of warm-up is far more than the one counted call.
    assert len(CALLS) > 10


def test_a_negative_warmup_time_is_refused_by_name(capsys):
    with pytest.raises(SystemExit):
        main(["assign", "--warmup-seconds", "-1"])
    assert "--warmup-seconds: must be 0 or more, got -1" in capsys.readouterr().err


def test_in_process_assignor_errors_and_crashes_become_error_lines(stand_ins, monkeypatch, capsys):
    stdin = "".join(json.dumps(dict(RANGE_SPEC, id=name, assignor=name)) + "\n" for name in ("roundrobin", "sticky", "range"))
    rc, answers = run_in_process(monkeypatch, capsys, stdin)
    assert rc == 1
    assert answers[0] == {"id": "roundrobin", "error": "line 1: topic 't0' is subscribed with an unknown topic id"}
    assert answers[1]["id"] == "sticky" and "internal error in the assignor: KeyError" in answers[1]["error"]
    assert "assignment" in answers[2]
