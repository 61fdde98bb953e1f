"""Logging set-up: plain lines for a terminal, or one JSON object per line (``--log-format
json``) for a log pipeline, with the fields a line carries as ``extra`` (``delivery_id``,
``seq``, ``deliveries``…) as top-level keys, so a delivery can be followed by its id."""

from __future__ import annotations

import logging
import re
import time
from datetime import UTC, datetime
from typing import Any

import orjson

# The attributes every LogRecord has; anything else on a record came from ``extra``
# (except uvicorn's terminal-coloured copy of its message).
_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {
    "message",
    "asctime",
    "color_message",
}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                doc[key] = value
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(doc, default=str).decode()


_configured: tuple[str, str] = ("info", "text")


def configure(level: str, fmt: str) -> None:
    global _configured
    _configured = (level, fmt)
    handler = logging.StreamHandler()
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # httpx logs each request it sends at INFO: under serve, every read the receiver
    # forwards (web/forward.py), and the notifier's every webhook.
    logging.getLogger("httpx").setLevel(max(root.level, logging.WARNING))


def configured() -> tuple[str, str]:
    """The level and format ``configure`` set, for a process this one starts."""
    return _configured


class Repeats(logging.Filter):
    """Lets the first line of a kind through, then drops that kind's lines for
    ``window`` seconds; the first one after says how many it stood for. A kind is the
    logger, the level and the message with its numbers blanked (a port, an offset, a
    duration), so a broker refusing connections 20 times a second is one line a minute,
    not 1,200 (docs/producers/kafka.md#logs)."""

    MAX_KINDS = 1000  # past it, the oldest kinds are forgotten

    def __init__(self, window: float = 60.0) -> None:
        super().__init__()
        self.window = window
        self._kinds: dict[tuple[str, int, str], tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        kind = (record.name, record.levelno, re.sub(r"\d+", "#", text))
        now = time.monotonic()
        shown, dropped = self._kinds.get(kind, (None, 0))
        if shown is not None and now - shown < self.window:
            self._kinds[kind] = (shown, dropped + 1)
            return False
        if len(self._kinds) >= self.MAX_KINDS:
            del self._kinds[next(iter(self._kinds))]
        self._kinds[kind] = (now, 0)
        if dropped:
            record.msg, record.args = f"{text} ({dropped} more like it since)", None
        return True
