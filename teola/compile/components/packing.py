"""How many retrieved chunks one LLM prompt holds: LlamaIndex's compact / tree_summarize repacking,
planned at compile time from upper bounds (the graph's shape is fixed before retrieval runs).

A chunk's size is bounded by its indexing node's `chunk_size` (`Port.item_tokens`, in chunk tokens:
the embedding model's, `teola.compile.chunk_tokenizer`, or words and punctuation marks without one),
so a compiled graph holds for any documents. The LLM's tokenizer may split text finer;
`TOKEN_RATIO` bounds that. Measured with SmolLM2's BPE on 256-token chunks (of at least 64 tokens)
of the shipped corpora (BoolQ, NarrativeQA, Wikipedia summaries): per MiniLM WordPiece token, LLM
tokens average 1.03-1.07, 1.61 at most; per word or mark, 1.12-1.14, 1.84 at most. A model whose
tokenizer splits finer than the chunk tokens needs a larger `token_ratio` in the synthesis node's
config.
"""

from __future__ import annotations

import math

from teola.compile.chunking import count_tokens

TOKEN_RATIO = 2.0
TEMPLATE_TOKENS = 64  # chat-template markup and part separators around the prompt's texts
# A compiled graph is reused for queries whose texts fall in the same length class
# (teola.compile.compiler.TEXT_BUCKET characters): room for that many more tokens (a character is at most
# a token), once for each time the question appears.
TEXT_SLACK = 64


def llm_tokens(text: str, ratio: float = TOKEN_RATIO) -> int:
    """An upper bound of `text`'s length in LLM tokens."""
    return math.ceil(count_tokens(text) * ratio)


def context_budget(window: int, fixed_texts: list[str], reserved: int, ratio: float = TOKEN_RATIO) -> int:
    """LLM tokens left for context in a prompt of a `window`-token model, after the fixed texts
    (instruction, question), `reserved` tokens (the answer, an existing answer) and the template."""
    if window <= 0:
        return 0
    return window - reserved - TEMPLATE_TOKENS - TEXT_SLACK - sum(llm_tokens(t, ratio) for t in fixed_texts)


def pack_ranges(
    n: int, item_tokens: int, budget: int, ratio: float = TOKEN_RATIO, pack_size: int | None = None
) -> list[tuple[int, int]]:
    """Consecutive [start, stop) ranges covering items 0..n-1, each as many items as fit `budget`
    LLM tokens (items of at most `item_tokens` chunk tokens); one item a range when the sizes are
    unknown, `pack_size` items when given."""
    n = max(1, n)
    if pack_size is not None:
        per = pack_size
    elif item_tokens > 0 and budget > 0:
        per = max(1, int(budget // (item_tokens * ratio)))
    else:
        per = 1
    return [(i, min(i + per, n)) for i in range(0, n, per)]
