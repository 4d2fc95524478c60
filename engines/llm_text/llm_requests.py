"""What one LLM request is, before an LLM engine (vLLM in process or behind HTTP, the simulated one)
sees it: `parts` validated and rendered with the model's chat template (`PromptRenderer`, so a
partial prefill of the first parts is a token prefix of the later full prompt), and a request dict
checked and normalized, a missing field taking its one default (`check_request`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engines.llm_text.chat_messages import check_messages, check_tools, render_chat
from engines.llm_text.split_parser import SPLITS
from engines.requests import DECODE_OPS, default

SYSTEM_PART_NAMES = ("instruction", "system")
PART_SEPARATOR = "\n\n"
# What happens to a call's KV while it pauses for a tool (INFERCEPT / LAMPS handlings).
PAUSE_KV = ("preserve", "discard", "swap")
_SENTINEL = "\u2063teola-prefix-end\u2063"


def validate_parts(parts: Any) -> list[tuple[str, str]]:
    """[[name, text], ...] as a list of (name, text); ValueError naming the problem otherwise."""
    if not isinstance(parts, (list, tuple)) or not parts:
        raise ValueError(f"request 'parts' must be a non-empty list of [name, text] pairs, got {parts!r:.80}")
    out = []
    for i, part in enumerate(parts):
        if (
            not isinstance(part, (list, tuple))
            or len(part) != 2
            or not isinstance(part[0], str)
            or not isinstance(part[1], str)
        ):
            raise ValueError(f"request 'parts'[{i}] must be a [name, text] pair of strings, got {part!r:.80}")
        out.append((part[0], part[1]))
    return out


class PromptRenderer:
    """Renders parts with a Hugging Face tokenizer's chat template and tokenizes the result."""

    def __init__(self, tokenizer):
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError(
                "the model's tokenizer has no chat template; use an instruct/chat model folder "
                "whose tokenizer_config.json (or chat_template.jinja) defines one"
            )
        self.tokenizer = tokenizer
        # what decoded text leaves out (skip_special_tokens): the end of turn, the template's markers
        self.special_ids = frozenset(tokenizer.all_special_ids)
        self.special_tokens = frozenset(tokenizer.all_special_tokens)

    def messages(self, parts: Sequence[tuple[str, str]], complete: bool) -> list[dict[str, str]]:
        system = None
        rest = list(parts)
        if rest and rest[0][0] in SYSTEM_PART_NAMES:
            system = rest.pop(0)[1]
        content = PART_SEPARATOR.join(text for _, text in rest if text)
        if not complete:
            content += _SENTINEL
        messages = [{"role": "system", "content": system}] if system is not None else []
        return messages + [{"role": "user", "content": content}]

    def text(self, parts: Sequence[tuple[str, str]], complete: bool) -> str:
        """The prompt text (special tokens included, as the template writes them)."""
        rendered = self.tokenizer.apply_chat_template(
            self.messages(parts, complete), tokenize=False, add_generation_prompt=complete
        )
        if complete:
            return rendered
        cut = rendered.find(_SENTINEL)
        if cut < 0:
            raise ValueError(
                "the chat template does not place the user message verbatim, so a partial "
                "prompt cannot be rendered; set passes.prefill_split=false for this engine"
            )
        return rendered[:cut]

    def request_ids(self, req: dict[str, Any]) -> list[int]:
        """The prompt token ids of a checked request (`check_request`): its "raw_prompt" as it is
        (tokenized with the tokenizer's special tokens, no chat template), else its "messages"
        (with its "tools") through the chat template, else its parts."""
        if req.get("raw_prompt") is not None:
            return list(self.tokenizer(req["raw_prompt"])["input_ids"])
        if req.get("messages"):
            text = render_chat(self.tokenizer, req["messages"], req.get("tools"))
            return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        return self.token_ids(req["parts"], req["complete"])

    def token_ids(self, parts: Sequence[tuple[str, str]], complete: bool) -> list[int]:
        """The prompt token ids (the template already holds the special tokens)."""
        return list(self.tokenizer(self.text(parts, complete), add_special_tokens=False)["input_ids"])

    def continuation_ids(self, segments: Sequence[str | list[int]]) -> list[int]:
        """Token ids of a continuation: id lists as they are, texts tokenized (no special tokens)."""
        out: list[int] = []
        for seg in segments:
            out.extend(
                seg if isinstance(seg, list) else self.tokenizer(seg, add_special_tokens=False)["input_ids"]
            )
        return out


def tokens_prompt(ids: list[int], cache_salt: str | None = None) -> dict[str, Any]:
    """A pre-tokenized prompt in the form this vLLM version expects; `cache_salt` keeps its
    prefix-cache blocks apart from prompts with another (or no) salt."""
    try:
        from vllm.inputs import tokens_input
    except ImportError:  # older vLLM: a TokensPrompt dict
        return {"prompt_token_ids": ids, **({"cache_salt": cache_salt} if cache_salt else {})}
    return tokens_input(ids, cache_salt=cache_salt)


def check_request(op: str, req: Any, max_tokens_default: int) -> dict[str, Any]:
    """Normalize one request (defaults filled in); ValueError naming the field otherwise."""
    if not isinstance(req, dict):
        raise ValueError(f"{op} request must be a dict with 'parts', got {type(req).__name__}")
    parts = validate_parts(req.get("parts"))
    complete = default(req, "complete")
    if not isinstance(complete, bool):
        raise ValueError(f"request 'complete' must be a bool, got {complete!r}")
    if op in DECODE_OPS and not complete:
        raise ValueError(f"{op} needs 'complete': True (only prefills take a prompt prefix)")
    max_tokens = req.get("max_tokens") or max_tokens_default
    if not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"request 'max_tokens' must be a positive int, got {max_tokens!r}")
    temperature = default(req, "temperature")
    if not isinstance(temperature, (int, float)) or temperature < 0:
        raise ValueError(f"request 'temperature' must be a number >= 0, got {temperature!r}")
    stop = default(req, "stop")
    if stop is not None and (not isinstance(stop, list) or not all(isinstance(s, str) for s in stop)):
        raise ValueError(f"request 'stop' must be a list of strings or None, got {stop!r}")
    priority = default(req, "priority")
    if not isinstance(priority, int):
        raise ValueError(f"request 'priority' must be an int (lower runs first), got {priority!r}")
    split = default(req, "split")
    if split is not None and split not in SPLITS:
        raise ValueError(f"request 'split' must be one of {', '.join(SPLITS)} or None, got {split!r}")
    max_items = req.get("max_items")
    if max_items is not None and (
        not isinstance(max_items, int) or isinstance(max_items, bool) or max_items < 1 or split is None
    ):
        raise ValueError(
            f"request 'max_items' must be an int >= 1 on a request with a 'split', got {max_items!r}"
            f" (split {split!r})"
        )
    salt, owner, tag, resume, swap_key = _check_routing(op, req)
    return {
        "parts": parts,
        "complete": complete,
        "max_tokens": max_tokens,
        "temperature": float(temperature),
        "stop": stop,
        "priority": priority,
        "split": split,
        "ignore_eos": bool(default(req, "ignore_eos")),
        "seed": req.get("seed"),
        "max_items": max_items,
        "owner": owner,
        "stream_text": bool(default(req, "stream_text")),
        "cache_salt": salt,
        "tag": tag,
        "progress": bool(default(req, "progress")),
        "resume_ids": resume or [],
        "kv_swap_key": swap_key,
        **check_sampling(req),
        **check_chat(op, req),
        **check_pause(op, req),
    }


def _check_routing(op: str, req: dict[str, Any]) -> tuple[Any, Any, Any, Any, Any]:
    """Whose call a request is and where it resumes: its cache_salt, owner, tag, resume_ids and
    kv_swap_key, checked (ValueError naming the field otherwise)."""
    salt = req.get("cache_salt")
    if salt is not None and (not isinstance(salt, str) or not salt):
        raise ValueError(f"request 'cache_salt' must be a non-empty string or None, got {salt!r}")
    owner = req.get("owner")
    if owner is not None and not isinstance(owner, str):
        raise ValueError(f"request 'owner' must be a string (the query or program id) or None, got {owner!r}")
    tag = req.get("tag")
    if tag is not None and not isinstance(tag, str):
        raise ValueError(f"request 'tag' must be a string (a key abort() can name) or None, got {tag!r}")
    resume = req.get("resume_ids")
    if resume is not None and (
        op not in DECODE_OPS
        or not isinstance(resume, list)
        or not all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in resume)
    ):
        raise ValueError(
            f"request 'resume_ids' must be a list of token ids on a decoding request, got {resume!r}"
        )
    swap_key = req.get("kv_swap_key")
    if swap_key is not None and (op not in DECODE_OPS or not isinstance(swap_key, str) or not swap_key):
        raise ValueError(
            f"request 'kv_swap_key' must be a non-empty string on a decoding request, got {swap_key!r}"
        )
    return salt, owner, tag, resume, swap_key


MAX_LOGPROBS = 20  # top alternatives per token (OpenAI's limit, vLLM's default max_logprobs)


def check_sampling(req: dict[str, Any]) -> dict[str, Any]:
    """The optional sampling fields "top_p" (in (0, 1]), "presence_penalty" and "frequency_penalty"
    (in [-2, 2]), "json_object" (bool: the output is constrained to one JSON object), "json_schema"
    (a JSON schema object the output is constrained to; not with json_object) and "logprobs"
    (None, or 0-20 top alternatives returned with each output token's logprob)."""
    out = {}
    for name, low, high in (
        ("top_p", 0.0, 1.0),
        ("presence_penalty", -2.0, 2.0),
        ("frequency_penalty", -2.0, 2.0),
    ):
        value = default(req, name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
            raise ValueError(f"request {name!r} must be a number in [{low:g}, {high:g}], got {value!r}")
        out[name] = float(value)
    if out["top_p"] == 0:
        raise ValueError("request 'top_p' must be above 0 (1 keeps every token)")
    out["json_object"] = bool(default(req, "json_object"))
    schema = default(req, "json_schema")
    if schema is not None and not isinstance(schema, dict):
        raise ValueError(f"request 'json_schema' must be a JSON schema object or None, got {schema!r:.80}")
    if schema is not None and out["json_object"]:
        raise ValueError("a request constrains its output with 'json_object' or 'json_schema', not both")
    out["json_schema"] = schema
    top = default(req, "logprobs")
    if top is not None and (
        isinstance(top, bool) or not isinstance(top, int) or not 0 <= top <= MAX_LOGPROBS
    ):
        raise ValueError(
            f"request 'logprobs' must be None or an int in [0, {MAX_LOGPROBS}] (top alternatives per "
            f"token), got {top!r}"
        )
    out["logprobs"] = top
    return out


def check_chat(op: str, req: dict[str, Any]) -> dict[str, Any]:
    """A decoding request's whole conversation ("messages", "tools": engines/llm_text/chat_messages.py)
    or raw prompt text ("raw_prompt"), sent instead of its parts; ValueError naming the problem."""
    messages, tools, raw = (
        check_messages(req.get("messages")),
        check_tools(req.get("tools")),
        req.get("raw_prompt"),
    )
    if raw is not None and (not isinstance(raw, str) or not raw):
        raise ValueError(f"request 'raw_prompt' must be a non-empty string, got {raw!r:.80}")
    if (messages is not None or raw is not None) and op not in DECODE_OPS:
        raise ValueError(f"request 'messages' and 'raw_prompt' are for decoding requests, not {op}")
    if tools is not None and messages is None:
        raise ValueError("request 'tools' needs 'messages' (the conversation the tools are offered in)")
    if messages is not None and raw is not None:
        raise ValueError("a request has 'messages' or 'raw_prompt', not both")
    return {"messages": messages, "tools": tools, "raw_prompt": raw}


def check_pause(op: str, req: dict[str, Any]) -> dict[str, Any]:
    """The fields of a call that pauses for a tool or continues after one: "continuation" (below),
    "pause_kv" (what to do with its KV during the pause: PAUSE_KV) and "kv_key" (names that KV; the
    continuing call sends the same key)."""
    pause_kv = req.get("pause_kv")
    if pause_kv is not None and (op not in DECODE_OPS or pause_kv not in PAUSE_KV):
        raise ValueError(
            f"request 'pause_kv' must be one of {', '.join(PAUSE_KV)} on a decoding request, got {pause_kv!r}"
        )
    kv_key = req.get("kv_key")
    if kv_key is not None and (not isinstance(kv_key, str) or not kv_key):
        raise ValueError(
            f"request 'kv_key' must be a non-empty string (names a paused call's KV), got {kv_key!r}"
        )
    if pause_kv is not None and kv_key is None:
        raise ValueError("request 'pause_kv' needs a 'kv_key' naming the KV for the call that continues it")
    return {
        "continuation": check_continuation(op, req.get("continuation")),
        "pause_kv": pause_kv,
        "kv_key": kv_key,
    }


def check_continuation(op: str, value: Any) -> list[str | list[int]]:
    """A call that continues after a pause (a tool call): what follows the prompt's assistant turn,
    in order: token ids the model wrote (lists of ints) and texts teola inserts (strs, e.g. a tool's
    result)."""
    if value is None:
        return []
    if op not in DECODE_OPS or not isinstance(value, list):
        raise ValueError(
            f"request 'continuation' must be a list of texts and token-id lists on a decoding request, "
            f"got {value!r:.80}"
        )
    for i, seg in enumerate(value):
        ok = isinstance(seg, str) or (isinstance(seg, list) and _token_ids(seg))
        if not ok:
            raise ValueError(
                f"request 'continuation'[{i}] must be a text or a list of token ids, got {seg!r:.80}"
            )
    return list(value)


def _token_ids(seg: list[Any]) -> bool:
    """Every element an int >= 0, bools excluded; plain ints are checked at C speed (a paused
    call's continuation repeats all the tokens written so far, on every call)."""
    if not seg:
        return True
    if set(map(type, seg)) == {int}:
        return min(seg) >= 0
    return all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in seg)
