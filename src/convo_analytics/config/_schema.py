"""How settings are described: :class:`Setting`, :class:`Kind`, the registry and value coercion.

The actual list of settings is data in :mod:`._registry`; this module only knows
how to interpret such data.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path

from convo_analytics.config._secret import Secret
from convo_analytics.errors import UserError

__all__ = [
    "CONFIG_ENV_VAR",
    "ENV_PREFIX",
    "ConfigError",
    "InvalidValue",
    "Kind",
    "Registry",
    "Setting",
    "Source",
    "coerce_python",
    "coerce_text",
    "coerce_toml",
    "generic_env_var",
]

ENV_PREFIX = "CONVO_"
CONFIG_ENV_VAR = "CONVO_CONFIG"

_NAME_RE = re.compile(r"[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*")
_ENV_RE = re.compile(r"CONVO_[A-Z0-9_]+")
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


class ConfigError(UserError):
    """A problem with configuration supplied by the user (file, environment, flag)."""


class Kind(enum.Enum):
    """The type of a setting's value.  ``.value`` is the name used in docs and errors."""

    STR = "string"
    INT = "integer"
    FLOAT = "float"
    BOOL = "boolean"
    PATH = "path"
    SECRET = "secret"
    LIST = "list of strings"


class Source(enum.Enum):
    """Where a value came from, in increasing order of precedence."""

    DEFAULT = "default"
    FILE = "file"
    ENV = "env"
    FLAG = "flag"

    @property
    def rank(self) -> int:
        return _SOURCE_ORDER.index(self)


_SOURCE_ORDER = (Source.DEFAULT, Source.FILE, Source.ENV, Source.FLAG)


def generic_env_var(name: str) -> str:
    """The environment variable every setting gets: ``CONVO_<SECTION>_<KEY>``."""
    return ENV_PREFIX + name.replace(".", "_").upper()


@dataclass(frozen=True)
class Setting:
    """One configurable value, described as data.

    ``Setting("sandbox.port", Kind.INT, 8787, help="...", minimum=1, maximum=65535)``

    * ``name``: ``section.key``; the TOML file spells it ``[section] key = ...``.
    * ``default``: a Python value of the right type (``None`` = unset / none).
    * ``env_aliases``: short environment variable names accepted in addition to
      the generic ``CONVO_<SECTION>_<KEY>``; the first alias is the one documented.
    * ``secret``: the value is masked everywhere and may not appear inline in a
      config file.  ``Kind.SECRET`` implies it; a ``Kind.LIST`` may set it.
    * ``secret_file_for``: this ``Kind.PATH`` setting names a file holding the
      value of the given secret setting.
    * ``minimum`` / ``maximum``: inclusive bounds for numbers.
    * ``pattern`` / ``pattern_help``: full-match regex for strings (each item for
      lists) and the human description of that format used in errors.
    * ``url``: the value is a URL (each item for lists): one holding a secret (a
      password in its user info or a password-like query key) is refused, and it is
      shown with its query values masked (decision D-URL-SECRETS).
    * ``url_secret_to``: the secret setting where a password found in this URL goes;
      ``url_secret_fix``: what else to say about where it goes (the driver's own
      variables, say).
    """

    name: str
    kind: Kind
    default: object = None
    _: KW_ONLY
    help: str
    env_aliases: tuple[str, ...] = ()
    secret: bool = False
    secret_file_for: str | None = None
    minimum: float | None = None
    maximum: float | None = None
    pattern: str | None = None
    pattern_help: str | None = None
    url: bool = False
    url_secret_to: str | None = None
    url_secret_fix: str | None = None
    _compiled: re.Pattern[str] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        compiled = re.compile(self.pattern) if self.pattern is not None else None
        object.__setattr__(self, "_compiled", compiled)

    @property
    def section(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def key(self) -> str:
        return self.name.split(".", 1)[1]

    @property
    def is_secret(self) -> bool:
        return self.secret or self.kind is Kind.SECRET

    @property
    def env_vars(self) -> tuple[str, ...]:
        """All accepted environment variables, the documented one first."""
        names = [*self.env_aliases, generic_env_var(self.name)]
        return tuple(dict.fromkeys(names))

    @property
    def env_var(self) -> str:
        """The documented environment variable."""
        return self.env_vars[0]

    @property
    def type_name(self) -> str:
        if self.kind is Kind.LIST and self.secret:
            return "list of strings (secret)"
        return self.kind.value

    def expectation(self) -> str:
        """Describe an acceptable value, for error messages."""
        if self.kind is Kind.STR and self.pattern_help is not None:
            return self.pattern_help
        text = {
            Kind.STR: "a string",
            Kind.INT: "an integer",
            Kind.FLOAT: "a number",
            Kind.BOOL: "a boolean (true/false)",
            Kind.PATH: "a path (string)",
            Kind.SECRET: "a secret string",
            Kind.LIST: "a list of strings",
        }[self.kind]
        if self.minimum is not None and self.maximum is not None:
            text += f" between {_num(self.minimum)} and {_num(self.maximum)}"
        elif self.minimum is not None:
            text += f" >= {_num(self.minimum)}"
        elif self.maximum is not None:
            text += f" <= {_num(self.maximum)}"
        if self.pattern_help is not None:
            text += f" ({self.pattern_help})"
        return text


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


class InvalidValue(ValueError):
    """Raised by the coercion helpers; the loader turns it into a ConfigError."""


def _check(setting: Setting, value: object) -> object:
    """Apply bounds and pattern checks to an already-typed value."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        if setting.minimum is not None and value < setting.minimum:
            raise InvalidValue(setting.expectation())
        if setting.maximum is not None and value > setting.maximum:
            raise InvalidValue(setting.expectation())
    regex = setting._compiled
    if regex is not None:
        items: Iterable[object] = value if isinstance(value, tuple) else (value,)
        for item in items:
            text = item.reveal() if isinstance(item, Secret) else item
            if isinstance(text, str) and regex.fullmatch(text) is None:
                raise InvalidValue(setting.expectation())
    return value


def _finish_list(setting: Setting, items: Iterable[str]) -> object:
    cleaned = tuple(item.strip() for item in items if item.strip())
    if setting.is_secret:
        return _check(setting, tuple(Secret(item) for item in cleaned))
    return _check(setting, cleaned)


def coerce_text(setting: Setting, text: str) -> object:
    """Parse a value written as text (environment variable, secret file, text flag)."""
    raw = text.strip()
    kind = setting.kind
    try:
        if kind is Kind.STR:
            return _check(setting, raw)
        if kind is Kind.INT:
            return _check(setting, int(raw))
        if kind is Kind.FLOAT:
            number = float(raw)
            if not math.isfinite(number):
                raise InvalidValue(setting.expectation())
            return _check(setting, number)
    except ValueError as exc:
        raise InvalidValue(setting.expectation()) from exc
    if kind is Kind.BOOL:
        lowered = raw.lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise InvalidValue(setting.expectation())
    if kind is Kind.PATH:
        return Path(raw).expanduser() if raw else None
    if kind is Kind.SECRET:
        return _check(setting, Secret(raw)) if raw else None
    return _finish_list(setting, re.split(r"[,\n]", raw))


def coerce_toml(setting: Setting, raw: object, base_dir: Path | None = None) -> object:
    """Validate a value read from TOML; relative paths are resolved against ``base_dir``."""
    kind = setting.kind
    if isinstance(raw, str) and kind in (Kind.STR, Kind.SECRET):
        return coerce_text(setting, raw)
    if isinstance(raw, str) and kind is Kind.PATH:
        path = coerce_text(setting, raw)
        if isinstance(path, Path) and base_dir is not None and not path.is_absolute():
            return base_dir / path
        return path
    if kind is Kind.INT and isinstance(raw, int) and not isinstance(raw, bool):
        return _check(setting, raw)
    if kind is Kind.FLOAT and isinstance(raw, int | float) and not isinstance(raw, bool):
        if not math.isfinite(raw):
            raise InvalidValue(setting.expectation())
        return _check(setting, float(raw))
    if kind is Kind.BOOL and isinstance(raw, bool):
        return raw
    if kind is Kind.LIST and isinstance(raw, list) and all(isinstance(i, str) for i in raw):
        return _finish_list(setting, raw)
    raise InvalidValue(setting.expectation())


def coerce_python(setting: Setting, raw: object) -> object:
    """Validate a Python value (a default, or a CLI flag value); strings are parsed as text."""
    kind = setting.kind
    if isinstance(raw, str):
        return coerce_text(setting, raw)
    if kind is Kind.PATH and isinstance(raw, Path):
        return raw.expanduser()
    if kind is Kind.SECRET and isinstance(raw, Secret):
        return _check(setting, raw)
    if kind is Kind.LIST and isinstance(raw, list | tuple):
        if setting.is_secret and all(isinstance(i, Secret) for i in raw):
            return _finish_list(setting, [i.reveal() for i in raw])
        if all(isinstance(i, str) for i in raw):
            return _finish_list(setting, raw)
        raise InvalidValue(setting.expectation())
    return coerce_toml(setting, raw)


class Registry:
    """The validated, ordered collection of all settings."""

    def __init__(self, settings: Iterable[Setting]) -> None:
        self.settings: tuple[Setting, ...] = tuple(settings)
        self._by_name: dict[str, Setting] = {}
        self._by_env: dict[str, Setting] = {}
        self._file_for: dict[str, Setting] = {}
        for setting in self.settings:
            self._add(setting)
        for setting in self.settings:
            self._validate_links(setting)
        self.sections: tuple[str, ...] = tuple(dict.fromkeys(s.section for s in self.settings))

    def _add(self, setting: Setting) -> None:
        name = setting.name
        if _NAME_RE.fullmatch(name) is None:
            raise ValueError(f"setting name {name!r} must look like 'section.key' (lowercase)")
        if name in self._by_name:
            raise ValueError(f"setting {name!r} is registered twice")
        for env in setting.env_vars:
            if _ENV_RE.fullmatch(env) is None or env == CONFIG_ENV_VAR:
                raise ValueError(f"setting {name!r}: invalid environment variable name {env!r}")
            if env in self._by_env:
                other = self._by_env[env].name
                raise ValueError(f"environment variable {env} is used by {other!r} and {name!r}")
            self._by_env[env] = setting
        if setting.is_secret and setting.kind not in (Kind.SECRET, Kind.LIST):
            raise ValueError(f"setting {name!r}: only SECRET or LIST settings can be secret")
        if setting.url and (setting.is_secret or setting.kind not in (Kind.STR, Kind.LIST)):
            raise ValueError(f"setting {name!r}: only a non-secret STR or LIST can be a URL")
        if (setting.url_secret_to or setting.url_secret_fix) and not setting.url:
            raise ValueError(f"setting {name!r}: url_secret_to/_fix need url=True")
        if setting.is_secret and setting.default not in (None, ()):
            raise ValueError(f"secret setting {name!r} must not have a default")
        if setting.default is not None:
            try:
                coerce_python(setting, setting.default)
            except InvalidValue as exc:
                raise ValueError(f"setting {name!r}: default is not {exc}") from None
        self._by_name[name] = setting

    def _validate_links(self, setting: Setting) -> None:
        if setting.url_secret_to is not None:
            home = self._by_name.get(setting.url_secret_to)
            if home is None or not home.is_secret:
                raise ValueError(f"{setting.name!r}: url_secret_to must name a secret setting")
        target_name = setting.secret_file_for
        if target_name is None:
            return
        target = self._by_name.get(target_name)
        if target is None or not target.is_secret:
            raise ValueError(f"{setting.name!r}: secret_file_for must name a secret setting")
        if setting.kind is not Kind.PATH:
            raise ValueError(f"{setting.name!r}: a secret file setting must be a PATH")
        if target_name in self._file_for:
            raise ValueError(f"secret {target_name!r} has two file settings")
        self._file_for[target_name] = setting

    def __iter__(self) -> Iterator[Setting]:
        return iter(self.settings)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def get(self, name: str) -> Setting:
        """Return the setting called ``name``; ``KeyError`` (a programming error) if unknown."""
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"unknown setting {name!r}") from None

    def in_section(self, section: str) -> tuple[Setting, ...]:
        return tuple(s for s in self.settings if s.section == section)

    def file_setting_for(self, name: str) -> Setting | None:
        """The ``*_file`` setting that can supply secret ``name``, if any."""
        return self._file_for.get(name)

    def by_env(self) -> Mapping[str, Setting]:
        return dict(self._by_env)
