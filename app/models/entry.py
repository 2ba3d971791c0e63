"""One model found on the disk: what the library shows of it and how to load it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engine.public import format_bytes


@dataclass(frozen=True)
class ModelEntry:
    name: str  # how the list and `batchchat models info NAME` call it
    source: str  # what the loader takes: "bundled", a .gguf file or a model directory
    place: str  # where it was found: "BatchChat", "Hugging Face", "LM Studio", "Folder"
    path: Path | None  # the file or directory (None: the bundled model, not fetched yet)
    format: str  # "GGUF" or "mlx-lm"
    architecture: str = ""  # GGUF general.architecture or config.json model_type
    parameters: int | None = None
    quantization: str = ""  # "Q4_1", "4-bit g64", "bf16"
    size_bytes: int = 0  # on disk
    context_length: int | None = None
    reason: str = ""  # why it does not load on this backend ("" when it does)
    note: str = ""  # anything else worth saying (e.g. fetched on first load)
    # a vision-language model (#52): a VLM directory (vision / preprocessor config), or a
    # GGUF with an mmproj*.gguf projector beside it
    sees_images: bool = False
    images_reason: str = ""  # why its images do not load here yet ("" when they do)

    @property
    def loads(self) -> bool:
        return not self.reason

    def row(self) -> dict[str, str]:
        """The list's columns as text (the CLI table and the dialog share them)."""
        return {"name": self.name, "arch": self.architecture or "?",
                "params": format_params(self.parameters), "quant": self.quantization or "?",
                "size": format_bytes(self.size_bytes) if self.size_bytes else "—",
                "context": format_context(self.context_length),
                "loads": "yes" if self.loads else "no", "where": self.place,
                "input": self.input}

    @property
    def input(self) -> str:
        """What it reads: "text", "text + images", or "text (images: not yet)"."""
        if not self.sees_images:
            return "text"
        return "text (images: not yet)" if self.images_reason else "text + images"


def format_params(n: int | None) -> str:
    """135M, 1.7B, 70B; "?" when not known."""
    if not n:
        return "?"
    for unit, size in (("T", 10**12), ("B", 10**9), ("M", 10**6), ("K", 10**3)):
        if n >= size:
            value = n / size
            return f"{value:.1f}{unit}" if value < 10 else f"{value:.0f}{unit}"
    return str(n)


def format_context(n: int | None) -> str:
    """8K, 128K, 131072 → 128K; "?" when not known."""
    if not n:
        return "?"
    return f"{n // 1024}K" if n >= 1024 and n % 1024 == 0 else f"{n:,}"
