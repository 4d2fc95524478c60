"""A preempted call back in its queue (teola.runtime.engine_tier.preemption): each request that has
not ended carries its token ids and text so far to its next run (`Resume`, kept by the Preemptor per
entry), its dispatch record is set to resume from them, and its work hears `requeued`."""

from __future__ import annotations

from typing import Any

from teola.runtime.engine_tier.call_resume import Resume, joined, text_of
from teola.runtime.engine_tier.engine_context import EngineContext
from teola.runtime.engine_tier.running_call import RunningCall
from teola.runtime.engine_tier.token_estimates import estimate_held_tokens
from teola.scheduling.base import Pending
from teola.scheduling.preemption import held_tokens, tokens_left


def requeue(
    ctx: EngineContext,
    call: RunningCall,
    finals: list[Any],
    resumes_of: dict[Pending, list[Resume]],
    *,
    live: bool,
) -> bool:
    """Put a preempted call back in its queue to resume later; False if it cannot resume (an
    aborted request gave no token ids, or nothing is left to decode: then `finals` are its results).
    `resumes_of`: the Preemptor's resume state per entry; `live`: admission by live KV use (the
    entry's tokens are what its requests hold when they resume)."""
    e = call.pick.entry
    resumes = resumes_of.get(e) or [Resume(request=e.wire(i)) for i in range(len(e.requests))]
    left: list[int] = []
    for i, result in zip(call.sent, finals):
        n = tokens_left(resumes[i].request, len(resumes[i].ids), result)
        if n is None:
            return False
        left.append(n)
    if not any(n > 0 for n in left) or (
        call.items is not None and call.items.all_out(resumes[0].text + text_of(finals[0]))
    ):
        return False
    resumes_of[e] = resumes
    for j, (i, result, n) in enumerate(zip(call.sent, finals, left)):
        resume = resumes[i]
        if n <= 0:  # it ended (or decoded its last token as the abort hit): not sent again
            resume.final = joined(resume, result, complete=True)
            if live and e.tokens is not None:
                e.tokens[i] = 0
            continue
        resume.ids += result["output_token_ids"]
        resume.text += str(result.get("text", ""))
        resume.count += 1
        resume.points.append(len(resume.ids))
        # the resume is the record's: its body stays as it was queued
        rec = e.records[i]
        rec.resume_ids, rec.max_tokens = (
            tuple(resume.ids),
            int(resume.request["max_tokens"]) - len(resume.ids),
        )
        rec.call_tag, rec.progress = None, False  # its next run sets its own
        if live and e.tokens is not None:  # it holds its decoded tokens when it resumes
            e.tokens[i] = (
                estimate_held_tokens(e.wire(i))
                if j not in call.prompt
                else held_tokens(call.prompt[j] + len(result["output_token_ids"]), 0)
            )
        if call.items is not None:
            rec.stream_text, rec.max_items = True, call.items.preempted(resume.text, ctx.loop.time())
            resume.items = call.items
    ctx.metrics.preemptions += 1
    e.taken = 0
    ctx.policy().preempted(call.pick, ctx.loop.time())
    call.queue.push(e)
    e.work.requeued(ctx.loop.time())
    return True
