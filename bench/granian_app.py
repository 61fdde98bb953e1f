"""The app ``embrasure serve --no-projector --single-process`` serves, built from the
``EMBRASURE_*`` settings, for granian to import (``granian --factory
granian_app:app``): bench/http_servers.py."""

from __future__ import annotations

from starlette.applications import Starlette

from embrasure.app import build_app
from embrasure.settings import Settings
from embrasure.store import open_store


def app() -> Starlette:
    settings = Settings.load()
    return build_app(settings, open_store(settings.db))
