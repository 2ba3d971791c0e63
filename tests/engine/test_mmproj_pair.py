"""A GGUF language model with its llama.cpp mmproj beside it, loaded as one VLM (issue #52):
tiny random VLMs of each family written as the converter writes a pair
(tests/mmproj_models.py), against the very same weights loaded as an mlx-vlm folder.

- The pair answers an image request (greedy, and seeded) and a text request as the folder
  does, token for token: the same prompt ids, the same merged embeddings.
- Same answer: an image row from the pair alone and batched beside text rows (also from a
  Q4_0 text GGUF on the native kernels); a follow-up with the same image is cached.
- LFM2-VL: an image larger than one view, in tiles and a thumbnail, answers the same alone
  and batched and is cached on a follow-up.
- Pixtral: Mistral 3's projector (a patch merger) and Pixtral 12B's (none) alike.
- Gemma 4: its images attend both ways as its folder's (use_bidirectional_attention
  "vision"), or causally where llama.cpp's width rule says so.
- A float16 or Q8_0 mmproj loads within its rounding.
- An mmproj given by path (`mmproj=`, the CLI's --mmproj) pairs from anywhere; a projector
  type the engine does not map, or one for another text architecture, is refused with its
  name when asked for, and leaves a GGUF it sits beside reading text, with a note.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest
from gguf import GGMLQuantizationType
from mlx.utils import tree_flatten

from engine import Engine, EngineConfig, SamplingParams, testing
from engine.loader import ModelLoadError
from engine.loader.gguf_file import read_gguf_file
from engine.vision.deepstack import StackedRows
from tests.engine.conftest import run_to_end
from tests.mmproj_models import (
    PROJECTOR,
    make_tiny_pair,
    mmproj_tensors,
    write_mmproj,
    write_text_gguf,
)
from tests.vision_models import png_bytes

pytestmark = pytest.mark.usefixtures("native_built")

GREEDY = SamplingParams(max_tokens=10, temperature=0.0)
SEEDED = SamplingParams(max_tokens=10, temperature=0.8, top_p=0.9, seed=7)
RED, GREEN = png_bytes((200, 10, 10)), png_bytes((10, 200, 10), size=(24, 40))
BIG = png_bytes((30, 60, 200), size=(260, 200))
TILED = png_bytes((30, 60, 200), size=(800, 700))  # past LFM2-VL's one view: tiles


def ask(text: str) -> list[dict]:
    return [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": text}]}]


def chat(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


@pytest.fixture(scope="module", params=sorted(PROJECTOR))
def pair(request, tmp_path_factory) -> tuple[Path, Path, Path]:
    """(the mlx-vlm folder, the text GGUF, the mmproj beside it)."""
    return make_tiny_pair(tmp_path_factory.mktemp(request.param), request.param)


def answers(engine: Engine, requests: list[tuple[list[dict], list[bytes] | None]],
            params: SamplingParams = GREEDY) -> list[list[int]]:
    got: list[list[int]] = []
    for messages, images in requests:
        tokens: list[int] = []
        stream = engine.submit(messages=messages, params=params, images=images)
        stream.listen(lambda e, t=tokens: t.append(e.token) if e.token is not None else None)
        got.append(tokens)
    run_to_end(engine)
    return got


def same_rows(a, b) -> bool:
    """Bit-equal merged input rows (and, Qwen3-VL, each DeepStack level's rows)."""
    if isinstance(a, StackedRows) or isinstance(b, StackedRows):
        return (isinstance(a, StackedRows) and isinstance(b, StackedRows)
                and len(a.levels) == len(b.levels) > 0 and mx.array_equal(a.rows, b.rows)
                and all(mx.array_equal(x, y) for x, y in zip(a.levels, b.levels, strict=True)))
    return mx.array_equal(a, b).item()


def test_the_pair_answers_as_the_mlx_vlm_folder(pair):
    folder, text, mmproj = pair
    ours, theirs = Engine.load(str(text)), Engine.load(str(folder))
    assert ours.sees_images and mmproj.name in ours.description
    assert "sees images" in ours.description and not ours.notes
    assert type(ours.vision.processor) is type(theirs.vision.processor)
    a, b = ours.vision.prepare(ask("what is it?"), [RED]), theirs.vision.prepare(
        ask("what is it?"), [RED])
    assert a.ids == b.ids and a.token_ids == b.token_ids
    assert same_rows(ours.vision.embed(a), theirs.vision.embed(b))
    # a larger image: tiles (Idefics3), several 112-pixel windows (Qwen2.5-VL's tower)
    a, b = ours.vision.prepare(ask("and this?"), [BIG]), theirs.vision.prepare(
        ask("and this?"), [BIG])
    assert a.ids == b.ids and same_rows(ours.vision.embed(a), theirs.vision.embed(b))
    requests = [(ask("what is it?"), [RED]), (chat("tell me a story"), None),
                (ask("and the colour?"), [GREEN])]
    for params in (GREEDY, SEEDED):
        got = answers(ours, requests, params)
        assert got == answers(theirs, requests, params)
        assert all(got)  # each answered something
    assert answers(ours, [requests[0]])[0] != answers(ours, [requests[2]])[0]


def test_the_text_gguf_alone_reads_text_as_the_pair(pair, tmp_path):
    """Without its mmproj the text GGUF reads text, with the same answers (a qwen2vl /
    qwen3vl GGUF: plain RoPE alone, the engine's M-RoPE in the pair, one rotation for
    text), and its rope.dimension_sections are the folder's M-RoPE sections."""
    folder, text, _ = pair
    alone = tmp_path / text.name
    shutil.copy(text, alone)
    requests = [(chat("tell me a story"), None), (chat("count to three"), None)]
    engine = Engine.load(str(alone))
    assert not engine.sees_images
    assert answers(engine, requests) == answers(Engine.load(str(text)), requests)
    config = json.loads((folder / "config.json").read_text())
    config = config.get("text_config", config)  # Qwen3-VL's is nested
    if "rope_scaling" in config:  # Qwen-VL: the sections as the folder's config says
        scaling = engine.model.args.rope_scaling
        assert scaling == {"type": "mrope",
                           "mrope_section": config["rope_scaling"]["mrope_section"]}
        assert engine.model.args.model_type == config["model_type"].split("_")[0]


def test_an_image_row_from_the_pair_same_alone_and_batched(pair):
    _, text, _ = pair

    def engine() -> Engine:  # no prefix cache: every answer computed from scratch
        return Engine.load(str(text), config=EngineConfig(prefix_cache=False))

    rows = [(chat(f"tell me about the number {i} please"), None) for i in range(3)]
    seen = [(ask("what is it?"), [RED]), (ask("and this one, what colour?"), [GREEN])]
    solo = engine()  # each request alone, one after another (a load costs more than one)
    alone = [answers(solo, [r], SEEDED)[0] for r in rows + seen]
    together = answers(engine(), [rows[0], seen[0], rows[1], seen[1], rows[2]], SEEDED)
    assert together == [alone[0], alone[3], alone[1], alone[4], alone[2]]


def test_a_follow_up_with_the_same_image_is_cached(pair):
    """A next turn about the same image reuses its KV (and answers as without a cache);
    another image reuses nothing past the text before it. (LFM2's convolutions: a hybrid
    model's prefix cache reuses an entry only whole, so its first turn is one token, the
    entry kept its prompt, as tests/engine/test_vision.py does.)"""
    _, text, _ = pair
    engine = Engine.load(str(text))
    fresh = Engine.load(str(text), config=EngineConfig(prefix_cache=False))
    whole = testing.facts(engine).whole_prefix_entries
    [reply] = answers(engine, [(ask("what is it?"), [RED])],
                      SamplingParams(max_tokens=1, temperature=0.0) if whole else GREEDY)
    image_end = engine.vision.prepare(ask("what is it?"), [RED]).images_end
    said = engine.tokenizer.decode([t for t in reply if t != engine.vision.image_token_id])
    follow = ask("what is it?") + [{"role": "assistant", "content": said},
                                   {"role": "user", "content": "say more"}]
    assert answers(engine, [(follow, [RED])]) == answers(fresh, [(follow, [RED])])
    assert engine.finished_requests()[-1].cached_tokens >= image_end
    answers(engine, [(follow, [GREEN])])  # another image: nothing past the text
    assert engine.finished_requests()[-1].cached_tokens < image_end


def test_an_mmproj_given_by_path_pairs_from_anywhere(pair, tmp_path):
    folder, text, mmproj = pair
    alone = tmp_path / "alone" / text.name
    alone.parent.mkdir()
    shutil.copy(text, alone)
    assert not Engine.load(str(alone)).sees_images  # nothing beside it: text only
    elsewhere = tmp_path / "projector.gguf"  # any name, given by path
    shutil.copy(mmproj, elsewhere)
    engine = Engine.load(str(alone), mmproj=str(elsewhere))
    assert engine.sees_images
    assert answers(engine, [(ask("what is it?"), [RED])]) == answers(
        Engine.load(str(folder)), [(ask("what is it?"), [RED])])
    with pytest.raises(ModelLoadError, match="GGUF file only"):
        Engine.load(str(folder), mmproj=str(elsewhere))
    with pytest.raises(ModelLoadError, match="no such mmproj"):
        Engine.load(str(alone), mmproj=str(tmp_path / "missing.gguf"))


@pytest.mark.parametrize("projector", ["llava", "kimivl"])
def test_a_projector_type_not_mapped_is_refused_with_its_name(pair, tmp_path, projector):
    folder, text, _ = pair
    other = write_mmproj(folder, tmp_path / "mmproj-other.gguf", projector=projector)
    with pytest.raises(ModelLoadError, match=f"projector type '{projector}'"):
        Engine.load(str(text), mmproj=str(other))
    beside = tmp_path / "m"
    beside.mkdir()
    shutil.copy(text, beside / text.name)
    shutil.copy(other, beside / other.name)
    engine = Engine.load(str(beside / text.name))  # the model still loads, reading text
    assert not engine.sees_images
    [note] = engine.notes
    assert "reads text only" in note and projector in note


@pytest.mark.parametrize("kernels", [True, False], ids=["ragged", "passes-apart"])
def test_a_quantized_gguf_s_image_rows_same_alone_and_batched(pair, tmp_path, kernels):
    """A Q4_0 text GGUF (kept quantized: on the CPU packed for the native kernels, its
    embedding table read by mlx-vlm's merge as by the engine) with its mmproj."""
    folder, _, mmproj = pair
    text = write_text_gguf(folder, tmp_path / "tiny-Q4_0.gguf", GGMLQuantizationType.Q4_0)
    shutil.copy(mmproj, tmp_path / mmproj.name)

    def engine() -> Engine:
        return Engine.load(str(text), config=EngineConfig(prefix_cache=False,
                                                          cpu_kernels=kernels))

    solo = engine()  # each request alone, one after another
    assert "quantized" in solo.description and solo.sees_images
    rows = [(chat(f"count to {i} please"), None) for i in range(2)]
    seen = [(ask("what is it?"), [RED]), (ask("which colour?"), [GREEN])]
    alone = [answers(solo, [r], SEEDED)[0] for r in rows + seen]
    together = answers(engine(), [seen[0], rows[0], seen[1], rows[1]], SEEDED)
    assert together == [alone[2], alone[0], alone[3], alone[1]]


@pytest.mark.parametrize("outtype", ["f16", "q8_0"])
def test_a_half_or_8_bit_mmproj_loads_its_weights(pair, tmp_path, outtype):
    """The converter's default (f16) and a q8_0 projector: the tower's matrices in the file
    as F16 / Q8_0 blocks, read back within their rounding of the folder's weights."""
    folder, text, _ = pair
    shutil.copy(text, tmp_path / text.name)
    mmproj = write_mmproj(folder, tmp_path / f"mmproj-{outtype}.gguf", outtype=outtype)
    kinds = {t.kind.name for t in read_gguf_file(mmproj).tensors.values()}
    assert outtype.upper() in kinds
    engine = Engine.load(str(tmp_path / text.name))
    assert engine.sees_images
    ours = dict(tree_flatten(engine.vision.vlm.parameters()))
    for name, w in tree_flatten(Engine.load(str(folder)).vision.vlm.parameters()):
        if name.startswith("language_model."):
            continue
        # F16: 11 significant bits; Q8_0: a block's largest / 127 a step, half of it off,
        # plus the step's own float16 rounding times 127
        bound = (2.0 ** -11 if outtype == "f16" else 0.6 / 127) * mx.abs(w).max().item()
        assert mx.abs(ours[name] - w).max().item() <= bound * 1.0001, name
    [got] = answers(engine, [(ask("what is it?"), [RED])])
    assert got


def test_a_projector_for_another_model_is_refused(tmp_path):
    _, llama_text, _ = make_tiny_pair(tmp_path, "idefics3")
    gemma, _, gemma_proj = make_tiny_pair(tmp_path, "gemma3")
    with pytest.raises(ModelLoadError, match="'gemma3' does not pair with a llama GGUF"):
        Engine.load(str(llama_text), mmproj=str(gemma_proj))
    # a tensor missing, one too many: named
    tensors = mmproj_tensors(gemma)
    del tensors["mm.soft_emb_norm.weight"]
    short = write_mmproj(gemma, tmp_path / "short.gguf", tensors=tensors)
    with pytest.raises(ModelLoadError, match="no tensor for .*soft_emb_norm"):
        Engine.load(str(tmp_path / "gemma3-gguf" / "tiny-gemma3.F32.gguf"), mmproj=str(short))
    tensors = mmproj_tensors(gemma) | {"mm.extra.weight": np.zeros((2, 2), np.float32)}
    extra = write_mmproj(gemma, tmp_path / "extra.gguf", tensors=tensors)
    with pytest.raises(ModelLoadError, match="unexpected tensor 'mm.extra.weight'"):
        Engine.load(str(tmp_path / "gemma3-gguf" / "tiny-gemma3.F32.gguf"), mmproj=str(extra))


@pytest.mark.parametrize("family", ["mistral3", "pixtral"])
def test_a_pixtral_projector_with_the_img_break_copy_or_half_a_merger(tmp_path, family):
    """An older conversion's copy of [IMG_BREAK]'s embedding (v.token_embd.img_break, which
    clip.cpp reads) is taken as read (the prompt's [IMG_BREAK] tokens read the text GGUF's
    own table), with Mistral 3's patch merger or without (Pixtral 12B's layout); a Mistral
    3 projector less its merger matrix (neither layout: read as Pixtral 12B's, whose
    projector has biases this one lacks) is refused naming the tensor missing."""
    folder, text, _ = make_tiny_pair(tmp_path, family)
    tensors = mmproj_tensors(folder)
    embeddings = mx.load(str(folder / "model.safetensors"))[
        "language_model.model.embed_tokens.weight"]
    row = Engine.load(str(folder)).vision.break_token_id
    older = write_mmproj(folder, tmp_path / "older.gguf", tensors=tensors | {
        "v.token_embd.img_break": np.array(embeddings[row])})
    request = [(ask("what is it?"), [RED])]
    assert answers(Engine.load(str(text), mmproj=str(older)), request) == answers(
        Engine.load(str(text)), request) == answers(Engine.load(str(folder)), request)
    if family == "mistral3":
        half = {k: v for k, v in tensors.items() if not k.startswith("mm.patch_merger")}
        with pytest.raises(ModelLoadError, match=r"has no tensor for .*\(mm\.1\.bias\)"):
            Engine.load(str(text), mmproj=str(write_mmproj(folder, tmp_path / "half.gguf",
                                                           tensors=half)))


def test_a_large_image_tiles_on_lfm2_vl(tmp_path, monkeypatch):
    """LFM2-VL's processor splits an image larger than one view into 512-pixel tiles and a
    thumbnail (4 + 1 views here, each its own run of image tokens between its markers):
    the pair's merged rows are the folder's; its answer is the same alone and beside text
    rows (its ~1,300 image tokens prefilled over several chunks); a follow-up about it
    reuses every image token, runs no vision pass and answers as a fresh engine."""
    folder, text, _ = make_tiny_pair(tmp_path, "lfm2_vl")
    ours, theirs = Engine.load(str(text)), Engine.load(str(folder))
    a, b = ours.vision.prepare(ask("what is it?"), [TILED]), theirs.vision.prepare(
        ask("what is it?"), [TILED])
    assert a.arrays["pixel_values"].shape[0] == 5  # four tiles and the thumbnail
    assert a.ids == b.ids and same_rows(ours.vision.embed(a), theirs.vision.embed(b))
    image_token = ours.vision.image_token_id
    runs = sum(1 for i, t in enumerate(a.token_ids)
               if t == image_token and (i == 0 or a.token_ids[i - 1] != image_token))
    assert runs == 5

    def engine(**more) -> Engine:  # no prefix cache: every answer computed from scratch
        return Engine.load(str(text), config=EngineConfig(prefix_cache=False, **more))

    rows = [(chat(f"tell me about the number {i} please"), None) for i in range(2)]
    seen = (ask("what is it?"), [TILED])
    solo = engine()  # each request alone, one after another
    alone = [answers(solo, [r], SEEDED)[0] for r in [*rows, seen]]
    assert all(alone)
    assert answers(engine(prefill_burst=256), [rows[0], seen, rows[1]], SEEDED) == \
        [alone[0], alone[2], alone[1]]
    assert answers(ours, [seen], SEEDED)[0] == alone[2]
    # a next turn about it (a hybrid model's cache reuses an entry whole: a one-token turn)
    cached = Engine.load(str(text))
    [reply] = answers(cached, [seen], SamplingParams(max_tokens=1, temperature=0.0))
    said = cached.tokenizer.decode([t for t in reply if t != image_token])
    follow = ask("what is it?") + [{"role": "assistant", "content": said},
                                   {"role": "user", "content": "say more"}]
    passes = []
    real = cached.vision.embed
    monkeypatch.setattr(cached.vision, "embed", lambda p: passes.append(p) or real(p))
    assert answers(cached, [(follow, [TILED])]) == answers(engine(), [(follow, [TILED])])
    assert cached.finished_requests()[-1].cached_tokens >= a.images_end and passes == []


def test_a_gemma4_pair_s_images_attend_both_ways_unless_llama_cpp_says_causal(
        tmp_path, monkeypatch):
    """The GGUF does not say use_bidirectional_attention; llama.cpp decides by the text
    model's width (causal for E2B's 1536 and E4B's 2560, both ways otherwise:
    mtmd_decode_use_non_causal). The tiny pair (64 wide) answers as its folder with
    `vision` both ways; taken as causal (64 made one of those widths), it answers as the
    same folder without it, and the two answers differ."""
    from engine.vision import mmproj_gemma4

    folder, text, _ = make_tiny_pair(tmp_path, "gemma4")
    request = [(ask("what is it?"), [RED])]
    both = Engine.load(str(text))
    assert both.vision.bidirectional and both.vision.prepare(*request[0]).blocks
    causal_folder = tmp_path / "causal"
    shutil.copytree(folder, causal_folder)
    config = json.loads((causal_folder / "config.json").read_text())
    del config["text_config"]["use_bidirectional_attention"]
    (causal_folder / "config.json").write_text(json.dumps(config))
    monkeypatch.setattr(mmproj_gemma4, "CAUSAL_WIDTHS", (64,))
    causal = Engine.load(str(text))
    assert not causal.vision.bidirectional and not causal.vision.prepare(*request[0]).blocks
    got_both, got_causal = answers(both, request, SEEDED), answers(causal, request, SEEDED)
    assert got_both == answers(Engine.load(str(folder)), request, SEEDED)
    assert got_causal == answers(Engine.load(str(causal_folder)), request, SEEDED)
    assert got_both != got_causal


def test_a_gemma4_mmproj_with_its_audio_encoder_gives_the_same_images(tmp_path):
    """E2B's and E4B's mmproj hold their audio encoder beside the vision one (gguf-py names
    every audio tensor a.* or mm.a.*, some with clip bounds): the engine reads images only,
    so they are taken as read and the image rows are the vision-only file's, bit for bit."""
    folder, text, _ = make_tiny_pair(tmp_path, "gemma4")
    sound = {"a.blk.0.attn_q.weight": np.ones((8, 8), np.float32),
             "a.blk.0.attn_q.input_max": np.ones((1,), np.float32),
             "mm.a.input_projection.weight": np.ones((64, 8), np.float32)}
    both = write_mmproj(folder, tmp_path / "mmproj-with-audio.gguf",
                        tensors=mmproj_tensors(folder) | sound)
    seen, heard = Engine.load(str(text)), Engine.load(str(text), mmproj=str(both))
    assert heard.sees_images
    a, b = seen.vision.prepare(ask("what is it?"), [RED]), heard.vision.prepare(
        ask("what is it?"), [RED])
    assert a.ids == b.ids and same_rows(seen.vision.embed(a), heard.vision.embed(b))


def test_a_gemma4_image_larger_than_the_burst_runs_whole_in_one_tick(tmp_path):
    """A Gemma 4 image (~250 tokens that attend both ways) under a 32-token prefill burst:
    it is never split, so one tick prefills all of it, and the answers
    (its own and a text row's beside it) are those of a burst that holds it."""
    _, text, _ = make_tiny_pair(tmp_path, "gemma4")

    def engine(**more) -> Engine:
        return Engine.load(str(text), config=EngineConfig(prefix_cache=False, **more))

    seen, row = (ask("what is it?"), [RED]), (chat("tell me about the number 7 please"), None)
    image_tokens = sum(t < 0 for t in engine().vision.prepare(*seen).ids)
    assert image_tokens > 32
    small = engine(prefill_burst=32)
    assert answers(small, [row, seen], SEEDED) == answers(engine(), [row, seen], SEEDED)
    assert max(t.prefill_tokens for t in small.telemetry()) >= image_tokens > 32
