"""Request ids are unique across launches: each engine has its own short random prefix."""

import re

from engine import SamplingParams


def test_request_ids_differ_between_engines_and_keep_their_form(make_engine):
    ids = []
    for _ in range(2):  # two launches (or a model reload): same counters, other prefixes
        engine = make_engine()
        streams = [engine.submit(prompt_tokens=[5, 6, 7], params=SamplingParams(max_tokens=1))
                   for _ in range(3)]
        ids.append([s.request_id for s in streams])
    assert all(re.fullmatch(r"req-[0-9a-f]{6}-\d+", i) for run in ids for i in run)
    assert [i.rsplit("-", 1)[1] for i in ids[0]] == ["1", "2", "3"]
    assert not set(ids[0]) & set(ids[1])
