"""A workspace's knowledge: sources, their documents cut into passages, and BM25 retrieval.

Two paths feed one index (decision D-KNOWLEDGE-PATHS): POST
/v1/knowledge-sources creates or updates a *source* (a url-crawl source
fetches its seed URLs; a text or faq source carries its content), and POST
/v1/knowledge uploads a *document* into a source (the "uploads" source unless
one is named). Retrieval ranks passages with Okapi BM25 over Snowball-stemmed words
without stop words (the snowballstemmer and stop-words libraries); no language model.
"""

from __future__ import annotations

import functools
import html
import math
import re
import threading
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
import snowballstemmer
import stop_words

from convo_analytics.sandbox._model import iso

#: Okapi BM25 parameters (the usual defaults).
K1 = 1.5
B = 0.75
PASSAGE_WORDS = 90
FETCH_TIMEOUT_SECONDS = 5.0
FETCH_MAX_BYTES = 1_000_000
_WORD = re.compile(r"\w+", re.UNICODE)
#: Words of the stop-words library's English list that carry the meaning of a customer's
#: question ("where is my order", "is it free", "opening hours"), so they stay searchable.
_MEANINGFUL = frozenset(
    ("order orders ordered free open opening opened work working works number numbers home "  # noqa: SIM905
     "page pages help change changed invoice line lines group groups member members "
     "information available possible show shows new old large small best").split()
)  # fmt: skip
#: Question phrasing that names no subject ("how long does it take", "tell me", "I want").
_PHRASING = frozenset("take takes taking tell know want wanted need needs like".split())  # noqa: SIM905
_STOP = frozenset(stop_words.get_stop_words("english")) - _MEANINGFUL | _PHRASING
_STEMMER = snowballstemmer.stemmer("english")
_TAGS = re.compile(r"<(script|style)\b.*?</\1>|<[^>]+>", re.S | re.I)


@functools.lru_cache(maxsize=65_536)
def _stem(word: str) -> str:
    """The Snowball (Porter 2) English stem: refunds/refunded/refunding -> refund."""
    stem: str = _STEMMER.stemWord(word)
    return stem


def tokens(text: str) -> list[str]:
    """Lower-cased, unaccented, Snowball-stemmed words, without stop words (decision
    D-LIVE-ASSISTANT): the terms passages are indexed and questions are searched by."""
    folded = unicodedata.normalize("NFKD", text.casefold())
    plain = "".join(ch for ch in folded if not unicodedata.combining(ch))
    return [_stem(w) for w in _WORD.findall(plain) if w not in _STOP and len(w) > 1]


@dataclass(slots=True)
class Passage:
    source_id: str
    document_id: str
    title: str
    text: str
    terms: Counter[str]
    length: int


@dataclass(slots=True)
class Document:
    id: str
    title: str
    content: str
    url: str | None
    updated_at: int


@dataclass(slots=True)
class Source:
    id: str
    name: str
    type: str
    seed_urls: list[str]
    created_at: int
    updated_at: int
    status: str = "ready"
    errors: list[dict[str, str]] = field(default_factory=list)
    documents: dict[str, Document] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "type": self.type,
            "seedUrls": self.seed_urls,
            "status": self.status,
            "documents": len(self.documents),
            "errors": self.errors,
            "createdAt": iso(self.created_at),
            "updatedAt": iso(self.updated_at),
        }


@dataclass(frozen=True, slots=True)
class Hit:
    passage: Passage
    score: float
    #: Share of the weight (idf) of the question's terms that the knowledge holds anywhere
    #: which this passage contains, 0-1.
    coverage: float
    #: Share of the question's terms that no passage holds (words the knowledge never uses).
    unknown: float


def split_passages(text: str) -> list[str]:
    """Paragraphs, with long ones cut into runs of about PASSAGE_WORDS words."""
    out: list[str] = []
    for para in re.split(r"\n\s*\n", text):
        words = para.split()
        for i in range(0, len(words), PASSAGE_WORDS):
            chunk = " ".join(words[i : i + PASSAGE_WORDS])
            if chunk:
                out.append(chunk)
    return out


def html_text(body: str) -> tuple[str, str]:
    """(title, visible text) of an HTML page; paragraphs kept apart."""
    title_match = re.search(r"<title[^>]*>(.*?)</title>", body, re.S | re.I)
    title = html.unescape(title_match.group(1)).strip() if title_match else ""
    blocks = re.sub(r"</?(p|div|li|h[1-6]|section|article|br|tr)\b[^>]*>", "\n\n", body, flags=re.I)
    text = html.unescape(_TAGS.sub(" ", blocks))
    text = "\n\n".join(" ".join(p.split()) for p in re.split(r"\n\s*\n", text) if p.strip())
    return title, text


class KnowledgeBase:
    """Sources and the BM25 index over their passages, for one workspace."""

    def __init__(self) -> None:
        self.sources: dict[str, Source] = {}
        self._passages: list[Passage] = []
        self._df: Counter[str] = Counter()
        self._lock = threading.Lock()

    def by_name(self, name: str) -> Source | None:
        return next((s for s in self.sources.values() if s.name == name), None)

    def put_document(
        self, source: Source, doc_id: str, title: str, content: str, url: str | None, at: int
    ) -> Document:
        doc = Document(doc_id, title, content, url, at)
        with self._lock:
            source.documents[doc_id] = doc
            source.updated_at = at
            self._reindex()
        return doc

    def replace_documents(self, source: Source, docs: list[Document], at: int) -> None:
        with self._lock:
            source.documents = {d.id: d for d in docs}
            source.updated_at = at
            self._reindex()

    def _reindex(self) -> None:
        passages = []
        for source in self.sources.values():
            for doc in source.documents.values():
                for text in split_passages(doc.content):
                    terms = Counter(tokens(f"{doc.title} {text}"))
                    passages.append(
                        Passage(source.id, doc.id, doc.title, text, terms, sum(terms.values()))
                    )
        df: Counter[str] = Counter()
        for p in passages:
            df.update(p.terms.keys())
        self._passages, self._df = passages, df

    def search(self, query: str, limit: int = 3) -> list[Hit]:
        """Passages ranked by BM25 against the query, best first (score > 0 only)."""
        with self._lock:
            passages, df = self._passages, self._df
        if not passages:
            return []
        n = len(passages)
        avg = sum(p.length for p in passages) / n or 1.0
        terms = set(tokens(query))
        known = {t for t in terms if df[t]}
        idf = {t: math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in known}
        weight = sum(idf.values()) or 1.0
        unknown = (len(terms) - len(known)) / len(terms) if terms else 1.0
        hits = []
        for p in passages:
            score = covered = 0.0
            for t in known:
                tf = p.terms.get(t, 0)
                if tf:
                    covered += idf[t]
                    score += idf[t] * tf * (K1 + 1) / (tf + K1 * (1 - B + B * p.length / avg))
            if score > 0:
                hits.append(Hit(p, score, covered / weight, unknown))
        hits.sort(key=lambda h: (-h.score, h.passage.source_id, h.passage.document_id))
        return hits[:limit]


def fetch_page(url: str, client: httpx.Client | None = None) -> tuple[str, str]:
    """(title, text) of one seed URL: no link is followed, redirects only on the same host.

    Raises ValueError with a reason a client can show (timeout, size, type, status).
    """
    host = urlsplit(url).hostname
    own = client or httpx.Client(timeout=FETCH_TIMEOUT_SECONDS, follow_redirects=False)
    try:
        for _ in range(5):  # a few same-host redirects, then give up
            with own.stream("GET", url, headers={"User-Agent": "convo-sandbox-crawler"}) as r:
                if r.is_redirect:
                    target = str(r.next_request.url) if r.next_request else ""
                    if urlsplit(target).hostname != host:
                        raise ValueError(f"redirect to another host ({target}) not followed")
                    url = target
                    continue
                if r.status_code >= 400:
                    raise ValueError(f"HTTP {r.status_code}")
                kind = r.headers.get("content-type", "")
                if not any(t in kind for t in ("text/html", "text/plain", "text/markdown")):
                    raise ValueError(f"unsupported content type {kind or 'unknown'}")
                size = int(r.headers.get("content-length") or 0)
                if size > FETCH_MAX_BYTES:
                    raise ValueError(f"larger than {FETCH_MAX_BYTES} bytes")
                body = b""
                for block in r.iter_bytes():
                    body += block
                    if len(body) > FETCH_MAX_BYTES:
                        raise ValueError(f"larger than {FETCH_MAX_BYTES} bytes")
                text = body.decode(r.encoding or "utf-8", errors="replace")
                return html_text(text) if "html" in kind else ("", text)
        raise ValueError("too many redirects")
    except httpx.TimeoutException:
        raise ValueError(f"no answer within {FETCH_TIMEOUT_SECONDS:g} s") from None
    except httpx.HTTPError as exc:
        raise ValueError(f"could not fetch: {type(exc).__name__}") from None
    finally:
        if client is None:
            own.close()
