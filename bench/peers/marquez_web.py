"""marquez-web, Marquez's own UI, built from a Marquez checkout and driven in a real
browser against any Marquez API: Embrasure's ``serve --marquez-port`` or Marquez itself
(issue 40; docs/marquez.md#clients).

- ``build``: ``web/`` of the checkout at the tag (``--marquez-source``, as
  bench/peers/marquez_build.py takes it), ``npm ci`` and its own webpack production build,
  cached under ``~/.cache/embrasure/marquez-web-{version}/``. Nothing of Marquez is kept in
  this repository.
- ``drive``: serves the build with its own server (``setupProxy.js``: express, the
  ``/api/v1`` and ``/api/v2beta`` proxy to ``MARQUEZ_HOST:MARQUEZ_PORT``), opens it in
  headless Debian chromium (Playwright) and walks its pages — the home page with its
  charts, the namespace picker, jobs, datasets, a dataset's lineage graph with a node's
  drawer, a job's runs and facets, the column-level graph, the events page, search, a
  tag added to a dataset, and a failed run's job — taking a screenshot of each
  (``--shots DIR``) and recording every API request the UI made, with the answer's
  status and JSON (``--record FILE``).

Run: ``.venv/bin/python bench/peers/marquez_web.py drive --marquez-source PATH
--api http://127.0.0.1:5002 --dataset NS NAME --job NS NAME --failed-job NS NAME
--shots docs/screenshots/marquez-web --record tests/data/marquez_web_requests.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

VERSION = "0.50.0"
CHROMIUM = "/usr/bin/chromium"
SOURCE_HELP = "a Marquez git checkout (or EMBRASURE_MARQUEZ_SOURCE)"
SETTLE_MS = 3000  # for a page's requests and drawing, after it loaded


def cache_dir(version: str = VERSION) -> Path:
    parent = os.environ.get("EMBRASURE_MARQUEZ_CACHE")
    base = Path(parent) if parent else Path.home() / ".cache" / "embrasure"
    return base / f"marquez-web-{version}"


def build(source: Path, version: str = VERSION) -> Path:
    """marquez-web's ``dist/`` (with its server), built once per version."""
    web = cache_dir(version) / "src" / "web"
    if (web / "dist" / "index.html").exists():
        return web
    shutil.rmtree(web.parent, ignore_errors=True)
    web.parent.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(source), "archive", version, "web"], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(web.parent)], input=archive, check=True)
    env = {**os.environ, "CYPRESS_INSTALL_BINARY": "0", "PUPPETEER_SKIP_DOWNLOAD": "1"}
    started = time.monotonic()
    # --ignore-scripts: no package's install script fetches a binary from outside the
    # registry (none of the build's needs one).
    subprocess.run(
        ["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund"], cwd=web, env=env, check=True
    )
    installed = time.monotonic()
    # webpack 5 on Node 17+ needs the legacy OpenSSL provider for its md4 hashes.
    env["NODE_OPTIONS"] = "--openssl-legacy-provider"
    subprocess.run(["npx", "webpack", "--config", "webpack.prod.js"], cwd=web, env=env, check=True)
    print(
        f"marquez-web {version}: npm ci {installed - started:.0f} s, webpack"
        f" {time.monotonic() - installed:.0f} s"
    )
    return web


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def serving(web: Path, api: str) -> Iterator[str]:
    """marquez-web's own server (setupProxy.js) in front of the API at ``api``."""
    parts = urlsplit(api)
    port = free_port()
    env = {
        **os.environ,
        "MARQUEZ_HOST": parts.hostname or "127.0.0.1",
        "MARQUEZ_PORT": str(parts.port or 80),
        "WEB_PORT": str(port),
    }
    log = open(web.parent / "serve.log", "wb")  # noqa: SIM115 - the child keeps it
    proc = subprocess.Popen(["node", "setupProxy.js"], cwd=web, env=env, stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()


class Recorder:
    """Every API request the page made, with its answer."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def response(self, response: Any) -> None:
        url = urlsplit(response.url)
        if not url.path.startswith("/api/"):
            return
        try:
            body = response.json()
        except Exception:  # a non-JSON answer (a 4xx in plain text) is kept as text
            body = response.text()
        self.calls.append(
            {
                "method": response.request.method,
                "path": url.path,
                "query": parse_qsl(url.query, keep_blank_values=True),
                "status": response.status,
                "response": body,
            }
        )


def drive(url: str, args: argparse.Namespace, shots: Path) -> list[dict[str, Any]]:
    from playwright.sync_api import sync_playwright

    shots.mkdir(parents=True, exist_ok=True)
    recorder = Recorder()
    ds_ns, ds_name = args.dataset
    job_ns, job_name = args.job
    ds_lineage = f"/lineage/dataset/{quote(ds_ns, safe='')}/{quote(ds_name, safe='')}"
    pages = [
        ("home", "/"),
        ("datasets", "/datasets"),
        ("events", "/events"),
        ("dataset-lineage", ds_lineage),
        ("job-lineage", f"/lineage/job/{quote(job_ns, safe='')}/{quote(job_name, safe='')}"),
        (
            "column-level",
            f"/datasets/column-level/{quote(ds_ns, safe='')}/{quote(ds_name, safe='')}",
        ),
    ]
    if args.failed_job:
        ns, name = args.failed_job
        # The job's drawer (its runs, the failed one's error, its facets), as a click on
        # the node opens it: the lineage page's ?tableLevelNode=.
        node = quote(f"job:{ns}:{name}", safe="")
        lineage = f"/lineage/job/{quote(ns, safe='')}/{quote(name, safe='')}"
        pages.append(("failed-run", lineage))
        pages.append(("failed-run-drawer", f"{lineage}?tableLevelNode={node}"))
    node = quote(f"dataset:{ds_ns}:{ds_name}", safe="")
    pages.append(("dataset-drawer", f"{ds_lineage}?tableLevelNode={node}"))
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.on("response", recorder.response)
        for name, path in pages:
            page.goto(url + path, wait_until="load")
            page.wait_for_timeout(SETTLE_MS)
            page.screenshot(path=str(shots / f"{name}.png"))
        # The jobs page, by its link in the side bar: marquez-web's own server does not
        # serve /jobs to a browser asking for it directly (setupProxy.js lists the other
        # pages' paths, not that one), so it is reached as a user does, from another page.
        page.goto(url + "/", wait_until="load")
        page.wait_for_timeout(SETTLE_MS)
        page.locator('a[href="/jobs"]').first.click()
        page.wait_for_timeout(SETTLE_MS)
        page.screenshot(path=str(shots / "jobs.png"))
        # The namespace picker: the job's namespace picked.
        page.locator("#namespace-select").click()
        page.get_by_role("option", name=job_ns, exact=True).click()
        page.wait_for_timeout(SETTLE_MS)
        page.screenshot(path=str(shots / "jobs-picked.png"))
        # Search: the bar on every page, opened with Ctrl+K as a user does.
        page.goto(url + "/datasets", wait_until="load")
        page.keyboard.press("Control+k")
        page.keyboard.type(ds_name.split(".")[-1][:5], delay=50)
        page.wait_for_timeout(SETTLE_MS)
        page.screenshot(path=str(shots / "search.png"))
        # A tag added to the dataset, through the API as marquez-web's tag dialog sends it.
        page.evaluate(
            "([ns, name]) => fetch(`/api/v1/namespaces/${encodeURIComponent(ns)}/datasets/"
            "${encodeURIComponent(name)}/tags/PII`, {method: 'POST'})",
            [ds_ns, ds_name],
        )
        page.goto(url + ds_lineage, wait_until="load")
        page.wait_for_timeout(SETTLE_MS)
        page.screenshot(path=str(shots / "tagged.png"))
        browser.close()
    return recorder.calls


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("build", "drive"))
    parser.add_argument("--marquez-source", type=Path, default=None, help=SOURCE_HELP)
    parser.add_argument("--api", default="http://127.0.0.1:5002", help="the Marquez API")
    parser.add_argument("--dataset", nargs=2, default=None, metavar=("NS", "NAME"))
    parser.add_argument("--job", nargs=2, default=None, metavar=("NS", "NAME"))
    parser.add_argument("--failed-job", nargs=2, default=None, metavar=("NS", "NAME"))
    parser.add_argument("--shots", type=Path, default=Path("marquez-web-shots"))
    parser.add_argument("--record", type=Path, default=None)
    args = parser.parse_args(argv)
    source = args.marquez_source or os.environ.get("EMBRASURE_MARQUEZ_SOURCE")
    if source is None:
        print(f"marquez_web: --marquez-source is needed: {SOURCE_HELP}", file=sys.stderr)
        return 2
    web = build(Path(source))
    if args.command == "build":
        return 0
    if args.dataset is None or args.job is None:
        print("marquez_web: drive needs --dataset NS NAME and --job NS NAME", file=sys.stderr)
        return 2
    with serving(web, args.api) as url:
        calls = drive(url, args, args.shots)
    print(f"{len(calls)} API requests; screenshots in {args.shots}")
    if args.record is not None:
        args.record.parent.mkdir(parents=True, exist_ok=True)
        args.record.write_text(json.dumps(calls, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
