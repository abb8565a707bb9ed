"""Published snapshots for the dashboard's tests, made through the real pipeline: three
workspaces, each extracted from the sandbox with its own key (under its configured name),
their webhook history ingested, the transform run, the warehouse published; and one
conversation of hostile end-user text (Markdown and HTML that must show as written), with
a beacon server that records any request a browser makes for it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

from streamlit.runtime.media_file_manager import MediaFileManager
from streamlit.testing.v1 import AppTest

from conftest import ACME_KEY, GLOBEX_KEY, make_settings
from convo_analytics._serving import ServerThread
from convo_analytics.publish import publish_snapshot
from convo_analytics.sandbox import Sandbox, create_app
from convo_analytics.sandbox._history_archive import write_history_archive
from convo_analytics.topics import TopicConfig
from convo_analytics.transform import TransformConfig, run_transform
from convo_analytics.warehouse import open_warehouse
from convo_analytics.webhooks import ingest
from extract_support import extract

INITECH_KEY = "sk_test_initech_55555555"
#: (configured name, API key) of each workspace.
WORKSPACES = (("acme", ACME_KEY), ("globex", GLOBEX_KEY), ("initech", INITECH_KEY))
SECRET = "whsec_dashboard_workspaces_0123456789"


@contextmanager
def three_workspaces(
    folder: Path, conversations: int = 120, topics_from: int | None = None
) -> Iterator[tuple[Path, Path]]:
    """(the published folder, the warehouse) of three workspaces read into one warehouse;
    each workspace's topics discovered once it has ``topics_from`` conversations (None:
    the default, topics.min_conversations)."""
    sandbox = Sandbox(make_settings(conversations=conversations, days=10,
                                    workspaces=list(WORKSPACES)))  # fmt: skip
    db = folder / "w.duckdb"
    with ServerThread(create_app(sandbox)) as server:
        for name, key in WORKSPACES:
            result = extract(server.url, key, db, workspace=name, implicit_workspace=False)
            assert result.ok, result.to_json()
    archive = folder / "history.jsonl.gz"
    write_history_archive(archive, list(sandbox.workspaces.values()), SECRET)
    assert ingest([archive], [SECRET.encode()], db).loaded > 0
    con = open_warehouse(db)
    try:
        topics = (
            TopicConfig() if topics_from is None else TopicConfig(min_conversations=topics_from)
        )
        run_transform(con, TransformConfig(timezones=("UTC",), topics=topics))
        publish_snapshot(con, db, folder / "published")
    finally:
        con.close()
    yield folder / "published", db


# -- hostile input: what end users may write, shown as written -----------------------------------

#: An inline code span as ``_text.plain`` writes it: its content shows character for character.
CODE_SPAN = re.compile(r"(`+) (.*?) \1")
#: What Markdown (or Streamlit's extras) would turn into a link, an image, HTML or an emoji.
MARKUP = ("](", "<img", "<script", "127.0.0.1", "www.", "@example.com", ":smile:")


def markdown_shown(at: AppTest) -> list[str]:
    """Every string the app hands to Streamlit where Streamlit renders Markdown: text
    elements, alerts, headings, metric labels and values, widget and button labels and
    help, radio options, tab and expander labels."""
    shown = [e.value for kind in ("markdown", "caption", "title", "header", "subheader",
                                  "info", "warning", "error", "success")
             for e in getattr(at, kind)]  # fmt: skip
    for metric in at.metric:
        shown += [metric.label, metric.value]
    for kind in ("button", "selectbox", "multiselect", "text_input", "number_input", "radio",
                 "date_input", "checkbox", "text_area", "toggle", "slider"):  # fmt: skip
        for widget in getattr(at, kind):
            shown += [widget.label, widget.help or ""]
    for widget in at.radio:
        shown += [str(option) for option in widget.options]
    for button in at.get("download_button"):
        shown += [button.proto.label, button.proto.help]
    shown += [e.label for e in at.expander] + [t.label for t in at.tabs]
    return shown


def assert_no_markup(at: AppTest) -> None:
    """No end user's text reaches Markdown except inside a code span (shown as written)."""
    for text in markdown_shown(at):
        outside = CODE_SPAN.sub("", str(text))
        assert not any(marker in outside for marker in MARKUP), text


#: A link that a rendered Markdown would turn into a phishing link (port 9: discard).
PHISH = "[sign in again](http://127.0.0.1:9/phish)"


def hostile_messages(beacon: str) -> list[str]:
    """What an end user writes: Markdown and HTML that would link, or make the browser fetch
    ``beacon`` (a URL on 127.0.0.1), if the dashboard rendered it instead of showing it."""
    return [
        PHISH,
        f"![x]({beacon}/beacon.png)",
        f'<img src="{beacon}/img.png"> <script>fetch("{beacon}/script")</script>',
        f"I want to buy it, send a quote and a demo: lead@example.com :smile: -> www.example.com"
        f" ![y]({beacon}/lead.png)",
    ]


def hostile_user(beacon: str) -> str:
    return f"![u]({beacon}/user.png)"


def hostile_source(beacon: str) -> str:
    return f"[promo](http://127.0.0.1:9/src) <img src={beacon}/source.png>"


class Beacon:
    """An HTTP server on 127.0.0.1 (a free port) that records every request it gets: a
    browser that rendered an image or ran a script from the data would call it."""

    def __init__(self) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.hits: list[str] = []
        hits = self.hits

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                hits.append(self.path)
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Beacon:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=10)


@contextmanager
def hostile_snapshot(
    folder: Path, beacon: str, conversations: int = 60
) -> Iterator[tuple[Path, str]]:
    """(the published folder, the hostile conversation's id): a sandbox's history (of
    ``conversations``; the warehouse is ``folder / "w.duckdb"``) plus one
    conversation whose end user wrote :func:`hostile_messages` (with a hostile user id and
    lead source, and an escalation with a hostile reason and owner), told to the sandbox
    the way its live API does, one minute after the history ends (the newest conversation);
    then extracted, its webhooks ingested, transformed and published."""
    from conftest import UNTIL_MS
    from transform_support import populate

    sandbox = Sandbox(make_settings(conversations=conversations, days=10))
    ws = sandbox.workspace_for(ACME_KEY)
    assert ws is not None
    at = UNTIL_MS + 60_000
    conv = sandbox.live.open(ws, external_user_id=hostile_user(beacon), channel="web",
                             metadata={"source": hostile_source(beacon)}, locale="en-US",
                             now=at)  # fmt: skip
    for step, text in enumerate(hostile_messages(beacon), start=1):
        sandbox.live.message(ws, conv, text=text, channel="web", locale="en-US",
                             now=at + step * 60_000)  # fmt: skip
    ws.change(conv, lambda c: ws.activity.escalate(
        c, at + 600_000, reason_code="[r](http://127.0.0.1:9/r)", destination="helpdesk",
        owner=f"![o]({beacon}/owner.png)", priority="normal", origin="manual",
    )[1])  # fmt: skip
    db = folder / "w.duckdb"
    with ServerThread(create_app(sandbox)) as server:
        populate(sandbox, server.url, ACME_KEY, db, ("UTC",))
    con = open_warehouse(db)
    try:
        publish_snapshot(con, db, folder / "published")
    finally:
        con.close()
    yield folder / "published", conv.id


class RecordingManager(MediaFileManager):
    """AppTest's media file manager, kept so that a test can click a download button and read
    what it hands over: a file made when the page ran, or one made on demand (every download
    is made on demand when the audit trail records it: ``dashboard/_audit.py``)."""

    made: ClassVar[list[RecordingManager]] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        RecordingManager.made.append(self)

    @classmethod
    def record(cls, monkeypatch: Any) -> list[RecordingManager]:
        cls.made = []
        monkeypatch.setattr("streamlit.testing.v1.app_test.MediaFileManager", cls)
        return cls.made


def downloaded(made: list[RecordingManager], button: Any) -> tuple[str, bytes]:
    """The file name and the bytes ``button`` (an AppTest download button) hands over when
    clicked."""
    manager = made[-1]
    url = button.proto.url or manager.execute_deferred(button.proto.deferred_file_id)
    stored = manager._storage.get_file(url.rsplit("/", 1)[-1])
    return str(stored.filename), bytes(stored.content)
