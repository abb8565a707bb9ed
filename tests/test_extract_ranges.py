"""A ``skip``/``take`` service with ``Content-Range`` totals and a summary of its own shape
(issue 25, item 8), over real HTTP (tests/foreign_more.py's ``ranges``).

A stream read short of its ``Content-Range`` total and a summary that makes no typed day
are reported, each naming what fixes it; ``--strict`` fails either; ``convo transform``
says when there was nothing to compare. With the mapping ``convo extract --check``
proposes, everything loads, every summary day is typed and it reconciles.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from extract_support import warehouse_rows
from foreign_more import serve, truth
from foreign_services import ForeignDomain
from test_extract_check import KEY, assert_exactly, convo, run_json

#: A user's guess: the leads come whole in one answer (they come 20 at a time).
GUESS = '[extract.streams.leads]\npaginator = { type = "single" }\n'


def test_a_short_stream_and_an_unmapped_summary_then_the_checked_mapping(
    tmp_path: Path,
) -> None:
    domain = ForeignDomain()
    guess = tmp_path / "guess.toml"
    guess.write_text(GUESS)
    db, checked_db = tmp_path / "guess.duckdb", tmp_path / "w.duckdb"
    with serve(domain, "ranges", KEY) as (server, _):
        base = ("--config", str(guess), "extract", "--base-url", server.url,
                "--rate-limit", "none")  # fmt: skip
        first = run_json(*base, "--db", str(db), "--streams", "leads,summary", cwd=tmp_path)
        strict = run_json(*base, "--db", str(tmp_path / "s.duckdb"), "--streams",
                          "leads,summary", "--strict", cwd=tmp_path)  # fmt: skip
        summary = run_json(*base, "--db", str(tmp_path / "m.duckdb"), "--streams", "summary",
                           cwd=tmp_path)  # fmt: skip
        summary_strict = run_json(*base, "--db", str(tmp_path / "n.duckdb"), "--streams",
                                  "summary", "--strict", cwd=tmp_path)  # fmt: skip
        nothing = convo("transform", "--db", str(db), cwd=tmp_path)
        check = convo("extract", "--check", "--base-url", server.url, "--rate-limit", "none",
                      "--write-config", str(tmp_path / "convo.toml"), cwd=tmp_path)  # fmt: skip
        good = run_json("extract", "--db", str(checked_db), "--rate-limit", "none", cwd=tmp_path)
        good_strict = run_json("extract", "--db", str(checked_db), "--rate-limit", "none",
                               "--strict", cwd=tmp_path)  # fmt: skip
    leads = first["streams"]["leads"]
    assert first["exit"] == 1 and leads["status"] == "partial"
    assert (
        "reported 61 records (Content-Range) but 20 distinct records were read" in (leads["error"])
    )
    unmapped = first["streams"]["summary"]
    assert unmapped["status"] == "ok" and unmapped["records"] == 0
    (warning,) = unmapped["warnings"]
    for named in ("day, total_conversations", "from=", "to=", '"service_summaries.date"',
                  "range = { from_param", "--check"):  # fmt: skip
        assert named in warning, (named, warning)
    assert strict["exit"] == 1 and strict["streams"]["summary"]["status"] == "failed"
    assert summary["exit"] == 0, "an unmapped summary is a warning, not a failure"
    assert summary_strict["exit"] == 1
    assert nothing.returncode == 0 and "reconciliation: nothing to compare" in nothing.stderr

    assert check.returncode == 0, check.stderr[-2000:]
    assert "a total of 61 records in the Content-Range header" in check.stdout
    assert "the range is asked with 'since' and 'until'" in check.stdout
    written = tomllib.loads((tmp_path / "convo.toml").read_text())
    streams = written["extract"]["streams"]
    assert streams["leads"]["paginator"] == {
        "type": "offset", "offset_param": "skip", "limit_param": "take",
        "total_header": "Content-Range",
    }  # fmt: skip
    assert streams["leads"]["updated"] == "modified_at"
    assert streams["summary"]["records"] == "days"
    assert streams["summary"]["range"]["from_param"] == "since"
    assert streams["summary"]["range"]["to_param"] == "until"
    assert written["extract"]["fields"]["service_summaries.date"] == "day"

    assert good["exit"] == 0, good["streams"]
    for name in ("conversations", "leads", "summary"):
        assert good["streams"][name]["status"] == "ok", good["streams"][name]
        assert good["streams"][name]["warnings"] == [], good["streams"][name]["warnings"]
    assert good["streams"]["summary"]["records"] == 30, "every day asked for, typed"
    assert good_strict["exit"] == 0, "with the mapping, --strict has nothing to fail"
    assert_exactly(checked_db, truth(domain, "ranges"))
    days = warehouse_rows(checked_db, "SELECT count(*) FROM service_summaries")
    assert days == [(30,)]
    transform = convo("transform", "--db", str(checked_db), cwd=tmp_path)
    assert transform.returncode == 0 and "of the service's own summary match" in transform.stderr
    for done in (first, strict, summary, good):
        assert "Traceback" not in done["stderr"] and KEY not in done["stderr"]
