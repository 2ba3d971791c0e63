"""The prompt ids an image stands for in the prefix cache.

Every image of a model is the same placeholder token repeated, so keyed by its token ids two
different images would share cached KV (a wrong answer). An image request's prompt holds,
at each of its image tokens, a negative id derived from the image's digest and the token's
place in the image: the same image gives the same ids (a follow-up reuses its KV), another
image other ids, and no id of a vocabulary is negative. Those positions are always fed as
embeddings (engine/vision/prompt.py), never looked up as tokens.
"""

from __future__ import annotations

import hashlib

_SPAN = 1 << 31  # negative int32 ids: the prefix store keeps ids as int32 arrays


def image_ids(digest: str, count: int) -> list[int]:
    """`count` ids in [-2**31, -1], one per image token of the image whose sha256 hex is
    `digest`; each hashes the digest with the token's index, so a shorter span of the same
    image is a prefix of a longer one and two images differ at their first token (but for
    a 2**-31 chance per token)."""
    out = []
    for i in range(count):
        h = hashlib.blake2b(f"{digest}:{i}".encode(), digest_size=4).digest()
        out.append(-1 - int.from_bytes(h, "little") % (_SPAN - 1))
    return out


def is_image_id(token: int) -> bool:
    """Whether a prompt id stands for an image token (fed as an embedding)."""
    return token < 0
