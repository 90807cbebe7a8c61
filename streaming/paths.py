"""Where the project keeps its files: one place, so nothing else guesses paths.

``REBALANCE_MONITOR_HOME`` points at a checkout when the package runs from elsewhere (for example
under ``spark-submit`` on a machine where the jars were fetched into another directory).
"""

from __future__ import annotations

import os
from pathlib import Path


def project_root() -> Path:
    env = os.environ.get("REBALANCE_MONITOR_HOME")
    if env:
        return Path(env).resolve()
    return Path(__file__).resolve().parent.parent


def conf_dir() -> Path:
    return project_root() / "conf"


def jar_dir(name: str) -> Path:
    """A set of JVM jars resolved by ``scripts/bootstrap`` (``kafka``, ``spark``, ``reference``)."""
    return project_root() / ".cache" / "jars" / name


def state_dir() -> Path:
    """Project-local runtime state: brokers' data and logs."""
    return project_root() / ".state"


def default_data_dir() -> Path:
    return project_root() / "data"


def default_checkpoint_dir() -> Path:
    return project_root() / "checkpoints"
