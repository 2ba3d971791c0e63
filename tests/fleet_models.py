"""Model files for the model manager's tests (issue #50): the bundled model re-quantized with
gguf-py (a second real model file of another size), and tiny random GGUFs."""

from __future__ import annotations

from pathlib import Path

Q8_0_FILE_TYPE = 7  # llama.cpp's general.file_type for a mostly-Q8_0 file
FILE_TYPES = {"Q8_0": Q8_0_FILE_TYPE, "Q5_0": 8, "Q4_0": 2}  # llama.cpp's LLAMA_FTYPE


def bundled_path() -> Path:
    from engine.loader import bundled_model_path

    return Path(bundled_model_path())


def requantize(src: Path, dest: Path, kind_name: str = "Q8_0") -> Path:
    """`src`'s Q4_1 tensors dequantized and quantized again as `kind_name` (gguf-py's own
    quantizer), every other tensor and every metadata key copied as they are; made once a
    test session for each source and kind (tests/session_files.py), then copied."""
    from tests.session_files import made_once

    return made_once(src, f"requantize:{kind_name}", dest,
                     lambda out: _requantize(src, out, kind_name))


def _requantize(src: Path, dest: Path, kind_name: str) -> None:
    from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter, quants

    kind = GGMLQuantizationType[kind_name]
    reader = GGUFReader(src)
    arch = reader.fields["general.architecture"].contents()
    writer = GGUFWriter(str(dest), arch)
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture":
            continue
        value = field.contents()
        if field.name == "general.file_type":
            value = FILE_TYPES[kind_name]
        vtype = field.types[0]
        sub = field.types[-1] if vtype is GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, value, vtype, sub_type=sub)
    for t in reader.tensors:
        if t.tensor_type is GGMLQuantizationType.Q4_1:
            data = quants.quantize(quants.dequantize(t.data, t.tensor_type), kind)
            writer.add_tensor(t.name, data, raw_dtype=kind)
        elif t.tensor_type in (GGMLQuantizationType.F32,):
            writer.add_tensor(t.name, t.data)
        else:
            writer.add_tensor(t.name, t.data, raw_dtype=t.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def tiny_gguf(path: Path, seed: int = 0, hidden: int = 256) -> Path:
    """A tiny random llama GGUF (Q8_0 linears) of tests/gguf_models.py."""
    from gguf import GGMLQuantizationType

    from tests.gguf_models import CASES, ArchCase, build_model, gguf_tensors, quantize, write_gguf

    base = CASES["llama"]
    case = ArchCase("llama", dict(base.config, hidden_size=hidden, intermediate_size=2 * hidden),
                    permute_qk=True, metadata=base.metadata)
    tensors, raw = quantize(gguf_tensors(case, build_model(case, seed)),
                            GGMLQuantizationType.Q8_0, seed=seed)
    return write_gguf(path, case, tensors, raw_types=raw, file_type=Q8_0_FILE_TYPE)
