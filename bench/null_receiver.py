"""The null receiver: Embrasure's HTTP stack with nothing behind the parse.

The single-event ingest target is a fraction of what this answers (bench/ingest.py), so it
must be the same stack as ``embrasure serve``: Starlette routes on uvicorn with uvloop and
httptools, access log off, one process; and it must do the one piece of work every
receiver has to do, reading the body and parsing it with the same JSON library (orjson,
as ``embrasure.receiver.jsonguard``). It stores nothing and checks nothing else.

Run: ``python bench/null_receiver.py --port 8001``.
"""

from __future__ import annotations

import argparse

import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

# A receipt-sized answer, so the response costs what Embrasure's 202 costs on the wire.
RECEIPT = orjson.dumps(
    {"delivery_id": "0" * 26, "state": "accepted", "duplicate": False, "item_count": 1}
)


async def ingest(request: Request) -> Response:
    orjson.loads(await request.body())
    return Response(RECEIPT, 202, media_type="application/json")


async def healthz(request: Request) -> Response:
    return Response(b'{"status":"ok"}', media_type="application/json")


def build_app() -> Starlette:
    # The same two POST paths as Embrasure's receiver, so the Lua script is shared.
    return Starlette(
        routes=[
            Route("/api/v1/lineage", ingest, methods=["POST"]),
            Route("/api/v1/lineage/batch", ingest, methods=["POST"]),
            Route("/healthz", healthz, methods=["GET"]),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    args = parser.parse_args()
    uvicorn.run(
        build_app(),
        host=args.host,
        port=args.port,
        loop="uvloop",
        http="httptools",
        access_log=False,
        log_level="warning",
        workers=None,  # one process, like `embrasure serve`
    )


if __name__ == "__main__":
    main()
