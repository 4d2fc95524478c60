"""What the server keeps per tenant beyond one query: `base.py` (the `TenantStore` interface and its
records), its backends `postgres.py` and `memory.py` (setting ``documents``), `documents.py`
(uploaded documents), `namespaces.py` (kept vector-store namespaces) and `routes.py` (their
endpoints)."""
