"""The emulated model's tokens: prompts tokenized with the named model's local tokenizer as vLLM
tokenizes them (a completion's prompt with the tokenizer's special tokens, a chat through the chat
template with the generation prompt and no further special tokens), and the text of the tokens an
emulated call writes.

Written text: one filler word of the vocabulary repeated (" the the the ..."), chosen at start-up so
that the text re-tokenizes to exactly as many tokens as were written; in echo mode the prompt's own
tokens, decoded one by one (special tokens as empty text, as vLLM's skip_special_tokens does; a
character split over two tokens shows as U+FFFD)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

FILLER_WORDS = (" the", " a", " and", " of", " to", " hello", " token")


class ModelTokens:
    """A Hugging Face tokenizer loaded from a local model folder (or a teola model name)."""

    def __init__(self, model: str) -> None:
        from transformers import AutoTokenizer

        from engines.assets.models import resolve_model

        self.path: Path = resolve_model(model)
        self.tokenizer = AutoTokenizer.from_pretrained(str(self.path))
        self.filler_id, self.filler_text = self._filler()

    def completion_ids(self, prompt: Any) -> list[int]:
        """Token ids of a completion's "prompt": a string, token ids, or a one-element list of either;
        ValueError for several prompts (one prompt per request is served)."""
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
            prompt = prompt[0]
        if isinstance(prompt, str) and prompt:
            return list(self.tokenizer(prompt)["input_ids"])
        if (
            isinstance(prompt, list)
            and prompt
            and all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in prompt)
        ):
            return list(prompt)
        raise ValueError(
            "prompt must be one non-empty string or one non-empty list of token ids "
            "(batched prompts are not served: send one request per prompt)"
        )

    def chat_ids(self, messages: Any, tools: Any = None, add_generation_prompt: bool = True) -> list[int]:
        """Token ids of a conversation rendered with the model's chat template."""
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            raise ValueError("messages must be a non-empty list of {role, content} objects")
        convo = [{**m, "content": _text(m.get("content"))} for m in messages]
        try:
            text = self.tokenizer.apply_chat_template(
                convo, tools=tools or None, tokenize=False, add_generation_prompt=add_generation_prompt
            )
        except Exception as exc:  # jinja's own errors: the conversation does not fit the template
            raise ValueError(
                f"the chat template of {self.path.name} cannot render these messages: {exc}"
            ) from None
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def pieces(self, ids: Sequence[int]) -> list[str]:
        """The text of each token, decoded alone (special tokens as empty text)."""
        return self.tokenizer.batch_decode([[i] for i in ids], skip_special_tokens=True)

    def _filler(self) -> tuple[int, str]:
        """A word whose repetitions tokenize to one token each (the first of FILLER_WORDS that does)."""
        for word in FILLER_WORDS:
            ids = [self.tokenizer(word * n, add_special_tokens=False)["input_ids"] for n in (1, 2, 3, 64)]
            if (
                all(len(x) == n and len(set(x)) == 1 for x, n in zip(ids, (1, 2, 3, 64)))
                and len({x[0] for x in ids}) == 1
            ):
                return ids[0][0], word
        raise ValueError(
            f"the tokenizer of {self.path} splits every filler word {FILLER_WORDS} into several "
            "tokens; emulated output counts would not re-tokenize exactly"
        )


def _text(content: Any) -> str:
    """A message's content as text: a string, or the text parts of a list of parts."""
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list):
        return "".join(
            str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text"
        )
    raise ValueError(f"message content must be a string or a list of parts, got {content!r:.80}")
