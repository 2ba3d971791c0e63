"""Images in chats (issue #52), engine side: tiny random-weight VLMs in mlx-vlm's format
(tests/vision_models.py): Idefics3 and SmolVLM (a llama text model, each its own processor
class), Gemma 3 (its own text model with sliding-window layers, an average-pooling
projector, its own processor) and Qwen2.5-VL (Qwen2's text model with M-RoPE: 3-D positions
for image tokens, the text after them shifted; engine/vision/mrope.py).

- Loading goes through mlx-vlm's classes; the engine's language model is mlx-lm's class on
  the same arrays, and an image request's answer is mlx-vlm's own generate_step's greedy
  answer (for M-RoPE, one that plain positions would not give).
- Same answer: a text request alone and batched beside image requests; an image request
  alone and batched; in one ragged pass (native kernels) and in passes apart.
- The prefix cache keys an image by its digest: a follow-up with the same image shows its
  image tokens cached, a different image reuses nothing past the text before it, and both
  answer as without a cache; a follow-up adding a second image answers as a fresh engine
  and as mlx-vlm.
- Bad images, a count that does not match the parts, and a text-only model are refused
  with a reason.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import mlx.core as mx
import pytest

from engine import Engine, EngineConfig, RequestRejected, SamplingParams, testing
from engine.loader import ModelLoadError
from engine.vision.prompt import as_mx
from tests.engine.conftest import run_to_end
from tests.vision_models import FAMILIES, make_tiny_vlm, png_bytes

pytestmark = pytest.mark.usefixtures("native_built")

GREEDY = SamplingParams(max_tokens=10, temperature=0.0)
SEEDED = SamplingParams(max_tokens=10, temperature=0.8, top_p=0.9, seed=7)
RED, GREEN = png_bytes((200, 10, 10)), png_bytes((10, 200, 10), size=(24, 40))


def ask(text: str) -> list[dict]:
    return [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": text}]}]


def chat(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


@pytest.fixture(scope="module", params=FAMILIES)
def vlm_dir(request, tmp_path_factory) -> Path:
    return make_tiny_vlm(tmp_path_factory.mktemp(request.param) / request.param,
                         request.param)


def answers(engine: Engine, requests: list[tuple[list[dict], list[bytes] | None]],
            params: SamplingParams = GREEDY) -> list[list[int]]:
    """Each request's tokens, all submitted at once and run to the end."""
    got: list[list[int]] = []
    for messages, images in requests:
        tokens: list[int] = []
        stream = engine.submit(messages=messages, params=params, images=images)
        stream.listen(lambda e, t=tokens: t.append(e.token) if e.token is not None else None)
        got.append(tokens)
    run_to_end(engine)
    return got


def said(engine: Engine, reply: list[int]) -> str:
    """A reply's text for the next turn, without the image token: a random model may say
    it, and the processor would take it for another image. (Its other tokens are kept: a
    hybrid model's prefix cache reuses an entry only whole, the reply's tokens as said.)"""
    return engine.tokenizer.decode([t for t in reply if t != engine.vision.image_token_id])


def whole_entries(engine: Engine) -> bool:
    """A hybrid text model (LFM2's convolutions: a state that cannot be cut back): its
    prefix cache reuses an entry only whole, and several answers do not share a prompt."""
    return testing.facts(engine).whole_prefix_entries


def first_turn(engine: Engine) -> SamplingParams:
    """A first turn's sampling, for a follow-up to reuse: with whole entries, one token, so
    the entry kept is its prompt (a random model's reply text does not encode back to its
    tokens, so prompt + reply would match no follow-up)."""
    return SamplingParams(max_tokens=1, temperature=0.0) if whole_entries(engine) else GREEDY


def cached(engine: Engine) -> int:
    return engine.finished_requests()[-1].cached_tokens


def mlx_vlm_generate(engine: Engine, messages: list[dict], *images: bytes) -> list[int]:
    """mlx-vlm's own greedy generation (generate_step: its merge, its language model with
    its own positions, M-RoPE's included) on the engine's prompt, up to the first end
    token (which it yields and goes on past)."""
    from mlx_vlm.generate import generate_step

    prompt = engine.vision.prepare(messages, list(images))
    arrays = {k: as_mx(v) for k, v in prompt.arrays.items()}
    pixels, mask = arrays.pop("pixel_values"), arrays.pop("mask", None)
    want = []
    for token, _ in generate_step(mx.array([prompt.token_ids]), engine.vision.vlm, pixels,
                                  mask, max_tokens=GREEDY.max_tokens, temperature=0.0,
                                  **arrays):
        want.append(int(token))
        if want[-1] in engine.tokenizer.eos_token_ids:
            break
    return want


def test_loads_through_mlx_vlm_and_answers_as_its_generate(vlm_dir):
    engine = Engine.load(str(vlm_dir))
    assert engine.sees_images and "sees images" in engine.description
    assert type(engine.vision.vlm).__module__.startswith("mlx_vlm.models.")
    got = [answers(engine, [(ask("what is it?"), [image])])[0] for image in (RED, GREEN)]
    assert got == [mlx_vlm_generate(engine, ask("what is it?"), image)
                   for image in (RED, GREEN)]
    assert got[0] != got[1]  # the image matters
    if engine.vision.positioned:
        # M-RoPE: the image's 3-D positions and the text's delta matter (the model is made
        # to turn at these positions): at plain positions another answer
        plain = Engine.load(str(vlm_dir))
        plain.vision.positioned = False
        assert answers(plain, [(ask("what is it?"), [RED])])[0] != got[0]
        # the MLX-ops rotation (no native kernels: a GPU's path) answers the same
        ops = Engine.load(str(vlm_dir), config=EngineConfig(cpu_kernels=False))
        assert answers(ops, [(ask("what is it?"), [RED])])[0] == got[0]


@pytest.mark.parametrize("kernels", [True, False], ids=["ragged", "passes-apart"])
@pytest.mark.parametrize("params", [GREEDY, SEEDED], ids=["greedy", "seeded"])
def test_same_answer_alone_and_batched(vlm_dir, kernels, params, monkeypatch):
    def engine() -> Engine:  # no prefix cache: every answer is computed from scratch
        return Engine.load(str(vlm_dir), config=EngineConfig(prefix_cache=False,
                                                             cpu_kernels=kernels))

    text = [(chat(f"tell me about the number {i} please"), None) for i in range(3)]
    seen = [(ask("what is it?"), [RED]), (ask("and this one, what colour?"), [GREEN])]
    solo = engine()  # each request alone, one after another (a load costs more than one)
    alone = [answers(solo, [r], params)[0] for r in text + seen]
    together = answers(engine(), [text[0], seen[0], text[1], seen[1], text[2]], params)
    assert together == [alone[0], alone[3], alone[1], alone[4], alone[2]]
    # the images arrive while the text rows decode (their prefill beside the rows), and a
    # text prompt arrives while an image prompt is prefilled in small chunks
    chunked = Engine.load(str(vlm_dir), config=EngineConfig(
        prefix_cache=False, cpu_kernels=kernels, prefill_burst=5, whole_prompt_tokens=0))
    runner = testing.internals(chunked).runner
    beside_rows = []  # ragged passes feeding an image chunk's rows beside decode rows
    ragged = runner.ragged

    def spy(*args, **kwargs):
        beside_rows.append(bool(kwargs.get("embeddings") and args[1]))
        return ragged(*args, **kwargs)

    monkeypatch.setattr(runner, "ragged", spy)
    staggered = []
    for messages, images in [text[0], text[1], seen[0], text[2], seen[1]]:
        tokens: list[int] = []
        stream = chunked.submit(messages=messages, params=params, images=images)
        stream.listen(lambda e, t=tokens: t.append(e.token) if e.token is not None else None)
        staggered.append(tokens)
        for _ in range(10):  # (a text prompt is prefilled in ~8 ticks of 5 tokens)
            chunked.step()
    run_to_end(chunked)
    assert staggered == [alone[0], alone[1], alone[3], alone[2], alone[4]]
    if chunked.vision.positioned:
        # M-RoPE: an image request's chunks and rows run their passes apart (their
        # positions are not their indices); the text rows' ticks still share ragged passes
        assert not any(beside_rows)
        assert bool(beside_rows) == testing.facts(chunked).ragged
    else:
        assert any(beside_rows) == testing.facts(chunked).ragged


@pytest.mark.parametrize("kernels", [True, False], ids=["ragged", "passes-apart"])
@pytest.mark.parametrize("family", ["qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe"])
def test_m_rope_rows_beside_text_rows_that_draft(family, kernels, tmp_path):
    """Speculation on: the text rows draft (n-gram) and check their drafts beside an M-RoPE
    image request's rows, which keep their delta (a tick holding them runs its passes
    apart, and its rows check no drafts); every answer is the one given alone without
    speculation."""
    folder = make_tiny_vlm(tmp_path / family, family)
    params = SamplingParams(max_tokens=24, temperature=0.0)

    def engine(speculative: str) -> Engine:
        return Engine.load(str(folder), config=EngineConfig(
            prefix_cache=False, speculative=speculative, cpu_kernels=kernels))

    text = [(chat("abc abc abc abc abc abc abc abc " * (i + 1)), None) for i in range(3)]
    seen = [(ask("what is it? abc abc abc abc"), [RED]), (ask("and this? abc abc"), [GREEN])]
    solo = engine("off")  # each request alone, one after another
    alone = [answers(solo, [r], params)[0] for r in text + seen]
    drafting = engine("ngram")
    together = answers(drafting, [text[0], seen[0], text[1], seen[1], text[2]], params)
    assert together == [alone[0], alone[3], alone[1], alone[4], alone[2]]
    assert sum(r.drafted_tokens for r in drafting.finished_requests()) > 0


def quantized_copy(vlm_dir: Path, tmp_path: Path) -> Path:
    """The VLM converted by mlx-vlm's own convert (4-bit, as mlx-community's repos)."""
    import shutil

    from mlx_vlm import convert

    quantized = tmp_path / "q4"
    convert(str(vlm_dir), mlx_path=str(quantized), quantize=True, q_group_size=32, q_bits=4)
    for f in vlm_dir.iterdir():  # the processor's files convert does not copy
        if not (quantized / f.name).exists():
            shutil.copy(f, quantized / f.name)
    return quantized


def test_a_vlm_quantized_by_mlx_vlm_runs_on_the_native_kernels(vlm_dir, tmp_path):
    """mlx-vlm's own convert (4-bit, as mlx-community's repos): the engine's text model is
    quantized like the VLM's, and an image answer is the same alone and batched."""
    quantized = quantized_copy(vlm_dir, tmp_path)
    engine = Engine.load(str(quantized), config=EngineConfig(prefix_cache=False))
    assert "4-bit quantized" in engine.description
    alone = answers(engine, [(ask("what is it?"), [RED])])[0]
    text = answers(engine, [(chat("hello there"), None)])[0]
    assert answers(engine, [(chat("hello there"), None), (ask("what is it?"), [RED])]) == \
        [text, alone]


def test_a_moe_vlm_s_experts_run_grouped_on_the_native_kernel(tmp_path, monkeypatch):
    """Qwen3-VL MoE, 4-bit by mlx-vlm's convert: its text model is mlx-lm's qwen3_moe, whose
    experts the engine runs grouped by expert on the packed kernel (engine/native/
    switch_layers.py) for an image request and the text rows beside it; every answer is
    the one given alone."""
    from engine.native import switch_layers

    quantized = quantized_copy(make_tiny_vlm(tmp_path / "moe", "qwen3_vl_moe"), tmp_path)

    def engine() -> Engine:
        return Engine.load(str(quantized), config=EngineConfig(prefix_cache=False))

    ran = []
    real = switch_layers.grouped_call
    monkeypatch.setattr(switch_layers, "grouped_call",
                        lambda *a: ran.append(out := real(*a)) or out)
    requests = [(chat("hello there"), None), (ask("what is it?"), [RED]),
                (chat("tell me about the number 7"), None), (ask("and this?"), [GREEN])]
    solo = engine()  # each request alone, one after another
    alone = [answers(solo, [r])[0] for r in requests]
    assert answers(engine(), requests) == alone
    assert ran and all(out is not None for out in ran)  # the grouped op, every call


def test_prefix_cache_keys_an_image_by_its_content(vlm_dir):
    engine = Engine.load(str(vlm_dir))
    fresh = Engine.load(str(vlm_dir), config=EngineConfig(prefix_cache=False))
    first = ask("what is it?")
    [reply] = answers(engine, [(first, [RED])], first_turn(engine))
    prompt = engine.vision.prepare(first, [RED])
    assert cached(engine) == 0
    follow = first + [{"role": "assistant", "content": said(engine, reply)},
                      {"role": "user", "content": "say more"}]
    # the same image again: everything up to the reply is reused, images included
    [again] = answers(engine, [(follow, [RED])])
    assert cached(engine) >= prompt.images_end
    assert again == answers(fresh, [(follow, [RED])])[0]
    # a different image with the same tokens around it: nothing past the text before it
    [other] = answers(engine, [(follow, [GREEN])])
    first_image_token = prompt.token_ids.index(engine.vision.image_token_id)
    assert cached(engine) <= first_image_token
    assert other == answers(fresh, [(follow, [GREEN])])[0]


def test_a_second_image_in_a_follow_up(vlm_dir):
    """A follow-up that adds another image: the first image's KV comes from the prefix
    cache, the second is seen, and the answer is a fresh engine's and mlx-vlm's own (for
    M-RoPE: the second image's positions go on from the first's and the text between)."""
    engine = Engine.load(str(vlm_dir))
    first = ask("what is it?")
    [reply] = answers(engine, [(first, [RED])], first_turn(engine))
    follow = first + [{"role": "assistant", "content": said(engine, reply)},
                      {"role": "user", "content": [{"type": "image"},
                                                   {"type": "text", "text": "and this?"}]}]
    [got] = answers(engine, [(follow, [RED, GREEN])])
    assert got  # (a request that failed would have no tokens)
    assert cached(engine) >= engine.vision.prepare(first, [RED]).images_end
    fresh = Engine.load(str(vlm_dir), config=EngineConfig(prefix_cache=False))
    assert got == answers(fresh, [(follow, [RED, GREEN])])[0]
    assert got == mlx_vlm_generate(engine, follow, RED, GREEN)


def test_a_follow_up_needs_no_vision_pass(vlm_dir, monkeypatch):
    engine = Engine.load(str(vlm_dir))
    answers(engine, [(ask("what is it?"), [RED])], first_turn(engine))
    passes = []
    real = engine.vision.embed
    monkeypatch.setattr(engine.vision, "embed", lambda p: passes.append(p) or real(p))
    answers(engine, [(ask("what is it?") + [{"role": "assistant", "content": "red"},
                                            {"role": "user", "content": "sure?"}], [RED])])
    assert passes == []  # its image tokens all came from the prefix cache
    answers(engine, [(ask("what is it?"), [GREEN])])
    assert len(passes) == 1


def test_several_answers_share_one_vision_pass(vlm_dir, monkeypatch):
    engine = Engine.load(str(vlm_dir))
    passes = []
    real = engine.vision.embed
    monkeypatch.setattr(engine.vision, "embed", lambda p: passes.append(p) or real(p))
    got: list[list[int]] = [[], []]
    lead = engine.submit(messages=ask("what is it?"), params=GREEDY, images=[RED])
    follow = engine.submit(messages=ask("what is it?"), params=GREEDY, images=[RED],
                           share_prompt_with=lead.request_id)
    for stream, tokens in zip((lead, follow), got, strict=True):
        stream.listen(lambda e, t=tokens: t.append(e.token) if e.token is not None else None)
    run_to_end(engine)
    assert got[0] == got[1]
    # the follower reused the lead's prompt (a hybrid model: it prefills its own)
    assert len(passes) == (2 if whole_entries(engine) else 1)


def test_the_processor_s_work_is_kept_for_the_submit(vlm_dir, monkeypatch):
    """prompt_tokens made off the loop, then submit with the same prompt: the processor
    runs once; another image or other words run it again; each
    caller gets lists of its own."""
    import mlx_vlm.utils

    engine = Engine.load(str(vlm_dir))
    real, runs = mlx_vlm.utils.process_inputs, []
    monkeypatch.setattr(mlx_vlm.utils, "process_inputs",
                        lambda *a, **k: runs.append(1) or real(*a, **k))
    first = engine.prompt_tokens(ask("what is it?"), images=[RED])
    stream = engine.submit(messages=ask("what is it?"), params=GREEDY, images=[RED])
    assert len(runs) == 1 and stream.prompt_tokens == first
    first.append(7)  # a caller's list is its own
    assert engine.prompt_tokens(ask("what is it?"), images=[RED]) == stream.prompt_tokens
    engine.prompt_tokens(ask("what is it?"), images=[GREEN])
    engine.prompt_tokens(ask("what is that?"), images=[RED])
    assert len(runs) == 3
    run_to_end(engine)


def test_one_vision_pass_a_tick(vlm_dir, monkeypatch):
    """Two image requests admitted together: their vision-tower passes run on two ticks,
    first in line first (the decoding rows wait for one at a time), and every answer is
    the one given alone."""
    engine = Engine.load(str(vlm_dir))
    ticks, passes = [0], []
    real = engine.vision.embed
    monkeypatch.setattr(engine.vision, "embed",
                        lambda p: passes.append((ticks[0], p.ids)) or real(p))
    requests = [(chat("hello there"), None), (ask("what is it?"), [RED]),
                (ask("and this?"), [GREEN])]
    got: list[list[int]] = []
    for messages, images in requests:
        tokens: list[int] = []
        engine.submit(messages=messages, params=GREEDY, images=images).listen(
            lambda e, t=tokens: t.append(e.token) if e.token is not None else None)
        got.append(tokens)
    while engine.has_work():
        engine.step()
        ticks[0] += 1
    assert [t for t, _ in passes] == [0, 1]
    assert [ids for _, ids in passes] == [engine.vision.prepare(m, i).ids
                                          for m, i in requests[1:]]
    solo = Engine.load(str(vlm_dir), config=EngineConfig(prefix_cache=False))
    for request, tokens in zip(requests, got, strict=True):  # each alone, one after another
        assert tokens == answers(solo, [request])[0]


async def test_an_image_chat_s_kv_outlives_a_restart(vlm_dir, tmp_path, monkeypatch):
    first = ask("what is it?")
    saving = Engine.load(str(vlm_dir), config=EngineConfig(kv_disk_dir=str(tmp_path)))
    if testing.facts(saving).disk_store_id is None:
        pytest.skip("no disk store for this model's caches (sliding-window layers)")
    [reply] = answers(saving, [(first, [RED])])
    chat = first + [{"role": "assistant", "content": said(saving, reply)}]
    images_end = saving.vision.prepare(first, [RED]).images_end
    assert await saving.save_prefix(chat, images=[RED]) >= images_end
    restarted = Engine.load(str(vlm_dir), config=EngineConfig(kv_disk_dir=str(tmp_path)))
    passes = []
    real = restarted.vision.embed
    monkeypatch.setattr(restarted.vision, "embed", lambda p: passes.append(p) or real(p))
    follow = chat + [{"role": "user", "content": "say more"}]
    [again] = answers(restarted, [(follow, [RED])])
    assert cached(restarted) >= images_end and passes == []  # the image from the disk
    fresh = Engine.load(str(vlm_dir), config=EngineConfig(prefix_cache=False))
    assert again == answers(fresh, [(follow, [RED])])[0]
    # another image in the same words: nothing of the first image's KV
    [_] = answers(restarted, [(follow, [GREEN])])
    assert cached(restarted) < images_end


def _png_header(width: int, height: int) -> bytes:
    """A PNG that claims width x height pixels and holds no image data."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data)))
    return (b"\x89PNG\r\n\x1a\n"
            + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b""))


@pytest.fixture(scope="module")
def refusing(vlm_dir) -> Engine:
    """One engine for the refusals below: a refused submit leaves nothing behind."""
    return Engine.load(str(vlm_dir))


@pytest.mark.parametrize(("data", "words"), [
    (b"hello, not an image", "image 1: not a readable image"),
    (RED[: len(RED) // 2], "image 1: not a readable image"),
    (_png_header(20_000, 20_000), "image 1: too many pixels"),
    (_png_header(10_000, 9_000), "image 1: too many pixels"),
])
def test_bad_images_are_refused_with_a_reason(refusing, data, words):
    engine = refusing
    with pytest.raises(RequestRejected, match=words):
        engine.submit(messages=ask("what is it?"), params=GREEDY, images=[data])
    with pytest.raises(RequestRejected, match="2 image part"):
        engine.submit(messages=ask("a") + ask("b"), params=GREEDY, images=[RED])
    assert not engine.has_work()


def test_a_text_model_refuses_images(make_engine):
    engine = make_engine()
    assert not engine.sees_images
    with pytest.raises(RequestRejected, match="does not see images"):
        engine.submit(messages=ask("what is it?"), params=GREEDY, images=[RED])


def test_a_vision_family_not_run_yet_loads_its_text_through_mlx_lm(tmp_path):
    import json

    from engine.public import vision_refusal

    assert "the engine runs images for" in vision_refusal("kimi_vl")
    (tmp_path / "config.json").write_text(json.dumps(
        {"model_type": "kimi_vl", "vision_config": {"depth": 1},
         "text_config": {"model_type": "deepseek_v3"}}))
    # not mlx-vlm's load: mlx-lm's, which finds no weights in this folder
    with pytest.raises(ModelLoadError, match="cannot load mlx-lm model directory"):
        Engine.load(str(tmp_path))


def test_a_gemma4_config_without_rope_parameters_answers_as_mlx_vlm(tmp_path):
    """Gemma 4's config.json without rope_parameters: mlx-vlm fills its defaults, which
    mlx-lm's gemma4_text does not share (the full layers' partial rotation); the engine's
    text model takes mlx-vlm's, so the answers are still mlx-vlm's own."""
    import json

    folder = make_tiny_vlm(tmp_path / "gemma4", "gemma4")
    config = json.loads((folder / "config.json").read_text())
    del config["text_config"]["rope_parameters"]
    (folder / "config.json").write_text(json.dumps(config))
    engine = Engine.load(str(folder))
    for image in (RED, GREEN):
        assert answers(engine, [(ask("what is it?"), [image])])[0] == \
            mlx_vlm_generate(engine, ask("what is it?"), image)


SQUARE = png_bytes((200, 10, 10), size=(32, 32))  # Gemma 4's tiny tower: 4 image tokens


@pytest.fixture(scope="module")
def both_ways(tmp_path_factory) -> Path:
    """A tiny Gemma 4 with use_bidirectional_attention "vision" (an image's tokens see each
    other both ways: engine/vision/image_blocks.py)."""
    import json

    folder = make_tiny_vlm(tmp_path_factory.mktemp("gemma4_both") / "gemma4", "gemma4")
    config = json.loads((folder / "config.json").read_text())
    config["text_config"]["use_bidirectional_attention"] = "vision"
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_a_gemma4_whose_image_tokens_attend_both_ways_answers_as_mlx_vlm(both_ways, tmp_path):
    """Its images are seen, and the answer is mlx-vlm's own generate's (its mask overlay
    over every layer), not the one a causal mask gives (the same weights without the
    flag)."""
    engine = Engine.load(str(both_ways))
    assert engine.sees_images and engine.vision.bidirectional
    prompt = engine.vision.prepare(ask("describe"), [SQUARE])
    assert len(prompt.blocks) == 1 and prompt.blocks[0][1] - prompt.blocks[0][0] == 4
    for image in (SQUARE, GREEN):
        assert answers(engine, [(ask("describe"), [image])])[0] == \
            mlx_vlm_generate(engine, ask("describe"), image)
    causal = make_tiny_vlm(tmp_path / "causal", "gemma4")  # the same weights, causal
    assert answers(Engine.load(str(causal)), [(ask("describe"), [SQUARE])])[0] != \
        answers(engine, [(ask("describe"), [SQUARE])])[0]


@pytest.mark.parametrize("kernels", [True, False], ids=["native", "mlx-ops"])
def test_images_attending_both_ways_same_answer_alone_batched_and_chunked(both_ways, kernels,
                                                                         monkeypatch):
    """Text rows beside the image requests answer as alone, the image requests as alone;
    with a chunk budget smaller than an image (2 tokens a tick) the scheduler keeps each
    image in one chunk (the text before it cut off, the image's chunk past the budget)
    and the answers are the same."""
    def engine(**more) -> Engine:
        return Engine.load(str(both_ways), config=EngineConfig(
            prefix_cache=False, cpu_kernels=kernels, **more))

    text = [(chat(f"tell me about the number {i} please"), None) for i in range(3)]
    seen = [(ask("describe"), [SQUARE]), (ask("and this one, what colour?"), [GREEN])]
    solo = engine()  # each request alone, one after another
    alone = [answers(solo, [r])[0] for r in text + seen]
    assert answers(engine(), [text[0], seen[0], text[1], seen[1], text[2]]) == \
        [alone[0], alone[3], alone[1], alone[4], alone[2]]
    chunked = engine(prefill_burst=2, whole_prompt_tokens=0)
    runner = testing.internals(chunked).runner
    image_chunks = []
    prefill = runner.prefill

    def spy(cache, tokens, *args, **kwargs):
        if any(t < 0 for t in tokens):  # (an image's keyed ids)
            image_chunks.append((tokens, kwargs.get("blocks")))
        return prefill(cache, tokens, *args, **kwargs)

    monkeypatch.setattr(runner, "prefill", spy)
    staggered = []
    for messages, images in [text[0], seen[0], text[1], seen[1], text[2]]:
        tokens: list[int] = []
        stream = chunked.submit(messages=messages, params=GREEDY, images=images)
        stream.listen(lambda e, t=tokens: t.append(e.token) if e.token is not None else None)
        staggered.append(tokens)
        for _ in range(6):
            chunked.step()
    run_to_end(chunked)
    assert staggered == [alone[0], alone[3], alone[1], alone[4], alone[2]]
    # each image's tokens (4, then 2) in one chunk of their own, its block the whole chunk
    assert [(sum(t < 0 for t in tokens), blocks) for tokens, blocks in image_chunks] == \
        [(4, ((0, 4),)), (2, ((0, 2),))]


def test_text_rows_that_draft_beside_images_attending_both_ways(both_ways):
    """Speculation on: the text rows draft (n-gram) and check their drafts while an image
    chunk runs its pass apart (its own masks); every answer is the one given alone without
    speculation."""
    params = SamplingParams(max_tokens=24, temperature=0.0)

    def engine(speculative: str) -> Engine:
        return Engine.load(str(both_ways), config=EngineConfig(
            prefix_cache=False, speculative=speculative, prefill_burst=3,
            whole_prompt_tokens=0))

    text = [(chat("abc abc abc abc abc abc abc abc " * (i + 1)), None) for i in range(2)]
    seen = [(ask("describe abc abc abc abc"), [SQUARE]), (ask("and this? abc abc"), [GREEN])]
    solo = engine("off")  # each request alone, one after another
    alone = [answers(solo, [r], params)[0] for r in text + seen]
    drafting = engine("ngram")
    runner = testing.internals(drafting).runner
    rows_beside = []  # how many rows decode when an image chunk runs its pass
    prefill = runner.prefill

    def spy(cache, tokens, *args, **kwargs):
        if kwargs.get("blocks"):
            rows_beside.append(len(testing.facts(drafting).decode_rows))
        return prefill(cache, tokens, *args, **kwargs)

    runner.prefill = spy
    got: list[list[int]] = []
    for messages, images in [text[0], text[1], seen[0], seen[1]]:
        tokens: list[int] = []
        drafting.submit(messages=messages, params=params, images=images).listen(
            lambda e, t=tokens: t.append(e.token) if e.token is not None else None)
        got.append(tokens)
        # the images arrive while both text rows decode (and draft)
        while len(got) == 2 and len(testing.facts(drafting).decode_rows) < 2:
            drafting.step()
        for _ in range(3 if images else 0):
            drafting.step()
    run_to_end(drafting)
    assert got == alone
    assert rows_beside and all(rows_beside)
    assert sum(r.drafted_tokens for r in drafting.finished_requests()) > 0


def test_a_follow_up_about_an_image_attending_both_ways_reuses_it(both_ways, monkeypatch):
    """The prefix cache holds the image's KV (made by a pass over the whole image): a
    follow-up needs no vision pass and answers as a fresh engine."""
    engine = Engine.load(str(both_ways))
    [reply] = answers(engine, [(ask("describe"), [SQUARE])], first_turn(engine))
    passes = []
    real = engine.vision.embed
    monkeypatch.setattr(engine.vision, "embed", lambda p: passes.append(p) or real(p))
    follow = ask("describe") + [{"role": "assistant", "content": said(engine, reply)},
                                {"role": "user", "content": "say more"}]
    [again] = answers(engine, [(follow, [SQUARE])])
    assert passes == [] and cached(engine) >= engine.vision.prepare(
        ask("describe"), [SQUARE]).images_end
    fresh = Engine.load(str(both_ways), config=EngineConfig(prefix_cache=False))
    assert again == answers(fresh, [(follow, [SQUARE])])[0]


@pytest.mark.parametrize(("start", "n", "size", "inside"), [
    (0, 5, 5, ()),  # text only, the image after the chunk
    (0, 9, 7, ()),  # ends inside the image: cut before it
    (7, 2, 4, ((0, 4),)),  # starts at the image: past the budget to its end
    (8, 1, 3, ((0, 3),)),  # a prefix restored into the image: the rest of it whole
    (5, 20, 20, ((2, 6), (10, 12))),  # both images whole
    (10, 1, 1, ()),  # a prefix restored up to an image's last token: nothing to lay over
])
def test_a_chunk_never_splits_an_image_attending_both_ways(start, n, size, inside):
    from engine.vision.image_blocks import blocks, whole_blocks, within

    ids = [1] * 7 + [9] * 4 + [1] * 4 + [9] * 2 + [1] * 8
    found = blocks(ids, 9)
    assert found == ((7, 11), (15, 17))
    assert whole_blocks(found, start, n) == size
    assert within(found, start, size) == inside
