"""Seeded fuzzing of the loaders: byte- and text-level mutations of small CSV, CSV.gz, Parquet and moments
files. Each mutated file either loads or raises the documented :class:`~offeval_core.errors.InputError`;
any other exception (EOFError, zlib.error, ArrowInvalid, KeyError, ...) is a failure of the boundary."""

from __future__ import annotations

import gzip
import io
import json
from collections import Counter

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from security_support import moments_file, small_logs

from offeval_core.errors import InputError
from offeval_core.logs import read_logs
from offeval_core.moments_io import read_moments

SEED = 20261123
TOKENS = ["", "nan", "NaN", "-1", "0", "1.5", "1e309", "-inf", "abc", "2147483648", "99999999999999999999", '"',
          '""', "=1+1", "\x00", "é", "x" * 300, "1,2", "\t", "treatment", "control", "TRUE", " 1 ", "0x10"]
COUNTS = {"csv": 3000, "csv.gz": 2500, "parquet": 2500, "moments": 2000}


def _byte_mutation(data: bytes, rng: np.random.Generator) -> bytes:
    b = bytearray(data)
    op = int(rng.integers(6))
    i = int(rng.integers(len(b))) if b else 0
    if op == 0:  # flip bits in a few bytes
        for _ in range(int(rng.integers(1, 8))):
            j = int(rng.integers(len(b)))
            b[j] ^= 1 << int(rng.integers(8))
    elif op == 1:  # truncate
        del b[i:]
    elif op == 2:  # delete a range
        del b[i:i + int(rng.integers(1, 64))]
    elif op == 3:  # insert random bytes
        b[i:i] = rng.integers(0, 256, int(rng.integers(1, 32)), dtype=np.uint8).tobytes()
    elif op == 4:  # duplicate a chunk
        b[i:i] = b[i:i + int(rng.integers(1, 128))]
    else:  # overwrite with a constant run
        b[i:i + int(rng.integers(1, 32))] = bytes([int(rng.integers(256))]) * int(rng.integers(1, 32))
    return bytes(b)


def _text_mutation(text: str, rng: np.random.Generator) -> str:
    lines = text.split("\n")
    op = int(rng.integers(6))
    k = int(rng.integers(len(lines)))
    if op <= 2:  # replace one field (header included) with a hostile token
        fields = lines[k].split(",")
        fields[int(rng.integers(len(fields)))] = TOKENS[int(rng.integers(len(TOKENS)))]
        lines[k] = ",".join(fields)
    elif op == 3:  # drop or duplicate a line
        if rng.random() < 0.5:
            del lines[k]
        else:
            lines.insert(k, lines[k])
    elif op == 4:  # add or remove a field
        fields = lines[k].split(",")
        if rng.random() < 0.5 and len(fields) > 1:
            del fields[int(rng.integers(len(fields)))]
        else:
            fields.append(TOKENS[int(rng.integers(len(TOKENS)))])
        lines[k] = ",".join(fields)
    else:  # rename a column
        head = lines[0].split(",")
        head[int(rng.integers(len(head)))] = TOKENS[int(rng.integers(len(TOKENS)))] or "rank"
        lines[0] = ",".join(head)
    return "\n".join(lines)


def _frame_mutation(df: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    df = df.copy()
    col = df.columns[int(rng.integers(len(df.columns)))]
    row = int(rng.integers(len(df)))
    choices = [np.nan, -5, 0, 1.5, np.inf, 2**40, "abc", None]
    value = choices[int(rng.integers(len(choices)))]
    df[col] = df[col].astype(object)
    df.iat[row, df.columns.get_loc(col)] = value
    try:
        pa.Table.from_pandas(df)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        df[col] = df[col].astype(str)
    return df


def _parquet_bytes(df: pd.DataFrame, metadata: dict | None = None) -> bytes:
    table = pa.Table.from_pandas(df, preserve_index=False)
    if metadata is not None:
        table = table.replace_schema_metadata(metadata)
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def _cases(kind: str, base: dict, rng: np.random.Generator):
    """Yield (file suffix, bytes) mutations of ``kind``."""
    for _ in range(COUNTS[kind]):
        if kind == "csv":
            if rng.random() < 0.5:
                yield ".csv", _text_mutation(base["csv"], rng).encode("utf-8", errors="surrogatepass")
            else:
                yield ".csv", _byte_mutation(base["csv"].encode(), rng)
        elif kind == "csv.gz":
            if rng.random() < 0.3:
                yield ".csv.gz", gzip.compress(_text_mutation(base["csv"], rng).encode(), mtime=0)
            else:
                yield ".csv.gz", _byte_mutation(base["gz"], rng)
        elif kind == "parquet":
            if rng.random() < 0.3:
                yield ".parquet", _parquet_bytes(_frame_mutation(base["frame"], rng))
            else:
                yield ".parquet", _byte_mutation(base["parquet"], rng)
        else:
            r = rng.random()
            if r < 0.3:
                meta = dict(base["moments_meta"])
                doc = json.loads(meta[b"offeval"])
                key = ["format", "grid", "discount_labels", "source"][int(rng.integers(4))]
                doc[key] = [None, 1, "x", [], {"clips": [0]}, -1.5][int(rng.integers(6))]
                meta[b"offeval"] = json.dumps(doc).encode()
                yield ".parquet", _parquet_bytes(base["moments_frame"], meta)
            elif r < 0.6:
                df = base["moments_frame"].copy()
                col = ["n", "sum", "m2", "den_sum", "den_m2", "clip", "kind"][int(rng.integers(7))]
                row = int(rng.integers(len(df)))
                value = [np.nan, -5, 0, 1.5, np.inf, -np.inf, 1e308, "weird"][int(rng.integers(8))]
                df[col] = df[col].astype(object)
                df.iat[row, df.columns.get_loc(col)] = value
                try:
                    data = _parquet_bytes(df, base["moments_meta"])
                except (pa.ArrowInvalid, pa.ArrowTypeError):
                    df[col] = df[col].astype(str)
                    data = _parquet_bytes(df, base["moments_meta"])
                yield ".parquet", data
            else:
                yield ".parquet", _byte_mutation(base["moments"], rng)


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz_base")
    df = small_logs(n_sessions=12)
    csv = df.to_csv(index=False)
    m = moments_file(d)
    table = pq.read_table(m)
    return {"csv": csv, "gz": gzip.compress(csv.encode(), mtime=0), "frame": df, "parquet": _parquet_bytes(df),
            "moments": m.read_bytes(), "moments_frame": table.to_pandas(), "moments_meta": dict(table.schema.metadata)}


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(COUNTS))
def test_only_the_documented_error_escapes(kind, base, tmp_path):
    rng = np.random.default_rng([SEED, list(COUNTS).index(kind)])
    outcomes: Counter = Counter()
    unexpected: dict[str, str] = {}
    for i, (suffix, data) in enumerate(_cases(kind, base, rng)):
        path = tmp_path / f"case{suffix}"
        path.write_bytes(data)
        try:
            read_moments(path) if kind == "moments" else read_logs(path)
        except InputError as exc:
            outcomes[type(exc).__name__] += 1
            assert "Traceback" not in str(exc)
        except Exception as exc:  # anything else escaping the boundary is a bug
            outcomes["unexpected"] += 1
            unexpected.setdefault(type(exc).__name__, f"case {i}: {str(exc)[:200]}")
        else:
            outcomes["loaded"] += 1
    assert sum(outcomes.values()) == COUNTS[kind]
    assert not unexpected, f"{kind}: {dict(outcomes)}; unexpected: {unexpected}"
    # the mutations are not all harmless: most files are refused, some still load
    assert outcomes["loaded"] > 0 and sum(v for k, v in outcomes.items() if k != "loaded") > COUNTS[kind] // 4


def test_the_fuzz_budget_is_at_least_ten_thousand_mutations():
    assert sum(COUNTS.values()) >= 10_000


def test_mutations_are_reproducible(base):
    a = [d for _, d in zip(range(20), _cases("csv", base, np.random.default_rng([SEED, 0])), strict=False)]
    b = [d for _, d in zip(range(20), _cases("csv", base, np.random.default_rng([SEED, 0])), strict=False)]
    assert a == b and len(set(a)) > 10
