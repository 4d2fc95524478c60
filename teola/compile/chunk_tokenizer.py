"""The tokens chunk sizes are counted in: the embedding model's own tokenizer, read from its local
folder, so a chunk of `chunk_size` tokens is what the embedder reads (LlamaIndex's SentenceSplitter
counts in a tokenizer too); words and punctuation marks (`teola.compile.chunking.count_tokens`) when no
tokenizer is on disk. Nothing is downloaded: the folder is the one the engine loads its model from.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from typing import Literal

from engines.registry import kind_tokenizer_dir
from teola.compile.chunking import Piece
from teola.ir.engine_spec import Engine

TOKENIZER_CHOICES = ("engine", "words")
TokenizerChoice = Literal["engine", "words"]


class ModelTokenizer:
    """A Hugging Face fast tokenizer (`tokenizer.json`) without truncation, padding or special
    tokens; it hashes by identity (one instance per folder), so chunk memos key on it."""

    def __init__(self, folder: Path) -> None:
        from tokenizers import Tokenizer

        self.folder = folder
        self._tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()

    def pieces(self, text: str) -> list[Piece]:
        """`text`'s tokens in order: character offsets and whether each starts a word (a word as the
        tokenizer's pre-tokenizer splits them, e.g. "playing" -> "playing" | "play", "##ing")."""
        enc = self._tokenizer.encode(text, add_special_tokens=False)
        words = enc.word_ids
        return [(a, b, k == 0 or words[k] != words[k - 1]) for k, (a, b) in enumerate(enc.offsets)]

    def count(self, text: str) -> int:
        """How many tokens `text` has."""
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)

    def __repr__(self) -> str:
        return f"ModelTokenizer({str(self.folder)!r})"


@functools.lru_cache(maxsize=16)
def load_tokenizer(folder: Path) -> ModelTokenizer:
    """The tokenizer of a local model folder holding a tokenizer.json (loaded once per folder)."""
    return ModelTokenizer(folder)


def chunk_tokenizer(engine: Engine | None, choice: TokenizerChoice = "engine") -> ModelTokenizer | None:
    """What an indexing node counts chunk tokens in: with `choice` "engine", its embedding engine's
    model tokenizer when the engine's kind declares one on disk
    (`engines.registry.kind_tokenizer_dir`); None (words and punctuation marks) otherwise, or with
    `choice` "words"."""
    if choice not in TOKENIZER_CHOICES:
        raise ValueError(f"tokenizer must be one of {TOKENIZER_CHOICES}, got {choice!r}")
    if choice == "words" or engine is None or engine.remote:
        return None
    return _engine_tokenizer(engine)


# per registered engine (they live as long as their app): finding the folder stats files
@functools.lru_cache(maxsize=64)
def _engine_tokenizer(engine: Engine) -> ModelTokenizer | None:
    if importlib.util.find_spec("tokenizers") is None:  # installed with transformers (the cpu extra)
        return None
    folder = kind_tokenizer_dir(engine.kind, engine.options)
    return load_tokenizer(folder) if folder is not None else None
