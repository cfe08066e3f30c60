"""Putting a finished build in place: index directory, key and id mapping change as one step.

A build writes ``.<index>.partial`` beside the output while it holds ``.<index>.lock``
(``flock``; a second build into the same output is refused). The key file and the id
mapping hold one entry per index key id (``store.py``), so the change is:

1. ``.<index>.journal`` records the plan: the key file, the id mapping, the new and the
   replaced key id, the backup name.
2. The new key and ids are added to their files; the replaced index's entries stay.
3. The index at the output path (if any) moves to the backup name, the new one into
   place. This rename is the commit point.
4. The replaced index's entries are retired, the backup removed, then the journal.

``delink compact`` (``update.py``) commits the same way with the index's own key, which
then is never retired nor rolled back.

At every instant the key file and the id mapping hold the entries of whichever index is
at the output path (both builds' between 2 and 4), so no kill leaves an index paired with
a key or mapping that does not fit it; between the two renames of 3 there is no index at
the output path (readers say so). A kill leaves the journal: the next build into that
output reads it under the lock and completes the change when the index in place is the
new one, or rolls it back otherwise (the previous index and its entries stay, the new
entries go). With no journal, a leftover ``.<index>.partial`` is a killed build's and is removed.
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterator

from ...errors import DelinkError, InputError
from ...io.files import atomic_write, check_output_path, file_lock, fsync_dir, refuse_same_file, remove_stale_temporaries
from .format import FORMAT_NAME, MANIFEST, manifest_key_id
from .ids import IdMapping
from .keys import KeyFile, key_id


def sidecar(output: Path, role: str) -> Path:
    """``.<index>.<role>`` beside the output: its lock, journal, partial build."""
    return output.with_name(f".{output.name}.{role}")


@dataclass
class Journal:
    """The plan of one commit, enough to complete or undo it after a kill."""

    key_file: str
    ids_file: str | None
    new_key_id: str
    old_key_id: str | None
    backup: str

    @classmethod
    def load(cls, path: Path) -> "Journal":
        try:
            return cls(**json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError) as err:
            raise DelinkError(
                f"{path} (the journal of an interrupted `delink index`) cannot be read ({err}); "
                "check the paths it names by hand, then remove it"
            ) from None

    def stores(self) -> list[KeyFile | IdMapping]:
        return [KeyFile(Path(self.key_file))] + ([IdMapping(Path(self.ids_file))] if self.ids_file else [])


@contextmanager
def build_lock(output: Path) -> Iterator[None]:
    """The exclusive right to build into ``output`` (a second build gets a clear error)."""
    lock = sidecar(output, "lock")
    busy = f"another `delink index` is writing {output} (it holds {lock}); wait for it to finish or choose another --output"
    with file_lock(lock, wait=False, busy_message=busy):
        yield


def _remove(path: Path) -> None:
    """Remove a directory tree, or only the link when ``path`` is a symlink (never its target)."""
    if path.is_symlink():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


def _tree_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _finish(journal: Journal) -> None:
    if journal.old_key_id and journal.old_key_id != journal.new_key_id:
        for store in journal.stores():
            store.update(remove=[journal.old_key_id])
    _remove(Path(journal.backup))


def _roll_back(output: Path, journal: Journal) -> None:
    backup = Path(journal.backup)
    if backup.exists() or backup.is_symlink():  # the index was moved aside, the new one not yet in place
        os.replace(backup, output)
        fsync_dir(output.parent)
    if journal.new_key_id != journal.old_key_id:  # a compaction keeps its key: the old index needs it
        for store in journal.stores():
            store.update(remove=[journal.new_key_id])


def recover(output: Path) -> list[str]:
    """Complete or roll back an interrupted commit, remove a killed build; notes for the user.

    Call with the build lock held.
    """
    notes = []
    journal_path = sidecar(output, "journal")
    remove_stale_temporaries(journal_path)
    if journal_path.exists():
        journal = Journal.load(journal_path)
        if manifest_key_id(output) == journal.new_key_id:
            _finish(journal)
            notes.append(f"completed the interrupted replacement of {output}: the new index is in place")
        else:
            _roll_back(output, journal)
            notes.append(f"rolled back an interrupted replacement of {output}: the previous index is back in place")
        journal_path.unlink()
        fsync_dir(journal_path.parent)
    partial = sidecar(output, "partial")
    if partial.exists():
        size = _tree_bytes(partial)
        _remove(partial)
        notes.append(f"removed {partial} ({size:,} bytes), left by an interrupted build")
    return notes


def check_outputs(
    output: Path, key_path: Path, ids_path: Path | None, overwrite: bool, strict_key_permissions: bool | None = None
) -> None:
    """Refuse, before any work, what the commit could not write or must not replace.

    Never replaced: something at the output path that is not a spacy-delink index. The key
    file and the id mapping are only added to; a damaged or foreign one is refused.
    """
    refuse_same_file([output], key_path, "--key-file")
    if ids_path is not None:
        refuse_same_file([output, key_path], ids_path, "--ids-file")
    check_output_path(output, "--output", directory=True)
    check_output_path(key_path, "--key-file")
    if ids_path is not None:
        check_output_path(ids_path, "--ids-file")
    if output.exists() or output.is_symlink():
        if not overwrite:
            raise InputError(f"{output} already exists; choose another output path or pass --overwrite")
        try:
            is_index = json.loads((output / MANIFEST).read_text(encoding="utf-8")).get("format") == FORMAT_NAME
        except (OSError, ValueError, AttributeError):
            is_index = False
        if not is_index:
            raise InputError(
                f"{output} exists and is not a spacy-delink index; refusing to replace it (move it away or choose another --output)"
            )
    if key_path.exists():
        KeyFile(key_path).secrets(strict_key_permissions)
    if ids_path is not None:
        mapping = IdMapping(ids_path)
        mapping.check_access(strict_key_permissions)
        mapping.read()


def commit(output: Path, partial: Path, key_path: Path, secret: bytes, ids_path: Path | None, ids: list[Any]) -> None:
    """Put the finished ``partial`` build at ``output`` with its key and ids (module docstring)."""
    existed = output.exists()
    journal = Journal(
        key_file=str(key_path.absolute()),
        ids_file=str(ids_path.absolute()) if ids_path is not None else None,
        new_key_id=key_id(secret),
        old_key_id=manifest_key_id(output) if existed else None,
        backup=str(sidecar(output, f"old-{secrets.token_hex(4)}")),
    )
    journal_path = sidecar(output, "journal")
    with atomic_write(journal_path) as handle:
        json.dump(asdict(journal), handle, indent=1)
    KeyFile(key_path).add(secret)
    if ids_path is not None:
        IdMapping(ids_path).update(add={journal.new_key_id: ids})
    if existed:
        os.replace(output, journal.backup)
    os.replace(partial, output)
    fsync_dir(output.parent)
    _finish(journal)
    journal_path.unlink()
    fsync_dir(journal_path.parent)


def interrupted_hint(output: Path) -> str:
    """For a reader that finds no index: say so when a build was interrupted mid-replacement."""
    if sidecar(output, "journal").exists():
        return f"; a `delink index` into {output} was interrupted while replacing it: rerun it (it first restores or completes the replacement)"
    return ""
