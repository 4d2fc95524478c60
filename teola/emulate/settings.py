"""What `teola emulate` serves: the profile whose GPU costs time the engines, how many engines, the
model whose tokenizer counts the tokens, the name clients use for it, and how outputs end."""

from __future__ import annotations

from dataclasses import dataclass

from teola.emulate.call import OUTPUT_MODES

DEFAULT_MODEL = "smollm2-135m-instruct"


@dataclass(frozen=True, slots=True)
class EmulatorSettings:
    """Settings of one emulated server (see docs/emulator.md)."""

    profile: str
    instances: int = 1
    model: str = DEFAULT_MODEL  # a teola model name or a local Hugging Face folder (its tokenizer)
    served_model_name: str | None = None  # the model name clients send (default: `model` as given)
    output: str = "sample"  # "sample": lengths from `output_len`; "echo": the prompt's tokens
    output_len: str = "max"  # a spec of teola.emulate.lengths.OutputLengths
    seed: int = 0
    max_model_len: int | None = None  # default: the profile's

    def __post_init__(self) -> None:
        if self.output not in OUTPUT_MODES:
            raise ValueError(f"--output must be one of {', '.join(OUTPUT_MODES)}, got {self.output!r}")
        if self.instances < 1:
            raise ValueError(f"--instances must be >= 1, got {self.instances}")
        if self.max_model_len is not None and self.max_model_len < 2:
            raise ValueError(f"--max-model-len must be >= 2, got {self.max_model_len}")

    @property
    def names(self) -> tuple[str, ...]:
        """The model names requests may send."""
        return (self.served_model_name or self.model,)
