"""The model providers a judge can call, each declared once, by the module of its client.

A provider module in this package decorates its client class with
:func:`register_provider`: its name (what a panel's ``provider:`` says), the environment
variable of its key, the one host that key is meant for, its price table, the family of
models it makes (if it makes only its own) and how its prompt cache is priced. Everything
else reads those facts here: the panel's validation (which names exist), the factory
(which client to build), key resolution (which variable, which host), prices, families,
the dry run and the sampling warnings. Adding a provider is that one module.

The package's modules are imported when the registry is first read, so a provider module
registers without being named anywhere else. ``offline`` and ``recorded`` are not
providers here: they call no model (:data:`juryflow.judges.panel.UNCALLED_PROVIDERS`).
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from juryflow.judges.providers.base import ModelClient
from juryflow.judges.providers.price import Price
from juryflow.maths.names import did_you_mean

__all__ = [
    "ClientFactory",
    "Provider",
    "UnknownProviderError",
    "model_prices",
    "provider_names",
    "register_provider",
    "registered_provider",
    "registered_providers",
]

NOT_PROVIDERS = frozenset({"offline", "recorded"})
"""Names a panel uses for judges that call no model; no provider may take them."""


class ClientFactory(Protocol):
    """How a judge's client is built: a client class's constructor."""

    def __call__(
        self,
        api_key: str,
        *,
        base_url: str | None = ...,
        timeout: float = ...,
        headers: dict[str, str] | None = ...,
    ) -> ModelClient: ...


def no_priced_cache(model: str, base_url: str | None, prefix_tokens: int) -> int | None:
    """A provider whose prompt cache (if any) juryflow cannot price."""
    return None


CachedPrefix = Callable[[str, "str | None", int], "int | None"]
"""Of a static prompt prefix of so many tokens sent to (model, base_url), how many the
provider's cache keeps (0 under its minimum; None when juryflow cannot price a cache)."""


@dataclass(frozen=True)
class Provider:
    """What juryflow knows of one provider (see the module's docstring)."""

    name: str
    client: ClientFactory
    key_env: str
    """The environment variable of the provider's key (a panel may name another)."""
    default_host: str
    """The one host the key in ``key_env`` is sent to without the panel naming it."""
    prices: Mapping[str, Price] = field(default_factory=dict)
    """USD per million tokens by model name; a dated name is priced as its base."""
    family: str | None = None
    """The family of a model name no prefix table knows, if the provider makes only its own."""
    cached_prefix: CachedPrefix = no_priced_cache
    cache_mechanism: str = "automatic prefix caching"
    """How its prompt cache is used, as the dry run says it."""
    takes_temperature: bool = True
    """Whether a panel's ``temperature`` reaches the model (else samples vary on their own)."""


_REGISTRY: dict[str, Provider] = {}

Client = TypeVar("Client", bound=ClientFactory)


class UnknownProviderError(ValueError):
    """A provider name no module registered, with the known names and a close one."""

    def __init__(self, name: str) -> None:
        known = sorted({*provider_names(), *NOT_PROVIDERS})
        hint = did_you_mean(name, known)
        super().__init__(f"unknown provider {name!r}{hint}; use one of: {', '.join(known)}")
        self.name = name


def register_provider(
    name: str,
    *,
    key_env: str,
    default_host: str,
    prices: Mapping[str, Price] | None = None,
    family: str | None = None,
    cached_prefix: CachedPrefix = no_priced_cache,
    cache_mechanism: str = "automatic prefix caching",
    takes_temperature: bool = True,
) -> Callable[[Client], Client]:
    """Register the decorated client class as provider ``name`` (and set its ``provider``)."""
    if name in NOT_PROVIDERS:
        raise ValueError(f"provider name {name!r} is taken by judges that call no model")

    def register(client_class: Client) -> Client:
        earlier = _REGISTRY.get(name)
        # The same class imported again (a reload) replaces itself; another class may not.
        if earlier is not None and _qualified(earlier.client) != _qualified(client_class):
            raise ValueError(
                f"provider {name!r} is registered twice: by {_qualified(earlier.client)} "
                f"and {_qualified(client_class)}; give one of them another name"
            )
        client_class.provider = name  # type: ignore[attr-defined]
        _REGISTRY[name] = Provider(
            name=name,
            client=client_class,
            key_env=key_env,
            default_host=default_host,
            prices=dict(prices or {}),
            family=family,
            cached_prefix=cached_prefix,
            cache_mechanism=cache_mechanism,
            takes_temperature=takes_temperature,
        )
        model_prices.cache_clear()
        return client_class

    return register


def registered_provider(name: str) -> Provider:
    """The provider called ``name``; raises :class:`UnknownProviderError`."""
    _import_provider_modules()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownProviderError(name) from None


def registered_providers() -> tuple[Provider, ...]:
    """Every registered provider, in the order they registered."""
    _import_provider_modules()
    return tuple(_REGISTRY.values())


def provider_names() -> tuple[str, ...]:
    return tuple(provider.name for provider in registered_providers())


@functools.cache
def model_prices() -> Mapping[str, Price]:
    """Every registered provider's prices by model name (read on every priced call, so
    kept until a provider registers)."""
    return {
        model: price
        for provider in registered_providers()
        for model, price in provider.prices.items()
    }


@functools.cache
def _import_provider_modules() -> None:
    # Each provider module registers itself when imported; the others register nothing.
    for module in pkgutil.iter_modules(importlib.import_module(__package__ or "").__path__):
        importlib.import_module(f"{__package__}.{module.name}")


def _qualified(thing: object) -> str:
    return f"{getattr(thing, '__module__', '?')}.{getattr(thing, '__qualname__', thing)}"
