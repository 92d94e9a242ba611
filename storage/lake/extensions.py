"""DuckDB's extensions for a lake, loaded from their PyPI wheels (autoinstall off): DuckLake,
PostgreSQL (renamed once into a private cache, as DuckDB derives its entry point from the
file name) and httpfs; and the SQL literal the LOAD and ATTACH statements quote paths with.

Shared by :mod:`~juryflow.storage.lake.attach` and
:mod:`~juryflow.storage.lake.object_store`, which each need them and each other's work.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

import duckdb

from juryflow.storage import StoreError

INSTALL_HINT = "pip install 'juryflow[lake]'"
# Where the renamed copy of the PostgreSQL extension is kept; XDG cache by default.
CACHE_ENV = "JURYFLOW_CACHE_DIR"


def _package_file(package: str, name: str) -> Path:
    """The extension file ``name`` shipped by the installed PyPI package ``package``."""
    spec = importlib.util.find_spec(package)
    locations = list(spec.submodule_search_locations or ()) if spec is not None else []
    if not locations:
        raise StoreError(
            f"the DuckLake store needs the Python package {package.replace('_', '-')}; "
            f"run {INSTALL_HINT}"
        )
    version = duckdb.__version__
    found = sorted(Path(locations[0]).glob(f"extensions/v*/{name}.duckdb_extension"))
    # Prefer the file built for this DuckDB; DuckDB refuses a mismatched one when loading.
    exact = [path for path in found if path.parent.name == f"v{version}"]
    chosen = exact or found
    if not chosen:
        raise StoreError(
            f"the package {package.replace('_', '-')} holds no {name} extension; "
            f"reinstall it with {INSTALL_HINT}"
        )
    return chosen[-1]


def _cache_dir() -> Path:
    if chosen := os.environ.get(CACHE_ENV):
        return Path(chosen).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "juryflow" / "duckdb-extensions"


def _postgres_scanner_file(source: Path) -> Path:
    """``source`` under the name DuckDB needs, copied once into a private cache directory.

    DuckDB derives an extension's entry point from its file name, and the package's file
    is called postgres.duckdb_extension while its entry point is postgres_scanner_init.
    The copy is keyed by the source's version, size and mtime (an upgrade makes a new
    one) and written to a temporary name first, so concurrent processes never LOAD a
    half-written file.
    """
    stat = source.stat()
    key = hashlib.sha256(f"{source}|{stat.st_size}|{stat.st_mtime_ns}".encode()).hexdigest()[:16]
    directory = _cache_dir() / source.parent.name / key
    target = directory / "postgres_scanner.duckdb_extension"
    if target.is_file() and target.stat().st_size == stat.st_size:
        return target
    try:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        handle, temporary = tempfile.mkstemp(dir=directory, suffix=".part")
        os.close(handle)
        try:
            shutil.copyfile(source, temporary)
            os.replace(temporary, target)
        finally:
            Path(temporary).unlink(missing_ok=True)
    except OSError as error:
        raise StoreError(
            f"cannot prepare the PostgreSQL extension in {directory}: "
            f"{error.strerror or error}; set {CACHE_ENV} to a writable directory"
        ) from None
    return target


def load_lake_extensions(con: duckdb.DuckDBPyConnection, *, postgres: bool = True) -> None:
    """LOAD DuckLake (and PostgreSQL, for a PostgreSQL catalog) from the installed wheels.

    Autoinstall and autoload are switched off first: a missing extension must be this
    one-line StoreError, never a download.
    """
    con.execute("SET autoinstall_known_extensions = false")
    con.execute("SET autoload_known_extensions = false")
    files = [_package_file("duckdb_extension_ducklake", "ducklake")]
    if postgres:
        files.append(_postgres_scanner_file(_package_file("duckdb_extension_postgres", "postgres")))
    for path in files:
        load_extension(con, path, path.name)


def load_extension(con: duckdb.DuckDBPyConnection, path: Path, shown: str) -> None:
    """LOAD one extension file of an installed wheel; a failure is one StoreError line."""
    try:
        con.execute(f"LOAD {_literal(str(path))}")
    except duckdb.Error as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
        raise StoreError(
            f"cannot load the DuckDB extension {shown} (DuckDB {duckdb.__version__}): "
            f"{first}; reinstall with {INSTALL_HINT}"
        ) from None


def _literal(value: str) -> str:
    # ATTACH and LOAD take no prepared parameters, so values are quoted here.
    if "\x00" in value:
        raise StoreError("a DuckLake target may not contain a NUL character")
    return "'" + value.replace("'", "''") + "'"
