"""Readers for TREC / CSV / Parquet qrels and runs: parsing, the tie rule, and exact error messages."""

from __future__ import annotations

import pandas as pd
import pytest

from offeval_core.errors import HeldoutValidationError, MissingInput
from offeval_core.heldout.io import qrels_from_frame, read_qrels, read_run, read_runs, run_from_frame
from offeval_core.heldout.metrics import evaluate_run


def _write(path, text):
    path.write_text(text)
    return path


def test_trec_qrels_and_run(tmp_path):
    q = read_qrels(_write(tmp_path / "q.txt", "# judged\nu1 0 a 2\nu1 0 b 0\n\nu2 0 c 1\n"))
    assert q.frame.to_dict("list") == {"user": ["u1", "u1", "u2"], "item": ["a", "b", "c"],
                                       "relevance": [2.0, 0.0, 1.0]}
    r = read_run(_write(tmp_path / "r.txt", "u1 Q0 b 1 0.9 bm25\nu1 Q0 a 2 0.9 bm25\nu2 Q0 c 1 0.1 bm25\n"))
    assert r.name == "bm25"
    # equal scores: the tie rule orders by item id, so a (file rank 2) comes before b (file rank 1)
    assert r.frame[["user", "item", "rank"]].values.tolist() == [["u1", "a", 1], ["u1", "b", 2], ["u2", "c", 1]]


def test_trec_run_file_with_two_tags(tmp_path):
    runs = read_runs(_write(tmp_path / "r.txt", "u1 Q0 a 1 2 A\nu1 Q0 a 1 3 B\nu1 Q0 b 2 1 B\n"))
    assert [r.name for r in runs] == ["A", "B"]
    assert runs[1].frame["item"].tolist() == ["a", "b"]
    with pytest.raises(ValueError, match=r"^expected one run, found 2 \(A, B\); use read_runs$"):
        read_run(tmp_path / "r.txt")


def test_csv_and_parquet_agree(tmp_path):
    df_q = pd.DataFrame({"user_id": [1, 1, 2], "item_id": [10, 11, 10], "rel": [1, 0, 3]})
    df_r = pd.DataFrame({"user_id": [1, 1, 2, 2], "item_id": [11, 10, 10, 11], "rank": [1, 2, 2, 1]})
    df_q.to_csv(tmp_path / "q.csv", index=False)
    df_r.to_csv(tmp_path / "r.csv", index=False)
    df_q.to_parquet(tmp_path / "q.parquet")
    df_r.to_parquet(tmp_path / "r.parquet")
    ev_csv = evaluate_run(read_qrels(tmp_path / "q.csv"), read_run(tmp_path / "r.csv"), ["ndcg@2"])
    ev_pq = evaluate_run(read_qrels(tmp_path / "q.parquet"), read_run(tmp_path / "r.parquet"), ["ndcg@2"])
    # user 1: relevant 10 at position 2 → 1/log2(3); user 2: grade 3 at position 2 of 2 → nDCG 1/log2(3)
    assert ev_csv.per_user["ndcg@2"].tolist() == pytest.approx([1 / 1.5849625007211563] * 2)
    pd.testing.assert_frame_equal(ev_csv.per_user, ev_pq.per_user)
    assert read_run(tmp_path / "r.csv").name == "r"


def test_csv_with_run_column(tmp_path):
    pd.DataFrame({"qid": ["u", "u", "u"], "doc": ["a", "b", "a"], "score": [1, 2, 3], "model": ["x", "x", "y"]}
                 ).to_csv(tmp_path / "runs.csv", index=False)
    runs = read_runs(tmp_path / "runs.csv")
    assert [(r.name, r.frame["item"].tolist()) for r in runs] == [("x", ["b", "a"]), ("y", ["a"])]


def test_errors_trec(tmp_path):
    p = _write(tmp_path / "q.txt", "u1 0 a 1\nu1 0 b\n")
    # messages name lines and columns, never a line's content (the file may be anything the reader can open)
    with pytest.raises(HeldoutValidationError, match=rf"^{p}: line 2: expected 4 whitespace-separated fields "
                                                     r"'qid iter doc rel', got 3$"):
        read_qrels(p)
    p = _write(tmp_path / "q2.txt", "u1 0 a 1\nu1 0 b high\n")
    with pytest.raises(HeldoutValidationError, match=rf"^{p}: column 'relevance' must be numeric and finite; 1 bad "
                                                     r"value\(s\), first: line 2$"):
        read_qrels(p)
    p = _write(tmp_path / "r.txt", "u1 Q0 a 1 0.5 m\nu1 Q0 b 2 NaN m\n")
    with pytest.raises(HeldoutValidationError, match=rf"^{p}: column 'score' must be numeric and finite; 1 bad "
                                                     r"value\(s\), first: line 2$"):
        read_run(p)
    p = _write(tmp_path / "r2.txt", "u1 Q0 a 1 0.5 m\nu2 Q0 a 1 0.5 m\nu1 Q0 a 2 0.4 m\n")
    with pytest.raises(HeldoutValidationError, match=rf"^{p}: 1 duplicate \(user, item\) pair\(s\) in the run 'm'; "
                                                     r"each item may appear once per user; first: line 3$"):
        read_run(p)
    p = _write(tmp_path / "empty.txt", "\n# nothing\n")
    with pytest.raises(HeldoutValidationError, match=rf"^{p}: the file is empty \(no 'qid iter doc rel' lines\)$"):
        read_qrels(p)
    with pytest.raises(MissingInput, match=r"^.*nope.txt: no such file or directory$"):
        read_qrels(tmp_path / "nope.txt")


def test_errors_tables(tmp_path):
    pd.DataFrame({"user": ["u"], "doc": ["a"]}).to_csv(tmp_path / "q.csv", index=False)
    with pytest.raises(HeldoutValidationError, match=r"q.csv: missing relevance column \(expected one of relevance, "
                                                     r"rel, label\); its 2 column\(s\) have none of these names$"):
        read_qrels(tmp_path / "q.csv")
    with pytest.raises(ValueError, match=r"^<table>: column 'relevance' must be ≥ 0 \(graded relevance, 0 = not "
                                         r"relevant\); 1 negative value\(s\), first: row 2$"):
        qrels_from_frame(pd.DataFrame({"user": ["u", "u"], "item": ["a", "b"], "relevance": [1, -1]}))
    with pytest.raises(ValueError, match=r"^<table>: column 'rank' must hold positive integers \(1 = top\); "
                                         r"first: row 1$"):
        run_from_frame(pd.DataFrame({"user": ["u"], "item": ["a"], "rank": [0]}), name="m")
    with pytest.raises(ValueError, match=r"^<table>: missing score or rank column in run 'm'; found columns user, item$"):
        run_from_frame(pd.DataFrame({"user": ["u"], "item": ["a"]}), name="m")
    with pytest.raises(ValueError, match=r"^fmt must be one of 'auto', 'trec', 'csv', 'parquet'; got 'xml'$"):
        read_qrels(_write(tmp_path / "x.txt", "u 0 a 1\n"), fmt="xml")


def test_user_mismatch_errors():
    q = qrels_from_frame(pd.DataFrame({"user": ["u1", "u2", "u3"], "item": ["a"] * 3, "relevance": [1, 1, 1]}))
    r = run_from_frame(pd.DataFrame({"user": ["u1", "u9", "u8"], "item": ["a"] * 3, "score": [1.0] * 3}), name="m")
    with pytest.raises(ValueError, match=r"^run 'm': 2 user\(s\) are in the run but not in the qrels \('u8', 'u9'\); "
                                         r"policy missing_in_qrels='error' — use 'skip' to evaluate only judged users$"):
        evaluate_run(q, r, ["ndcg@1"])
    with pytest.raises(ValueError, match=r"^run 'm': 2 user\(s\) with relevant items in the qrels are not in the run "
                                         r"\('u2', 'u3'\); policy missing_in_run='error' — use 'zero' to score them 0 "
                                         r"\(as trec_eval -c\) or 'skip' to leave them out$"):
        evaluate_run(q, r, ["ndcg@1"], missing_in_qrels="skip")
    with pytest.raises(ValueError, match=r"^missing_in_run must be one of 'error', 'zero', 'skip'; got 'drop'$"):
        evaluate_run(q, r, ["ndcg@1"], missing_in_run="drop")


@pytest.mark.parametrize("reader", [read_qrels, read_runs])
def test_readers_refuse_a_directory_and_an_empty_path(reader, tmp_path):
    """The input boundary of the held-out readers: a directory is not a regular file, an empty path names none
    (Path("") would be the working directory)."""
    from offeval_core.errors import UnreadableInput

    with pytest.raises(UnreadableInput, match="not a regular file"):
        reader(tmp_path)
    what = "qrels" if reader is read_qrels else "run"
    with pytest.raises(MissingInput, match=f"no {what} file named: the path is empty"):
        reader("")
