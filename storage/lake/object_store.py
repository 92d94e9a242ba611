"""A lake's data on an object store (``--data-path s3://bucket/prefix``).

DuckDB reaches S3 (and S3-compatible stores: MinIO, R2, Ceph) through its ``httpfs``
extension, shipped as the PyPI wheel ``duckdb-extension-httpfs`` (the ``lake`` extra) and
LOADed from its file like the lake's other extensions. Credentials come from the standard
AWS variables, made into a DuckDB secret for this connection only (never stored):
``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION`` (or
``AWS_DEFAULT_REGION``) and, for a store that is not AWS, ``AWS_ENDPOINT_URL`` (or
``AWS_ENDPOINT_URL_S3``), e.g. ``http://minio.internal:9000``.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit

import duckdb

from juryflow.storage import StoreError
from juryflow.storage.lake.extensions import _literal, _package_file, load_extension

REMOTE_SCHEMES = ("s3://", "s3a://", "s3n://", "r2://", "gcs://", "gs://")
SECRET_NAME = "juryflow_object_store"


def is_remote(path: str | None) -> bool:
    """Is ``path`` an object-store prefix (rather than a directory)?"""
    return path is not None and path.lower().startswith(REMOTE_SCHEMES)


def enable_object_store(con: duckdb.DuckDBPyConnection) -> None:
    """LOAD httpfs from its wheel and give the connection the environment's credentials."""
    load_extension(con, _package_file("duckdb_extension_httpfs", "httpfs"), "httpfs")
    options = _secret_options(os.environ)
    if not options:
        return  # a public bucket, or credentials DuckDB finds itself
    listed = ", ".join(f"{name} {value}" for name, value in options)
    try:
        con.execute(f"CREATE OR REPLACE TEMPORARY SECRET {SECRET_NAME} (TYPE s3, {listed})")
    except duckdb.Error as error:
        raise StoreError(
            f"cannot use the object store's credentials from AWS_*: "
            f"{str(error).strip().splitlines()[0]}; check AWS_ENDPOINT_URL and AWS_REGION"
        ) from None


def _secret_options(env: os._Environ[str] | dict[str, str]) -> list[tuple[str, str]]:
    options: list[tuple[str, str]] = []
    for name, variable in (
        ("KEY_ID", "AWS_ACCESS_KEY_ID"),
        ("SECRET", "AWS_SECRET_ACCESS_KEY"),
        ("SESSION_TOKEN", "AWS_SESSION_TOKEN"),
    ):
        if env.get(variable):
            options.append((name, _literal(env[variable])))
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
    if region:
        options.append(("REGION", _literal(region)))
    endpoint = env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL")
    if endpoint:
        parts = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
        if not parts.netloc:
            raise StoreError(
                f"AWS_ENDPOINT_URL={endpoint!r} names no host; set e.g. http://minio:9000"
            )
        options.append(("ENDPOINT", _literal(parts.netloc)))
        # S3-compatible servers answer bucket/key paths, not bucket.host names
        options.append(("URL_STYLE", _literal("path")))
        options.append(("USE_SSL", "true" if parts.scheme == "https" else "false"))
    return options
