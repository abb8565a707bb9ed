"""How a setting is declared: one field of a section model, with its type, default, description
and environment alias; and the read-only description of every setting derived from the model
(for docs, messages, ``convo config show`` and the CLI's help).

A section is a pydantic model (:class:`Section`); a setting is a field declared with
:func:`setting` and one of the types below (``Int``, ``PathOrNone``, ``SecretText``, ...), which
parse the text of environment variables and flags, refuse what TOML gives of the wrong type,
and tell the messages what a value must look like. Nothing else declares a setting.
"""

from __future__ import annotations

import enum
import functools
import re
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Self

import annotated_types
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, SecretStr, ValidationInfo
from pydantic import field_validator as _field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

from convo_analytics.config._secret import Secret
from convo_analytics.errors import UserError

__all__ = [
    "CONFIG_ENV_VAR",
    "ENV_PREFIX",
    "Bool",
    "ConfigError",
    "Float",
    "Int",
    "Kind",
    "List",
    "PathOrNone",
    "Registry",
    "Secret",
    "SecretList",
    "SecretText",
    "Section",
    "Setting",
    "Source",
    "SourcedSettings",
    "Str",
    "describe",
    "generic_env_var",
    "setting",
]

ENV_PREFIX = "CONVO_"
CONFIG_ENV_VAR = "CONVO_CONFIG"
_ENV_RE = re.compile(r"CONVO_[A-Z0-9_]+")


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
        return list(Source).index(self)


class _SecretItems:
    """Marks a list whose items are secrets."""


def _text(value: Any) -> Any:
    value = value.reveal() if isinstance(value, Secret) else value
    return value.strip() if isinstance(value, str) else value


def _number(value: Any) -> Any:
    if isinstance(value, bool):  # TOML's true is no number
        raise ValueError("a boolean")
    return _text(value)


def _path(value: Any) -> Any:
    value = _text(value)
    if isinstance(value, str):
        return Path(value).expanduser() if value else None
    return value.expanduser() if isinstance(value, Path) else value


def _secret(value: Any) -> Any:
    return _text(value) or None


def _list(value: Any) -> Any:
    value = _text(value)
    items = re.split(r"[,\n]", value) if isinstance(value, str) else value
    if not isinstance(items, list | tuple):
        return value
    return tuple(t for t in (_text(i) for i in items) if t != "")


Str = Annotated[str, Kind.STR, BeforeValidator(_text)]
Int = Annotated[int, Kind.INT, BeforeValidator(_number)]
Float = Annotated[float, Kind.FLOAT, BeforeValidator(_number)]
Bool = Annotated[bool, Kind.BOOL, BeforeValidator(_text)]
PathOrNone = Annotated[Path | None, Kind.PATH, BeforeValidator(_path)]
SecretText = Annotated[SecretStr | None, Kind.SECRET, BeforeValidator(_secret)]
List = Annotated[tuple[str, ...], Kind.LIST, BeforeValidator(_list)]
SecretList = Annotated[tuple[SecretStr, ...], Kind.LIST, _SecretItems(), BeforeValidator(_list)]


def setting(
    default: Any = None,
    help: str = "",
    *,
    env: str | None = None,
    ge: float | None = None,
    le: float | None = None,
    pattern: str | None = None,
    pattern_help: str | None = None,
    url: bool = False,
    url_secret_to: str | None = None,
    url_secret_fix: str | None = None,
) -> Any:
    """A setting's field: ``port: Int = setting(8787, "TCP port ...", ge=0, le=65535)``.

    ``env``: a short environment variable besides ``CONVO_<SECTION>_<KEY>`` (documented
    first). ``pattern``/``pattern_help``: the full match each text (each item) must be, and
    how messages say it. ``url``: the value is a URL (each item), refused when it holds a
    secret, shown with its query values masked (D-URL-SECRETS); a password found in it
    belongs in ``url_secret_to``; ``url_secret_fix`` says what else to do. A secret's file
    is the PATH setting beside it named ``<secret>_file``.
    """
    extra = {
        "pattern": pattern,
        "pattern_help": pattern_help,
        "url": url,
        "url_secret_to": url_secret_to,
        "url_secret_fix": url_secret_fix,
    }
    return Field(
        default,
        description=help,
        validation_alias=env,
        ge=ge,
        le=le,
        json_schema_extra={k: v for k, v in extra.items() if v} or None,
    )


class Section(BaseModel):
    """One ``[section]`` of convo.toml; its fields are the section's settings."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        validate_default=True,
        validate_by_name=True,
        allow_inf_nan=False,
    )

    @_field_validator("*")
    @classmethod
    def _pattern(cls, value: Any, info: ValidationInfo) -> Any:
        extra = cls.model_fields[info.field_name or ""].json_schema_extra
        pattern = extra.get("pattern") if isinstance(extra, dict) else None
        for item in value if isinstance(value, tuple) else (value,):
            text = item.get_secret_value() if isinstance(item, SecretStr) else item
            if (
                isinstance(pattern, str)
                and isinstance(text, str)
                and not re.fullmatch(pattern, text)
            ):
                raise ValueError("does not match its pattern")
        return value


def generic_env_var(name: str) -> str:
    """The environment variable every setting gets: ``CONVO_<SECTION>_<KEY>``."""
    return ENV_PREFIX + name.replace(".", "_").upper()


@dataclass(frozen=True)
class Setting:
    """What the model declares of one setting, read-only: ``section.key``, its kind, default,
    help, environment variables and format (see :func:`setting`)."""

    name: str
    kind: Kind
    default: object
    help: str
    env_aliases: tuple[str, ...] = ()
    secret: bool = False
    minimum: float | None = None
    maximum: float | None = None
    pattern_help: str | None = None
    url: bool = False
    url_secret_to: str | None = None
    url_secret_fix: str | None = None

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
        return tuple(dict.fromkeys([*self.env_aliases, generic_env_var(self.name)]))

    @property
    def env_var(self) -> str:
        return self.env_vars[0]

    @property
    def type_name(self) -> str:
        return (
            "list of strings (secret)"
            if self.kind is Kind.LIST and self.secret
            else self.kind.value
        )

    def expectation(self) -> str:
        """Describe an acceptable value, for error messages."""
        if self.kind is Kind.STR and self.pattern_help is not None:
            return self.pattern_help
        text = _EXPECTED[self.kind]
        low, high = (None if b is None else _num(b) for b in (self.minimum, self.maximum))
        if low is not None and high is not None:
            text += f" between {low} and {high}"
        elif low is not None or high is not None:
            text += f" >= {low}" if low is not None else f" <= {high}"
        return text + (f" ({self.pattern_help})" if self.pattern_help else "")


_EXPECTED = {
    Kind.STR: "a string",
    Kind.INT: "an integer",
    Kind.FLOAT: "a number",
    Kind.BOOL: "a boolean (true/false)",
    Kind.PATH: "a path (string)",
    Kind.SECRET: "a secret string",
    Kind.LIST: "a list of strings",
}


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _describe(section: str, key: str, field: Any) -> Setting:
    meta = field.metadata
    kind = next(m for m in meta if isinstance(m, Kind))
    extra = field.json_schema_extra or {}
    alias = field.validation_alias
    return Setting(
        f"{section}.{key}",
        kind,
        field.default,
        field.description or "",
        env_aliases=(alias,) if isinstance(alias, str) else (),
        secret=any(isinstance(m, _SecretItems) for m in meta),
        minimum=_bound(meta, annotated_types.Ge, "ge"),
        maximum=_bound(meta, annotated_types.Le, "le"),
        pattern_help=extra.get("pattern_help"),
        url=bool(extra.get("url")),
        url_secret_to=extra.get("url_secret_to"),
        url_secret_fix=extra.get("url_secret_fix"),
    )


def _bound(meta: list[Any], kind: type, attr: str) -> float | None:
    found = next((getattr(m, attr) for m in meta if isinstance(m, kind)), None)
    return None if found is None else float(found)


class Registry:
    """Every setting of a settings model, in declaration order (a view of the model)."""

    def __init__(self, model: type[BaseModel]) -> None:
        self.model = model
        self.sections: dict[str, type[Section]] = {}
        for name, field in model.model_fields.items():
            if isinstance(field.json_schema_extra, dict) and field.json_schema_extra.get("tables"):
                continue  # tables such as [[workspaces]], validated by their own models
            if not (isinstance(field.annotation, type) and issubclass(field.annotation, Section)):
                raise ValueError(f"{name}: a setting is a field of a section (a Section model)")
            self.sections[name] = field.annotation
        fields = [
            (section, key, f)
            for section, cls in self.sections.items()
            for key, f in cls.model_fields.items()
        ]
        self.settings = tuple(_describe(*field) for field in fields)
        self._by_name = {s.name: s for s in self.settings}
        self._check()

    def _check(self) -> None:
        """A model's declarations are checked once, as the registry is made of it."""
        seen: dict[str, str] = {}
        for s in self.settings:
            if not re.fullmatch(r"[a-z][a-z0-9]*", s.section):
                raise ValueError(f"section {s.section!r}: lowercase letters and digits only")
            for env in s.env_vars:
                if _ENV_RE.fullmatch(env) is None or env == CONFIG_ENV_VAR or env in seen:
                    raise ValueError(f"{s.name}: environment variable {env} is taken or invalid")
                seen[env] = s.name
            if s.is_secret and s.default not in (None, ()):
                raise ValueError(f"secret setting {s.name!r} must not have a default")
            if s.url and (s.is_secret or s.kind not in (Kind.STR, Kind.LIST)):
                raise ValueError(f"setting {s.name!r}: only a non-secret STR or LIST can be a URL")
            if s.url_secret_to and not self.get(s.url_secret_to).is_secret:
                raise ValueError(f"{s.name!r}: url_secret_to must name a secret setting")
            file = self._by_name.get(f"{s.name}_file")
            if s.is_secret and file is not None and file.kind is not Kind.PATH:
                raise ValueError(f"{file.name!r}: a secret's file setting must be a path")
        for cls in self.sections.values():
            cls()  # the defaults must be valid values

    def __iter__(self) -> Iterator[Setting]:
        return iter(self.settings)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def get(self, name: str) -> Setting:
        """The setting called ``name``; ``KeyError`` (a programming error) if unknown."""
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"unknown setting {name!r}") from None

    def in_section(self, section: str) -> tuple[Setting, ...]:
        return tuple(s for s in self.settings if s.section == section)

    def file_setting_for(self, name: str) -> Setting | None:
        """The ``*_file`` setting that can supply secret ``name``, if any."""
        file = self._by_name.get(f"{name}_file")
        return file if file is not None and self.get(name).is_secret else None

    def how_to_set_secret(self, name: str) -> str:
        """The fix for a missing or misplaced secret: which variable or file setting to use."""
        fix = f"set the environment variable {self.get(name).env_var}"
        if (file := self.file_setting_for(name)) is not None:
            fix += f", or point {file.name} ({file.env_var}) at a file containing it"
        return fix


@functools.cache
def describe(model: type[BaseModel]) -> Registry:
    """The settings ``model`` declares (checked; ``ValueError`` for a bad declaration)."""
    return Registry(model)


#: The model being built by :meth:`SourcedSettings.build` and the sources it reads.
_BUILDING: ContextVar[tuple[type, tuple[PydanticBaseSettingsSource, ...]]] = ContextVar(
    "_BUILDING", default=(type(None), ())
)


class SourcedSettings(BaseSettings):
    """A pydantic-settings model whose sources a loader hands it for one build (:meth:`build`):
    nothing is read from ``os.environ`` or a file behind the loader's back, and a model
    made bare (``Model()``) holds its defaults."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        owner, sources = _BUILDING.get()
        return (init_settings, *sources) if settings_cls is owner else (init_settings,)

    @classmethod
    def build(cls, sources: Iterable[PydanticBaseSettingsSource], **init: Any) -> Self:
        """The model from ``sources``, highest precedence first (``init``: above them all)."""
        token = _BUILDING.set((cls, tuple(sources)))
        try:
            return cls(**init)
        finally:
            _BUILDING.reset(token)
