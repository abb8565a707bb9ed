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


# -- webhooks: scrubbed at receipt, sealed, ingested; older archives scrubbed at ingest ----

SECRET = "whsec_privacy_load_tests_0123"


def _lines(folder: Path) -> list[bytes]:
    import gzip

    out: list[bytes] = []
    for path in sorted(folder.rglob("*.jsonl*")):
        raw = path.read_bytes()
        raw = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
        out.extend(line for line in raw.splitlines() if line.strip())
    return out


def _wait_lines(folder: Path, at_least: int) -> list[bytes]:
    import time

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        lines = [x for x in _lines(folder) if b'"reason"' not in x]
        if len(lines) >= at_least:
            return lines
        time.sleep(0.1)
    raise AssertionError(f"fewer than {at_least} deliveries reached {folder} in 30 s")


def _receive(running: RunningSandbox, hooks: dict[str, Path], privacy: dict[str, Any]) -> str:
    """Receivers (one per folder, each with its privacy) registered with the sandbox; the
    injected conversation's deliveries reach every one. Returns the conversation id."""
    from convo_analytics._serving import ServerThread
    from convo_analytics.webhooks._receiver import ReceiverSettings, create_receiver_app

    servers = [
        ServerThread(create_receiver_app(
            ReceiverSettings(archive_dir=folder, secrets=[SECRET], privacy=privacy[name])
        )).start()
        for name, folder in hooks.items()
    ]  # fmt: skip
    try:
        with running.client(ACME_KEY) as client:
            for server in servers:
                hook = client.post(
                    "/v1/webhooks", json={"url": f"{server.url}/webhooks", "secret": SECRET}
                )
                assert hook.status_code == 201, hook.text
            conv = _inject(client)
        for folder in hooks.values():
            _wait_lines(folder, 6)
    finally:
        for server in servers:
            server.stop()
    return conv


def test_deliveries_are_archived_scrubbed_sealed_and_ingested_once(
    start_sandbox: Any, tmp_path: Path
) -> None:
    import orjson

    from convo_analytics.webhooks import IngestOptions, ingest

    running: RunningSandbox = start_sandbox(conversations=20, live_inactivity_seconds=600)
    data, plain = tmp_path / "data", tmp_path / "plain-hooks"
    privacy = _privacy(data)
    conv = _receive(running, {"scrub": data / "hooks", "plain": plain},
                    {"scrub": privacy, "plain": None})  # fmt: skip
    values = {CARD, CARD.replace(" ", ""), IBAN, IBAN.replace(" ", ""), EMAIL, PHONE}
    assert files_holding(plain, values)  # the deliveries carried them (mode off: as received)
    assert files_holding(data, values) == {}

    lines = _wait_lines(data / "hooks", 6)
    records = [orjson.loads(x) for x in lines]
    assert all(r["verified"] and r["localMac"].startswith("hmac-sha256=") for r in records)
    assert all(r["scrub"]["mode"] == "mask" and r["scrub"]["keyId"] for r in records)
    assert any(r["scrub"]["findings"] for r in records)

    db = data / "warehouse.duckdb"
    files = sorted((data / "hooks").glob("*.jsonl*"))
    first = ingest(files, [SECRET.encode()], db, privacy=privacy)
    assert first.loaded == len(lines) and not first.quarantined, first.to_json()
    assert files_holding(data, values) == {}
    held = {r[0] for r in warehouse_rows(
        db, "SELECT kind FROM privacy_findings WHERE source = 'events'"
    )}  # fmt: skip
    assert {"email", "card", "iban"} <= held
    events = warehouse_rows(db, "SELECT count(*) FROM events")
    again = ingest(files, [SECRET.encode()], db, IngestOptions(full=True), privacy=privacy)
    assert again.loaded == 0 and again.duplicates == len(lines), again.to_json()
    assert warehouse_rows(db, "SELECT count(*) FROM events") == events

    # a scrubbed line edited after it was archived is quarantined, whatever was changed
    tampered = data / "hooks" / "tampered.jsonl"
    record = records[0]
    record["body"] = record["body"].replace(conv, conv + "x", 1)
    forged = dict(records[1], receivedAt="2026-01-01T00:00:00.000Z")
    tampered.write_bytes(orjson.dumps(record) + b"\n" + orjson.dumps(forged) + b"\n")
    bad = ingest([tampered], [SECRET.encode()], db, privacy=privacy)
    assert bad.loaded == 0 and dict(bad.quarantined) == {"bad_local_mac": 2}, bad.to_json()
    # without the privacy key, a sealed line cannot be trusted either
    unkeyed = ingest(files, [SECRET.encode()], tmp_path / "unkeyed.duckdb")
    assert unkeyed.loaded == 0 and set(unkeyed.quarantined) == {"bad_local_mac"}


def test_an_older_archive_is_verified_then_scrubbed_at_ingest(
    start_sandbox: Any, tmp_path: Path
) -> None:
    """An archive as older versions wrote it (unscrubbed, signed by the service): verified
    as before, scrubbed before the warehouse; a re-ingest finds only duplicates."""
    from convo_analytics.sandbox._history_archive import write_history_archive
    from convo_analytics.webhooks import IngestOptions, ingest

    running: RunningSandbox = start_sandbox(conversations=120)
    old = tmp_path / "old" / "history.jsonl.gz"  # an older version's file, not ours to rewrite
    write_history_archive(old, list(running.sandbox.workspaces.values()), SECRET)
    values = personal_values(running)
    assert files_holding(old.parent, values)  # it holds personal data
    data = tmp_path / "data"
    db = data / "warehouse.duckdb"
    first = ingest([old], [SECRET.encode()], db, privacy=_privacy(data))
    assert first.loaded > 0 and not first.quarantined, first.to_json()
    assert files_holding(data, values) == {}
    assert warehouse_rows(db, "SELECT count(*) FROM privacy_findings WHERE source = 'events'")[0][0]
    again = ingest([old], [SECRET.encode()], db, IngestOptions(full=True), privacy=_privacy(data))
    assert again.loaded == 0 and again.duplicates == first.loaded + first.duplicates

    # a line of that archive that cannot be loaded (signed with another secret) is
    # quarantined scrubbed: the original text reaches no file of the data folder either
    import gzip

    lines = gzip.decompress(old.read_bytes()).splitlines(keepends=True)
    typed = next(line for line in lines if any(v.encode() in line for v in values))
    broken = tmp_path / "old" / "broken.jsonl"
    broken.write_bytes(typed.replace(b"sha256=", b"sha256=00"))  # every signature wrong
    fresh = data / "fresh.duckdb"  # (in the first warehouse it is a duplicate of its event)
    held = ingest([broken], [SECRET.encode()], fresh, privacy=_privacy(data))
    assert sum(held.quarantined.values()) == 1, held.to_json()
    assert warehouse_rows(fresh, "SELECT count(*) FROM quarantine WHERE line IS NOT NULL")[0][0]
    assert files_holding(data, values) == {}

    # mode off: stored as received, as before
    off = tmp_path / "off.duckdb"
    ingest([old], [SECRET.encode()], off, privacy=_privacy(tmp_path, "off"))
    assert any(v in _duckdb_texts(off) for v in values)


def test_a_refused_delivery_is_quarantined_scrubbed(tmp_path: Path) -> None:
    """A delivery that fails its signature is kept for an investigation, scrubbed too."""
    import orjson

    from convo_analytics._serving import ServerThread
    from convo_analytics.webhooks._receiver import ReceiverSettings, create_receiver_app

    data = tmp_path / "data"
    settings = ReceiverSettings(
        archive_dir=data / "hooks", secrets=[SECRET], privacy=_privacy(data)
    )
    event = {"id": "evt_1", "event": "message.received", "timestamp": "2026-11-18T10:00:00.000Z",
             "data": {"text": INJECTED[0]}}  # fmt: skip
    with ServerThread(create_receiver_app(settings)) as server:
        signed = httpx.post(f"{server.url}/webhooks", content=orjson.dumps(event),
                            headers={"x-convo-signature": "sha256=" + "0" * 64})  # fmt: skip
        garbage = httpx.post(f"{server.url}/webhooks", content=f"not json {EMAIL}".encode())
    assert (signed.status_code, garbage.status_code) == (401, 400)
    lines = _lines(data / "hooks" / "quarantine")
    assert len(lines) == 2
    assert files_holding(data, {CARD, IBAN, EMAIL, PHONE}) == {}
    kept = [orjson.loads(x) for x in lines]
    assert all(r["scrub"]["verified"] is False and "localMac" not in r for r in kept)
    assert "[card]" in kept[0]["body"] and "[email]" in kept[1]["body"]
