"""The bytes of uploaded files, shared by the server's sessions and bounded by their total size.

The parsed uploads are cached by entry count (a few at a time); when other sessions' uploads push one out, the
next page of its session reads it again from these bytes instead of failing. The store keeps the most recently
used uploads up to ``OFFEVAL_UPLOAD_STORE_MB`` (default 512 MiB) in total; an upload pushed out of the store
itself has to be uploaded again (the page says so).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict

__all__ = ["UploadStore", "store"]


class UploadStore:
    """Least-recently-used bytes by content key, at most ``limit`` bytes in total.

    >>> s = UploadStore(limit=5)
    >>> s.put("a", b"abc"); s.put("b", b"de"); s.get("a")
    b'abc'
    >>> s.put("c", b"f")  # 3 + 2 + 1 > 5: the least recently used ("b") goes
    >>> s.get("b") is None, sorted(s.keys())
    (True, ['a', 'c'])
    """

    def __init__(self, *, limit: int) -> None:
        self.limit = limit
        self._items: OrderedDict[str, bytes] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, key: str, data: bytes | memoryview) -> None:
        data = bytes(data)
        with self._lock:
            self._items.pop(key, None)
            if len(data) > self.limit:
                return
            self._items[key] = data
            total = sum(len(v) for v in self._items.values())
            while total > self.limit:
                _, dropped = self._items.popitem(last=False)
                total -= len(dropped)

    def get(self, key: str) -> bytes | None:
        with self._lock:
            data = self._items.get(key)
            if data is not None:
                self._items.move_to_end(key)
            return data

    def keys(self) -> list[str]:
        with self._lock:
            return list(self._items)


def _limit(environ=None) -> int:
    """``OFFEVAL_UPLOAD_STORE_MB`` in bytes (default 512 MiB).

    >>> _limit({"OFFEVAL_UPLOAD_STORE_MB": "2"}), _limit({})
    (2097152, 536870912)
    """
    env = os.environ if environ is None else environ
    return int(float(env.get("OFFEVAL_UPLOAD_STORE_MB", "512")) * (1 << 20))


store = UploadStore(limit=_limit())
