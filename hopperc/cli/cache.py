"""`hopperc cache info|clear`: the build cache's place, size and limit."""
from __future__ import annotations

import click

from hopperc.buildsys.cache import BuildCache, CacheError
from hopperc.cli.common import Group


@click.group(cls=Group)
def cache() -> None:
    """The build cache (HOPPERC_CACHE_DIR; size bound HOPPERC_CACHE_MAX_SIZE; a shared
    remote tier HOPPERC_REMOTE_CACHE)."""


def open_cache() -> BuildCache:
    """The build cache the environment sets up; a setting that cannot be used is a
    command-line error naming its variable once."""
    try:
        return BuildCache.from_environment()
    except CacheError as exc:
        raise click.BadParameter(exc.detail, param_hint=exc.setting) from None


@cache.command()
def info() -> None:
    """Where the cache is, how many builds it holds and how much space they take."""
    store = open_cache()
    entries, size = store.size()
    click.echo(f"directory: {store.root}")
    click.echo(f"entries:   {entries}")
    click.echo(f"size:      {_human(size)} of at most {_human(store.max_size)}")
    if store.remote is not None:
        remote = store.remote
        state = "answers" if remote.reachable() else f"does not answer: {remote.failure}"
        click.echo(f"remote:    {remote.base}{' (read-only)' if remote.read_only else ''}; "
                   f"{state}")


@cache.command()
def clear() -> None:
    """Remove every cached build (of this machine: the remote tier is the server's)."""
    store = open_cache()
    try:
        removed = store.clear()
    except OSError as exc:
        raise click.ClickException(f"cannot clear {store.root}: {exc.strerror or exc}") \
            from None
    click.echo(f"removed {removed} cached builds from {store.root}")


def _human(size: int) -> str:
    for unit in ("B", "KiB", "MiB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"
