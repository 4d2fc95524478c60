"""Uploaded documents, kept in memory per server: (tenant, app, id) -> text, oldest dropped beyond a
capacity. A tenant sees only its own ids: another tenant's id is unknown (404), never forbidden."""
from __future__ import annotations

import uuid
from collections import OrderedDict


class DocumentStore:
    """Texts uploaded through POST /v1/apps/{app}/documents, addressed by (tenant, app, id)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._docs: OrderedDict[tuple[str, str, str], str] = OrderedDict()

    def add(self, tenant: str, app: str, text: str) -> str:
        doc_id = uuid.uuid4().hex
        self._docs[(tenant, app, doc_id)] = text
        while len(self._docs) > self.capacity:
            self._docs.popitem(last=False)
        return doc_id

    def get_many(self, tenant: str, app: str, ids: list[str]) -> list[str]:
        """Texts of `ids` in order; KeyError naming the unknown ids."""
        missing = [i for i in ids if (tenant, app, i) not in self._docs]
        if missing:
            raise KeyError(f"unknown document id(s) {missing} for app {app!r} (upload with "
                           f"POST /v1/apps/{app}/documents; the server keeps the last {self.capacity})")
        return [self._docs[(tenant, app, i)] for i in ids]

    def delete(self, tenant: str, app: str, doc_id: str) -> bool:
        return self._docs.pop((tenant, app, doc_id), None) is not None

    def __len__(self) -> int:
        return len(self._docs)
