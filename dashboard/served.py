"""The logs the server was started on (``offeval dashboard FILE``): named by the operator's command through
environment variables, never by a URL. ``OFFEVAL_DATA`` is the path (CSV, Parquet, a directory of Parquet or a
moments file), ``OFFEVAL_MAP`` the column mapping (``session_id=visit,rank=pos,rank__*=pos_*``) and
``OFFEVAL_REWARDS`` the reward columns (comma-separated; default the columns that can be rewards) and
``OFFEVAL_ARMS`` the arm labels (``control=A,treatment=B``). The file is read (by
:func:`dashboard.data.datasets.load_served`) as the command line read it (``offeval dashboard FILE`` checked it
first, and said its guesses on stderr)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

ENV_DATA, ENV_MAP, ENV_REWARDS, ENV_ARMS = "OFFEVAL_DATA", "OFFEVAL_MAP", "OFFEVAL_REWARDS", "OFFEVAL_ARMS"
PREFIX = "served:"


def served() -> tuple[str, str, str, str] | None:
    """(path, mapping text, rewards text, arms text) from the environment, or None when no file was given."""
    path = os.environ.get(ENV_DATA, "").strip()
    if not path:
        return None
    return (path, os.environ.get(ENV_MAP, "").strip(), os.environ.get(ENV_REWARDS, "").strip(),
            os.environ.get(ENV_ARMS, "").strip())


def served_name() -> str:
    s = served()
    return Path(s[0]).name if s else ""


def served_key() -> str:
    """The dataset key of the served file: a digest of its settings (the path never appears in a key)."""
    s = served()
    if s is None:
        return ""
    return PREFIX + hashlib.sha256("\0".join(s).encode()).hexdigest()[:16]
