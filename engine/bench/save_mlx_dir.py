"""`python -m engine.bench.save_mlx_dir --model bundled --out DIR`: save a model as loaded by
BatchChat (a .gguf dequantized, say) as an mlx-lm directory, so that `mlx_lm.server --model
DIR` and `batchchat serve --model DIR` serve exactly the same weights."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, is_dataclass
from pathlib import Path

from ..blas import ensure_fast_blas


def save(source: str, out: Path) -> Path:
    import mlx.core as mx
    from mlx.utils import tree_flatten

    from ..loader import load_model

    loaded = load_model(source)
    args = loaded.model.args
    config = asdict(args) if is_dataclass(args) else dict(vars(args))
    config["max_position_embeddings"] = loaded.context_length
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config, indent=1))
    mx.save_safetensors(str(out / "model.safetensors"),
                        dict(tree_flatten(loaded.model.parameters())))
    loaded.tokenizer._tokenizer.save_pretrained(str(out))
    return out


def main(argv: list[str] | None = None) -> int:
    ensure_fast_blas()
    p = argparse.ArgumentParser(prog="python -m engine.bench.save_mlx_dir", description=__doc__)
    p.add_argument("--model", default="bundled")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    print(f"saved {save(args.model, args.out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
