"""``offeval dashboard [LOGS|MOMENTS]``: serve the dashboard on the given file, bound to 127.0.0.1.

The file is checked here first (a bad file fails at once with the loader's message, before any server
starts), then handed to the app through the environment (``OFFEVAL_DATA``, ``OFFEVAL_MAP``,
``OFFEVAL_REWARDS``, ``OFFEVAL_ARMS``), never through a URL. ``--check`` prints what offeval understood of the file
(the same summary as ``offeval validate`` and the Data page).
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

from offeval_core.commands.argtypes import host
from offeval_core.commands.log_options import ARMS_HELP, MAP_HELP
from offeval_core.errors import InputError, LogValidationError, MissingInput, NeedsAnswers, SpecError

__all__ = [
    "app_path", "check", "register", "run",
]


def register(sub) -> None:
    p = sub.add_parser("dashboard", help="serve the dashboard on your logs (or a moments file)",
                       description="Serve the interactive dashboard on a CSV / Parquet file, a directory of "
                                   "Parquet files, or a moments file written by `offeval reduce`. Without a file it "
                                   "opens the bundled demo. Bound to 127.0.0.1 unless --host says otherwise.")
    p.add_argument("data", nargs="?", default=None, metavar="LOGS|MOMENTS",
                   help="logs (CSV, Parquet, directory of Parquet) or a moments file; default: the demo")
    p.add_argument("--map", default=None, metavar="NAME=COL,...", help=MAP_HELP)
    p.add_argument("--arms", default=None, metavar="control=A,treatment=B", help=ARMS_HELP)
    p.add_argument("--reward", action="append", default=None,
                   help="reward column(s) (repeat; default: every numeric non-schema column)")
    p.add_argument("--port", type=int, default=8501, help="port (default 8501)")
    p.add_argument("--host", type=host, default="127.0.0.1",
                   help="address to bind (default 127.0.0.1: this machine only; 0.0.0.0 exposes it to the network)")
    p.add_argument("--check", action="store_true",
                   help="check the file and print what offeval understood of it, then exit")
    p.set_defaults(func=run)


def app_path() -> Path:
    import dashboard

    return Path(dashboard.__file__).resolve().parent / "app.py"


def _port_free(host: str, port: int) -> bool:
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    except (socket.gaierror, UnicodeError):
        raise InputError(f"--host {host!r} is not an address of this machine (it does not resolve); use "
                         "127.0.0.1 (this machine only) or 0.0.0.0 (every interface)", source="--host") from None
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def check(path: str, mapping: str | None, rewards: list[str] | None, arms: str | None = None) -> str:
    """What offeval understood of the file that will be served (the summary of ``offeval validate``); raises
    the loader's errors for a bad file and NeedsAnswers when the file leaves a question open. Guesses are said
    on stderr."""
    from argparse import Namespace

    from offeval_core.commands.log_options import read_command_logs
    from offeval_core.moments_io import is_moments_file, read_moments
    from offeval_core.understanding import understand

    p = Path(path)
    if not p.exists():
        raise MissingInput(f"{path}: no such file or directory")
    if p.is_file() and is_moments_file(p):
        m = read_moments(p)
        return f"moments file {p.name}: {len(m.offline):,} moment rows"
    logs = read_command_logs(Namespace(logs=p, map=mapping, arms=arms), "dashboard", rewards=rewards, name=p.name)
    return understand(logs).to_text()


def run(args) -> int:
    env = dict(os.environ)
    if args.data:
        try:
            print(check(args.data, args.map, args.reward, args.arms), flush=True)
        except (LogValidationError, NeedsAnswers) as exc:
            from offeval_core.cli import map_hint

            print(str(exc), file=sys.stderr)
            if hint := map_hint(exc):
                print(f"offeval dashboard: hint: {hint}", file=sys.stderr)
            return 2
        env["OFFEVAL_DATA"] = str(Path(args.data).resolve())
        env["OFFEVAL_MAP"] = args.map or ""
        env["OFFEVAL_REWARDS"] = ",".join(args.reward or [])
        env["OFFEVAL_ARMS"] = args.arms or ""
    elif args.map or args.reward or args.arms:
        raise SpecError("--map, --arms and --reward apply to a file: give LOGS")
    if args.check:
        return 0
    if not 0 < args.port < 65536:
        raise InputError(f"--port must be between 1 and 65535, got {args.port}")
    if not _port_free(args.host, args.port):
        raise InputError(f"port {args.port} on {args.host} is in use; pick another with --port")
    # dashboard.serve is `streamlit run` that ends the process at once when the server stops (Ctrl-C, SIGTERM):
    # no Ibis finalizer then meets a connection still busy with a background query (a traceback and an abort)
    cmd = [sys.executable, "-m", "dashboard.serve", "run", str(app_path()), "--server.port", str(args.port),
           "--server.address", args.host, "--server.headless", "true", "--browser.gatherUsageStats", "false",
           "--client.disableDataExport", "true"]
    print(f"offeval dashboard: serving at http://{args.host}:{args.port} (Ctrl-C stops it)", flush=True)
    root = app_path().parents[1]  # the project's .streamlit/config.toml (theme, upload size) applies
    if (root / ".streamlit" / "config.toml").exists():
        os.chdir(root)
    sys.stdout.flush()
    # the server replaces this process: stopping it (Ctrl-C, SIGTERM) stops the server, no orphan left behind
    os.execve(sys.executable, cmd, env)
    return 0  # not reached
