"""A reply's text is decoded after its prompt (issue #46, item 2): SentencePiece and
byte-level detokenizers drop the first token's leading space when they read a reply alone,
so "The capital of France is" got "Paris." where the model wrote " Paris.". With mlx-lm's own
detokenizers, over a small vocabulary of each kind."""

from __future__ import annotations

from mlx_lm.tokenizer_utils import BPEStreamingDetokenizer, SPMStreamingDetokenizer

from engine.detokenize import TextStream, after

SPM_VOCAB = ["<unk>", "▁The", "▁capital", "▁of", "▁France", "▁is", "▁Paris", ".", "▁",
             "<0xC3>", "<0xA9>", "t"]


class Vocab:
    """Just what mlx-lm's streaming detokenizers read from a tokenizer, and a fresh
    detokenizer per `detokenizer`, as mlx-lm's TokenizerWrapper gives one."""

    def __init__(self, tokens: list[str], kind: type) -> None:
        self.tokens, self.kind = tokens, kind

    def __len__(self) -> int:
        return len(self.tokens)

    def convert_ids_to_tokens(self, ids: list[int]) -> list[str]:
        return [self.tokens[i] for i in ids]

    @property
    def detokenizer(self):
        return self.kind(self)

    def ids(self, *tokens: str) -> list[int]:
        return [self.tokens.index(t) for t in tokens]


def stream_after(vocab: Vocab, prompt: list[int], stop: tuple[str, ...] = ()) -> TextStream:
    """The engine's TextStream for a reply to `prompt` (Engine.submit builds it so)."""
    detok, skip = after(vocab, prompt)
    return TextStream(detok, stop, skip=skip)


def reply(vocab: Vocab, prompt: list[int], tokens: list[int]) -> tuple[str, str]:
    """(the streamed deltas joined, the text at the end) of `tokens` after `prompt`."""
    stream = stream_after(vocab, prompt)
    deltas = [stream.add(t) for t in tokens] + [stream.finish()]
    return "".join(deltas), stream.text


def test_sentencepiece_keeps_the_first_space_after_the_prompt():
    spm = Vocab(SPM_VOCAB, SPMStreamingDetokenizer)
    prompt = spm.ids("▁The", "▁capital", "▁of", "▁France", "▁is")
    streamed, text = reply(spm, prompt, spm.ids("▁Paris", "."))
    assert streamed == text == " Paris."
    # alone (no prompt: the start of a text) the dummy space is still dropped
    assert reply(spm, [], spm.ids("▁Paris", "."))[1] == "Paris."


def test_a_character_split_across_prompt_and_reply_goes_to_the_prompt():
    spm = Vocab(SPM_VOCAB, SPMStreamingDetokenizer)
    prompt = spm.ids("▁The", "<0xC3>")  # the first byte of "é"
    assert reply(spm, prompt, spm.ids("<0xA9>", "t", "▁is"))[1] == "t is"


def test_byte_level_keeps_the_first_space_and_a_prompt_s_last_space_is_its_own():
    # GPT-2's byte alphabet: "Ġ" is a space
    bpe = Vocab(["Ġis", "ĠParis", ".", "Ġ", "Paris", "is"], BPEStreamingDetokenizer)
    assert reply(bpe, bpe.ids("is", "Ġis"), bpe.ids("ĠParis", "."))[1] == " Paris."
    # a prompt ending in a lone space: the space is the prompt's, held back or not
    assert reply(bpe, bpe.ids("is", "Ġ"), bpe.ids("Paris", "."))[1] == "Paris."


def test_stop_strings_still_never_leak_after_a_prompt():
    spm = Vocab(SPM_VOCAB, SPMStreamingDetokenizer)
    prompt = spm.ids("▁The", "▁capital", "▁is")
    stream = stream_after(spm, prompt, (" France",))
    out = [stream.add(t) for t in spm.ids("▁Paris", "▁of", "▁France", "▁is")]
    assert "".join(out) + stream.finish() == " Paris of" and stream.stopped
