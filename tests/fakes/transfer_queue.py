"""An in-memory stand-in for TransferQueue's key-value API, as verl 0.9.1's V1 replay buffer
uses it (``kv_list``, ``kv_batch_get``, ``kv_clear``) and its agent loop fills it
(``kv_put``, ``kv_batch_put``). The real one runs as Ray actors, which this 2-core CI machine
cannot start in reasonable time; verl's own ReplayBuffer code runs unchanged on top of this.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any


class FakeTransferQueue:
    def __init__(self) -> None:
        self.tags: dict[str, dict[str, dict]] = defaultdict(dict)
        self.fields: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)

    def kv_put(self, key: str, partition_id: str, tag: dict | None = None, fields: dict | None = None) -> None:
        self.tags[partition_id].setdefault(key, {}).update(tag or {})
        if fields:
            self.fields[partition_id].setdefault(key, {}).update(fields)

    def kv_batch_put(self, keys, partition_id: str, tags=None, fields=None) -> None:
        for i, key in enumerate(keys):
            self.kv_put(key, partition_id, (tags or [{}] * len(keys))[i], fields[i] if fields else None)

    def kv_list(self, partition_id: str | None = None) -> dict[str, dict[str, dict]]:
        parts = [partition_id] if partition_id else list(self.tags)
        return {p: {k: dict(t) for k, t in self.tags[p].items()} for p in parts}

    def kv_batch_get(self, keys, partition_id: str, select_fields=None) -> dict[str, list]:
        rows = [self.fields[partition_id][k] for k in keys]
        names = select_fields or sorted({n for r in rows for n in r})
        return {n: [r.get(n) for r in rows] for n in names}

    def kv_clear(self, keys, partition_id: str) -> None:
        for k in keys:
            self.tags[partition_id].pop(k, None)
            self.fields[partition_id].pop(k, None)
