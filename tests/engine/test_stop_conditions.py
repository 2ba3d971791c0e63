"""EOS and end tokens, max_tokens, stop strings and the context limit, each with its reason."""

from engine import SamplingParams
from engine.detokenize import TextStream
from tests.engine.conftest import prompts, reference_tokens, run_to_end


def test_end_token_stops_with_reason_stop(tiny, make_engine):
    prompt = prompts(1, seed=21)[0]
    ref = reference_tokens(tiny.model, prompt, 30)
    k = 6
    end = ref[k]
    first_hit = ref.index(end)
    engine = make_engine(eos=[end])
    stream = engine.submit(prompt_tokens=prompt, params=SamplingParams(max_tokens=30))
    run_to_end(engine)
    assert stream.finish_reason == "stop"
    assert stream.tokens == ref[: first_hit + 1]  # the end token is produced and counted
    assert stream.stats.generated_tokens == first_hit + 1


def test_max_tokens_gives_length(tiny, make_engine):
    engine = make_engine()
    stream = engine.submit(prompt_tokens=[1, 2, 3], params=SamplingParams(max_tokens=7))
    run_to_end(engine)
    assert (stream.finish_reason, len(stream.tokens)) == ("length", 7)


def test_context_full_gives_context(tiny, make_engine):
    engine = make_engine(context_length=20)
    stream = engine.submit(prompt_tokens=list(range(15)), params=SamplingParams(max_tokens=50))
    run_to_end(engine)
    assert stream.finish_reason == "context"
    assert len(stream.tokens) == 5  # 15 prompt + 5 new = the 20-token context


def test_stop_string_ends_the_reply_and_never_leaks(tiny, make_engine):
    engine = make_engine()
    prompt = [ord(c) for c in "Once upon a time"]
    free = engine.submit(prompt_tokens=prompt, params=SamplingParams(max_tokens=40))
    run_to_end(engine)
    text = free.text
    assert len(text) > 12
    stop = text[8:11]  # a piece from the middle of the real reply
    cut = text.index(stop)
    stopped = engine.submit(prompt_tokens=prompt,
                            params=SamplingParams(max_tokens=40, stop=["never-there", stop]))
    run_to_end(engine)
    assert stopped.finish_reason == "stop"
    assert stopped.text == text[:cut]
    assert stop not in stopped.text


class FakeDetokenizer:
    """One character per token: enough to drive TextStream's hold-back logic."""

    def __init__(self):
        self.text, self.offset = "", 0

    def add_token(self, token):
        self.text += chr(token)

    def finalize(self):
        pass

    @property
    def last_segment(self):
        seg, self.offset = self.text[self.offset:], len(self.text)
        return seg


def feed(stream: TextStream, text: str) -> list[str]:
    return [stream.add(ord(c)) for c in text]


def test_text_stream_holds_back_a_possible_stop_and_releases_it_when_it_is_not():
    s = TextStream(FakeDetokenizer(), ("END",))
    deltas = feed(s, "abEN")
    assert "".join(deltas) == "ab"  # "EN" might become "END": held back
    deltas = feed(s, "x")
    assert "".join(deltas) == "ENx" and not s.stopped
    feed(s, "yEND tail")
    assert s.stopped and s.text == "abENxy"
    assert s.finish() == ""


def test_text_stream_flushes_held_text_at_the_end():
    s = TextStream(FakeDetokenizer(), ("STOP",))
    assert "".join(feed(s, "hello ST")) == "hello "
    assert s.finish() == "ST"
    assert s.text == "hello ST"
