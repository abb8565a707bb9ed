"""Latent intents: what each synthetic end user really wants (decision D-SANDBOX-INTENTS).

The service classifies a conversation into one of ten coarse intents; the
analytics' topic discovery is meant to find the finer needs underneath them
and the ones the knowledge base does not cover. So each generated
conversation starts from one of about thirty *latent* intents: it belongs to
a coarse intent (which the service sends, unchanged in meaning), its first
message is one of its phrasings, and its answers cite its knowledge source.
Five latent intents have no source: the assistant answers them with
fallbacks and low confidence, so they are the knowledge gaps to be found.

The latent intent is the sandbox's ground truth. It stays on the in-memory
conversation and is shown only to the admin token (``GET
/_sandbox/workspaces/{id}/latent-intents``); no API response, webhook
event or archive line carries it.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from convo_analytics.sandbox import _corpus as corpus
from convo_analytics.sandbox._phrasings_en import PHRASINGS_EN
from convo_analytics.sandbox._phrasings_intl import PHRASINGS_INTL

#: Confidence of the answers to an intent the knowledge base does not cover.
GAP_CONFIDENCE_BETA = (2.5, 4.0)
#: Share of first messages written in English whatever the conversation's language.
ENGLISH_ANYWAY = 0.15
#: Share of cited sources that are a neighbouring intent's (retrieval is not perfect).
NEIGHBOUR_SOURCE = 0.1
#: Share of a gap's answers that are off-target rather than a fallback.
GAP_OFF_TARGET = 0.15

_HELP = "https://help.example.com/articles/"


@dataclass(frozen=True, slots=True)
class LatentIntent:
    name: str
    #: The coarse intent the service classifies it as (one of _generate.INTENTS).
    intent: str
    weight: int
    #: The knowledge source its answers cite; None when the knowledge base has nothing.
    source: str | None
    #: What the assistant answers when it is confident; empty for a gap.
    answers: tuple[str, ...] = ()

    @property
    def has_source(self) -> bool:
        return self.source is not None


def _i(name: str, intent: str, weight: int, source: str | None, *answers: str) -> LatentIntent:
    return LatentIntent(name, intent, weight, source, tuple(answers))


#: The catalogue. Weights within a coarse intent add up to twice its weight in
#: _generate.INTENTS, so the coarse mix stays what it was.
LATENT_INTENTS: tuple[LatentIntent, ...] = (
    # product_question (22)
    _i("export_csv", "product_question", 12, _HELP + "export-reports",
       "You can export any report from Reports → Export → CSV.",
       "Exports include every row; large ones are emailed to you as a download link.",
       "Scheduled exports to CSV are under Reports → Schedules."),
    _i("crm_integration", "product_question", 8, _HELP + "salesforce-integration",
       "Yes, the Business plan includes the Salesforce and HubSpot integrations.",
       "Connect your CRM under Settings → Integrations; leads sync every five minutes."),
    _i("api_rate_limits", "product_question", 7, "https://developers.example.com/docs/rate-limits",
       "The API allows 600 requests per minute per key; a 429 carries Retry-After.",
       "Bulk imports have their own endpoint with a higher limit; see the API docs."),
    _i("data_residency", "product_question", 6, None),
    _i("accessibility", "product_question", 3, None),
    _i("voice_channel", "product_question", 4, None),
    _i("competitor_migration", "product_question", 4, None),
    # support (20)
    _i("reset_password", "support", 9, _HELP + "reset-password",
       "Use 'Forgot password' on the sign-in page; the link is valid for one hour.",
       "If the reset email doesn't arrive, check your spam folder or ask your admin.",
       "After five failed attempts the account is locked for 15 minutes."),
    _i("two_factor_reset", "support", 6, _HELP + "2fa-reset",
       "I've found an article that should help: resetting two-factor authentication.",
       "A workspace admin can reset your 2FA under Members → Security."),
    _i("sso_setup", "support", 7, None),
    _i("dashboard_not_loading", "support", 7, "https://status.example.com",
       "Our status page shows a partial outage that is being fixed right now.",
       "Please try a private window; a stale cache often keeps the dashboard from loading."),
    _i("upload_error", "support", 5, _HELP + "upload-limits",
       "Uploads can be up to 25 MB each, as PDF, DOCX, TXT or HTML.",
       "A failed upload can be retried from Knowledge → Documents."),
    _i("mobile_app_crash", "support", 6, "kb://uploads/release-notes-2026",
       "Version 3.3.1 fixes the crash on opening a conversation; please update the app.",
       "Reinstalling the app after the update clears the broken cache."),
    # pricing (14)
    _i("plan_prices", "pricing", 10, "https://www.example.com/pricing",
       "Starter is 19 € per seat a month, Pro 49 € and Business 89 €; prices exclude VAT.",
       "The Pro plan is billed per seat; Enterprise is quoted individually."),
    _i("annual_discount", "pricing", 7, "https://www.example.com/pricing#annual",
       "The Pro plan is billed per seat; annual billing saves two months.",
       "You can switch to annual billing any time under Settings → Billing."),
    _i("nonprofit_discount", "pricing", 5, _HELP + "nonprofit-education-discounts",
       "Registered nonprofits and schools get 50% off; apply with proof of status.",
       "Startups under two years old can apply for our startup program."),
    _i("free_trial", "pricing", 6, _HELP + "free-trial",
       "The trial lasts 14 days with every Business feature, no card needed.",
       "Your data is kept for 30 days after a trial ends."),
    # billing (9)
    _i("double_charge", "billing", 6, _HELP + "billing-faq",
       "I'm sorry about the double charge; refunds take 5–10 business days.",
       "A second charge is often a pending authorisation that disappears within days."),
    _i("invoice_copy", "billing", 6, _HELP + "download-invoices",
       "Invoices are available under Settings → Billing → History.",
       "Add your VAT number under Billing details and it appears on future invoices."),
    _i("update_card", "billing", 6, _HELP + "payment-methods",
       "Update your card under Settings → Billing → Payment method.",
       "We accept cards, PayPal and SEPA direct debit."),
    # demo_request (7)
    _i("book_demo", "demo_request", 10, "https://www.example.com/demo",
       "You can book a demo with our team at example.com/demo.",
       "Enterprise includes SSO, audit logs and a dedicated success manager."),
    _i("onboarding_training", "demo_request", 4, "kb://uploads/onboarding-guide",
       "Every new workspace gets two onboarding calls and access to our academy.",
       "We run a live setup webinar every Tuesday."),
    # purchase (5)
    _i("upgrade_plan", "purchase", 4, _HELP + "change-plan",
       "Upgrade under Settings → Plan; the difference is prorated to the day.",
       "Only workspace owners can upgrade; ask yours if the button is greyed out."),
    _i("buy_licenses", "purchase", 4, "https://www.example.com/pricing#volume",
       "Add seats under Settings → Members; from 100 seats volume pricing applies.",
       "Our sales team can prepare a quote for licenses in bulk."),
    _i("pay_by_invoice", "purchase", 2, _HELP + "pay-by-invoice",
       "Annual plans can be paid by bank transfer on 30-day terms.",
       "Add your PO number under Billing details and it appears on the invoice."),
    # cancellation (5)
    _i("cancel_subscription", "cancellation", 6, _HELP + "cancel-subscription",
       "You can cancel under Settings → Plan; it runs until the end of the period.",
       "Downgrading to Free keeps your data and stops the renewal."),
    _i("delete_account", "cancellation", 4, _HELP + "delete-account",
       "Owners can delete a workspace under Settings → Danger zone; data goes after 30 days.",
       "For a GDPR erasure request, we confirm deletion within 30 days."),
    # complaint (7)
    _i("refund_status", "complaint", 6, _HELP + "refunds",
       "Refunds take 5–10 business days to reach your bank after we issue them.",
       "I'm sorry for the wait; I can see the refund has been issued."),
    _i("sync_failures", "complaint", 5, "https://status.example.com/history",
       "We had two incidents this week; the status history has the details.",
       "I'm sorry about the failed syncs; missed records are retried automatically."),
    _i("support_unresponsive", "complaint", 3, _HELP + "contact-support",
       "I'm sorry you've been waiting; our support team answers within one business day.",
       "You can reach support by chat from 8:00 to 20:00 CET on weekdays."),
    # partnership (2)
    _i("reseller_program", "partnership", 4, "https://www.example.com/partners",
       "Our partner program offers a 20% margin for resellers and agencies.",
       "Agencies can manage client workspaces from one partner account."),
    # other (9)
    _i("greeting", "other", 8, "kb://uploads/getting-started",
       "Hi! How can I help you today?",
       "Hello! Ask me anything about our product, plans or your account."),
    _i("bot_or_human", "other", 5, "kb://uploads/assistant-faq",
       "I'm the virtual assistant; I can hand you to a person at any time.",
       "I'm an automated assistant trained on our help center."),
    _i("opening_hours", "other", 5, _HELP + "contact-support",
       "Our team is available from 8:00 to 20:00 CET, Monday to Friday.",
       "I'm here around the clock; our human team works weekdays."),
)  # fmt: skip

BY_NAME: dict[str, LatentIntent] = {latent.name: latent for latent in LATENT_INTENTS}
WEIGHTED: tuple[tuple[LatentIntent, int], ...] = tuple((li, li.weight) for li in LATENT_INTENTS)

#: What the assistant says to a question its knowledge base cannot answer.
GAP_ANSWERS = (
    "I'm sorry, I don't have information about that.",
    "I couldn't find an answer to that; would you like to talk to someone?",
    "I'm not sure about that. Could you rephrase your question?",
    "Sorry, that's not something I can answer yet; a colleague from our team can help.",
    "I don't have details on that, I'm afraid.",
)
#: Retrieval that found something, just not about the question.
OFF_TARGET_ANSWERS = (
    "Here is an overview of our plans and what each includes.",
    "You can find our documentation at help.example.com.",
    "I'm not completely sure, but this article may help.",
)
GREETINGS: dict[str, tuple[str, ...]] = {
    "en": ("hi, ", "hello ", "hey ", "Hi! "),
    "de": ("Hallo, ", "Hi, ", "Guten Tag, "),
    "fr": ("Bonjour, ", "Salut, "),
    "es": ("Hola, ", "Buenas, "),
    "pt": ("Olá, ", "Oi, "),
    "nl": ("Hoi, ", "Hallo, "),
    "ja": ("こんにちは。",),
    "ar": ("مرحبا، ",),
}


def phrasings(latent: LatentIntent, lang: str) -> tuple[str, ...] | None:
    """The intent's phrasings in ``lang`` (two letters), or None when it has none."""
    if lang == "en":
        return PHRASINGS_EN[latent.name]
    return PHRASINGS_INTL.get(latent.name, {}).get(lang)


def first_message(latent: LatentIntent, lang: str, rng: random.Random) -> str:
    """A first message of the intent in the conversation's language, lightly roughed up."""
    pool = phrasings(latent, lang)
    if pool is None or rng.random() < ENGLISH_ANYWAY:
        lang, pool = "en", PHRASINGS_EN[latent.name]
    text = rng.choice(pool)
    if latent.name != "greeting" and rng.random() < 0.08:
        prefix = rng.choice(GREETINGS.get(lang, GREETINGS["en"]))
        if text[:1].isupper() and text[1:2].islower():
            text = text[0].lower() + text[1:]
        text = prefix + text
    if rng.random() < 0.1:
        text = text.lower()
    if rng.random() < 0.15:
        text = text.rstrip("?.!？。") or text
    if rng.random() < 0.05:
        text = _double_a_letter(text, rng)
    return text


def _double_a_letter(text: str, rng: random.Random) -> str:
    """A typing slip: one letter typed twice ("pasword" -> "passsword")."""
    places = [i for i, ch in enumerate(text) if ch.isascii() and ch.isalpha()]
    if not places:
        return text
    i = rng.choice(places)
    return text[: i + 1] + text[i] + text[i + 1 :]


def confidence(latent: LatentIntent, rng: random.Random, beta: Sequence[float]) -> float:
    """The answer's confidence: ``beta`` for a covered intent, low for a gap."""
    a, b = GAP_CONFIDENCE_BETA if latent.source is None else beta
    return rng.betavariate(a, b)


def reply(latent: LatentIntent, confidence: float, rng: random.Random) -> tuple[str, str | None]:
    """The assistant's answer to the intent and the knowledge source it cites (or None).

    A covered intent is answered from its pool and cites its source when
    confident (now and then a neighbouring intent's); a gap is answered with
    a fallback, or something off-target, and never cites a source.
    """
    if latent.source is None:
        gap: tuple[str, ...] = OFF_TARGET_ANSWERS if rng.random() < GAP_OFF_TARGET else GAP_ANSWERS
        return rng.choice(gap), None
    pool: tuple[str, ...] = latent.answers if confidence >= 0.45 else corpus.LOW_CONFIDENCE_ANSWERS
    text = rng.choice(pool)
    if confidence < 0.6:
        return text, None
    if rng.random() < NEIGHBOUR_SOURCE:
        neighbours = _NEIGHBOURS[latent.name]
        if neighbours:
            return text, rng.choice(neighbours)
    return text, latent.source


def _neighbour_sources(latent: LatentIntent) -> tuple[str, ...]:
    """Other sources cited in the same coarse intent."""
    found = {
        other.source
        for other in LATENT_INTENTS
        if other.intent == latent.intent and other.source not in (None, latent.source)
    }
    return tuple(sorted(s for s in found if s is not None))


_NEIGHBOURS = {latent.name: _neighbour_sources(latent) for latent in LATENT_INTENTS}
