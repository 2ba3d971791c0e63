"""Issue #46 item 10: the history on a real full disk (a 1 MiB tmpfs, so root only). The
write-ahead log must not take the space while history.db stays empty, and once space is
freed the queued writes land and streaming goes on, instead of the log filling the volume
again."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.storage import Message, SafeStore, Session, Store

VOLUME_BYTES = 1 << 20


@pytest.fixture
def volume(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "vol"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={VOLUME_BYTES}", "tmpfs",
                           str(mount)], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"a small volume needs mount (root): {made.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def test_a_full_disk_merges_the_log_and_frees_it_when_space_returns(volume: Path) -> None:
    db, wal = volume / "history.db", volume / "history.db-wal"
    ballast = volume / "ballast"
    ballast.write_bytes(b"x" * (VOLUME_BYTES // 5))
    safe = SafeStore.open(db)
    session = Session(title="streaming")
    reply = Message(session_id=session.id, seq=0, role="assistant", content="",
                    is_complete=False)
    assert safe.save_session(session) and safe.save_message(reply)
    text, writes = "", 0
    while safe.checkpoint_message(reply.id, text := text + f"word {writes} "):
        writes += 1  # the checkpoints of a long streaming reply, until the disk is full
        assert writes < 100_000
    assert safe.last_error is not None and safe.last_error.kind == "disk_full"
    # The file holds the reply: the log was merged into it, and did not take the volume.
    assert size(db) > VOLUME_BYTES // 4, (size(db), size(wal))
    assert size(wal) <= VOLUME_BYTES // 2, (size(db), size(wal))

    ballast.unlink()  # the user frees some space
    assert safe.retry_pending()
    for _ in range(300):  # streaming goes on, and the log stays bounded
        assert safe.checkpoint_message(reply.id, text := text + "more ")
        assert size(wal) <= VOLUME_BYTES // 2
    assert safe.close()
    reader = Store.open(db, read_only=True)
    try:
        [saved] = reader.list_messages(session.id)
    finally:
        reader.close()
    assert saved.content == text and not saved.is_complete
    assert os.statvfs(volume).f_bavail > 0
