"""Personal data scrubbed before anything is written (issue 30, D-PRIVACY-SCRUB-AT-LOAD):
a real sandbox over HTTP on 127.0.0.1, real DuckDB files, the real webhook receiver.

After an extract (and a webhook receive and ingest) of conversations in which people typed
their email addresses, phone numbers, a card number and an IBAN, no file under the data
folder holds any of them: DuckDB files read with DuckDB (every column of every row as
text) and as bytes, archives, quarantine files. Duplicates still deduplicate; mode off
stores what came.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from pathlib import Path
from typing import Any

import duckdb
import httpx

from conftest import ACME_KEY, RunningSandbox
from convo_analytics.extract import ExtractConfig, extract_configs, run_extract
from convo_analytics.privacy import PrivacyConfig
from extract_support import warehouse_rows

#: What the injected conversation types: a card (Luhn, Visa), an IBAN (mod-97), an email and
#: a phone number of the test's own (the sandbox's history types emails, phones and cards).
CARD = "4111 1111 1111 1111"
IBAN = "DE89 3704 0044 0532 0130 00"
EMAIL = "zed.injected@example.org"
PHONE = "+44 20 7946 0958"
INJECTED = (
    f"my card is {CARD} and my IBAN {IBAN}; write to {EMAIL} or call {PHONE}",
    f"again: {CARD.replace(' ', '')} / {IBAN.replace(' ', '')}",
)
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_PHONE = re.compile(r"call me on (\+\d+ \d+ \d+)")
_CARD = re.compile(r"my card is ([\d -]{13,23}\d)")


def _privacy(tmp: Path, mode: str = "mask") -> PrivacyConfig:
    return PrivacyConfig(mode=mode, generated_key_file=tmp / "app-state" / "privacy.key")  # type: ignore[arg-type]


def _extract(running: RunningSandbox, db: Path, privacy: PrivacyConfig | None, **kw: Any) -> Any:
    config = ExtractConfig(
        base_url=running.url, api_key=ACME_KEY, db_path=db, rate_limit="none",
        privacy=privacy, **kw,
    )  # fmt: skip
    result = asyncio.run(run_extract(config))
    assert result.ok, result
    return result


def _inject(client: httpx.Client, user: str = "u-privacy") -> str:
    created = client.post(
        "/v1/conversations", json={"externalUserId": user, "channel": "web", "metadata": {}}
    )
    assert created.status_code == 201, created.text
    conv: str = created.json()["id"]
    for text in INJECTED:
        r = client.post(
            f"/v1/conversations/{conv}/messages",
            json={"text": text, "channel": "web", "locale": "en-US"},
        )
        assert r.status_code == 201, r.text
    return conv


def personal_values(running: RunningSandbox) -> set[str]:
    """Every email, phone number and card number the sandbox's people typed, and ours."""
    found = {CARD, CARD.replace(" ", ""), IBAN, IBAN.replace(" ", ""), EMAIL, PHONE}
    for ws in running.sandbox.workspaces.values():
        for conv in ws.conversations.records.values():
            for message in conv.messages:
                text = getattr(message, "text", "") or ""
                found.update(_EMAIL.findall(text))
                found.update(_PHONE.findall(text))
                for card in _CARD.findall(text):
                    found.update({card, re.sub(r"\D", "", card)})
    return found


def _duckdb_texts(path: Path) -> str:
    """Every row of every table of a DuckDB file, as text (each column cast, nested too)."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        tables = con.execute(
            "SELECT schema_name, table_name FROM duckdb_tables() WHERE NOT internal"
        ).fetchall()
        parts = []
        for schema, table in tables:
            rows = con.execute(f'SELECT CAST(t AS VARCHAR) FROM "{schema}"."{table}" t').fetchall()
            parts.extend(r[0] for r in rows)
        return "\n".join(parts)
    finally:
        con.close()


def files_holding(folder: Path, values: set[str]) -> dict[str, list[str]]:
    """Which files under ``folder`` hold which of ``values`` (DuckDB files read as their
    rows' text and as bytes; gzip archives decompressed; the rest as bytes)."""
    import gzip

    held: dict[str, list[str]] = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        raw = path.read_bytes()
        texts = [raw.decode("utf-8", "replace")]
        if path.suffix == ".duckdb":
            texts.append(_duckdb_texts(path))
        elif raw[:2] == b"\x1f\x8b":
            texts.append(gzip.decompress(raw).decode("utf-8", "replace"))
        whole = "\n".join(texts)
        hits = sorted(v for v in values if v in whole)
        if hits:
            held[str(path.relative_to(folder))] = hits
    return held


def _counts(db: Path) -> dict[str, int]:
    tables = ("raw_conversations", "raw_conversation_details", "raw_leads", "conversations",
              "messages", "leads", "privacy_findings")  # fmt: skip
    return {t: warehouse_rows(db, f"SELECT count(*) FROM {t}")[0][0] for t in tables}


def test_an_extract_writes_no_personal_data_and_still_deduplicates(
    start_sandbox: Any, tmp_path: Path
) -> None:
    running: RunningSandbox = start_sandbox(conversations=120)
    with running.client(ACME_KEY) as client:
        conv = _inject(client)
    values = personal_values(running)
    assert len(values) > 10  # the sandbox's history typed some, besides ours
    data = tmp_path / "data"
    db = data / "warehouse.duckdb"
    _extract(running, db, _privacy(data))

    assert files_holding(data, values) == {}
    texts = [r[0] for r in warehouse_rows(
        db, f"SELECT text FROM messages WHERE conversation_id = '{conv}' AND role = 'user'"
    )]  # fmt: skip
    assert texts and "[card]" in texts[0] and "[iban]" in texts[0] and "[email]" in texts[0]
    kinds = {r[0] for r in warehouse_rows(
        db, f"SELECT kind FROM privacy_findings WHERE record_id = '{conv}'"
    )}  # fmt: skip
    assert {"card", "iban", "email", "phone"} <= kinds
    # the keyed hash of our address is beside the conversation: an erasure finds it
    from convo_analytics.privacy import Scrubber

    (workspace,) = warehouse_rows(db, f"SELECT workspace_id FROM conversations WHERE id = '{conv}'")
    scrubber = Scrubber.from_config(_privacy(data), workspace[0])
    held = warehouse_rows(
        db,
        "SELECT DISTINCT source, record_id FROM privacy_findings WHERE kind = 'email' "
        f"AND keyed_hash = '{scrubber.keyed_hash('email', EMAIL.upper())}'",
    )
    assert ("conversations", conv) in held

    before = _counts(db)
    _extract(running, db, _privacy(data), full_refresh=True)
    assert _counts(db) == before  # the same records, scrubbed alike: nothing stored twice
    assert files_holding(data, values) == {}


def test_mode_off_stores_what_came(start_sandbox: Any, tmp_path: Path) -> None:
    running: RunningSandbox = start_sandbox(conversations=30)
    with running.client(ACME_KEY) as client:
        conv = _inject(client)
    db = tmp_path / "off.duckdb"
    _extract(running, db, _privacy(tmp_path, "off"))
    texts = [r[0] for r in warehouse_rows(
        db, f"SELECT text FROM messages WHERE conversation_id = '{conv}' AND role = 'user'"
    )]  # fmt: skip
    assert texts[0] == INJECTED[0]
    assert files_holding(tmp_path, {CARD, IBAN, EMAIL})  # the search finds what is there
    assert warehouse_rows(db, "SELECT count(*) FROM privacy_findings") == [(0,)]
    assert not (tmp_path / "app-state").exists()  # no key is made for nothing to hash
    # exactly what a run without any privacy configuration stores
    plain = tmp_path / "plain.duckdb"
    _extract(running, plain, None)
    sql = "SELECT id, payload_hash FROM raw_conversation_details ORDER BY ALL"
    assert warehouse_rows(db, sql) == warehouse_rows(plain, sql)


def test_each_workspace_gets_its_own_mode(tmp_path: Path) -> None:
    """``privacy.scrub`` for all, a ``[[workspaces]]`` table's ``privacy_scrub`` for its own."""
    from convo_analytics.config import load_settings

    config = tmp_path / "convo.toml"
    config.write_text(
        '[privacy]\nscrub = "hash"\n\n'
        '[[workspaces]]\nname = "acme"\nbase_url = "http://127.0.0.1:9"\n'
        'auth = { type = "api_key", key_env = "ACME_KEY" }\nprivacy_scrub = "off"\n\n'
        '[[workspaces]]\nname = "globex"\nbase_url = "http://127.0.0.1:9"\n'
        'auth = { type = "api_key", key_env = "GLOBEX_KEY" }\n',
        encoding="utf-8",
    )
    settings = load_settings(config, {}, {"ACME_KEY": "k1", "GLOBEX_KEY": "k2"}, cwd=tmp_path)
    modes = {c.workspace: c.privacy.mode if c.privacy else None for c in extract_configs(settings)}
    assert modes == {"acme": "off", "globex": "hash"}
    assert dataclasses.fields(ExtractConfig)  # the config carries it to the run
