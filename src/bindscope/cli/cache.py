"""``bindscope cache``: list the embedding cache, remove entries, show where it is."""

from __future__ import annotations

import datetime
import json
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from bindscope.cli.app import cache_app
from bindscope.cli.common import print_table
from bindscope.core.errors import BindscopeError

if TYPE_CHECKING:
    from bindscope.embeddings.cache import CacheEntry, EmbeddingCache


def _cache() -> tuple[EmbeddingCache, bool]:
    """The cache the environment names (where ``BINDSCOPE_CACHE=off`` too), and whether it is on."""
    from bindscope.embeddings.cache import EmbeddingCache, cache_enabled, cache_root

    return EmbeddingCache(cache_root()), cache_enabled()


def size_text(n: int) -> str:
    """Bytes as a reader counts them: ``512 B``, ``3.4 MiB``, ``1.2 GiB``."""
    value, unit = float(n), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            break
        value /= 1024
    return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"


def _row(entry: CacheEntry) -> tuple[str, ...]:
    d = entry.describe()
    used = datetime.datetime.fromtimestamp(entry.last_used()).strftime("%Y-%m-%d %H:%M")
    if d["damaged"]:
        damaged = "damaged: `bindscope cache rm` removes it"
        return (entry.key[:12], "-", damaged, "-", "-", "-", size_text(d["bytes"]), str(d["links"]), used)
    dataset = f"{d['dataset_preset'] or '?'} {str(d['dataset_hash'] or '?')[:8]}"
    shape = d["shape"] or ["?"]
    rows = f"{shape[0]:,} {str(d['rows'] or 'scenes').replace('_', ' ')}" if shape[0] != "?" else "?"
    layer = "-" if d["layer"] is None else str(d["layer"])
    model, size = str(d["model_spec"] or "-"), size_text(d["bytes"])
    return (entry.key[:12], dataset, model, str(d["modality"]), rows, layer, size, str(d["links"]), used)


@cache_app.command("ls")
def cache_ls(
    as_json: Annotated[bool, typer.Option("--json", help="Print the entries as JSON instead of a table.")] = False,
) -> None:
    """List the entries of the embedding cache: key, dataset, model, modality, rows, layer, size, the embedding
    folders that link each (removing an entry frees its space only once they are gone too) and when it was last
    used; then the folder and the total size."""
    cache, enabled = _cache()
    entries = cache.entries()
    total = sum(e.bytes for e in entries)
    if as_json:
        listing: dict[str, Any] = {"folder": str(cache.root), "enabled": enabled, "bytes": total}
        typer.echo(json.dumps({**listing, "entries": [e.describe() for e in entries]}, indent=2))
        return
    if entries:
        header = ("key", "dataset", "model", "modality", "rows", "layer", "size", "links", "last used")
        print_table([header, *(_row(e) for e in entries)])
        typer.echo("")
    count = f"{len(entries)} entr{'y' if len(entries) == 1 else 'ies'}"
    typer.echo(f"{count}, {size_text(total)}, in {cache.root}")
    if not enabled:
        typer.echo("the cache is off (BINDSCOPE_CACHE=off): embed and run neither reuse nor store embeddings")


@cache_app.command("rm")
def cache_rm(
    key_prefix: Annotated[
        Optional[list[str]],
        typer.Argument(help="Key prefixes of the entries to remove, as `bindscope cache ls` shows them."),
    ] = None,
    all_: Annotated[bool, typer.Option("--all", help="Remove every entry.")] = False,
    older_than: Annotated[
        Optional[float],
        typer.Option(
            "--older-than", metavar="DAYS", help="Remove the entries no embedding used for more than DAYS days."
        ),
    ] = None,
) -> None:
    """Remove entries of the embedding cache (nothing else in its folder). Embedding folders that link an entry's
    array keep it: they stay whole, and its space comes back once they are gone too."""
    chosen = [bool(key_prefix), all_, older_than is not None]
    if sum(chosen) == 0:
        raise BindscopeError(
            "name the entries to remove: KEY_PREFIX ... (as `bindscope cache ls` shows them), --all or "
            "--older-than DAYS"
        )
    if sum(chosen) > 1:
        raise BindscopeError("give key prefixes, --all or --older-than DAYS, one of them, not several")
    cache, _ = _cache()
    if key_prefix:
        entries = cache.select(key_prefix)
    elif older_than is not None:
        entries = cache.unused_for(older_than)
    else:
        entries = cache.entries()
    held = {e.key: (e.bytes, e.links) for e in entries}
    removed = cache.remove(entries)
    for entry in removed:
        d = entry.describe()
        typer.echo(
            f"removed {entry.key[:12]}  {d['model_spec'] or '?'}  {d['modality'] or '?'}  {d['dataset_preset'] or '?'}"
        )
    freed = sum(held[e.key][0] for e in removed if held[e.key][1] == 0)
    kept = sum(held[e.key][0] for e in removed if held[e.key][1] > 0)
    count = f"{len(removed)} entr{'y' if len(removed) == 1 else 'ies'}"
    still = f"; {size_text(kept)} stays on disk in the embedding folders that link it" if kept else ""
    typer.echo(f"removed {count} from {cache.root}, freeing {size_text(freed)}{still}")


@cache_app.command("path")
def cache_path() -> None:
    """Print the folder of the embedding cache (BINDSCOPE_CACHE_DIR, else $XDG_CACHE_HOME/bindscope/embeddings)."""
    cache, enabled = _cache()
    typer.echo(str(cache.root))
    if not enabled:
        typer.echo("note: the cache is off (BINDSCOPE_CACHE=off)", err=True)
