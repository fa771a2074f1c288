"""A Spark standalone cluster for the tests: a master and a worker started as separate processes with pyspark's
own launch classes (``bin/spark-class org.apache.spark.deploy.master.Master`` / ``...worker.Worker``), on
127.0.0.1 and free ports, with small JVMs (256 MB per daemon, one core and 1 GB for executors), waited for with a
deadline, and stopped at the end, also when a test fails: each daemon runs in a process group of its own, which
gets SIGTERM, then SIGKILL; executors started by the worker are in the worker's group. Every JVM of the cluster
(daemons, executors) carries a marker (``-Doffeval.cluster=<id>``) by which the test finds leftovers."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

DEADLINE = 120.0  # seconds for a daemon to come up


def spark_home() -> Path | None:
    """pyspark's own distribution (bin/spark-class and the jars), or None when pyspark is not installed."""
    try:
        import pyspark
    except ImportError:
        return None
    home = Path(pyspark.__file__).parent
    return home if (home / "bin" / "spark-class").exists() and (home / "jars").is_dir() else None


def skip_reason() -> str | None:
    if spark_home() is None:
        return "pyspark (with bin/spark-class and its jars) is not installed"
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "no Java runtime (java on PATH or JAVA_HOME) for Spark"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def marked_processes(marker: str) -> list[int]:
    """Ids of running processes whose command line holds ``marker``."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                cmd = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmd:
                out.append(int(entry.name))
    return out


@dataclass(frozen=True)
class Cluster:
    master: str  # spark://127.0.0.1:PORT
    root: Path
    marker: str
    executor_python: str
    conf_dir: Path  # spark-defaults.conf for the driver: executors' Python and memory, 127.0.0.1
    pids: tuple[int, ...]

    def driver_env(self) -> dict[str, str]:
        """The environment of a driver process (``offeval reduce --engine spark``) submitting to the cluster."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_"))}
        env.update(SPARK_CONF_DIR=str(self.conf_dir), SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=self.executor_python)
        return env


def _wait_for(log: Path, text: str, proc: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        if text in (log.read_text(errors="replace") if log.exists() else ""):
            return
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}: {_tail(log)}")
        time.sleep(0.25)
    raise TimeoutError(f"{what} not ready after {DEADLINE:.0f} s: {_tail(log)}")


def _tail(log: Path) -> str:
    try:
        return log.read_text(errors="replace")[-2000:]
    except OSError:
        return ""


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the process group (the daemon and what it started), SIGKILL after 20 s."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # anything the daemon started that outlived it


def bare_python(root: Path) -> str:
    """A Python with nothing installed (a venv without pip, outside the repository): no offeval, no Ibis."""
    import sys

    env_dir = root / "bare-python"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True, timeout=120,
                   capture_output=True)
    return str(env_dir / "bin" / "python")


@contextlib.contextmanager
def spark_cluster():
    """A running standalone master and worker; stopped, with every marked process gone, on exit."""
    home = spark_home()
    root = Path(tempfile.mkdtemp(prefix="offeval-spark-"))
    marker = f"-Doffeval.cluster={uuid.uuid4().hex}"
    procs: list[subprocess.Popen] = []
    try:
        python = bare_python(root)
        conf_dir = root / "conf"
        conf_dir.mkdir()
        master_port, worker_port = free_port(), free_port()
        master = f"spark://127.0.0.1:{master_port}"
        (conf_dir / "spark-defaults.conf").write_text("\n".join([
            "spark.driver.host 127.0.0.1", "spark.driver.bindAddress 127.0.0.1", "spark.driver.memory 512m",
            "spark.executor.memory 512m", "spark.executor.cores 1", "spark.cores.max 1",
            f"spark.pyspark.python {python}", f"spark.executor.extraJavaOptions {marker}",
            "spark.sql.shuffle.partitions 2", "spark.ui.enabled false", ""]))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_", "PYTHON"))}
        env.update(SPARK_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1", SPARK_DAEMON_MEMORY="256m",
                   SPARK_DAEMON_JAVA_OPTS=marker, SPARK_CONF_DIR=str(root / "daemon-conf"),
                   SPARK_LOG_DIR=str(root), SPARK_WORKER_DIR=str(root / "work"), PYSPARK_PYTHON=python)
        (root / "daemon-conf").mkdir()
        spark_class = str(home / "bin" / "spark-class")
        daemons = [
            ("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(master_port),
                        "--webui-port", str(free_port())], "I have been elected leader"),
            ("worker", ["org.apache.spark.deploy.worker.Worker", master, "--host", "127.0.0.1", "--port",
                        str(worker_port), "--webui-port", str(free_port()), "--cores", "1", "--memory", "1g",
                        "--work-dir", str(root / "work")], "Successfully registered with master"),
        ]
        for name, args, ready in daemons:
            log = root / f"{name}.log"
            with open(log, "wb") as fh:
                procs.append(subprocess.Popen([spark_class, *args], stdout=fh, stderr=subprocess.STDOUT, env=env,
                                              cwd=root, start_new_session=True))
            _wait_for(log, ready, procs[-1], f"Spark {name}")
        yield Cluster(master=master, root=root, marker=marker, executor_python=python, conf_dir=conf_dir,
                      pids=tuple(p.pid for p in procs))
    finally:
        for proc in reversed(procs):  # the worker first: it stops its executors
            _stop(proc)
        deadline = time.monotonic() + 20
        while marked_processes(marker) and time.monotonic() < deadline:
            time.sleep(0.25)
        for pid in marked_processes(marker):  # an executor in a group of its own
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(root, ignore_errors=True)
