"""``python -m dashboard.serve ARGS…``: ``streamlit run ARGS…`` (what ``offeval dashboard`` starts), then the
process ends at once, with Streamlit's exit status.

Stopping the server (Ctrl-C, SIGTERM) ends Streamlit's run while a background preparation may still be
running a DuckDB query. A normal interpreter exit would then run Ibis's finalizers, which drop cached tables
on that busy connection (a ``ResourceInUseException`` traceback, then ``terminate called … FATAL`` and an
abort), and DuckDB's bindings would list their live objects as leaks. Nothing is left to save once the server
has stopped (uploads live in memory; their temporary files are deleted right after reading), so the process
ends with ``os._exit`` after flushing its output.
"""

from __future__ import annotations

import os
import sys

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    from streamlit.web import cli

    code: int | str | None = 0
    try:
        cli.main(args=list(sys.argv[1:] if argv is None else argv), prog_name="streamlit")
    except SystemExit as exc:  # click ends with sys.exit
        code = exc.code
    return code if isinstance(code, int) else (0 if code is None else 1)


if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
