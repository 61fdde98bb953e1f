"""Every setting in one table: name, default, help.

The table feeds the CLI flags (``--group-commit-max``), the environment variables
(``EMBRASURE_GROUP_COMMIT_MAX``) and docs/settings.md; a test checks that the docs list
every entry. Precedence: flag > environment > default.

The receiver's contract bounds (8 MiB bodies, 1,000 events a batch…) are not settings:
they are the receiver's contract (docs/receiver.md#bounds) and live in ``receiver.bounds.Limits``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

ENV_PREFIX = "EMBRASURE_"


@dataclasses.dataclass(frozen=True)
class Setting:
    name: str
    default: Any
    help: str

    @property
    def type(self) -> type:
        return type(self.default)

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.name.upper()

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "db",
        "sqlite:///embrasure.db",
        "Database URL: sqlite:///PATH (embedded default) or postgresql://…",
    ),
    Setting(
        "url",
        "http://127.0.0.1:5000",
        "Server that the client commands (ingest, lineage, runs…) talk to, unless --db is given.",
    ),
    Setting(
        "token",
        "",
        "Bearer token the client commands send to --url (see `embrasure tokens`).",
    ),
    Setting("host", "127.0.0.1", "Address the server binds."),
    Setting(
        "insecure",
        False,
        "Serve a non-loopback address with no bearer token created (auth off): only for a"
        " network you trust.",
    ),
    Setting("port", 5000, "TCP port the server listens on."),
    Setting("group_commit_max", 512, "Most deliveries one log transaction (one fsync) may hold."),
    Setting(
        "group_commit_max_bytes", 64 * 1024 * 1024, "Most body bytes one log transaction may hold."
    ),
    Setting(
        "max_backlog_items",
        1_000_000,
        "Items received but not yet projected past which ingest answers 429.",
    ),
    Setting(
        "min_free_disk_mb",
        1024,
        "Free MiB beside the SQLite log under which ingest answers 429.",
    ),
    Setting(
        "max_body_memory_mb",
        256,
        "MiB of request bodies held in memory at once; past it a new body waits up to 2 s, "
        "then gets 429.",
    ),
    Setting(
        "body_timeout_seconds",
        60,
        "Seconds a request body may take to arrive; slower ones get 408 (slowloris).",
    ),
    Setting("retry_after", 1, "Seconds a client is told to wait (Retry-After) on 503 and 429."),
    Setting(
        "graceful_shutdown_seconds",
        30,
        "On SIGTERM, how long in-flight deliveries get to commit and be answered.",
    ),
    Setting("log_level", "info", "Log level: debug, info, warning, error."),
    Setting(
        "log_format",
        "text",
        "Log lines as text, or json: one object per line with delivery_id and other fields.",
    ),
    Setting(
        "db_pool_size",
        10,
        "PostgreSQL: most connections one process opens (API reads, the log's group commit,"
        " the projector); a request waits for a free one.",
    ),
    Setting(
        "projector_batch_events",
        2000,
        "Most events one projection transaction takes on (whole deliveries, at least one).",
    ),
    Setting(
        "log_compression",
        "zstd",
        "How the receiver stores bodies: zstd (with dictionaries trained from the log), or"
        " off (as received; bodies stored already stay readable either way).",
    ),
    Setting(
        "archive",
        "",
        "Where trimmed delivery bodies go: a directory or an fsspec URL (file://…,"
        " s3://bucket/prefix with s3fs installed). See docs/operations.md.",
    ),
)

BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}


def _coerce(setting: Setting, raw: str) -> Any:
    if setting.type is bool:
        return raw.strip().lower() in ("1", "true", "yes", "on")
    try:
        return setting.type(raw)
    except ValueError:
        raise ValueError(f"{setting.env}={raw!r} is not a valid {setting.type.__name__}") from None


@dataclasses.dataclass(frozen=True)
class Settings:
    """Resolved settings; build with ``Settings.load`` so env and flags apply."""

    db: str = BY_NAME["db"].default
    url: str = BY_NAME["url"].default
    token: str = BY_NAME["token"].default
    host: str = BY_NAME["host"].default
    insecure: bool = BY_NAME["insecure"].default
    port: int = BY_NAME["port"].default
    group_commit_max: int = BY_NAME["group_commit_max"].default
    group_commit_max_bytes: int = BY_NAME["group_commit_max_bytes"].default
    max_backlog_items: int = BY_NAME["max_backlog_items"].default
    min_free_disk_mb: int = BY_NAME["min_free_disk_mb"].default
    max_body_memory_mb: int = BY_NAME["max_body_memory_mb"].default
    body_timeout_seconds: int = BY_NAME["body_timeout_seconds"].default
    retry_after: int = BY_NAME["retry_after"].default
    graceful_shutdown_seconds: int = BY_NAME["graceful_shutdown_seconds"].default
    log_level: str = BY_NAME["log_level"].default
    log_format: str = BY_NAME["log_format"].default
    db_pool_size: int = BY_NAME["db_pool_size"].default
    projector_batch_events: int = BY_NAME["projector_batch_events"].default
    log_compression: str = BY_NAME["log_compression"].default
    archive: str = BY_NAME["archive"].default

    @classmethod
    def load(
        cls, flags: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
    ) -> Settings:
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for s in SETTINGS:
            if flags and flags.get(s.name) is not None:
                values[s.name] = flags[s.name]
            elif s.env in environ:
                values[s.name] = _coerce(s, environ[s.env])
        return cls(**values)


def markdown_table() -> str:
    """The docs/settings.md table, generated from SETTINGS."""
    rows = ["| flag | environment | default | meaning |", "| --- | --- | --- | --- |"]
    for s in SETTINGS:
        rows.append(f"| `{s.flag}` | `{s.env}` | `{s.default}` | {s.help} |")
    return "\n".join(rows) + "\n"
