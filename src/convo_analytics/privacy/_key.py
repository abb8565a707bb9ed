"""The key of the keyed hashes: the project's, and each workspace's derived from it.

A hash of an email or a phone number without a key is no protection: anyone can hash
every number of a country, or a list of addresses, and look the results up. So the
hash is an HMAC-SHA256 under a key the data does not hold (D-PRIVACY-SCRUB):

* ``privacy.key`` (``CONVO_PRIVACY_KEY``, or the file ``privacy.key_file`` names): a
  secret kept apart from the data (a secret manager, the environment). Whoever has
  the data folder without it cannot test a guess against a hash.
* unset: a key of 32 random bytes is made once, into ``privacy.generated_key_file``
  (mode 0600, under the app-state folder ``data/app-state/``) and read from there on.
  Nothing to configure, and the hashes stay joinable from run to run, but the key
  lies beside the data: a copy of the whole data folder carries it, and with it the
  means to test guesses. Losing the file loses the joins: hashes made after it are
  not those made before (an ``--email`` erasure no longer finds older rows). Back it
  up with the data; to move to a kept-apart key with the same hashes, set
  ``privacy.key`` to the file's content.

Each workspace hashes under its own key, HMAC-SHA256(project key, workspace id): the
same address in two workspaces gives two unrelated hashes, so hashes join within a
workspace and never across the boundary between two.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

from convo_analytics.config import Secret
from convo_analytics.errors import UserError

__all__ = ["MIN_KEY_CHARS", "project_key", "workspace_key"]

#: A configured key shorter than this is refused (the generated one has 64 hex digits).
MIN_KEY_CHARS = 16
_LABEL = b"convo-analytics/privacy/workspace\x00"
_SETTING = "privacy.key"
_FIX = "python -c 'import secrets; print(secrets.token_hex(32))'"


def workspace_key(project: bytes, workspace_id: str) -> bytes:
    """The key a workspace's hashes are made with."""
    return hmac.new(project, _LABEL + workspace_id.encode("utf-8"), hashlib.sha256).digest()


def project_key(configured: Secret | None, generated_file: Path | None) -> bytes:
    """The configured key, else the generated one (made on first use)."""
    if configured is not None:
        if len(configured.reveal()) < MIN_KEY_CHARS:
            raise UserError(
                f"{_SETTING} (CONVO_PRIVACY_KEY) is shorter than {MIN_KEY_CHARS} characters; "
                f"set a long random value, e.g. the output of {_FIX}"
            )
        return configured.reveal().encode("utf-8")
    if generated_file is None:
        raise UserError(
            f"{_SETTING} is not set and privacy.generated_key_file is empty, so the keyed "
            "hashes have no key; set CONVO_PRIVACY_KEY (or privacy.key_file), or give "
            "privacy.generated_key_file a path"
        )
    return _generated(generated_file)


def _generated(path: Path) -> bytes:
    try:
        text = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        text = _make(path)
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not text"
        raise UserError(
            f"the privacy key file {path} (privacy.generated_key_file) cannot be read "
            f"({why}); fix its permissions, or set privacy.key"
        ) from None
    if len(text) < MIN_KEY_CHARS:
        raise UserError(
            f"the privacy key file {path} (privacy.generated_key_file) is empty or cut "
            "short; restore it from a backup (the hashes stored so far were made with it), "
            "or delete it to start a new key (older hashes will no longer match)"
        )
    return text.encode("utf-8")


def _make(path: Path) -> str:
    """A new key written to ``path`` (0600); when another process made one first, its."""
    key = secrets.token_hex(32)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, (key + "\n").encode("ascii"))
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(temp, path)  # the first writer wins; the others read its key
        except FileExistsError:
            pass
        finally:
            temp.unlink(missing_ok=True)
        return path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise UserError(
            f"cannot make the privacy key file {path} (privacy.generated_key_file) "
            f"({exc.strerror}); make its folder writable, or set privacy.key"
        ) from None
