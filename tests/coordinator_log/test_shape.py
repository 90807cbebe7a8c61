"""The decoder stays pure: no Spark, no I/O, no clock, and nothing of the job's other rooms."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "streaming" / "coordinator_log"
FORBIDDEN = ("time", "datetime", "os", "socket", "subprocess", "pyspark", "pandas", "pyarrow", "urllib",
             "threading", "io", "pathlib", "confluent_kafka", "random")


def test_the_decoder_imports_only_the_standard_library_and_the_errors():
    modules = sorted(PACKAGE.glob("*.py"))
    assert len(modules) >= 6
    for path in modules:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                assert top not in FORBIDDEN, f"{path.name} imports {name}"
                if top in ("streaming", "assignors", "schemas"):
                    assert name == "streaming.errors", f"{path.name} imports {name}"
