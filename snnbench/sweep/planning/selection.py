"""The ``--adapters`` grammar: ``all``, or ``name[:variant][@VERSION|@ENVIRONMENT]``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from snnbench.errors import UserError
from snnbench.host.libenv import (
    EnvironmentRequest,
    EnvironmentSpecError,
    looks_like_version,
    version_request,
)
from snnbench.registry import AdapterEntry
from snnbench.store.overhead import PROBES


class SelectionError(UserError, ValueError):
    """An adapter selection names something that does not exist."""


@dataclass(frozen=True)
class Selection:
    """One ``--adapters`` item: an adapter, one variant or all (None), and its environment."""

    adapter: str
    variant: str | None = None
    #: None for the base environment
    environment: EnvironmentRequest | None = None


def _split_item(item: str) -> tuple[str, str, str]:
    """``name[:variant][@env]`` (or ``name@env:variant``) → (name, variant, env)."""
    left, _, env = item.partition("@")
    name, _, variant = left.partition(":")
    if ":" in env:
        if variant:
            raise SelectionError(f"{item!r}: give the variant once (adapter:variant@version)")
        env, _, variant = env.partition(":")
    if "@" in item and not env:
        raise SelectionError(f"{item!r}: nothing after '@' (adapter@VERSION or "
                             "adapter@ENVIRONMENT)")
    return name.strip(), variant.strip(), env.strip()


def _environment_of(item: str, name: str, env: str, entries: dict[str, AdapterEntry],
                    environments: Mapping[str, tuple[str, ...]]) -> EnvironmentRequest | None:
    if not env:
        return None
    if env in environments:
        return EnvironmentRequest(name=env, requirements=tuple(environments[env]))
    if not looks_like_version(env):
        known = ", ".join(environments) or "none in this config"
        raise SelectionError(f"{item!r}: {env!r} is neither a version nor a configured "
                             f"environment ([environments] tables: {known})")
    cls = entries[name].adapter_class
    if cls is None:
        raise SelectionError(f"{item!r}: adapter {name!r} failed to load, so its library is "
                             f"unknown: {entries[name].error}")
    try:
        return version_request(name, cls.library, env)
    except EnvironmentSpecError as exc:
        raise SelectionError(str(exc)) from exc


def select_adapters(
    names: tuple[str, ...], entries: dict[str, AdapterEntry],
    environments: Mapping[str, tuple[str, ...]] | None = None,
    probes: bool = True,
) -> list[Selection]:
    """Parse ``--adapters`` items into selections.

    An item is ``all``, or ``name[:variant][@VERSION|@ENVIRONMENT]``: ``snntorch@0.9.4`` runs
    the adapter in an environment pinning its library to 0.9.4; ``spikingjelly:torch@legacy``
    in the ``[environments.legacy]`` table of the config. A variant of None means every variant.
    ``probes=False``: ``all`` leaves out the harness probes (``null``), which a sweep adds
    once by itself (``[run] overhead_probe``) rather than at every case.
    """
    environments = environments or {}
    chosen: list[Selection] = []
    for item in names:
        item = item.strip()
        if not item:
            continue
        if item in ("all", "*"):
            chosen.extend(Selection(name) for name in entries if probes or name not in PROBES)
            continue
        name, variant, env = _split_item(item)
        if name not in entries:
            known = ", ".join(entries) or "none installed"
            raise SelectionError(f"unknown adapter {name!r} (known: {known})")
        entry = entries[name]
        if variant and entry.adapter_class is not None and (
            variant not in entry.adapter_class.variants
        ):
            raise SelectionError(
                f"adapter {name!r} has no variant {variant!r} "
                f"(variants: {', '.join(entry.adapter_class.variants)})"
            )
        chosen.append(Selection(name, variant or None,
                                _environment_of(item, name, env, entries, environments)))
    return list(dict.fromkeys(chosen))
