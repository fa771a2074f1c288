"""One user's hostile input leaves the dashboard as it was for the next user (AppTest, two sessions in one
server process sharing its caches): a 0.3 MB Parquet file of 19 M rows, a shared link naming a simulated world
of a million sessions per arm and day, and a huge uploaded qrels file each end with a specific notice, raise
the process's peak memory by little, start no lasting thread, and a second session then works."""

from __future__ import annotations

import threading

import pytest
from dashboard_support import environment, metric, open_page, write_small_world
from security_support import parquet_bomb, small_logs

pytestmark = pytest.mark.slow


def _peak_reset() -> None:
    with open("/proc/self/clear_refs", "w") as fh:  # resets VmHWM, the peak resident memory
        fh.write("5")


def _status(field: str) -> int:
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    out = write_small_world(tmp_path_factory.mktemp("hostile_demo") / "demo")
    with environment(OFFEVAL_DEMO_DIR=str(out)):
        yield out


def _upload(at, name: str, payload: bytes):
    at.segmented_control(key="w_source").set_value("upload").run()
    at.file_uploader(key="w_upload").upload(name, payload).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _errors(at) -> str:
    return "\n".join(str(e.value) for e in at.error)


def test_a_second_session_works_after_the_first_ones_hostile_upload(demo, tmp_path):
    bomb, good = parquet_bomb(tmp_path / "bomb.parquet").read_bytes(), small_logs().to_csv(index=False).encode()
    assert len(bomb) < 600_000
    first = open_page("data")
    threads = threading.active_count()
    _peak_reset()
    before = _status("VmRSS")
    _upload(first, "bomb.parquet", bomb)
    peak = _status("VmHWM") - before
    shown = _errors(first)
    assert "bomb.parquet" in shown and "would take about 3.8 GiB of memory once loaded" in shown
    assert "19,000,000 rows × 3 columns" in shown and "OFFEVAL_MAX_MEMORY" in shown
    assert peak < 200 * 2**20, f"the refused upload raised the peak memory by {peak / 2**20:.0f} MiB"
    assert threading.active_count() <= threads + 1

    second = open_page("data")
    _upload(second, "mine.csv", good)
    assert not _errors(second)
    assert metric(second, "Sessions") == "30" and metric(second, "Impressions") == f"{len(small_logs()):,}"
    print(f"hostile upload: peak +{peak / 2**20:.0f} MiB, threads {threads} → {threading.active_count()}")


def test_a_link_to_a_huge_simulated_world_shows_the_demo_with_the_reason(demo):
    threads = threading.active_count()
    _peak_reset()
    before = _status("VmRSS")
    at = open_page("data", dataset="sim", sim="demo;sessions=1000000;days=365")
    shown = "\n".join(str(w.value) for w in at.warning) + _errors(at)
    assert "simulation option 'sessions' must be between 1 and 20,000" in shown
    assert (_status("VmHWM") - before) < 200 * 2**20 and threading.active_count() <= threads + 1
    big = open_page("data", dataset="sim", sim="demo;seed=1;sessions=20000;days=30")
    shown = "\n".join(str(w.value) for w in big.warning) + _errors(big)
    assert "would have up to 238,556,163 impressions" in shown and "OFFEVAL_MAX_MEMORY" in shown
    ok = open_page("data", dataset="sim", sim="small;seed=3")
    assert not _errors(ok) and metric(ok, "Experiments") == "3"


def test_hostile_qrels_uploads_show_a_notice_without_content_and_the_next_upload_works(demo, tmp_path):
    from security_support import SECRET

    from dashboard import data

    def upload(at, kind, name, payload):
        sha = data.content_key(payload)
        data.heldout_bytes(sha, name, payload)
        at.session_state[f"ho_{kind}"] = [(sha, name)]

    run = (b"u1 Q0 a 1 2 r1\nu1 Q0 b 2 1 r1\nu2 Q0 c 1 2 r1\nu2 Q0 d 2 1 r1\n"
           b"u1 Q0 a 1 1 r2\nu1 Q0 b 2 2 r2\nu2 Q0 c 1 1 r2\nu2 Q0 d 2 2 r2\n")
    bomb = parquet_bomb(tmp_path / "qrels.parquet", names=("user", "item", "rel")).read_bytes()
    cases = {"passwd.txt": (f"root:x:0:0:{SECRET}:/root:/bin/bash\n".encode(), "line 1: expected 4"),
             "bomb.parquet": (bomb, "would take about 3.8 GiB of memory once loaded")}
    for name, (payload, fragment) in cases.items():
        at = open_page("dcg_vs_ndcg", timeout=90)
        at.session_state["w_ho_kind"] = "upload"
        upload(at, "qrels", name, payload)
        upload(at, "runs", "runs.txt", run)
        _peak_reset()
        before = _status("VmRSS")
        at.radio(key="w_agr_source").set_value("heldout").run()
        assert not at.exception, [e.value for e in at.exception]
        shown = _errors(at)
        assert f"Qrels file {name}" in shown and fragment in shown, shown
        assert SECRET not in shown and "root:" not in shown
        assert _status("VmHWM") - before < 200 * 2**20
    at = open_page("dcg_vs_ndcg", timeout=90)
    at.session_state["w_ho_kind"] = "upload"
    upload(at, "qrels", "q.txt", b"u1 0 a 1\nu1 0 b 0\nu2 0 c 0\nu2 0 d 2\n")
    upload(at, "runs", "runs.txt", run)
    at.radio(key="w_agr_source").set_value("heldout").run()
    assert not _errors(at)
    assert metric(at, "Kendall τ")
