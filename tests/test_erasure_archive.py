"""An erasure rewrites the receiver's archive files while a receiver appends to today's
(issue 30, D-ERASURE): real files, the real ArchiveWriter on its event loop in a thread,
the real eraser in this one. No delivery appended meanwhile is lost or doubled, and no
line of the erased person stays; gzip files of past days and lines of other workspaces
in the flat endpoint's files are handled as the module says."""

from __future__ import annotations

import asyncio
import gzip
import threading
from datetime import UTC, date, datetime
from pathlib import Path

import orjson

from convo_analytics.privacy import PrivacyConfig, SubjectHasher
from convo_analytics.webhooks import ArchiveWriter, erase_archive_lines

DAY = date(2026, 11, 20)


def _hasher(tmp: Path, workspace: str = "ws_acme") -> SubjectHasher:
    return SubjectHasher(PrivacyConfig(generated_key_file=tmp / "privacy.key"), workspace)


def _line(conversation: str, n: int, workspace: str = "ws_acme") -> bytes:
    body = orjson.dumps({"event": "message.received", "workspaceId": workspace,
                         "conversationId": conversation, "data": {"n": n}})  # fmt: skip
    return orjson.dumps({"receivedAt": "2026-11-20T10:00:00Z", "headers": {},
                         "body": body.decode()}) + b"\n"  # fmt: skip


def _conversations(path: Path) -> list[str]:
    data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    out = []
    for line in data.splitlines():
        body = orjson.loads(orjson.loads(line)["body"])
        out.append(f"{body['conversationId']}#{body['data']['n']}")
    return out


def test_a_receiver_appending_meanwhile_loses_no_line(tmp_path: Path) -> None:
    hasher = _hasher(tmp_path)
    lists = {"conversation": frozenset({hasher.hash("conversation", "c-gone")})}
    folder = tmp_path / "archive" / "workspaces" / "acme"
    total = 600
    done = threading.Event()

    async def receive() -> None:
        clock = lambda: datetime(2026, 11, 20, 12, tzinfo=UTC)  # noqa: E731
        async with ArchiveWriter(folder, "deliveries", clock) as writer:
            for n in range(total):
                await writer.append(_line("c-gone" if n % 10 == 0 else f"c-{n}", n), DAY)
                if n % 25 == 0:
                    await asyncio.sleep(0.001)

    thread = threading.Thread(target=lambda: (asyncio.run(receive()), done.set()), daemon=True)
    thread.start()
    rounds = 0
    while not done.is_set() and rounds < 2000:
        erase_archive_lines(tmp_path / "archive", "acme", "ws_acme", hasher, lists,
                            flat_is_workspace=False)  # fmt: skip
        rounds += 1
    thread.join(timeout=60)
    assert done.is_set() and rounds > 1
    erase_archive_lines(tmp_path / "archive", "acme", "ws_acme", hasher, lists,
                        flat_is_workspace=False)  # fmt: skip
    found = _conversations(folder / f"deliveries-{DAY}.jsonl")
    kept = [f"c-{n}#{n}" for n in range(total) if n % 10]
    assert sorted(found) == sorted(kept), "a line appended during a rewrite was lost or doubled"
    assert not list(folder.glob("*.erasing"))


def test_past_days_and_the_flat_endpoints_other_workspaces(tmp_path: Path) -> None:
    hasher = _hasher(tmp_path)
    lists = {"conversation": frozenset({hasher.hash("conversation", "c-gone")})}
    archive = tmp_path / "archive"
    own = archive / "workspaces" / "acme"
    own.mkdir(parents=True)
    past = own / "deliveries-2026-11-01.jsonl.gz"
    past.write_bytes(gzip.compress(_line("c-gone", 1) + _line("c-2", 2) + b"not json\n"))
    flat = archive / "deliveries-2026-11-02.jsonl"
    # the flat endpoint's file: the same conversation id in globex is someone else's
    flat.write_bytes(_line("c-gone", 3) + _line("c-gone", 4, "ws_globex") + _line("c-5", 5))
    other = archive / "workspaces" / "globex" / "deliveries-2026-11-02.jsonl"
    other.parent.mkdir(parents=True)
    other.write_bytes(_line("c-gone", 6, "ws_globex"))
    changed = erase_archive_lines(archive, "acme", "ws_acme", hasher, lists,
                                  flat_is_workspace=False)  # fmt: skip
    assert sorted((Path(c.path).name, c.lines) for c in changed) == [
        ("deliveries-2026-11-01.jsonl.gz", 1), ("deliveries-2026-11-02.jsonl", 1)]  # fmt: skip
    assert gzip.decompress(past.read_bytes()).splitlines()[-1] == b"not json"
    assert _conversations(flat) == ["c-gone#4", "c-5#5"]
    assert _conversations(other) == ["c-gone#6"]
    # a second pass changes nothing
    assert erase_archive_lines(archive, "acme", "ws_acme", hasher, lists,
                               flat_is_workspace=False) == []  # fmt: skip
