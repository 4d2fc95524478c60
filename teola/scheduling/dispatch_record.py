"""The dispatch record of one queued engine request, and the one function that builds the request
an engine adapter receives.

A request has two parts with one owner each:
  - its body: what the call is (prompt parts or messages, sampling, stop, split, stream_text,
    cache_salt, continuation, api, kv_key, ...), fixed when it is built (teola.runtime.requests,
    the door, the program API) and read-only afterwards (`frozen_body`);
  - its `DispatchRecord`: how the engine tier runs it (priority, owner, abort keys, a preempted
    call's resume, the pause handling and length hints). Submitters hand their hints in when they
    submit; policies return theirs; the engine tier writes the record.

`wire_request(body, record)` merges the two into the fresh, plain dict an adapter receives
(engines.requests.LLMRequest and the other TypedDicts): the adapters do not change, and neither
part is written by the merge.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

# The fields a record owns. A body may not hold them (`frozen_body` refuses them), except "tag":
# the door's client-given abort key, read into `DispatchRecord.abort_key` by the submitter.
RECORD_FIELDS = frozenset(
    {
        "priority",
        "owner",
        "tag",
        "resume_ids",
        "kv_swap_key",
        "progress",
        "predicted_tokens",
        "pause_kv",
        "resumes_preserved",
    }
)
# The program hints a submitter hands in with a request (keyword arguments of Runtime.submit_call).
HINTS = ("predicted_tokens", "pause_kv", "resumes_preserved")


@dataclass(slots=True, kw_only=True, eq=False)
class DispatchRecord:
    """What the engine tier decided about one request; None / False = not set (the body's value,
    if any, or the engine's default applies).

    priority: the engine priority of the batch's pick (lower runs first).
    owner: the query whose requests `abort(owner)` ends.
    abort_key: the submitter's key to abort this request alone (a speculative call's
      "<query>:<node>:<i>", or the client's tag at the door).
    call_tag: the preemption key of the call this request runs in (engine_tier.preemption);
      separate from `abort_key`: the wire "tag" is `call_tag` while the call runs preemptibly.
    resume_ids / max_tokens: a preempted request's tokens decoded so far and its budget left.
    stream_text / max_items: a resumed partial decode streams its text (its own parser cuts its
      items from it) and asks for the items still missing (teola.runtime.engine_tier.call_items).
    kv_swap_key: names the request's KV across its resumes (an engine with kv_swap saves it).
    progress: stream ("progress", tokens) events (a policy that charges running calls).
    predicted_tokens, pause_kv, resumes_preserved: the program hints (length prediction, how a
      paused call's KV is kept, whether a resumed call's KV is expected back).
    """

    priority: int | None = None
    owner: str | None = None
    abort_key: str | None = None
    call_tag: str | None = None
    resume_ids: tuple[int, ...] | None = None
    max_tokens: int | None = None
    stream_text: bool = False
    max_items: int | None = None
    kv_swap_key: str | None = None
    progress: bool = False
    predicted_tokens: int | None = None
    pause_kv: str | None = None
    resumes_preserved: bool = False

    @property
    def tag(self) -> str | None:
        """The key the engine knows this request by for an abort."""
        return self.call_tag if self.call_tag is not None else self.abort_key


def lift_hints(request: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(a copy of `request` without the program hints, the hints it carried): a request dict built
    with its hints inside is split at submission, before anything queues it."""
    body = {k: v for k, v in request.items() if k not in HINTS}
    return body, {k: request[k] for k in HINTS if request.get(k) is not None}


def frozen_body(request: Mapping[str, Any]) -> Mapping[str, Any]:
    """A read-only copy of a request body; a body holding a field a record owns is refused."""
    owned = sorted(RECORD_FIELDS.intersection(request) - {"tag"})
    if owned:
        raise ValueError(f"a request body may not set {owned}: the engine tier's dispatch record owns them")
    return MappingProxyType(dict(request))


def wire_request(body: Mapping[str, Any], record: DispatchRecord) -> dict[str, Any]:
    """The request an adapter receives: a fresh dict of `body` with the record's set fields on top
    (a record field wins over the body's value; a resumed request keeps its body otherwise)."""
    req = dict(body)
    tag = record.tag
    if tag is not None:
        req["tag"] = tag
    for name in (
        "priority",
        "owner",
        "kv_swap_key",
        "predicted_tokens",
        "pause_kv",
        "max_tokens",
        "max_items",
    ):
        value = getattr(record, name)
        if value is not None:
            req[name] = value
    if record.resume_ids is not None:
        req["resume_ids"] = list(record.resume_ids)
    if record.progress:
        req["progress"] = True
    if record.stream_text:
        req["stream_text"] = True
    if record.resumes_preserved:
        req["resumes_preserved"] = True
    return req
