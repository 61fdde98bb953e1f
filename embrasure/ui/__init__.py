"""The web UI (docs/ui.md): a page at ``/`` and its static files at ``/ui/static/``.

The UI is plain HTML, CSS and JS modules that fetch the JSON read API (docs/ui.md); the
graph libraries it uses (cytoscape.js and its dagre layout) are vendored into
``static/vendor/`` by scripts/build-ui and ship in the wheel, so a ``pip install`` serves
the whole UI with no Node.js and nothing fetched from another host.
"""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from embrasure.web.auth import public

STATIC = Path(__file__).parent / "static"


# The page loads only its own files: no other host, no inline script, no plugin, no
# framing. Names in events are inserted as text (js/dom.js); this is the second fence.
# Inline styles are allowed: cytoscape.js sets its canvases' style attributes.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


async def index(request: Request) -> Response:
    # The page is a shell: every view is a hash route (#/dataset?…) drawn by app.js, so
    # one URL serves them all and entity names never need to fit in a path.
    return FileResponse(
        STATIC / "index.html",
        media_type="text/html",
        headers={"Content-Security-Policy": CONTENT_SECURITY_POLICY},
    )


def routes() -> list[BaseRoute]:
    # Open to all (auth.public): the page and its files hold no data; the API calls the
    # page makes carry the user's token (js/api.js).
    return [
        Route("/", public(index), methods=["GET"]),
        Mount("/ui/static", app=StaticFiles(directory=STATIC), name="ui-static"),
    ]
