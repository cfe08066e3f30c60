"""Integrity and secrecy of an index on disk: its manifest, key file, id mapping, builds and kills.

Issue 11, points 4-8: an edited manifest is refused; another index's key is never
overwritten and a rebuild replaces index, key and mapping as one step, whatever instant a
kill hits; the key is never written through a planted file; a killed build's leftovers
are cleaned under a lock; the index holds no plaintext ids.
"""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import warnings
from pathlib import Path
from typing import Any, Callable

import pytest
import srsly

from spacy_delink.errors import IndexFormatError, InputError
from spacy_delink.linkage.index import CorpusIndex, IndexBuilder, KeyPermissionWarning
from spacy_delink.linkage.index.commit import build_lock, recover
from spacy_delink.linkage.ngrams import analyze
from spacy_delink.linkage.tokenize import LinkageRules
from conftest import Outcome

CORPUS: list[tuple[Any, str]] = [
    ("Zwieselstein-v-Slovenia.txt", "The applicant's farm near the river Mura was sold."),
    (987654321, "The applicant's farm was sold in 1994."),
    ("c", "The farm near the river was sold."),
]
REBUILT = CORPUS + [("d", "A fourth judgment about the old watermill.")]
KILLED = 77


def build(out: Path, corpus: list[tuple[Any, str]] = CORPUS, **kwargs: Any) -> None:
    IndexBuilder(LinkageRules(max_n=4), progress=False).build(corpus, out, **kwargs)


def entries(store: Path) -> list[str]:
    """Key ids with an entry in a key file or an id mapping."""
    data = json.loads(store.read_text())
    return sorted(data["keys" if "keys" in data else "mappings"])


# 4. The manifest is authenticated.


@pytest.mark.parametrize(
    "edit",
    [
        lambda m: m["rules"].update(max_n=2),  # the one-byte edit: 13 linkable n-grams became 0
        lambda m: m["rules"]["mask_patterns"].append("farm"),
        lambda m: m["rules"].update(stemming=True),
        lambda m: m.update(documents=2),
        lambda m: m["arrays"]["shard-0000.level-1.ef"].update(sha256="0" * 64),
        lambda m: m["doc_ids"].update(mapping_sha256=None),
        lambda m: m["summary"].update(tokens=1),
        lambda m: m.update(mac="0" * 64),
    ],
)
def test_any_manifest_edit_is_refused(tmp_path: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    build(tmp_path / "index")
    manifest_path = tmp_path / "index" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    edit(manifest)
    manifest_path.write_text(json.dumps(manifest))
    for verify in (True, False):
        with pytest.raises(IndexFormatError, match="fails authentication"):
            CorpusIndex(tmp_path / "index", verify=verify)


def test_assess_refuses_an_index_whose_max_n_was_lowered(tmp_path: Path, delink: Callable[..., Outcome]) -> None:
    build(tmp_path / "index")
    text = "Her farm near the river Mura was sold in 1994."
    assert analyze(CorpusIndex(tmp_path / "index"), text, 2).anonymity() == 1
    manifest_path = tmp_path / "index" / "manifest.json"
    manifest_path.write_text(manifest_path.read_text().replace('"max_n": 4', '"max_n": 2'))
    srsly.write_jsonl(tmp_path / "in.jsonl", [{"id": 1, "text": text}])
    result = delink("assess", str(tmp_path / "index"), str(tmp_path / "in.jsonl"), "-o", str(tmp_path / "out.jsonl"))
    assert result.returncode == 1 and "fails authentication" in result.stderr and "rebuild" in result.stderr
    assert not (tmp_path / "out.jsonl").exists()


def test_older_format_is_refused_with_how_to_rebuild(tmp_path: Path) -> None:
    index = tmp_path / "index"
    index.mkdir()
    (index / "manifest.json").write_text(json.dumps({"format": "spacy-delink-index", "format_version": 1, "rules": {}}))
    with pytest.raises(IndexFormatError, match=r"format 1 of an older spacy-delink.*rebuild it with `delink index"):
        CorpusIndex(index)


def test_a_build_with_another_key_cannot_vouch_for_a_manifest(tmp_path: Path) -> None:
    """Copying another build's MAC and key id into a manifest is refused: the MAC covers every field."""
    build(tmp_path / "a")
    build(tmp_path / "b", REBUILT)
    manifest_a = json.loads((tmp_path / "a" / "manifest.json").read_text())
    manifest_b = json.loads((tmp_path / "b" / "manifest.json").read_text())
    manifest_a.update(key_id=manifest_b["key_id"], mac=manifest_b["mac"])
    (tmp_path / "a" / "manifest.json").write_text(json.dumps(manifest_a))
    with pytest.raises(IndexFormatError, match="fails authentication"):
        CorpusIndex(tmp_path / "a", key_file=tmp_path / "b.key")


# 5. Keys of other indexes are never overwritten; a rebuild is one step.


def test_a_key_file_of_another_index_is_added_to_never_overwritten(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    build(tmp_path / "A.idx")
    build(tmp_path / "B.idx", REBUILT, key_file=tmp_path / "A.idx.key")
    assert CorpusIndex(tmp_path / "A.idx").documents == 3
    assert CorpusIndex(tmp_path / "B.idx", key_file=tmp_path / "A.idx.key").documents == 4
    monkeypatch.setenv("DELINK_KEY_FILE", str(tmp_path / "shared.key"))
    build(tmp_path / "C.idx")
    build(tmp_path / "D.idx", REBUILT)
    build(tmp_path / "C.idx", REBUILT, overwrite=True)  # retires C's old key only
    assert CorpusIndex(tmp_path / "C.idx").documents == CorpusIndex(tmp_path / "D.idx").documents == 4
    assert len(entries(tmp_path / "shared.key")) == 2


def test_a_damaged_key_file_is_refused_not_rewritten(tmp_path: Path) -> None:
    key = tmp_path / "index.key"
    key.write_text("not a key\n")
    key.chmod(0o600)
    with pytest.raises(IndexFormatError, match="damaged or not a key file"):
        build(tmp_path / "index")
    assert key.read_text() == "not a key\n" and not (tmp_path / "index").exists()


def _die_at(step: int, action: Callable[[], None]) -> int:
    """Run ``action`` in a forked child killed (``os._exit``) at its step-th rename or removal."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        calls = 0

        def deadly(function: Callable[..., Any]) -> Callable[..., Any]:
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                nonlocal calls
                calls += 1
                if calls == step:
                    os._exit(KILLED)
                return function(*args, **kwargs)

            return wrapper

        os.replace = deadly(os.replace)  # type: ignore[assignment]
        shutil.rmtree = deadly(shutil.rmtree)  # type: ignore[assignment]
        Path.unlink = deadly(Path.unlink)  # type: ignore[method-assign]
        try:
            action()
        except BaseException:
            os._exit(1)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def _only_the_index_remains(folder: Path) -> CorpusIndex:
    """No leftover beside the index, its key and mapping, each holding this index's entry alone."""
    assert sorted(p.name for p in folder.iterdir()) == ["index", "index.ids.json", "index.key"]
    index = CorpusIndex(folder / "index")
    for store in ("index.key", "index.ids.json"):
        assert entries(folder / store) == [index.manifest["key_id"]], f"an orphan entry was left in {store}"
    return index


def _is_one_of_the_builds(index: CorpusIndex) -> None:
    assert index.doc_ids == [doc_id for doc_id, _ in (CORPUS if index.documents == 3 else REBUILT)]


def test_a_kill_at_any_instant_of_a_rebuild_never_pairs_an_index_with_a_wrong_key(tmp_path: Path) -> None:
    out = tmp_path / "index"
    build(out)
    completed = False
    for step in range(1, 200):
        code = _die_at(step, lambda: build(out, REBUILT, overwrite=True))
        if code == 0:
            completed = True
            break
        assert code == KILLED, f"the build failed at step {step} instead of being killed"
        try:
            index = CorpusIndex(out)
        except IndexFormatError as err:  # only between the directory's two renames
            assert "interrupted while replacing it" in str(err), (step, str(err))
        else:
            _is_one_of_the_builds(index)  # its key opened it; its own ids are in the mapping
        with build_lock(out):
            recover(out)
        _is_one_of_the_builds(_only_the_index_remains(tmp_path))
        build(out, overwrite=True)  # back to the old corpus for the next step
    assert completed and _only_the_index_remains(tmp_path).documents == 4


def test_an_interrupted_rebuild_is_recovered_by_the_next_build(tmp_path: Path) -> None:
    out = tmp_path / "index"
    build(out)
    # Kill at each step until the old directory has moved aside but the new one is not in place.
    for step in range(1, 200):
        assert _die_at(step, lambda: build(out, REBUILT, overwrite=True)) == KILLED
        if not out.exists():
            break
        with build_lock(out):
            recover(out)
    with pytest.raises(IndexFormatError, match="interrupted while replacing it: rerun it"):
        CorpusIndex(out)
    summary = IndexBuilder(LinkageRules(max_n=4), progress=False).build(REBUILT, out, overwrite=True)
    assert any("rolled back" in note for note in summary.notes)
    _is_one_of_the_builds(_only_the_index_remains(tmp_path))


# 6. The key is created safely and guarded like an ssh key.


def test_the_key_is_never_written_through_a_planted_file_or_link(tmp_path: Path) -> None:
    planted = tmp_path / "index.key.tmp"
    planted.write_text("")
    planted.chmod(0o644)
    build(tmp_path / "index")
    assert oct((tmp_path / "index.key").stat().st_mode & 0o777) == "0o600"
    assert planted.read_text() == ""
    target = tmp_path / "elsewhere.txt"
    target.write_text("public\n")
    planted.unlink()
    planted.symlink_to(target)
    build(tmp_path / "index", overwrite=True)
    assert target.read_text() == "public\n"
    assert oct((tmp_path / "index.key").stat().st_mode & 0o777) == "0o600"
    assert oct((tmp_path / "index.ids.json").stat().st_mode & 0o777) == "0o600"


def test_a_key_file_others_can_read_warns_or_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, delink: Callable[..., Outcome]
) -> None:
    build(tmp_path / "index")
    (tmp_path / "index.key").chmod(0o644)
    with pytest.warns(KeyPermissionWarning, match=r"mode 0644.*chmod 600"):
        CorpusIndex(tmp_path / "index")
    with pytest.raises(InputError, match="refused: strict key permissions"):
        CorpusIndex(tmp_path / "index", strict_key_permissions=True)
    srsly.write_jsonl(tmp_path / "in.jsonl", [{"id": 1, "text": "farm"}])
    args = ["assess", str(tmp_path / "index"), str(tmp_path / "in.jsonl"), "-o", str(tmp_path / "out.jsonl")]
    result = delink(*args)
    assert result.returncode == 0 and result.stderr.startswith("warning: key file") and "mode 0644" in result.stderr
    assert delink(*args, "--strict-key-permissions").returncode == 1
    monkeypatch.setenv("DELINK_STRICT_KEY_PERMISSIONS", "1")
    result = delink(*args)
    assert result.returncode == 1 and "strict key permissions" in result.stderr
    with pytest.raises(InputError, match="strict key permissions"):
        build(tmp_path / "index", overwrite=True)  # the key file it would add to is exposed too
    (tmp_path / "index.key").chmod(0o600)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        CorpusIndex(tmp_path / "index")


# 7. Killed builds are cleaned up; concurrent builds are refused.


def test_a_killed_build_is_cleaned_up_by_the_next(tmp_path: Path) -> None:
    out = tmp_path / "index"
    corpus = [(f"d{i}", f"text number {i} of the collection") for i in range(50)]
    assert _die_at(1, lambda: build(out, corpus)) == KILLED  # its first removal: mid-build
    assert (tmp_path / ".index.partial").is_dir() and not out.exists()
    summary = IndexBuilder(LinkageRules(max_n=4), progress=False).build(corpus, out)
    assert any(".index.partial" in note and "interrupted build" in note for note in summary.notes)
    assert _only_the_index_remains(tmp_path).documents == 50


def test_a_second_build_into_the_same_output_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "index"
    with build_lock(out):
        with pytest.raises(InputError, match="another `delink index` is writing"):
            build(out)
    assert not out.exists()
    fd = os.open(tmp_path / ".index.lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # another process's lock, as the kernel sees it
        with pytest.raises(InputError, match="another `delink index` is writing"):
            build(out)
    finally:
        os.close(fd)
    build(out)
    assert _only_the_index_remains(tmp_path).documents == 3


# 8. The index holds no plaintext ids; the mapping is kept apart.


def test_the_index_holds_keyed_ids_and_the_mapping_is_kept_apart(tmp_path: Path) -> None:
    build(tmp_path / "index")
    for file in (tmp_path / "index").iterdir():
        data = file.read_bytes()
        assert b"Zwieselstein" not in data and b"987654321" not in data, file.name
    mapping = tmp_path / "index.ids.json"
    assert oct(mapping.stat().st_mode & 0o777) == "0o600"
    index = CorpusIndex(tmp_path / "index")
    assert index.doc_ids == [doc_id for doc_id, _ in CORPUS]
    assert index.document_number(987654321) == 1 and index.document_number("987654321") is None
    assert index.doc_id_matches(0, "Zwieselstein-v-Slovenia.txt") and not index.doc_id_matches(0, "c")
    edited = json.loads(mapping.read_text())
    edited["mappings"][index.manifest["key_id"]][0] = "someone-else"
    mapping.write_text(json.dumps(edited))
    with pytest.raises(IndexFormatError, match="were edited"):
        CorpusIndex(tmp_path / "index").doc_ids


def test_external_ids_write_no_mapping(tmp_path: Path) -> None:
    build(tmp_path / "index", doc_ids="external")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index", "index.key"]
    index = CorpusIndex(tmp_path / "index")
    with pytest.raises(IndexFormatError, match="external ids"):
        index.doc_ids
    assert index.document_number("c") == 2
    with pytest.raises(InputError, match="--ids-file"):
        build(tmp_path / "other", doc_ids="external", ids_file=tmp_path / "ids.json")


def test_an_id_mapping_of_another_index_is_kept(tmp_path: Path) -> None:
    ids = tmp_path / "ids.json"
    build(tmp_path / "a", ids_file=ids)
    build(tmp_path / "b", REBUILT, ids_file=ids)
    assert len(CorpusIndex(tmp_path / "a", ids_file=ids).doc_ids) == 3
    build(tmp_path / "a", REBUILT, ids_file=ids, overwrite=True)  # retires a's old ids only
    assert CorpusIndex(tmp_path / "a", ids_file=ids).doc_ids == CorpusIndex(tmp_path / "b", ids_file=ids).doc_ids
    assert len(entries(ids)) == 2
    ids.write_text("[]")
    with pytest.raises(IndexFormatError, match="not a spacy-delink id mapping"):
        build(tmp_path / "c", ids_file=ids)
    assert ids.read_text() == "[]"


def test_something_that_is_not_an_index_is_never_replaced(tmp_path: Path) -> None:
    folder = tmp_path / "documents"
    folder.mkdir()
    (folder / "letter.txt").write_text("keep me")
    with pytest.raises(InputError, match="is not a spacy-delink index; refusing to replace it"):
        build(folder, overwrite=True)
    assert (folder / "letter.txt").read_text() == "keep me"
