"""Run Kafka's own assignors (the Java reference in ``jvm/reference``) over a batch of group specs.

The whole batch goes through ONE JVM: start-up and JIT warm-up cost about a second, which would
dominate a thousand small specs run one JVM each. Specs go in as JSON Lines through a file and
answers come back parsed, one per spec, in order (error answers included, as ``{"id", "error"}``).

Used by the differential tests and by ``bench/assignors.py``. The reference is built on first use
with ``scripts/build-reference`` (idempotent, a no-op once built).
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Iterable, Mapping

REPO = Path(__file__).resolve().parent.parent
REFERENCE_DIR = REPO / ".cache" / "jars" / "reference"
MAIN_CLASS = "rebalancemonitor.reference.AssignorReference"


class JavaReferenceError(RuntimeError):
    """The reference could not be built or did not answer every spec."""


def ensure_built() -> Path:
    """Build the reference if needed (cheap when it is up to date) and return its jar directory."""
    proc = subprocess.run(
        ["bash", str(REPO / "scripts" / "build-reference")],
        cwd=REPO, capture_output=True, text=True,
    )
    if proc.returncode != 0 or not (REFERENCE_DIR / "assignor-reference.jar").is_file():
        raise JavaReferenceError(f"scripts/build-reference failed:\n{proc.stderr[-4000:]}")
    return REFERENCE_DIR


def java_command(
    *, repeat: int = 1, warmup: int | None = None, assignor: str | None = None,
    heap: str | None = None, warmup_seconds: int = 0,
) -> list[str]:
    """The command line that runs the reference (input and output options are added by callers)."""
    cmd = ["java"]
    if heap:
        cmd.append(f"-Xmx{heap}")
    # A JVM per batch on a shared 2-core machine: serial GC keeps it from taking both cores.
    cmd += ["-XX:+UseSerialGC", "-cp", str(ensure_built() / "*"), MAIN_CLASS, "--repeat", str(repeat)]
    if warmup is not None:
        cmd += ["--warmup", str(warmup)]
    if warmup_seconds:
        cmd += ["--warmup-seconds", str(warmup_seconds)]
    if assignor is not None:
        cmd += ["--assignor", assignor]
    return cmd


def run_reference(
    specs: Iterable[Mapping[str, Any]],
    *,
    repeat: int = 1,
    warmup: int | None = None,
    assignor: str | None = None,
    timeout: float | None = None,
    heap: str | None = None,
    warmup_seconds: int = 0,
) -> list[dict[str, Any]]:
    """Answers of Kafka's assignors for ``specs`` (decoded JSON objects), in order, from one JVM.

    Raises :class:`subprocess.TimeoutExpired` if the JVM runs past ``timeout`` seconds (it is
    killed), and :class:`JavaReferenceError` if it dies or answers a different number of lines.
    """
    with tempfile.TemporaryDirectory(prefix="java-reference-") as tmp:
        spec_path = Path(tmp) / "specs.jsonl"
        out_path = Path(tmp) / "answers.jsonl"
        count = 0
        with open(spec_path, "w", encoding="utf-8") as f:
            for spec in specs:
                f.write(json.dumps(spec, separators=(",", ":")) + "\n")
                count += 1
        cmd = java_command(repeat=repeat, warmup=warmup, assignor=assignor, heap=heap, warmup_seconds=warmup_seconds)
        cmd += ["--input", str(spec_path), "--output", str(out_path)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=_env())
        # Exit code 1 only means some line got an error answer; those are returned to the caller.
        if proc.returncode not in (0, 1):
            raise JavaReferenceError(f"the Java reference exited with {proc.returncode}:\n{proc.stderr[-4000:]}")
        with open(out_path, encoding="utf-8") as f:
            answers = [json.loads(line) for line in f if line.strip()]
    if len(answers) != count:
        raise JavaReferenceError(f"the Java reference answered {len(answers)} of {count} specs:\n{proc.stderr[-4000:]}")
    return answers


def _env() -> dict[str, str]:
    env = dict(os.environ)
    # A user's JAVA_TOOL_OPTIONS banner would land on stderr only, but its options (agents, heap
    # settings) would skew timings; the reference runs with the options given here alone.
    env.pop("JAVA_TOOL_OPTIONS", None)
    return env
