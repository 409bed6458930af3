"""The Source definition, its factory (which mounts the Provider), and the plugin itself."""

from __future__ import annotations

import inspect
import secrets
from collections.abc import Iterable

from mnemon.sdk import (
    DefinitionError,
    PluginContext,
    SourceDefinition,
    SourceError,
    SourceInit,
    define_memory_plugin,
    define_memory_source,
    install_memory,
    source_data_directory,
)

from ._calls import ProviderCalls
from ._config import configuration_error, read_settings
from ._grants import Handles
from ._manifest import MANIFEST, PACKAGE
from ._provider import ProviderInit, SpaceProvider, SpaceProviderDefinition, check_adapter
from ._semantic import Semantic, choose_space
from ._source import SpacesSource
from ._sqlite import SQLITE_PROVIDER

__all__ = ["SPACES_SOURCE", "apply", "define_spaces_source", "memory_plugin"]

memory_plugin = define_memory_plugin(
    PACKAGE,
    label="Long-term memory spaces",
    description=(
        "Durable long-term memory in named spaces, served by Providers (embedded SQLite by "
        "default): recall, related, remember, link, forget."
    ),
    roles=["source"],
    provides=["memory.spaces"],
)


def define_spaces_source(
    providers: Iterable[SpaceProviderDefinition] = (SQLITE_PROVIDER,),
) -> SourceDefinition:
    """Define the `spaces` Source with the Provider types it may mount.

    A distribution shipping its own Provider installs
    `define_spaces_source([SQLITE_PROVIDER, MY_PROVIDER])` from its own plugin; the
    configuration's `provider.type` then picks one.

    Raises:
        DefinitionError: a Provider is not a definition, or two share a type id.
    """
    known: dict[str, SpaceProviderDefinition] = {}
    for provider in providers:
        if not isinstance(provider, SpaceProviderDefinition):
            raise DefinitionError("providers: each must come from define_space_provider")
        if provider.type_id in known:
            raise DefinitionError(f"providers: two Providers of type {provider.type_id!r}")
        known[provider.type_id] = provider
    if not known:
        raise DefinitionError("providers: at least one Provider is needed")

    async def create(init: SourceInit) -> SpacesSource:
        settings = read_settings(init)
        provider = known.get(settings.provider_type)
        if provider is None:
            raise configuration_error(
                "provider.type", f"unknown Provider type; known: {', '.join(sorted(known))}"
            )
        data_dir = None if settings.data_dir is None else str(settings.data_dir)
        directory = source_data_directory(init, data_dir)
        token = settings.provider_token
        provider_init = ProviderInit(
            instance_key=init.instance_key,
            data_directory=str(directory),
            configuration=settings.provider_configuration,
            token=None if token is None else token.get_secret_value(),
        )
        adapter = await _open(provider, provider_init)
        calls = ProviderCalls(provider, adapter, settings.provider_timeout)
        try:
            space = choose_space(init.embedding, settings.vectors)
        except SourceError:
            await calls.dispose()
            raise configuration_error("vectors", "names no installed vector space") from None
        semantic = Semantic(init.embedding, space, calls)
        return SpacesSource(
            init.instance_key, settings, calls, Handles(secrets.token_bytes(32)), semantic
        )

    return define_memory_source(MANIFEST, create)


async def _open(provider: SpaceProviderDefinition, init: ProviderInit) -> SpaceProvider:
    try:
        made = provider.create(init)
        adapter: SpaceProvider = await made if inspect.isawaitable(made) else made
    except DefinitionError as exc:
        # the factory names the key ("path: ..."); never a value
        key, _, rule = str(exc).partition(": ")
        raise configuration_error(f"provider.{key}", rule) from None
    except Exception:
        raise configuration_error(
            "provider", f"the {provider.type_id} Provider could not be created"
        ) from None
    try:
        check_adapter(provider.manifest, adapter)
    except DefinitionError:
        dispose = getattr(adapter, "dispose", None)
        if callable(dispose):
            result = dispose()
            if inspect.isawaitable(result):
                await result
        raise
    return adapter


SPACES_SOURCE = define_spaces_source()


def apply(ctx: PluginContext) -> None:
    """Install one `spaces` Source (with the SQLite Provider) for this entry."""
    install_memory(ctx, sources=[SPACES_SOURCE])
