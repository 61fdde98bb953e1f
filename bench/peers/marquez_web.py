"""marquez-web, Marquez's own UI, built from a Marquez checkout and driven in a real
browser against any Marquez API: Embrasure's ``serve --marquez-port`` or Marquez itself
(issue 40; docs/marquez.md#clients).

- ``build``: ``web/`` of the checkout at the tag (``--marquez-source``, as
  bench/peers/marquez_build.py takes it), ``npm ci --ignore-scripts`` and its own webpack
  production build (``NODE_OPTIONS=--openssl-legacy-provider`` for an older tag's webpack
  on Node 17+), cached under ``~/.cache/embrasure/marquez-web-{version}/``
  (``EMBRASURE_MARQUEZ_CACHE`` names another parent). Nothing of Marquez is kept in this
  repository.
- ``drive``: serves the build with its own production server (``node setupProxy.js``, as
  its Docker image does: express, the ``/api/v1`` and ``/api/v2beta`` proxy to
  ``MARQUEZ_HOST:MARQUEZ_PORT``, taken from ``--api``), opens it in headless Debian
  chromium (Playwright) and walks its pages (``Walk.STEPS``; ``--steps`` for some): the
  home page (a day's and a week's charts, the jobs whose last run failed, all jobs), the
  datasets and jobs pages with their namespace picker, the events of a day with one
  unfolded, a dataset's lineage graph with its drawer and version history, a job's
  lineage, drawer, run history and a run's facets, a failed run's error, the
  column-level graph, a symlinked path's lineage, drawer and column graph (each must
  draw the path's own name), search (all, datasets only, by name), and a tag made in the Edit
  Tag dialog and given to the dataset. It takes a screenshot at each stop (``--shots
  DIR``) and records every API request the UI made, without repeats: method, path,
  query, the body sent, status and the answer's JSON (``--record FILE``). A step whose
  element never shows, or during which the page threw (marquez-web goes blank), is
  reported and the exit status is 1.
- ``marquez``: ``drive`` against Marquez 0.50.0 itself (bench/peers/marquez_server.py),
  started on a new database of the local PostgreSQL and loaded with
  tests/marquez_web_platform.py's events; the dataset, jobs and day default to that
  platform's. Stopped, and its database dropped, afterwards.
- ``embrasure``: the same against this checkout's ``serve --marquez-port`` on a new
  SQLite file (how tests/data/marquez_web_requests.json is recorded).

Run: ``.venv/bin/python bench/peers/marquez_web.py drive --marquez-source PATH
--api http://127.0.0.1:5002 --dataset NS NAME --job NS NAME --failed-job NS NAME
--column-dataset NS NAME --events-day YYYY-MM-DD --shots DIR --record FILE``, or
``marquez --marquez-source PATH --shots DIR --record FILE`` (``embrasure`` likewise).
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
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

VERSION = "0.50.0"
CHROMIUM = "/usr/bin/chromium"
SOURCE_HELP = "a Marquez git checkout (or EMBRASURE_MARQUEZ_SOURCE)"
# After a page loads or a click: at least SETTLE_MS for the page to ask, then until no
# request has been open for QUIET_MS (at most SETTLE_MAX_S), then DRAW_MS to draw.
SETTLE_MS, QUIET_MS, DRAW_MS, SETTLE_MAX_S = 1000, 500, 500, 20.0


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
    # --ignore-scripts: 0.50.0's only install scripts print notices (core-js, Font
    # Awesome); skipped, no package can fetch a binary from outside the registry.
    subprocess.run(
        ["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund"], cwd=web, env=env, check=True
    )
    installed = time.monotonic()
    # 0.50.0's webpack 5.88 hashes with its own md4 and builds on Node 20 without this
    # (checked); an older tag's webpack asks OpenSSL for md4, which Node 17+ has only in
    # the legacy provider.
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
    """Every API request the page made, with its body and its answer."""

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
        call: dict[str, Any] = {
            "method": response.request.method,
            "path": url.path,
            "query": parse_qsl(url.query, keep_blank_values=True),
        }
        sent = response.request.post_data
        if sent:
            with contextlib.suppress(ValueError):
                sent = json.loads(sent)
            call["body"] = sent
        call["status"] = response.status
        call["response"] = body
        self.calls.append(call)

    def distinct(self) -> list[dict[str, Any]]:
        """The calls without repeats (every page asks for the namespaces and tags again),
        in the order first made."""
        seen: set[str] = set()
        kept = []
        for call in self.calls:
            key = json.dumps(call, sort_keys=True)
            if key not in seen:
                seen.add(key)
                kept.append(call)
        return kept


def node_path(kind: str, ns: str, name: str) -> str:
    """A lineage page's path (marquez-web's /lineage/:nodeType/:namespace/:name)."""
    return f"/lineage/{kind}/{quote(ns, safe='')}/{quote(name, safe='')}"


def drawer_path(kind: str, ns: str, name: str) -> str:
    """A lineage page with its node's drawer open, as a click on the node opens it."""
    node = quote(f"{kind}:{ns}:{name}", safe="")
    return f"{node_path(kind, ns, name)}?tableLevelNode={node}"


class Walk:
    """marquez-web's pages walked in one browser page, a screenshot at each stop. A step
    that fails is reported (with a screenshot) and the walk goes on with the next."""

    STEPS = (
        "home",
        "datasets",
        "jobs",
        "events",
        "dataset-lineage",
        "job-runs",
        "failed-run",
        "column-level",
        "symlinked",
        "search",
        "tag",  # last: the answers before it are the events' alone
    )

    def __init__(self, page: Any, url: str, shots: Path, args: argparse.Namespace) -> None:
        self.page, self.url, self.shots, self.args = page, url, shots, args
        self.failed: list[str] = []
        self.taken: list[str] = []
        # What the page threw (a render error blanks marquez-web's whole page): the
        # step it happened in fails.
        self.errors: list[str] = []
        page.on("pageerror", lambda error: self.errors.append(str(error)))
        self.open_requests = 0
        page.on("request", lambda _: self.count_request(1))
        page.on("requestfinished", lambda _: self.count_request(-1))
        page.on("requestfailed", lambda _: self.count_request(-1))

    def count_request(self, change: int) -> None:
        self.open_requests += change

    def run(self, steps: list[str]) -> None:
        for name in steps:
            self.errors.clear()
            try:
                getattr(self, name.replace("-", "_"))()
            except Exception as e:  # a missing element: Playwright's TimeoutError, mostly
                self.failed.append(f"{name}: {str(e).splitlines()[0]}")
                print(f"marquez_web: step {name} failed: {e}", file=sys.stderr)
                with contextlib.suppress(Exception):
                    self.shot(f"{name}-failed")
            self.failed.extend(f"{name}: the page threw {error}" for error in self.errors)

    def go(self, path: str) -> None:
        self.page.goto(self.url + path, wait_until="load")
        self.settle()

    def settle(self) -> None:
        """Until the page's requests are answered (Playwright's ``networkidle`` holds for
        a navigation only, not for what a click sets off in a single-page app)."""
        self.page.wait_for_timeout(SETTLE_MS)
        quiet, deadline = 0, time.monotonic() + SETTLE_MAX_S
        while quiet < QUIET_MS and time.monotonic() < deadline:
            quiet = quiet + 100 if self.open_requests <= 0 else 0
            self.page.wait_for_timeout(100)
        self.page.wait_for_timeout(DRAW_MS)

    def click(self, locator: Any) -> None:
        locator.click()
        self.settle()

    def shot(self, name: str) -> None:
        self.page.screenshot(path=str(self.shots / f"{name}.png"))
        self.taken.append(name)

    def pick_namespace(self, namespace: str) -> None:
        """The namespace picker of the jobs and datasets pages."""
        self.page.locator("#namespace-select").click()
        self.click(self.page.get_by_role("option", name=namespace, exact=True))

    def open_run(self, run_state: str | None = None) -> None:
        """In an open job drawer: the run history tab, then a run's details (its facets,
        a failed run's error): the first run, or the first in ``run_state``."""
        self.click(self.page.get_by_role("tab", name="RUN HISTORY"))
        rows = self.page.locator("tbody tr")
        if run_state is not None:
            rows = rows.filter(has_text=run_state)
        self.click(rows.first)

    def home(self) -> None:
        """The dashboard: the day's stats and the latest jobs; then the week's, and the
        jobs whose last run failed (its FAILED button); then all jobs (See More)."""
        self.go("/")
        self.shot("home")
        self.click(self.page.get_by_role("button", name="7 Days"))
        self.click(self.page.get_by_role("button", name="FAILED", exact=True))
        self.shot("home-failed")
        self.click(self.page.get_by_role("button", name="See More"))
        self.shot("home-jobs-drawer")

    def datasets(self) -> None:
        self.go("/datasets")
        self.pick_namespace(self.args.dataset[0])
        self.shot("datasets")

    def jobs(self) -> None:
        """The jobs page, by its link in the side bar: marquez-web's own server does not
        serve /jobs to a browser asking for it directly (setupProxy.js lists the other
        pages' paths, not that one), so it is reached as a user does."""
        self.go("/")
        self.click(self.page.locator('a[href="/jobs"]').first)
        self.shot("jobs")
        self.pick_namespace(self.args.job[0])
        self.shot("jobs-picked")

    def events(self) -> None:
        """The events of a day (the page's ?dateFrom=&dateTo=), the first one unfolded."""
        day = self.args.events_day or time.strftime("%Y-%m-%d", time.gmtime())
        self.go(f"/events?dateFrom={day}T00:00:00.000Z&dateTo={day}T23:59:59.000Z")
        self.click(self.page.locator("tbody tr").first)
        self.shot("events")

    def dataset_lineage(self) -> None:
        """A dataset's lineage graph; its drawer (details, schema, facets); its versions."""
        self.go(node_path("dataset", *self.args.dataset))
        self.shot("dataset-lineage")
        self.go(drawer_path("dataset", *self.args.dataset))
        self.shot("dataset-drawer")
        self.click(self.page.get_by_role("tab", name="VERSION HISTORY"))
        self.shot("dataset-versions")

    def tag(self) -> None:
        """A tag made with the dataset drawer's Edit Tag dialog (PUT /tags/{tag}), then
        given to the dataset with the drawer's tag picker (POST .../tags/{tag})."""
        tag, page = self.args.tag, self.page
        self.go(drawer_path("dataset", *self.args.dataset))
        page.locator("button", has_text="Edit Tag").first.click()
        name = page.get_by_placeholder("Search for a Tag")
        name.fill(tag)
        name.press("Enter")
        page.locator("#tag-description").fill(f"{tag}, added in marquez-web")
        self.click(page.get_by_role("button", name="Submit"))
        page.locator("#dataset-tags").click()
        self.click(page.get_by_role("option", name=tag).first)
        page.keyboard.press("Escape")
        self.shot("tagged")

    def job_runs(self) -> None:
        """A job's lineage with its drawer (latest run, job facets), and a run's facets."""
        self.go(node_path("job", *self.args.job))
        self.shot("job-lineage")
        self.go(drawer_path("job", *self.args.job))
        self.shot("job-drawer")
        self.open_run()
        self.shot("job-run")

    def failed_run(self) -> None:
        """The failed job's drawer, and its failed run's facets (the error message)."""
        if not self.args.failed_job:
            return
        self.go(drawer_path("job", *self.args.failed_job))
        self.shot("failed-run-drawer")
        self.open_run("FAILED")
        self.shot("failed-run")

    def column_level(self) -> None:
        ns, name = self.args.column_dataset or self.args.dataset
        self.go(f"/datasets/column-level/{quote(ns, safe='')}/{quote(name, safe='')}")
        self.shot("column-level")

    def symlinked(self) -> None:
        """A path its writer's symlinks facet names as a table whose identity sorts first
        (Spark writing a metastore table): its lineage page, drawer and column graph,
        each drawn under the path's own name (docs/marquez.md#symlinks)."""
        if not self.args.symlinked:
            return
        ns, name, field = self.args.symlinked
        self.go(node_path("dataset", ns, name))
        self.shot("symlinked-lineage")
        self.expect(name, field)
        self.go(drawer_path("dataset", ns, name))
        self.shot("symlinked-drawer")
        self.expect(name, field)
        self.go(f"/datasets/column-level/{quote(ns, safe='')}/{quote(name, safe='')}")
        self.shot("symlinked-column-level")
        self.expect(name, field)

    def expect(self, *texts: str) -> None:
        """Each of ``texts`` drawn on the page: the name (the header shows it even over
        a blank graph) and one of the dataset's fields, which only a drawn graph, drawer
        or column graph shows."""
        for text in texts:
            self.page.get_by_text(text).first.wait_for(state="visible")

    def search(self) -> None:
        """The bar on every page, opened with Ctrl+K as a user does and typed into; then
        datasets only, sorted by name; then the first answer opened."""
        page = self.page
        self.go("/datasets")
        page.keyboard.press("Control+k")
        page.keyboard.type(self.args.search or self.args.dataset[1].split(".")[-1][:5], delay=50)
        self.settle()
        self.shot("search")
        self.click(page.locator("#chip-DATASET"))
        self.click(page.locator("#chip-NAME"))
        self.shot("search-datasets")


def drive(url: str, args: argparse.Namespace, shots: Path) -> tuple[Recorder, Walk]:
    from playwright.sync_api import sync_playwright

    shots.mkdir(parents=True, exist_ok=True)
    recorder = Recorder()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 900}, timezone_id="UTC")
        page.set_default_timeout(10_000)
        page.on("response", recorder.response)
        walk = Walk(page, url, shots, args)
        walk.run(args.steps or list(Walk.STEPS))
        browser.close()
    return recorder, walk


def _platform() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """tests/marquez_web_platform.py's events, and the drive's defaults for them."""
    bench, tests = Path(__file__).resolve().parents[1], Path(__file__).resolve().parents[2]
    for folder in (bench, tests / "tests"):
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
    from embrasure.cli import demo

    import marquez_web_platform as platform  # tests/marquez_web_platform.py

    defaults = {
        "dataset": list(platform.DATASET),
        "job": list(platform.JOB),
        "failed_job": list(platform.FAILED_JOB),
        # Marquez draws a dataset's column graph from the columns it was made from: a
        # source table (platform.DATASET) has an empty one.
        "column_dataset": [demo.WAREHOUSE, "analytics.customers_masked"],
        "events_day": demo.DAY,
        "symlinked": [demo.LAKE, demo.SPARK_PATH, "customer_id"],
    }
    return platform.events(), defaults


@contextlib.contextmanager
def marquez_loaded(work: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """Marquez itself (bench/peers/marquez_server.py) on a new database, with the
    platform's events POSTed one at a time; the API's URL and the drive's defaults."""
    events, defaults = _platform()
    import httpx

    from peers import marquez_server

    with marquez_server.marquez_database(work) as db_url:
        server = marquez_server.start_marquez(work, db_url)
        try:
            with httpx.Client(base_url=server.url, timeout=60) as client:
                for event in events:
                    client.post("/api/v1/lineage", json=event).raise_for_status()
            yield server.url, defaults
        finally:
            server.stop()


@contextlib.contextmanager
def embrasure_loaded(work: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """``embrasure serve --marquez-port`` of this checkout on a new SQLite file, with the
    platform's events POSTed as one batch and projected; the Marquez port's URL and the
    drive's defaults."""
    events, defaults = _platform()
    import httpx
    import servers  # bench/servers.py
    import storage_sizes  # bench/storage_sizes.py

    port = servers.free_port()
    source = Path(__file__).resolve().parents[2]
    server = servers.start_embrasure(
        work, work / "embrasure.db", source, projector=True, extra=["--marquez-port", str(port)]
    )
    try:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            client.post("/api/v1/lineage/batch", json=events).raise_for_status()
        storage_sizes.wait_projected(server.url, 60.0)
        yield f"http://127.0.0.1:{port}", defaults
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("command", choices=("build", "drive", "marquez", "embrasure"))
    parser.add_argument("--marquez-source", type=Path, default=None, help=SOURCE_HELP)
    parser.add_argument("--api", default="http://127.0.0.1:5002", help="the Marquez API")
    parser.add_argument("--dataset", nargs=2, default=None, metavar=("NS", "NAME"))
    parser.add_argument("--job", nargs=2, default=None, metavar=("NS", "NAME"))
    parser.add_argument("--failed-job", nargs=2, default=None, metavar=("NS", "NAME"))
    parser.add_argument(
        "--column-dataset",
        nargs=2,
        default=None,
        metavar=("NS", "NAME"),
        help="the column-level page's dataset (default: --dataset)",
    )
    parser.add_argument(
        "--symlinked",
        nargs=3,
        default=None,
        metavar=("NS", "NAME", "FIELD"),
        help="a symlinked path and one of its fields, drawn under its name (default: none for"
        " drive; the platform's Spark path for marquez and embrasure)",
    )
    parser.add_argument(
        "--events-day", default=None, help="the events page's day, YYYY-MM-DD (default: today)"
    )
    parser.add_argument("--tag", default="PII", help="the tag made and given to --dataset")
    parser.add_argument("--search", default=None, help="typed in the search bar")
    parser.add_argument(
        "--steps", nargs="+", choices=Walk.STEPS, default=None, help="these only (default: all)"
    )
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
    with contextlib.ExitStack() as stack:
        api = args.api
        if args.command in ("marquez", "embrasure"):
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="marquez-web-")))
            loaded = marquez_loaded if args.command == "marquez" else embrasure_loaded
            api, defaults = stack.enter_context(loaded(work))
            for key, value in defaults.items():
                if getattr(args, key) is None:
                    setattr(args, key, value)
        if args.dataset is None or args.job is None:
            print("marquez_web: drive needs --dataset NS NAME and --job NS NAME", file=sys.stderr)
            return 2
        url = stack.enter_context(serving(web, api))
        recorder, walk = drive(url, args, args.shots)
    calls = recorder.distinct()
    statuses = sorted({c["status"] for c in calls})
    print(
        f"{len(recorder.calls)} API requests ({len(calls)} distinct, statuses {statuses});"
        f" {len(walk.taken)} screenshots in {args.shots}"
    )
    if args.record is not None:
        args.record.parent.mkdir(parents=True, exist_ok=True)
        args.record.write_text(json.dumps(calls, indent=1) + "\n")
    for failed in walk.failed:
        print(f"marquez_web: failed: {failed}", file=sys.stderr)
    return 1 if walk.failed else 0


if __name__ == "__main__":
    sys.exit(main())
