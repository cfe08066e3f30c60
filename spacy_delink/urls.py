"""Inputs named by URL: fsspec opens them, and every failure is one line with credentials redacted.

Any URL fsspec understands works where a corpus file does (``s3://``, ``gs://``,
``https://``, ``file://``, ``memory://``, chains such as ``simplecache::s3://...``;
docs/scale.md): a Dask worker opens it itself, so only the URL string travels. Messages
never show user info, query values or fragments (they often hold tokens).
"""
from __future__ import annotations

import io
import re
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Iterator, TypeGuard
from urllib.parse import unquote, urlsplit, urlunsplit

from isal import igzip

from .errors import DelinkError, InputError

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem


#: A source fsspec opens: ``protocol://...``, or a chain such as ``simplecache::s3://...``.
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*(?:://|::)")
#: Protocols whose "folders" are web pages, not listings, and where ``?`` starts the query.
WEB_PROTOCOLS = ("http", "https")
#: A ``::`` that chains two URLs, not one inside an IPv6 host (``http://[::1]:8080``).
_CHAIN = re.compile(r"::(?![^\[]*\])")
#: Read size of a URL stream (each read is a request or a slice of one).
_URL_BUFFER = 1 << 20


def is_url(source: str | Path) -> TypeGuard[str]:
    """Whether an input is a URL for fsspec rather than a local path (a ``Path`` never is)."""
    return isinstance(source, str) and _URL.match(source) is not None


def url_protocols(url: str) -> list[str]:
    """The protocol of each link of a (chained) URL, outermost first: ``simplecache::s3://b/k`` → simplecache, s3."""
    links = url.split("::")
    return [
        link.split("://", 1)[0].lower() if "://" in link else ("file" if n == len(links) - 1 else link.lower())
        for n, link in enumerate(links)
    ]


def url_name(url: str) -> str:
    """The file name a URL ends in, without query or fragment (it chooses the reader, as a suffix does)."""
    split = urlsplit(url.rpartition("::")[2])
    return (split.netloc + split.path).rstrip("/").rpartition("/")[2]


def redact_url(url: str) -> str:
    """``url`` fit to print: user info, every query value and the fragment become ``***`` (they often hold
    tokens; a query value's name says nothing of it), in every link of a chain. The one rule of every
    message, the corpus inputs' and the LLM endpoint's alike."""
    links = []
    for link in _CHAIN.split(url):
        split = urlsplit(link)
        netloc = f"***@{split.netloc.rpartition('@')[2]}" if "@" in split.netloc else split.netloc
        query = "&".join(f"{item.partition('=')[0]}=***" for item in split.query.split("&") if item)
        links.append(urlunsplit((split.scheme, netloc, split.path, query, "***" if split.fragment else "")))
    return "::".join(links)


def _scrub(text: str, url: str) -> str:
    """A backend's message about ``url`` with the URL redacted and every credential in it removed."""
    secrets = {url, unquote(url)}
    for link in _CHAIN.split(url):
        split = urlsplit(link)
        if "@" in split.netloc:
            secrets.add(split.netloc.rpartition("@")[0])
        values = [item.partition("=")[2] for item in split.query.split("&")] + [split.fragment]
        secrets.update(value for value in values if len(value) >= 4)  # shorter ones are no tokens, and too common
    for secret in sorted(secrets | {unquote(s) for s in secrets}, key=len, reverse=True):
        text = text.replace(secret, redact_url(url) if secret in (url, unquote(url)) else "***")
    return text


def display_name(source: str | Path) -> str:
    """How messages name an input: its path, its URL redacted, or ``<stdin>`` for ``-``."""
    if str(source) == "-":
        return "<stdin>"
    return redact_url(source) if is_url(source) else str(source)


def _url_error(url: str, err: Exception) -> InputError:
    """One line for a failure of fsspec or its backend on ``url``; credentials never appear in it."""
    shown = redact_url(url)
    if isinstance(err, ImportError):
        package = getattr(err.__cause__, "name", None) or err.name or "its fsspec implementation"
        protocol = next((p for p in url_protocols(url) if _not_installed(p)), url_protocols(url)[-1])
        extra = " or pip install 'spacy-delink[http]'" if package == "aiohttp" else ""
        return InputError(f"{shown}: reading {protocol}:// URLs needs the package {package}, which is not installed; pip install {package}{extra}")
    if isinstance(err, ValueError) and str(err).startswith("Protocol not known"):
        return InputError(
            f"{shown}: unknown URL protocol {str(err).rpartition(' ')[2]!r}; give a local path or a URL fsspec knows "
            "(file://, s3://, gs://, https://, memory://, ...)"
        )
    chain: list[BaseException] = [err]
    while (cause := chain[-1].__cause__) is not None and len(chain) < 8:  # fsspec re-raises a backend's error as its own
        chain.append(cause)
    denied = next((e for e in chain if isinstance(e, PermissionError) or _status(e) in (401, 403) or "credential" in type(e).__name__.lower()), None)
    if denied is not None:
        status = f" {_status(denied)}" if _status(denied) in (401, 403) else ""
        return InputError(
            f"{shown}: access denied ({type(denied).__name__}{status}); check the credentials this machine "
            "(and every Dask worker) has for that storage"
        )
    root = chain[-1]
    if isinstance(err, FileNotFoundError) and (isinstance(root, FileNotFoundError) or _status(root) in (404, 410)):
        return InputError(f"{shown}: not found; check the URL")
    return InputError(f"{shown}: cannot read it ({type(root).__name__}: {_scrub(str(root), url)})")


def _status(err: BaseException) -> Any:
    """The HTTP status a backend's error carries (aiohttp: ``status``, Google's clients: ``code``), if any."""
    status = getattr(err, "status", None)
    return status if status is not None else getattr(err, "code", None)


def _not_installed(protocol: str) -> bool:
    """Whether fsspec knows ``protocol`` but cannot import its implementation."""
    from fsspec import get_filesystem_class

    try:
        get_filesystem_class(protocol)
    except ImportError:
        return True
    except ValueError:  # unknown to fsspec: reported as such
        pass
    return False


@contextmanager
def url_errors(url: str) -> Iterator[None]:
    """Turn any failure of fsspec or its backend on ``url`` into one ``InputError`` line."""
    try:
        yield
    except DelinkError:
        raise
    except Exception as err:  # backends raise their own types (aiohttp, botocore, google-auth, ...)
        raise _url_error(url, err) from None


def innermost_filesystem(url: str) -> tuple[str, AbstractFileSystem, str]:
    """``(chain prefix, file system, path)`` of a URL's last link, which lists and globs the data itself.

    ``simplecache::s3://b/k`` gives ``("simplecache::", S3FileSystem, "b/k")``: a listed path
    ``p`` is the URL ``prefix + fs.unstrip_protocol(p)`` again.
    """
    head, separator, target = url.rpartition("::")
    return (head + separator, *_filesystem(target, url))


def _filesystem(target: str, url: str) -> tuple[AbstractFileSystem, str]:
    """fsspec's file system and path for ``target``, failures reported as about ``url``."""
    from fsspec.core import url_to_fs

    with url_errors(url):
        fs, path = url_to_fs(target)
    return fs, path


def local_path(source: str | Path) -> Path | None:
    """The local file an input names: a path, or the path of a ``file://`` URL; None for a remote URL."""
    if not is_url(source):
        return Path(source)
    if url_protocols(source)[-1] not in ("file", "local"):
        return None  # without building its file system: a remote one may look for credentials at once
    return Path(innermost_filesystem(source)[2])


def _protocols(fs: AbstractFileSystem) -> set[str]:
    """The protocol names of a file system (fsspec gives one name or a tuple)."""
    return {fs.protocol} if isinstance(fs.protocol, str) else set(fs.protocol)


class _UrlStream(io.RawIOBase):
    """An fsspec file as a raw stream whose read failures are one-line ``InputError``s."""

    def __init__(self, handle: Any, url: str) -> None:
        super().__init__()
        self._handle, self._url = handle, url

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        with url_errors(self._url):
            return int(self._handle.readinto(buffer))

    def close(self) -> None:
        if not self.closed:
            try:
                self._handle.close()
            finally:
                super().close()


class _GzipStream(igzip.IGzipFile):
    """A gzip stream (ISA-L's, as ``io.open_binary`` reads local files) that also closes the
    stream it decompresses (``GzipFile`` leaves a given one open)."""

    def __init__(self, raw: IO[bytes]) -> None:
        super().__init__(fileobj=raw, mode="rb")
        self._raw = raw

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._raw.close()


def open_url(url: str, decompress: bool = True) -> IO[bytes]:
    """A URL's bytes as a buffered stream, gunzipped when its name ends in .gz (as for a local file) unless not ``decompress``."""
    fs, path = _filesystem(url, url)
    with url_errors(url):
        # block_size=0: one streamed GET, so servers without range requests work too
        handle = fs.open(path, "rb", **({"block_size": 0} if _protocols(fs) & set(WEB_PROTOCOLS) else {}))
    stream: IO[bytes] = io.BufferedReader(_UrlStream(handle, url), _URL_BUFFER)
    return _GzipStream(stream) if decompress and url_name(url).endswith(".gz") else stream  # type: ignore[return-value]  # GzipFile is a binary IO


def read_bytes(source: str | Path) -> bytes:
    """A whole input file's bytes, from a path or a URL (never gunzipped)."""
    if is_url(source):
        fs, target = _filesystem(source, source)
        with url_errors(source):
            return bytes(fs.cat_file(target))
    path = Path(source)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    return path.read_bytes()
