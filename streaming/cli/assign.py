"""``rebalance-monitor assign``: run an assignor over JSON Lines group specs.

Usage::

    rebalance-monitor assign [--assignor NAME] [--input PATH|-] [--output PATH|-] [--repeat N] [--warmup W]
                             [--warmup-seconds S]

Each input line is a group spec; each output line is the assignment, or ``{"id": ..., "error":
"..."}`` for a line that could not be assigned. Lines are answered in order and a bad line does not
stop the run; the exit code is 0 when every line succeeded and 1 otherwise. Blank lines are skipped.

The line's ``assignor`` (or ``--assignor``) picks the group type and so the codec: consumer groups
(:mod:`assignors.codec`), Kafka Streams ``streams-ha`` (:mod:`assignors.streams.codec`) and Kafka
Connect ``connect-eager``/``connect-incremental`` (:mod:`assignors.connect.codec`); docs/assign.md
has the Streams and Connect fields. One file may mix group types.

``elapsed_ms`` is the in-process time of the assignor call alone (parsing and formatting are
outside the clock), so it compares with the Java reference's number: with ``--repeat N`` the call
runs N times and the median is reported, after ``--warmup W`` untimed calls, continued until
``--warmup-seconds S`` have passed (as the Java reference's warm-up does, so that a small spec's
first timed calls do not land on a cold machine).

This module must not import PySpark: the command is used in tight loops by tests and benchmarks.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass
from typing import IO, Any, Callable, Iterable, Iterator, Mapping

from assignors.codec import format_error, format_group_assignment, parse_group_spec, spec_id_of
from assignors.connect import assign_connect_eager, assign_connect_incremental
from assignors.connect.codec import CONNECT_ASSIGNOR_NAMES, EAGER, format_connect_assignment, parse_connect_spec
from assignors.errors import InvalidGroupSpecError, RebalanceMonitorError
from assignors.registry import CONSUMER_ASSIGNOR_NAMES, get_assignor
from assignors.streams import assign_streams_ha
from assignors.streams.codec import STREAMS_ASSIGNOR_NAMES, format_streams_assignment, parse_streams_spec

ASSIGNOR_NAMES: tuple[str, ...] = CONSUMER_ASSIGNOR_NAMES + STREAMS_ASSIGNOR_NAMES + CONNECT_ASSIGNOR_NAMES


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "assign",
        help="run a Kafka assignor over JSON Lines group specs",
        description=(
            "Read group specs (JSON Lines), run the assignor of each line (or --assignor) and write"
            " one answer line per spec, in order. Exit code 1 if any line failed."
        ),
    )
    parser.add_argument(
        "--assignor",
        metavar="NAME",
        help=f"assignor for every line, overriding the line's own ({', '.join(ASSIGNOR_NAMES)})",
    )
    parser.add_argument("--input", default="-", metavar="PATH|-", help="spec file (default: stdin)")
    parser.add_argument("--output", default="-", metavar="PATH|-", help="answer file (default: stdout)")
    parser.add_argument(
        "--repeat", type=_positive_int, default=1, metavar="N",
        help="run each assignment N times and report the median time (default 1)",
    )
    parser.add_argument(
        "--warmup", type=_non_negative_int, default=0, metavar="W",
        help="untimed runs of each assignment before the timed ones (default 0)",
    )
    parser.add_argument(
        "--warmup-seconds", type=_non_negative_float, default=0.0, metavar="S",
        help="keep making untimed runs until S seconds of warm-up have passed (default 0)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    with ExitStack() as stack:
        source = _open(stack, args.input, "r", sys.stdin)
        sink = _open(stack, args.output, "w", sys.stdout)
        failed = 0
        for answer in assign_lines(source, args.assignor, args.repeat, args.warmup, args.warmup_seconds):
            failed += "error" in answer
            sink.write(json.dumps(answer, separators=(", ", ": ")) + "\n")
            # Flushed per line so that a reader driving us through a pipe sees each answer at once.
            sink.flush()
    return 1 if failed else 0


def assign_lines(
    lines: Iterable[str], assignor_override: str | None = None, repeat: int = 1, warmup: int = 0,
    warmup_seconds: float = 0.0,
) -> Iterator[dict[str, Any]]:
    """Answer each non-blank line; never raises for a bad line (it becomes an error answer)."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        yield answer_line(line, number, assignor_override, repeat, warmup, warmup_seconds)


def answer_line(line: str, number: int, assignor_override: str | None, repeat: int, warmup: int,
                warmup_seconds: float = 0.0) -> dict[str, Any]:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        return format_error(None, f"line {number}: invalid JSON: {exc}")
    spec_id = spec_id_of(obj)
    try:
        job = prepare(obj, assignor_override)
        warm_until = time.perf_counter() + warmup_seconds
        calls = 0
        while calls < warmup or time.perf_counter() < warm_until:
            job.call()
            calls += 1
        times: list[float] = []
        for _ in range(repeat):
            # Free the previous answer before the clock starts: its deallocation is not this call's.
            result = None
            start = time.perf_counter()
            result = job.call()
            times.append(time.perf_counter() - start)
        return job.answer(result, statistics.median(times) * 1000.0)
    except RebalanceMonitorError as exc:
        return format_error(spec_id, f"line {number}: {exc}")
    except Exception as exc:  # noqa: BLE001 - an assignor bug on one spec must not lose the others' answers
        return format_error(spec_id, f"line {number}: internal error in the assignor: {type(exc).__name__}: {exc}")


@dataclass(frozen=True, slots=True)
class AssignmentJob:
    """One parsed line: ``call`` is the assignor call alone (what is timed), ``answer`` formats its result."""

    call: Callable[[], Any]
    answer: Callable[[Any, float], dict[str, Any]]


def prepare(obj: object, assignor_override: str | None) -> AssignmentJob:
    """Parse one decoded line with the codec of its group type (chosen by the assignor name)."""
    name = assignor_override if assignor_override is not None else (
        obj.get("assignor") if isinstance(obj, Mapping) else None
    )
    if name in STREAMS_ASSIGNOR_NAMES:
        return _prepare_streams(obj, name)
    if name in CONNECT_ASSIGNOR_NAMES:
        return _prepare_connect(obj, name)
    if isinstance(name, str) and name not in CONSUMER_ASSIGNOR_NAMES:
        # The consumer codec would list only the consumer assignors.
        raise InvalidGroupSpecError(f"assignor: unknown assignor {name!r}; known assignors: {', '.join(ASSIGNOR_NAMES)}")
    # Missing or mistyped names are worded by the consumer codec, the historical contract.
    parsed = parse_group_spec(obj, assignor_override)
    assign = get_assignor(parsed.assignor)
    return AssignmentJob(
        call=lambda: assign(parsed.spec),
        answer=lambda result, ms: format_group_assignment(parsed.spec_id, parsed.assignor, parsed.spec, result, ms),
    )


def _prepare_streams(obj: object, name: str) -> AssignmentJob:
    parsed = parse_streams_spec(obj, name)
    return AssignmentJob(
        call=lambda: assign_streams_ha(parsed.spec),
        answer=lambda result, ms: format_streams_assignment(parsed, result, ms),
    )


def _prepare_connect(obj: object, name: str) -> AssignmentJob:
    parsed = parse_connect_spec(obj, name)
    if name == EAGER:  # no leader state in, none out
        return AssignmentJob(
            call=lambda: assign_connect_eager(parsed.spec),
            answer=lambda result, ms: format_connect_assignment(parsed, result, None, ms),
        )
    return AssignmentJob(
        call=lambda: assign_connect_incremental(parsed.spec, parsed.state, parsed.now_ms),
        answer=lambda result, ms: format_connect_assignment(parsed, result[0], result[1], ms),
    )


def _open(stack: ExitStack, path: str, mode: str, standard: IO[str]) -> IO[str]:
    if path == "-":
        return standard
    try:
        return stack.enter_context(open(path, mode, encoding="utf-8"))
    except OSError as exc:
        option = "--input" if "r" in mode else "--output"
        raise RebalanceMonitorError(f"cannot open {option} {path!r}: {exc.strerror}") from None


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def _non_negative_float(text: str) -> float:
    value = float(text)
    if not value >= 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value
