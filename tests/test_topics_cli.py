"""``convo topics discover`` on any text file: one line per input record, in order, with the
quality of the warehouse path's discovery on a public labelled set, and no configuration or
warehouse needed (issue 27)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
from sklearn.metrics import normalized_mutual_info_score

from convo_analytics.topics import read_records

DSTC11 = Path(__file__).parent / "data" / "intents" / "dstc11-insurance-dev.jsonl"
#: The quality floor asserted on the shared set: a floor under what `make bench BENCH_ARGS=
#: "--only topics"` measures (docs/benchmarks.md), not a timing.
NMI_FLOOR = 0.80


def convo(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVO_")}
    return subprocess.run(
        [sys.executable, "-m", "convo_analytics.cli", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_the_shared_set_gets_one_topic_per_utterance(tmp_path: Path) -> None:
    """One line per input, ids unique and in input order, labels non-empty and one per topic,
    sizes adding up, and the topics agree with the set's intents above the floor. A broken
    convo.toml in the folder changes nothing: the command reads no configuration."""
    (tmp_path / "convo.toml").write_text("[nonsense\n")
    out = tmp_path / "topics.jsonl"
    done = convo(
        "topics", "discover", "--input", str(DSTC11), "--text-field", "utterance",
        "--id-field", "utterance_id", "--out", str(out), "--json", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = orjson.loads(done.stdout)
    rows = [orjson.loads(line) for line in DSTC11.read_bytes().splitlines() if line.strip()]
    lines = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert [line["id"] for line in lines] == [row["utterance_id"] for row in rows]
    assert summary["records"] == len(rows) == 913
    labels = {t["id"]: t["label"] for t in summary["topics"]}
    assert all(label.strip() for label in labels.values())
    assert all(labels[line["topic_id"]] == line["topic_label"] for line in lines)
    assert sum(t["size"] for t in summary["topics"]) == len(rows)
    assert len(labels) > 2  # the number of topics was chosen, not one bucket
    nmi = normalized_mutual_info_score(
        [row["intent"] for row in rows], [line["topic_id"] for line in lines]
    )
    assert nmi >= NMI_FLOOR, nmi
    assert not list(tmp_path.glob(".topics.jsonl.*")), "no temporary file is left"


def test_csv_without_ids_numbers_the_records_and_can_write_to_stdout(tmp_path: Path) -> None:
    """A CSV with a byte-order mark and no id column: records numbered 1..n, lines on
    stdout, the table of topics on stderr; text that looks like markup is printed as text."""
    texts = ["[b]reset[/b] my password", "[b]forgot[/b] my password", "[b]where[/b] is my card"]
    texts += ["my [b]card[/b] has not arrived", "cancel my [b]subscription[/b]", ""]
    body = "text,channel\n" + "".join(f'"{t}",web\n' for t in texts)
    (tmp_path / "chats.csv").write_bytes(b"\xef\xbb\xbf" + body.encode())
    done = convo("topics", "discover", "--input", "chats.csv", "--out", "-", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = [orjson.loads(line) for line in done.stdout.splitlines()]
    assert [line["id"] for line in lines] == [1, 2, 3, 4, 5, 6]
    assert lines[-1]["topic_id"] == 0, "a blank text is 'other'"
    assert "[b]" in done.stderr, done.stderr  # every example holds one: shown, not rendered


def test_records_are_read_as_written(tmp_path: Path) -> None:
    """Nested text fields, null texts as blank, ids kept with their JSON type, blank lines
    skipped."""
    path = tmp_path / "in.jsonl"
    path.write_text('{"id": "a-1", "msg": {"text": "hello"}}\n\n{"id": 7, "msg": {"text": null}}\n')
    records = read_records(path, text_field="msg.text")
    assert records.ids == ("a-1", 7) and records.texts == ("hello", "")
    assert records.id_field == "id"
