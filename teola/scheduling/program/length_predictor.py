"""Output length before it is generated (LAMPS §6): a linear classifier over prompt embeddings that
puts a prompt's output into one of `bins` bins of `bin_width` tokens, trained with cross-entropy on
(prompt, output length) pairs recorded from the real engine (`python -m bench record_lengths`
writes them).
LAMPS uses OPT-125M's last-token embedding and 50 bins of 10 tokens; here any embedder works (the
shipped MiniLM by default in `python -m bench length_predictor`), the
classifier is plain numpy.

    predictor = LengthPredictor().fit(embeddings, lengths)
    predictor.predict(new_embeddings)          # tokens: the middle of the predicted bin
    accuracy(predictor.predict(x), lengths)    # MAE, Acc-5, Acc-15 as LAMPS reports them

Its predictions reach the `lamps` / `sjf` policies as a request's "predicted_tokens"
(`Program(..., predictor=...)`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np


class LengthPredictor:
    """Multinomial logistic regression over standardized embeddings (full-batch gradient descent,
    L2 penalty, deterministic)."""

    def __init__(
        self, bin_width: int = 10, bins: int = 50, l2: float = 1e-3, epochs: int = 400, lr: float = 0.5
    ) -> None:
        if bin_width < 1 or bins < 2 or epochs < 1 or lr <= 0 or l2 < 0:
            raise ValueError(
                "LengthPredictor: bin_width >= 1, bins >= 2, epochs >= 1, lr > 0 and l2 >= 0 required"
            )
        self.bin_width = bin_width
        self.bins = bins
        self.l2 = l2
        self.epochs = epochs
        self.lr = lr
        self.mean: np.ndarray | None = None
        self.std: np.ndarray | None = None
        self.w: np.ndarray | None = None
        self.b: np.ndarray | None = None

    def bin_of(self, lengths: Sequence[int] | np.ndarray) -> np.ndarray:
        return np.minimum(np.asarray(lengths, dtype=int) // self.bin_width, self.bins - 1)

    def fit(self, x: Sequence[Sequence[float]] | np.ndarray, lengths: Sequence[int]) -> LengthPredictor:
        """Train on embeddings `x` (n x d) and the output lengths they led to."""
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 2 or len(x) != len(lengths) or len(x) == 0:
            raise ValueError(
                f"LengthPredictor.fit: x must be n x d with one length per row, got {x.shape} "
                f"and {len(lengths)} lengths"
            )
        self.mean = x.mean(axis=0)
        self.std = x.std(axis=0) + 1e-08
        z = (x - self.mean) / self.std
        y = np.eye(self.bins)[self.bin_of(lengths)]
        self.w = np.zeros((x.shape[1], self.bins))
        self.b = np.zeros(self.bins)
        for _ in range(self.epochs):
            p = self._proba(z)
            grad = (p - y) / len(z)
            self.w -= self.lr * (z.T @ grad + self.l2 * self.w)
            self.b -= self.lr * grad.sum(axis=0)
        return self

    def _proba(self, z: np.ndarray) -> np.ndarray:
        logits = z @ self.w + self.b
        logits -= logits.max(axis=1, keepdims=True)
        e = np.exp(logits)
        return e / e.sum(axis=1, keepdims=True)

    def predict(self, x: Sequence[Sequence[float]] | np.ndarray) -> np.ndarray:
        """Predicted output tokens per row: the middle of the most likely bin."""
        if self.w is None:
            raise RuntimeError("LengthPredictor.predict: call fit (or load) first")
        z = (np.asarray(x, dtype=np.float64) - self.mean) / self.std
        return self._proba(np.atleast_2d(z)).argmax(axis=1) * self.bin_width + self.bin_width // 2

    def to_dict(self) -> dict[str, Any]:
        if self.w is None:
            raise RuntimeError("LengthPredictor: nothing to save before fit")
        return {
            "bin_width": self.bin_width,
            "bins": self.bins,
            "mean": self.mean.tolist(),
            "std": self.std.tolist(),
            "w": self.w.tolist(),
            "b": self.b.tolist(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LengthPredictor:
        p = cls(int(data["bin_width"]), int(data["bins"]))
        p.mean, p.std = np.asarray(data["mean"]), np.asarray(data["std"])
        p.w, p.b = np.asarray(data["w"]), np.asarray(data["b"])
        return p

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict()))

    @classmethod
    def load(cls, path: str | Path) -> LengthPredictor:
        return cls.from_dict(json.loads(Path(path).read_text()))


def accuracy(predicted: Sequence[float], actual: Sequence[int]) -> dict[str, float]:
    """LAMPS's metrics: mean absolute error, and the shares within 5 and 15 tokens."""
    err = np.abs(np.asarray(predicted, dtype=float) - np.asarray(actual, dtype=float))
    return {
        "mae": float(err.mean()),
        "acc5": float((err <= 5).mean()),
        "acc15": float((err <= 15).mean()),
        "n": int(len(err)),
    }


def split(n: int, holdout: float = 0.2, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Train / test row indices (LAMPS: an 80-20 split)."""
    order = np.random.default_rng(seed).permutation(n)
    cut = int(round(n * (1 - holdout)))
    return order[:cut], order[cut:]
