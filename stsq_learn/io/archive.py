"""The model file as bytes: a zip archive sealed by a checksum of its contents.

A model file is a zip archive whose comment, the last bytes of the file, is
``stsq-sha256:`` and the SHA-256 of every byte before it (hex). The zip's own
CRC-32s cover the members' data only; the checksum covers every byte, the
zip's headers included, so any flipped byte, a truncation or a member
rewritten and re-zipped is caught before anything is parsed. It detects
corruption, not forgery (anyone can compute a SHA-256).

Reading turns every failure of the zip layer (``zipfile.BadZipFile``,
``zlib.error``, ``EOFError``, an unsupported compression method, ...) into
one ``ValueError`` naming the file; writing refuses a destination it cannot
write, naming it, before any work, and replaces an existing file atomically.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import struct
import zipfile
import zlib

MAGIC = b"stsq-sha256:"
_SEAL_BYTES = len(MAGIC) + 64  # the comment: MAGIC and a hex SHA-256
_CHUNK = 1 << 20
_ZIP_ERRORS = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    zlib.error,
    EOFError,
    OSError,
    NotImplementedError,
    RuntimeError,
    struct.error,
    UnicodeDecodeError,
    KeyError,
    IndexError,
    OverflowError,
    ValueError,
)


_COMPRESSED = {  # the first bytes of the compressed files joblib.dump(..., compress=...) writes
    b"\x1f\x8b": "gzip",
    b"BZh": "bz2",
    b"\xfd7zXZ\x00": "xz",
    b"\x5d\x00\x00": "lzma",
    b"\x04\x22\x4d\x18": "lz4",
    b"\x78\x01": "zlib",
    b"\x78\x5e": "zlib",
    b"\x78\x9c": "zlib",
    b"\x78\xda": "zlib",
}
_TRUST = (
    ", and only from a source you trust: unpickling runs code. save_model writes the files "
    "load_model reads."
)


def _what_else(head):
    """The end of the message for a file that is not a zip archive: what its first bytes say."""
    if len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5:  # PROTO 2-5: a pickle
        return (
            ": it is a pickle file, as joblib.dump and pickle.dump write; load it with "
            f"joblib.load (or pickle.load){_TRUST}"
        )
    for magic, kind in _COMPRESSED.items():
        if head.startswith(magic):
            return (
                f": it is a {kind}-compressed file, as joblib.dump(..., compress=...) writes; "
                f"if joblib wrote it, load it with joblib.load{_TRUST}"
            )
    return "."


class FileError(ValueError):
    """A model file that cannot be read as one (the message names the file)."""


def check_destination(path):
    """Refuse (``ValueError``, naming it) a ``path`` :func:`write` cannot write, before any work:
    a directory, a path under a file or a missing directory, or in a directory not writable.
    """
    if os.path.isdir(path):
        raise ValueError(f"Cannot save a model to {path!r}: it is a directory; give a file name.")
    directory = os.path.dirname(os.path.abspath(path))
    ancestor = directory
    while not os.path.exists(ancestor):
        ancestor = os.path.dirname(ancestor)
    if not os.path.isdir(ancestor):
        raise ValueError(
            f"Cannot save a model to {path!r}: {ancestor!r} is a file, not a directory."
        )
    if ancestor != directory:
        raise ValueError(
            f"Cannot save a model to {path!r}: the directory {directory!r} does not exist."
        )
    if not os.access(directory, os.W_OK | os.X_OK):
        raise ValueError(f"Cannot save a model to {path!r}: {directory!r} is not writable.")


def _create_beside(path):
    """A new temporary file beside ``path``, open for writing: ``(fd, name)``.

    It gets the mode :func:`open` gives a new file (0o666 less the umask),
    as the model file that replaces ``path`` should; ``tempfile.mkstemp``
    makes it 0o600 whatever the umask.
    """
    directory = os.path.dirname(os.path.abspath(path))
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    while True:
        name = os.path.join(directory, f".stsq-{secrets.token_hex(8)}.tmp")
        try:
            return os.open(name, flags, 0o666), name
        except FileExistsError:  # pragma: no cover - 64 random bits taken: draw again
            continue


def write(path, members):
    """Write ``members`` (name -> bytes, in order) as a sealed zip at ``path``, atomically.

    ``path`` is checked by :func:`check_destination` first; the file is written beside it and
    renamed over it, with the mode a new file gets from :func:`open` (0o666 less the umask)
    whether or not ``path`` existed. A failure is a ``ValueError`` naming ``path`` (never the
    temporary file).
    """
    check_destination(path)
    tmp = None
    try:
        fd, tmp = _create_beside(path)
        with os.fdopen(fd, "wb") as fh, zipfile.ZipFile(fh, "w", zipfile.ZIP_DEFLATED) as zf:
            for name, blob in members.items():
                zf.writestr(name, blob)
            zf.comment = MAGIC + b"0" * 64
        seal(tmp)
        os.replace(tmp, path)
    except OSError as exc:
        raise ValueError(f"Cannot save a model to {path!r}: {exc.strerror or exc}.") from None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)


def seal(path):
    """Write the checksum of the zip at ``path`` into its comment (the file's last bytes), in place.

    A comment of another kind first becomes a placeholder of the seal's length (so the bytes
    before the checksum are final), whose digits the checksum of those bytes then replaces.
    """
    with open(path, "rb") as fh:
        tail = _tail(fh)
    if tail is None or not tail.startswith(MAGIC):
        with zipfile.ZipFile(path, "a") as zf:
            zf.comment = MAGIC + b"0" * 64
    with open(path, "r+b") as fh:
        size = fh.seek(0, os.SEEK_END)
        digest = _digest(fh, size - 64)
        fh.seek(size - 64)
        fh.write(digest.encode("ascii"))


def _tail(fh):
    size = fh.seek(0, os.SEEK_END)
    if size < _SEAL_BYTES:
        return None
    fh.seek(size - _SEAL_BYTES)
    return fh.read(_SEAL_BYTES)


def _digest(fh, n_bytes):
    """Hex SHA-256 of the first ``n_bytes`` of ``fh``."""
    h = hashlib.sha256()
    fh.seek(0)
    while n_bytes > 0:
        chunk = fh.read(min(_CHUNK, n_bytes))
        if not chunk:
            break
        h.update(chunk)
        n_bytes -= len(chunk)
    return h.hexdigest()


def read(path, names, max_bytes):
    """``(members, sealed)``: the members ``names`` (each must be there, of at most
    ``max_bytes`` unpacked) of the model file at ``path`` as name -> bytes, after its checksum.

    ``sealed``: whether the file carries a checksum (files of stsq-learn 0.1 to 0.4 do not),
    which then matched. A missing or unreadable file raises ``OSError``; a checksum that does not
    match, a file that is not a zip, a missing or too large member, or any failure of the zip
    layer a ``ValueError`` naming the file.
    """
    with open(path, "rb") as fh:
        tail = _tail(fh)
        sealed = tail is not None and tail.startswith(MAGIC)
        if sealed:
            size = fh.seek(0, os.SEEK_END)
            if _digest(fh, size - 64).encode("ascii") != tail[len(MAGIC) :]:
                raise FileError(
                    f"{path!r} is corrupted: its contents do not match the SHA-256 checksum "
                    "it was saved with."
                )
        fh.seek(0)
        try:
            with zipfile.ZipFile(fh) as zf:
                return {name: _member(zf, name, path, max_bytes) for name in names}, sealed
        except FileError:
            raise
        except zipfile.BadZipFile as exc:
            if "File is not a zip file" in str(exc):
                fh.seek(0)
                raise FileError(
                    f"{path!r} is not an stsq-learn model file (not a zip archive)"
                    f"{_what_else(fh.read(8))}"
                ) from None
            raise FileError(f"{path!r} is a corrupted model file: {exc}.") from None
        except _ZIP_ERRORS as exc:
            kind = type(exc).__name__
            if type(exc).__module__ != "builtins":
                kind = f"{type(exc).__module__}.{kind}"
            raise FileError(f"{path!r} is a corrupted model file: {kind}: {exc}.") from None


def _member(zf, name, path, max_bytes):
    try:
        info = zf.getinfo(name)
    except KeyError:
        raise FileError(f"{path!r} is not a complete stsq-learn model file: no {name}.") from None
    if info.file_size > max_bytes:
        raise FileError(f"{path!r}: {name} is {info.file_size} bytes, more than allowed.")
    return zf.read(info)
