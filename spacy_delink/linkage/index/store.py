"""A small JSON file of values by key id, kept beside indexes: the key file and the id mapping.

Both hold one entry per index, named by the index's key id, so several indexes may share
one file and a build never touches another index's entry. During a rebuild the file
holds the entries of both the replaced and the new index (``commit.py``), so whichever
index is in place finds its own. Updates rewrite the file atomically, owner-only, under a
lock beside it that serializes concurrent builds sharing the file.

Both are secrets, so reading one first checks it as ssh checks a private key: it must
belong to the current user (or root) and be closed to group and others. Anything else
is a warning by default and an error with ``strict`` (``--strict-key-permissions``, or
``$DELINK_STRICT_KEY_PERMISSIONS=1``).
"""
from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any, Callable, Iterable

from ...errors import IndexFormatError, InputError
from ...io.files import atomic_write, file_lock, remove_stale_temporaries

STRICT_PERMISSIONS_ENV = "DELINK_STRICT_KEY_PERMISSIONS"
#: Parses a file's text into entries, raising IndexFormatError for anything else.
Parser = Callable[[Path, str], dict[str, Any]]


class KeyPermissionWarning(UserWarning):
    """A key file or id mapping that another user owns, or that group or others may access."""


def strict_permissions(strict: bool | None) -> bool:
    """The explicit choice, else ``$DELINK_STRICT_KEY_PERMISSIONS`` (1/true/yes)."""
    if strict is not None:
        return strict
    return os.environ.get(STRICT_PERMISSIONS_ENV, "").strip().lower() in ("1", "true", "yes")


class KeyedStore:
    """Entries by key id in one JSON object ``{"format": <kind>, <field>: {<key id>: value}}``."""

    def __init__(self, path: Path, kind: str, field: str, what: str, exposes: str, parse: Parser | None = None) -> None:
        self.path = path
        self.kind = kind
        self.field = field
        self.what = what  # "key file", "id mapping": for messages
        self.exposes = exposes  # what a reader of the file learns, for the permission messages
        self._parse = parse or self._parse_json

    def check_access(self, strict: bool | None = None) -> None:
        """Warn (or, strict, refuse) when the file is another user's or group or others may access it (module docstring)."""
        if not self.path.is_file():
            return
        status = os.stat(self.path)
        mode, owner, me = status.st_mode & 0o777, status.st_uid, os.geteuid()
        problems = []
        if owner not in (me, 0):
            problems.append(
                f"is owned by uid {owner}, not by you (uid {me}) or root, so that user can read or replace it: "
                f"take it over (`chown {me} {self.path}`) or use a copy of your own"
            )
        if mode & 0o077:
            problems.append(f"is accessible to group or others (mode {mode:04o}), so {self.exposes}: run `chmod 600 {self.path}`")
        if not problems:
            return
        message = f"{self.what} {self.path} {'; and it '.join(problems)}"
        if strict_permissions(strict):
            raise InputError(f"{message} (refused: strict key permissions are on)")
        warnings.warn(message, KeyPermissionWarning, stacklevel=3)

    def _parse_json(self, path: Path, text: str) -> dict[str, Any]:
        try:
            data = json.loads(text)
        except ValueError as err:
            raise IndexFormatError(f"{self.what} {path} is not valid JSON ({err}); it is damaged or not a {self.what}") from None
        if not isinstance(data, dict) or data.get("format") != self.kind or not isinstance(data.get(self.field), dict):
            raise IndexFormatError(f"{path} is not a spacy-delink {self.what} (format {self.kind!r} expected)")
        return dict(data[self.field])

    def read(self) -> dict[str, Any]:
        """Every entry; a missing file has none."""
        if not self.path.exists():
            return {}
        if not self.path.is_file():
            raise IndexFormatError(f"{self.what} {self.path} is not a regular file")
        try:
            text = self.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise IndexFormatError(f"{self.what} {self.path} cannot be read ({err})") from None
        return self._parse(self.path, text)

    def serialize(self, entries: dict[str, Any]) -> str:
        return json.dumps({"format": self.kind, self.field: entries}, ensure_ascii=False, indent=1) + "\n"

    def update(self, add: dict[str, Any] | None = None, remove: Iterable[str] = ()) -> None:
        """Add and retire entries in one atomic rewrite; every other entry is kept (an empty store is removed)."""
        with file_lock(self.path.with_name(f".{self.path.name}.lock"), wait=True, busy_message=""):
            remove_stale_temporaries(self.path)  # a killed rewrite's copy
            entries = self.read()
            for retired in remove:
                entries.pop(retired, None)
            entries.update(add or {})
            if not entries:
                self.path.unlink(missing_ok=True)
                return
            with atomic_write(self.path, private=True) as handle:
                handle.write(self.serialize(entries))
