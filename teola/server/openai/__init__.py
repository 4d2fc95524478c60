"""The OpenAI-compatible door: `door.py` (chat and completion routes: one program call per request
through `Runtime.submit_call`), `embeddings.py` (`/v1/embeddings`), `models.py` (what a request's
`model` names), `format.py` (OpenAI's request and response shapes), `tools.py` (tool calling),
`stream.py` (streamed chunks), `errors.py` (OpenAI's error shape), `calls.py` (what the server records
of one call)."""
