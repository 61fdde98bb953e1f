"""Every setting in one table: name, default, help.

The table feeds the CLI flags (``--group-commit-max``), the environment variables
(``EMBRASURE_GROUP_COMMIT_MAX``) and docs/settings.md; a test checks that the docs list
every entry. Precedence: flag > environment > default. Each entry also says what it
allows (a range, a set of words, a duration): a value outside it is one line naming the
setting, where the value came from (flag or variable) and what is allowed.

The receiver's contract bounds (8 MiB bodies, 1,000 events a batch…) are not settings:
they are the receiver's contract (docs/receiver.md#bounds) and live in ``receiver.bounds.Limits``.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import os
import re
import urllib.parse
from collections.abc import Mapping
from typing import Any

ENV_PREFIX = "EMBRASURE_"


TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off", "")


@dataclasses.dataclass(frozen=True)
class Setting:
    name: str
    default: Any
    help: str
    choices: tuple[str, ...] = ()  # the words a text setting may be (any case)
    low: int | None = None  # an integer setting's range, both ends included
    high: int | None = None
    duration: bool = False  # parse_duration's forms; empty means off unless low says
    # otherwise (low: the fewest seconds)
    repeated: bool = False  # a flag given once per entry; held as lines of text

    @property
    def type(self) -> type:
        return type(self.default)

    @property
    def allowed(self) -> str:
        """What the setting takes, for errors and docs/settings.md."""
        if self.type is bool:
            return "true or false (1/0, yes/no, on/off)"
        if self.choices:
            return "one of " + ", ".join(self.choices)
        if self.duration:
            text = "a duration such as 90d, 12h, 5m, 0s or 1h30m"
            return text + (f", at least {self.low}s" if self.low else ", or empty for off")
        if self.type is int:
            if self.high is not None:
                return f"a whole number from {self.low} to {self.high}"
            return (
                f"a whole number of at least {self.low}"
                if self.low is not None
                else "a whole number"
            )
        return "text"

    def check(self, value: Any) -> Any:
        """``value`` as the setting holds it (a word in lower case); ValueError saying
        what is allowed when it is not."""
        if self.type is bool:
            if isinstance(value, bool):
                return value
            word = str(value).strip().lower()
            if word not in TRUE + FALSE:
                raise ValueError(f"must be {self.allowed}")
            return word in TRUE
        if self.type is int:
            try:
                number = int(value)
            except (TypeError, ValueError):
                raise ValueError(f"must be {self.allowed}") from None
            if (self.low is not None and number < self.low) or (
                self.high is not None and number > self.high
            ):
                raise ValueError(f"must be {self.allowed}")
            return number
        text = str(value)
        if self.choices:
            if text.strip().lower() not in self.choices:
                raise ValueError(f"must be {self.allowed}")
            return text.strip().lower()
        if self.duration and (text or self.low):
            try:
                seconds = parse_duration(text).total_seconds()
            except ValueError as exc:
                raise ValueError(str(exc)) from None
            if self.low and seconds < self.low:
                raise ValueError(f"must be {self.allowed}")
        return text

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
    Setting(
        "oidc_issuer",
        "",
        "The identity provider's issuer URL (OpenID Connect): JWTs it signs are accepted as"
        " bearer tokens beside static ones (docs/security.md#jwts-from-the-identity-provider)."
        " Empty: off.",
    ),
    Setting(
        "oidc_audience",
        "",
        "The audience (aud) a JWT must be for: this API's identifier at the provider.",
    ),
    Setting(
        "oidc_groups_claim",
        "groups",
        "The JWT claim listing the bearer's groups or roles; a dotted path reaches into"
        " objects (Keycloak: realm_access.roles).",
    ),
    Setting(
        "oidc_leeway_seconds",
        60,
        "Clock skew allowed between this server and the provider on exp, nbf and iat.",
        low=0,
        high=3600,
    ),
    Setting(
        "oidc_client_id",
        "",
        "The web UI's client id at the identity provider: people sign in with it"
        " (docs/security.md#signing-in-to-the-web-ui). Empty: no sign-in, tokens only.",
    ),
    Setting(
        "oidc_client_secret",
        "",
        "The web UI client's secret (confidential client; PKCE is used as well).",
    ),
    Setting(
        "oidc_scopes",
        "openid profile email",
        "The scopes the sign-in asks for; add the one that brings the groups claim where"
        " the provider needs one (Okta: groups).",
    ),
    Setting(
        "oidc_session_hours",
        8,
        "How long a sign-in to the web UI lasts at most.",
        low=1,
        high=24 * 30,
    ),
    Setting(
        "oidc_session_idle_minutes",
        60,
        "A sign-in to the web UI unused this long ends (0: only --oidc-session-hours ends it).",
        low=0,
        high=24 * 60 * 30,
    ),
    Setting("port", 5000, "TCP port the server listens on.", low=1, high=65535),
    Setting(
        "subscription_secrets_key",
        "",
        "A Fernet key (`embrasure subscriptions new-key`) the notifications' signing secrets"
        " are stored encrypted under; kept outside the database. Empty: stored as they are"
        " (docs/notifications.md#secrets).",
    ),
    Setting(
        "webhook_allow",
        "",
        "Networks (CIDR) and host names notifications may be sent to although they are not"
        " public (loopback, private, link-local…: docs/security.md#webhook-targets), at any"
        " port: the flag may be given again for each, the variable takes one per line. Who"
        " may subscribe may then make the server call them.",
        repeated=True,
    ),
    Setting(
        "webhook_ports",
        "80,443,8080,8443",
        "The ports a webhook's URL may name (comma-separated; any: every port), unless"
        " --webhook-allow holds its host.",
    ),
    Setting(
        "public_url",
        "",
        "The web UI's address as people reach it (https://lineage.example.com), for the"
        " links in notifications (docs/notifications.md); empty: http://HOST:PORT.",
    ),
    Setting(
        "marquez_port",
        0,
        "serve: also listen on this port (same --host) with Marquez's API, for marquez-web,"
        " marquez-python and Marquez users' scripts (docs/marquez.md); 0: off.",
        low=0,
        high=65535,
    ),
    Setting(
        "no_projector",
        False,
        "serve: run the receiver only; run `embrasure project` beside it (docs/postgres.md).",
    ),
    Setting(
        "single_process",
        False,
        "serve: run the receiver, the projector, retention and the Kafka consumer as threads"
        " of one process, not a process each (docs/operations.md#processes).",
    ),
    Setting(
        "upgrade",
        False,
        "serve: upgrade an older database schema first (else it refuses to start on one).",
    ),
    Setting(
        "read_workers",
        1,
        "serve: processes that answer the read API, the web UI and Marquez's API, which the"
        " receiver forwards reads to, so that no read slows ingest"
        " (docs/operations.md#reads-under-load); 0: the receiver answers them itself.",
        low=0,
        high=64,
    ),
    Setting(
        "read_nice",
        10,
        "serve: the read processes' nice value: under load the receiver and the projector"
        " keep most of the CPU, and reads wait (0: the same priority; 19 starves reads"
        " behind any other busy process on the machine).",
        low=0,
        high=19,
    ),
    Setting(
        "read_timeout_seconds",
        30,
        "How long the database may run a read's queries; past it the read stops, 503"
        " read-too-long (the export is not bounded; it runs one at a time). 0: no bound.",
        low=0,
    ),
    Setting(
        "heavy_reads",
        2,
        "How many walks of the graph (lineage, column lineage, impact) and exports run at"
        " once; past it such a read is refused, 429 with Retry-After. 0: no bound.",
        low=0,
    ),
    Setting(
        "group_commit_max", 512, "Most deliveries one log transaction (one fsync) may hold.", low=1
    ),
    Setting(
        "group_commit_max_bytes",
        64 * 1024 * 1024,
        "Most body bytes one log transaction may hold.",
        low=1,
    ),
    Setting(
        "max_backlog_items",
        1_000_000,
        "Items received but not yet projected past which ingest answers 429.",
        low=1,
    ),
    Setting(
        "min_free_disk_mb",
        1024,
        "Free MiB beside the SQLite log under which ingest answers 429.",
        low=0,
    ),
    Setting(
        "max_body_memory_mb",
        256,
        "MiB of request bodies held in memory at once; past it a new body waits up to 2 s, "
        "then gets 429.",
        low=1,
    ),
    Setting(
        "body_timeout_seconds",
        60,
        "Seconds a request body may take to arrive; slower ones get 408 (slowloris).",
        low=1,
    ),
    Setting(
        "retry_after", 1, "Seconds a client is told to wait (Retry-After) on 503 and 429.", low=1
    ),
    Setting(
        "graceful_shutdown_seconds",
        30,
        "On SIGTERM, how long in-flight deliveries get to commit and be answered.",
        low=0,
    ),
    Setting(
        "log_level",
        "info",
        "Log level: debug, info, warning, error.",
        choices=("debug", "info", "warning", "error"),
    ),
    Setting(
        "log_format",
        "text",
        "Log lines as text, or json: one object per line with delivery_id and other fields.",
        choices=("text", "json"),
    ),
    Setting(
        "db_pool_size",
        10,
        "PostgreSQL: most connections one process opens (API reads, the log's group commit,"
        " the projector); a request waits for a free one.",
        low=1,
    ),
    Setting(
        "projector_batch_events",
        10_000,
        "Most events one projection transaction takes on (whole deliveries, at least one):"
        " behind, a bigger fold writes each job's and edge's row once for more events"
        " (docs/projection.md#what-makes-it-fast-enough).",
        low=1,
    ),
    Setting(
        "projector_processes",
        2,
        "Processes the projector runs as on SQLite: with 2, one folds the next transaction"
        " while the other writes, so a projector behind uses two cores; 1 leaves a core"
        " to the receiver under sustained load (docs/projection.md"
        "#two-processes-taking-turns). On PostgreSQL run more `embrasure project` instead.",
        low=1,
        high=2,
    ),
    Setting(
        "notify_settle_seconds",
        10,
        "How long a notification the projector decided waits before it is sent, and is"
        " checked to still hold: results of a check that arrive out of order within it fire"
        " what they would have in order (docs/notifications.md#order).",
        low=0,
    ),
    Setting(
        "reproject_batch_events",
        20000,
        "Most events one transaction of a rebuild (reproject, or the one on start after an"
        " upgrade) takes on: a bigger fold writes each job's and edge's row once for more"
        " events, and holds the write lock longer (docs/operations.md#rebuilding-the-graph).",
        low=1,
    ),
    Setting(
        "log_compression",
        "zstd",
        "How the receiver stores bodies: zstd (with dictionaries trained from the log), or"
        " off (as received; bodies stored already stay readable either way).",
        choices=("zstd", "off"),
    ),
    Setting(
        "retain_log",
        "",
        "Keep delivery bodies in the database for this long (90d, 12h, 5m, 0s), then move"
        " those projected to --archive; empty keeps every body (docs/operations.md"
        "#retention-and-the-archive).",
        duration=True,
    ),
    Setting(
        "archive",
        "",
        "Where trimmed delivery bodies go: a directory or an fsspec URL (file://…,"
        " s3://bucket/prefix with s3fs installed); required with --retain-log. See"
        " docs/operations.md.",
    ),
    Setting(
        "retain_runs",
        "",
        "Keep runs (and their per-run rows) for this long after their latest eventTime;"
        " empty keeps every run. Each job's latest run and all lineage stay; asOf before"
        " the horizon answers 422.",
        duration=True,
    ),
    Setting(
        "kafka_bootstrap",
        "",
        "Kafka bootstrap servers (HOST:PORT,…): serve consumes --kafka-topic too, and"
        " `embrasure consume` needs it (docs/producers/kafka.md).",
    ),
    Setting("kafka_topic", "openlineage", "Kafka topics to consume, comma-separated."),
    Setting(
        "kafka_group",
        "embrasure",
        "Kafka consumer group: consumers in one group share the topics' partitions.",
    ),
    Setting(
        "kafka_provider_key",
        "",
        "provider_key of the deliveries consumed from Kafka; empty: each message's topic.",
    ),
    Setting(
        "kafka_config",
        "",
        "More librdkafka settings, KEY=VALUE (security.protocol=SASL_SSL, …): the flag may"
        " be given again for each, the variable takes one per line.",
        repeated=True,
    ),
    Setting(
        "retention_interval",
        "1h",
        "How often serve and project start a retention pass when --retain-log or"
        " --retain-runs is set (a pass that takes longer is followed by the next at once).",
        duration=True,
        low=1,
    ),
)

_DURATION = re.compile(r"(\d+)([dhms])")
_UNIT_SECONDS = {"d": 86_400, "h": 3_600, "m": 60, "s": 1}


def spell_duration(seconds: int) -> str:
    """A whole number of seconds as parse_duration reads it back: ``1d2h``, ``90m``, ``0s``."""
    parts = []
    for unit in ("d", "h", "m", "s"):
        count, seconds = divmod(seconds, _UNIT_SECONDS[unit])
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"


def parse_duration(text: str) -> datetime.timedelta:
    """``90d``, ``12h``, ``5m``, ``0s``, or several in a row (``1h30m``) → a timedelta.
    ValueError, naming the accepted forms, for anything else."""
    spelled = text.strip().lower()
    parts = _DURATION.findall(spelled)
    if not spelled or "".join(n + u for n, u in parts) != spelled:
        raise ValueError(
            f"{text!r} is not a duration: write a whole number and a unit, d (days),"
            " h (hours), m (minutes) or s (seconds), such as 90d, 12h, 5m, 0s or 1h30m"
        )
    return datetime.timedelta(seconds=sum(int(n) * _UNIT_SECONDS[u] for n, u in parts))


BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}


def _check_fernet_key(key: str) -> None:
    """ValueError unless ``key`` is empty or a Fernet key: 32 bytes, url-safe base64, what
    cryptography's ``Fernet`` takes (notify/secrets.py; checked here, where every setting
    is, without loading cryptography)."""
    if not key:
        return
    try:
        raw = base64.urlsafe_b64decode(key.encode("ascii"))
    except ValueError:  # binascii.Error, or a character outside ASCII
        raw = b""
    if len(raw) != 32:
        raise ValueError(
            "--subscription-secrets-key is not a Fernet key (32 url-safe base64 bytes:"
            " `embrasure subscriptions new-key` makes one)"
        )


def _check_issuer(issuer: str, audience: str) -> None:
    """--oidc-issuer is an https URL (http only on loopback: a test provider), and comes
    with --oidc-audience: a token for any audience would be a token for any API."""
    parts = urllib.parse.urlsplit(issuer)
    loopback = parts.hostname in ("127.0.0.1", "::1", "localhost")
    if parts.scheme != "https" and not (parts.scheme == "http" and loopback):
        raise ValueError(
            f"--oidc-issuer (EMBRASURE_OIDC_ISSUER) {issuer!r}: must be an https:// URL"
            " (http:// only on loopback)"
        )
    if not audience:
        raise ValueError(
            "--oidc-issuer needs --oidc-audience (EMBRASURE_OIDC_AUDIENCE): the aud claim"
            " the provider puts in tokens for this API"
        )


@dataclasses.dataclass(frozen=True)
class Settings:
    """Resolved settings; build with ``Settings.load`` so env and flags apply."""

    db: str = BY_NAME["db"].default
    url: str = BY_NAME["url"].default
    token: str = BY_NAME["token"].default
    host: str = BY_NAME["host"].default
    insecure: bool = BY_NAME["insecure"].default
    oidc_issuer: str = BY_NAME["oidc_issuer"].default
    oidc_audience: str = BY_NAME["oidc_audience"].default
    oidc_groups_claim: str = BY_NAME["oidc_groups_claim"].default
    oidc_leeway_seconds: int = BY_NAME["oidc_leeway_seconds"].default
    oidc_client_id: str = BY_NAME["oidc_client_id"].default
    oidc_client_secret: str = BY_NAME["oidc_client_secret"].default
    oidc_scopes: str = BY_NAME["oidc_scopes"].default
    oidc_session_hours: int = BY_NAME["oidc_session_hours"].default
    oidc_session_idle_minutes: int = BY_NAME["oidc_session_idle_minutes"].default
    port: int = BY_NAME["port"].default
    marquez_port: int = BY_NAME["marquez_port"].default
    public_url: str = BY_NAME["public_url"].default
    subscription_secrets_key: str = BY_NAME["subscription_secrets_key"].default
    webhook_allow: str = BY_NAME["webhook_allow"].default
    webhook_ports: str = BY_NAME["webhook_ports"].default
    no_projector: bool = BY_NAME["no_projector"].default
    single_process: bool = BY_NAME["single_process"].default
    upgrade: bool = BY_NAME["upgrade"].default
    read_workers: int = BY_NAME["read_workers"].default
    read_nice: int = BY_NAME["read_nice"].default
    read_timeout_seconds: int = BY_NAME["read_timeout_seconds"].default
    heavy_reads: int = BY_NAME["heavy_reads"].default
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
    projector_processes: int = BY_NAME["projector_processes"].default
    notify_settle_seconds: int = BY_NAME["notify_settle_seconds"].default
    reproject_batch_events: int = BY_NAME["reproject_batch_events"].default
    log_compression: str = BY_NAME["log_compression"].default
    retain_log: str = BY_NAME["retain_log"].default
    archive: str = BY_NAME["archive"].default
    retain_runs: str = BY_NAME["retain_runs"].default
    retention_interval: str = BY_NAME["retention_interval"].default
    kafka_bootstrap: str = BY_NAME["kafka_bootstrap"].default
    kafka_topic: str = BY_NAME["kafka_topic"].default
    kafka_group: str = BY_NAME["kafka_group"].default
    kafka_provider_key: str = BY_NAME["kafka_provider_key"].default
    kafka_config: str = BY_NAME["kafka_config"].default

    def __post_init__(self) -> None:
        # Checked once, at start-up: a value the setting does not take, or a horizon with
        # nowhere to put what it trims, is a clear error before anything runs. (load()
        # checks each value first, naming where it came from.)
        for setting in SETTINGS:
            value = getattr(self, setting.name)
            try:
                held = setting.check(value)
            except ValueError as exc:
                raise ValueError(f"{setting.flag} ({setting.env}) {value!r}: {exc}") from None
            object.__setattr__(self, setting.name, held)
        if self.retain_log and not self.archive:
            raise ValueError(
                "--retain-log needs --archive (EMBRASURE_ARCHIVE): the bodies it trims move"
                " to the archive, a directory or an fsspec URL such as s3://bucket/prefix"
            )
        if self.oidc_issuer:
            _check_issuer(self.oidc_issuer, self.oidc_audience)
        if self.oidc_client_id and not (self.oidc_issuer and self.oidc_client_secret):
            raise ValueError(
                "--oidc-client-id needs --oidc-issuer and --oidc-client-secret"
                " (EMBRASURE_OIDC_CLIENT_SECRET)"
            )
        try:
            self.kafka_client()
        except ValueError as exc:
            raise ValueError(f"--kafka-config (EMBRASURE_KAFKA_CONFIG): {exc}") from None
        _check_fernet_key(self.subscription_secrets_key)  # its message never holds the key

    def ui_url(self) -> str:
        """Where people reach the web UI: --public-url, else this server's address."""
        return self.public_url.rstrip("/") or f"http://{self.host}:{self.port}"

    def environment(self) -> dict[str, str]:
        """Every setting as its EMBRASURE_* variable: what ``serve`` hands the processes
        it starts (processes/supervisor.py), so they run with its settings."""
        return {
            s.env: ("true" if v else "false") if isinstance(v, bool) else str(v)
            for s in SETTINGS
            for v in [getattr(self, s.name)]
        }

    def kafka_client(self) -> dict[str, str]:
        """--kafka-config's KEY=VALUE entries (one per line) as librdkafka settings;
        ValueError naming an entry without ``=``."""
        client: dict[str, str] = {}
        for entry in filter(str.strip, self.kafka_config.splitlines()):
            key, sep, value = entry.partition("=")
            if not sep or not key.strip():
                raise ValueError(f"{entry!r} is not KEY=VALUE (a librdkafka setting)")
            client[key.strip()] = value.strip()
        return client

    def log_horizon(self) -> datetime.timedelta | None:
        """How long bodies stay in the database, or None when every body stays."""
        return parse_duration(self.retain_log) if self.retain_log else None

    def runs_horizon(self) -> datetime.timedelta | None:
        """How long runs stay in the graph, or None when every run stays."""
        return parse_duration(self.retain_runs) if self.retain_runs else None

    def retention_seconds(self) -> float:
        return parse_duration(self.retention_interval).total_seconds()

    @classmethod
    def load(
        cls, flags: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
    ) -> Settings:
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for s in SETTINGS:
            if flags and flags.get(s.name) is not None:
                raw, source = flags[s.name], f"{s.flag} {flags[s.name]!r}"
            elif s.env in environ:
                raw, source = environ[s.env], f"{s.env}={environ[s.env]!r}"
            else:
                continue
            try:
                values[s.name] = s.check(raw)
            except ValueError as exc:
                raise ValueError(f"{source}: {exc}") from None
        return cls(**values)


def markdown_table() -> str:
    """The docs/settings.md table, generated from SETTINGS."""
    rows = [
        "| flag | environment | default | allowed | meaning |",
        "| --- | --- | --- | --- | --- |",
    ]
    for s in SETTINGS:
        rows.append(f"| `{s.flag}` | `{s.env}` | `{s.default}` | {s.allowed} | {s.help} |")
    return "\n".join(rows) + "\n"
