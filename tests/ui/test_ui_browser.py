"""The web UI in a real browser (docs/ui.md): Debian's chromium driven by Playwright,
against a real server process loaded through the API.

The fixture graph is the demo platform (embrasure/cli/demo.py: an Airflow DAG, Spark, dbt
models with a masked column, a dashboard) plus what the demo lacks: a failed run with
an error and SQL, a hub read by more jobs than the graph draws, a fan-out of about 500
nodes, a quarantined event, and eight nights of a load with statistics, schema changes
and a check that fails (tests/ui/nightly.py). One server and one browser serve every test here.

`EMBRASURE_SCREENSHOTS=DIR` saves a screenshot of each page into DIR
(scripts/screenshots writes docs/screenshots/ this way).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from embrasure import ui
from embrasure.cli import demo
from embrasure.projector.causes import KINDS

import nightly
import producer_events as pe
from conftest import ServerProcess
from http_client import HTTP

CHROMIUM = "/usr/bin/chromium"
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        shutil.which(CHROMIUM) is None, reason=f"{CHROMIUM} is absent (scripts/test installs it)"
    ),
]

WAREHOUSE = demo.WAREHOUSE
ORDERS_CLEAN = f"dataset:{WAREHOUSE}:{demo.TABLE}"
CAP = 12  # new neighbours drawn on each side of a node (summarize.js)
HUB_READERS = 40  # more than that
# root → 12 jobs → 144 parts → 144 loads → 144 outputs → 144 readers: 589 nodes, no node
# with more than CAP neighbours; the server sends 500 of them (its page limit).
FAN_JOBS, FAN_WIDTH = 12, 12
PAGE_NODES = 500
CHILD_PAGE = 25  # child runs listed at once (runs.js)
HOURLY_RUNS = 30  # more than a page of runs (25 on a job page, 20 on a dataset page)
SCREENSHOTS = os.environ.get("EMBRASURE_SCREENSHOTS")
# Generous waits: CI's two cores may be busy with the rest of the suite (or another
# checkout's); a page that never shows what is expected still fails, just later.
expect.set_options(timeout=15_000)


def _run(
    job: str,
    n: int,
    state: str,
    minute: int,
    *,
    job_facets: dict[str, Any] | None = None,
    run_facets: dict[str, Any] | None = None,
    inputs: list[dict[str, str]] | None = None,
    outputs: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    return {
        "eventType": state,
        "eventTime": f"{demo.DAY}T{4 + minute // 60:02d}:{minute % 60:02d}:00Z",
        "producer": demo.SPARK,
        "schemaURL": f"{demo.CORE}#/$defs/RunEvent",
        "run": {"runId": f"01943c00-0000-7000-9000-{n:012x}", "facets": run_facets or {}},
        "job": {"namespace": "ui-tests", "name": job, "facets": job_facets or {}},
        "inputs": inputs or [],
        "outputs": outputs or [],
    }


def _facet(schema: str, version: str, /, **fields: Any) -> dict[str, Any]:
    url = f"https://openlineage.io/spec/facets/{version}/{schema}.json#/$defs/{schema}"
    return {"_producer": demo.SPARK, "_schemaURL": url, **fields}


def _ds(namespace: str, name: str) -> dict[str, str]:
    return {"namespace": namespace, "name": name}


def extra_events() -> list[Any]:
    sql = _facet(
        "SQLJobFacet",
        "1-1-0",
        query="INSERT INTO analytics.refunds\nSELECT order_id, amount\nFROM analytics.orders_clean",
    )
    error = _facet(
        "ErrorMessageRunFacet",
        "1-0-1",
        message="division by zero in refunds.amount",
        programmingLanguage="SQL",
    )
    ins, outs = [_ds(WAREHOUSE, demo.TABLE)], [_ds(WAREHOUSE, "analytics.refunds")]
    events: list[Any] = [
        _run("refunds", 1, "START", 0, job_facets={"sql": sql}, inputs=ins, outputs=outs),
        _run("refunds", 1, "FAIL", 3, job_facets={"sql": sql}, run_facets={"errorMessage": error}),
    ]
    for n in range(HUB_READERS):
        events.append(
            _run(f"report_{n:02d}", 100 + n, "COMPLETE", 5, inputs=[_ds(WAREHOUSE, demo.MODELS[2])])
        )
    for j in range(FAN_JOBS):
        outputs = [_ds("s3://fan", f"part_{j:02d}_{k:02d}") for k in range(FAN_WIDTH)]
        events.append(
            _run(
                f"split_{j:02d}",
                200 + j,
                "COMPLETE",
                6,
                inputs=[_ds("s3://fan", "root")],
                outputs=outputs,
            )
        )
        for k, out in enumerate(outputs):
            n = 300 + 2 * (j * FAN_WIDTH + k)
            loaded = _ds("s3://fan", f"loaded_{j:02d}_{k:02d}")
            load = f"load_{j:02d}_{k:02d}"
            events.append(_run(load, n, "COMPLETE", 7, inputs=[out], outputs=[loaded]))
            events.append(_run(f"use_{j:02d}_{k:02d}", n + 1, "COMPLETE", 8, inputs=[loaded]))
    # What a catalog says about the Spark table (a DatasetEvent: no job, no run).
    about = {
        "documentation": _facet(
            "DocumentationDatasetFacet", "1-1-0", description="Orders, deduplicated, in EUR."
        ),
        "ownership": _facet(
            "OwnershipDatasetFacet",
            "1-0-1",
            owners=[{"name": "team:data-platform", "type": "MAINTAINER"}],
        ),
        "dataSource": _facet(
            "DatasourceDatasetFacet", "1-0-1", name="metastore", uri="hive://metastore.demo:9083"
        ),
    }
    events.append(
        {
            "eventTime": f"{demo.DAY}T04:09:00Z",
            "producer": demo.DBT,
            "schemaURL": f"{demo.CORE}#/$defs/DatasetEvent",
            "dataset": {"namespace": WAREHOUSE, "name": demo.TABLE, "facets": about},
        }
    )
    # An hourly job with more runs than a page shows, in every state.
    hourly = [_ds(WAREHOUSE, "analytics.hourly")]
    for i in range(HOURLY_RUNS):
        start = 60 + 2 * i
        events.append(_run("hourly", 600 + i, "START", start, outputs=hourly))
        if i < HOURLY_RUNS - 1:  # the last one is still running
            end = "FAIL" if i % 7 == 3 else "ABORT" if i % 11 == 5 else "COMPLETE"
            events.append(_run("hourly", 600 + i, end, start + 1, outputs=hourly))
    events.append(_run("bad", 0, "COMPLETE", 8) | {"run": {"runId": "not-a-uuid"}})
    # Producer hierarchies (tests/producer_events.py): a dbt test invocation from the
    # corpus (invocation → tests → queries, each naming the invocation as root) and a dbt
    # run with more models than a page of child runs. Moved to the demo's night, before
    # the hourly job, so that the home page's latest run stays the hourly one.
    for minute, event in enumerate(pe.dbt_singular_tests() + pe.dbt_sized_run(CHILD_PAGE + 5)):
        event["eventTime"] = f"{demo.DAY}T02:{minute // 60:02d}:{minute % 60:02d}Z"
        events.append(event)
    # Eight nights before the demo's day: statistics, schema changes, checks, a DAG run.
    events.extend(nightly.events())
    return events


def _projected(http: httpx.Client, delivery_id: str) -> bool:
    state: str = http.get(f"/api/v1/deliveries/{delivery_id}").json()["state"]
    return state != "accepted"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path_factory.mktemp("ui") / "ui.db").start()
    try:
        with httpx.Client(base_url=proc.url, timeout=30) as http:
            ids = []
            for provider, batch in ((demo.PROVIDER_KEY, demo.events()), (None, extra_events())):
                r = http.post(
                    "/api/v1/lineage/batch",
                    content=orjson.dumps(batch),
                    headers={"Content-Type": "application/json"},
                    params={"provider_key": provider} if provider else {},
                )
                assert r.status_code == 202, r.text
                ids.append(r.json()["delivery_id"])
            deadline = time.monotonic() + 30
            while not all(_projected(http, i) for i in ids):
                assert time.monotonic() < deadline, "the projector did not catch up"
                time.sleep(0.1)
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    # Debian's chromium, never a browser Playwright downloads; --no-sandbox because the
    # tests run as root in CI, where chromium's sandbox refuses to start.
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture
def page(browser: Browser, server: ServerProcess) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, base_url=server.url)
    errors: list[str] = []
    p = context.new_page()
    p.on("pageerror", lambda e: errors.append(str(e)))
    # Console errors too: a failed API call, a blocked load (the page's CSP).
    p.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    p.set_default_timeout(15_000)
    yield p
    # Whatever the test looked at: no uncaught script error, and no JavaScript value
    # that leaked into the text where a name or a number belongs.
    shown = p.inner_text("main")
    context.close()
    assert errors == [], errors
    assert not re.search(r"\b(null|undefined|NaN)\b|\[object Object\]", shown), shown


def shot(page: Page, name: str) -> None:
    if SCREENSHOTS:
        Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
        page.wait_for_timeout(300)  # let the canvas paint its last frame
        page.screenshot(path=f"{SCREENSHOTS}/{name}.png", full_page=True)


def graph_nodes(page: Page) -> Any:
    return page.get_by_role("list", name="Nodes in the lineage graph")


# -- the tests ---------------------------------------------------------------------------------


def test_home_page_shows_counters_backlog_and_recent_runs(page: Page) -> None:
    page.goto("/")
    counters = page.get_by_role("region", name="Ingest counters")
    expect(counters).to_contain_text("Deliveries")
    expect(counters.locator(".card").nth(2)).to_contain_text("0 deliveries waiting")
    events = counters.locator(".card").nth(1)
    expect(events.locator(".big")).to_have_text(str(len(demo.events()) + len(extra_events())))
    expect(events).to_contain_text("1 quarantined")
    recent = page.get_by_role("region", name="Recent runs")
    # The hourly job's last run, started at 05:58 and still going, has the latest event.
    expect(recent.locator("tr.run").first).to_contain_text("hourly")
    expect(recent.locator("tr.run").first.locator(".state")).to_have_text("START")
    shot(page, "home")


def test_a_namespace_lists_its_datasets_a_page_at_a_time(page: Page) -> None:
    page.goto("/")
    page.get_by_role("region", name="Namespaces").get_by_role("link", name="s3://fan").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("s3://fan")
    datasets = page.get_by_role("region", name="Datasets")
    expect(datasets.get_by_role("listitem")).to_have_count(100)
    more = datasets.get_by_role("button", name="More")
    more.click()
    expect(datasets.get_by_role("listitem")).to_have_count(200)
    more.click()
    expect(datasets.get_by_role("listitem")).to_have_count(1 + 2 * FAN_JOBS * FAN_WIDTH)
    expect(more).to_be_hidden()
    expect(page.get_by_role("region", name="Jobs")).to_contain_text("None.")
    datasets.get_by_role("link", name="root", exact=True).click()
    expect(page.get_by_role("heading", level=1)).to_have_text("root")


def test_search_with_the_keyboard_opens_a_dataset_with_its_graph(page: Page) -> None:
    page.goto("/")
    page.keyboard.press("/")  # the shortcut focuses the search box
    page.keyboard.type("orders_clean")
    options = page.get_by_role("option")
    expect(options).to_have_count(2)
    expect(options.nth(0)).to_contain_text("job")  # the exact match first
    expect(options.nth(1)).to_contain_text("analytics.orders_clean")
    page.keyboard.press("ArrowDown")
    expect(options.nth(1)).to_have_attribute("aria-selected", "true")
    page.keyboard.press("Enter")

    expect(page.get_by_role("heading", level=1)).to_have_text("analytics.orders_clean")
    nodes = graph_nodes(page)
    # Two edges each way from the Spark-written table (its alias is the same node).
    for name in (
        "orders",
        "orders_clean",
        "demo_shop.customer_orders",
        "analytics.customer_orders",
    ):
        expect(nodes.get_by_role("link", name=name, exact=True)).to_be_visible()
    expect(nodes.get_by_role("link", name="analytics.daily_revenue", exact=True)).to_have_count(0)
    expect(page.locator(".canvas canvas").first).to_be_visible()  # cytoscape drew
    expect(page.get_by_role("region", name="Runs that read or wrote it")).to_contain_text(
        "orders_clean"
    )
    facets = page.get_by_role("region", name="Facets")
    expect(facets.get_by_role("region", name="documentation facet")).to_contain_text(
        "Orders, deduplicated, in EUR."
    )
    expect(facets.get_by_role("region", name="ownership facet")).to_contain_text(
        "team:data-platform (MAINTAINER)"
    )
    expect(facets.get_by_role("region", name="dataSource facet")).to_contain_text("metastore")
    expect(facets.locator("h3")).to_have_text(["documentation", "ownership", "dataSource"])
    schema = page.get_by_role("region", name="Schema")
    expect(schema.get_by_role("row")).to_have_count(5)  # the header and 4 fields
    expect(page.get_by_role("link", name="warehouse/orders_clean")).to_be_visible()  # alias
    shot(page, "dataset")


def test_expand_and_collapse_a_node(page: Page) -> None:
    page.goto(f"/#/dataset?namespace={WAREHOUSE}&name={demo.TABLE}")
    nodes = graph_nodes(page)
    revenue = nodes.get_by_role("link", name="analytics.daily_revenue", exact=True)
    expect(nodes.get_by_role("link", name="analytics.customer_orders")).to_be_visible()
    expect(revenue).to_have_count(0)

    page.get_by_role("button", name="Expand analytics.customer_orders").click()
    expect(revenue).to_be_visible()
    expect(nodes.get_by_role("link", name="revenue_dashboard")).to_be_visible()
    collapse = page.get_by_role("button", name="Collapse analytics.customer_orders")
    expect(collapse).to_have_attribute("aria-expanded", "true")
    shot(page, "dataset-expanded")

    collapse.click()
    expect(revenue).to_have_count(0)
    expect(nodes.get_by_role("link", name="analytics.customer_orders")).to_be_visible()


def test_a_big_neighbourhood_is_summarized_until_asked_for(page: Page) -> None:
    page.goto(f"/#/dataset?namespace={WAREHOUSE}&name={demo.MODELS[2]}")
    more = page.get_by_role("button", name="downstream neighbours of analytics.daily_revenue")
    # 41 readers: the reports and the dashboard service. 12 are drawn (the first by id:
    # jobs sort before services), the rest summarized.
    expect(more).to_have_text(f"+{HUB_READERS + 1 - CAP} more")
    jobs, services = (graph_nodes(page).locator(f"li.kind-{k}") for k in ("job", "service"))
    expect(jobs).to_have_count(CAP + 1)  # and the job that writes it
    expect(services).to_have_count(0)
    shot(page, "dataset-summarized")
    more.click()
    expect(jobs).to_have_count(HUB_READERS + 1)
    expect(services).to_have_count(1)
    expect(more).to_have_count(0)


def test_a_page_of_five_hundred_nodes_draws_without_freezing(page: Page) -> None:
    page.goto("/#/dataset?namespace=s3://fan&name=root")
    expect(page.locator(".graph-status")).to_contain_text("nodes")
    start = time.monotonic()
    page.get_by_label("Downstream depth").fill("5")
    page.get_by_label("Downstream depth").dispatch_event("change")
    status = page.locator(".graph-status")
    expect(status).to_contain_text(f"{PAGE_NODES} nodes", timeout=20_000)
    elapsed = time.monotonic() - start
    # About 3 s on an idle 2-core machine; the bound catches a layout gone quadratic.
    assert elapsed < 20, f"{elapsed:.1f} s to fetch, lay out and draw {PAGE_NODES} nodes"
    expect(status).to_contain_text(f"the server stopped at {PAGE_NODES} nodes")
    # The page still answers at once: the layout is done, not hogging the main thread.
    assert page.evaluate("() => 1 + 1") == 2
    expect(graph_nodes(page).locator("li")).to_have_count(PAGE_NODES)
    shot(page, "fan-out")


def test_column_view_marks_the_masked_path(page: Page) -> None:
    page.goto(f"/#/dataset?namespace={WAREHOUSE}&name={demo.CUSTOMERS}")
    # The dataset's impact, asked for when opened: the masked e-mail reaches the models.
    page.get_by_text("Impact downstream").click()
    dataset_impact = page.locator("details.impact-section table.impact")
    expect(dataset_impact.locator("tr.masked").first).to_contain_text("masked path")
    expect(dataset_impact).to_contain_text("analytics.daily_revenue")
    page.get_by_role("region", name="Schema").get_by_role("link", name="email").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("analytics.customers.email")
    edges = page.get_by_role("list", name="Column lineage edges")
    masked = edges.locator("li.masked")
    expect(masked).to_have_count(1)
    expect(masked).to_contain_text("analytics.customers_masked.email_hash")
    expect(masked.locator(".badge.masked")).to_have_text("masked")
    # Masking protects: the badge says what it means, and is not the alarm red.
    expect(masked.locator(".badge.masked")).to_have_attribute(
        "title", re.compile("value is hashed or masked.*masking flag")
    )
    colours = masked.locator(".badge.masked").evaluate(
        "e => [getComputedStyle(e).color, getComputedStyle(e).backgroundColor]"
    )
    assert "rgb(201, 54, 43)" not in colours, colours  # the failed-run red (--fail)
    expect(masked).to_contain_text("expression")
    # Each edge names the job it goes through, as the CLI does.
    expect(masked.locator(".via")).to_contain_text("via demo_shop.customers_masked")
    expect(masked.locator(".via").get_by_role("link")).to_have_attribute(
        "href", re.compile("#/job\\?namespace=demo-dbt&name=demo_shop.customers_masked")
    )
    impact = page.get_by_role("region", name="Impact")
    expect(impact.locator("tr.masked").first).to_contain_text("masked path")
    expect(impact.locator("tr.masked .badge.masked").first).to_have_attribute(
        "title", re.compile("hashed or masked value, not the raw one")
    )
    shot(page, "column-masked")

    # Direction and depth: nothing is upstream of a source table's field.
    page.get_by_label("Direction").select_option("upstream")
    expect(page).to_have_url(re.compile("direction=upstream"))
    expect(page.get_by_role("region", name="Column lineage")).to_contain_text(
        "No column lineage for this field."
    )
    expect(page.get_by_label("Direction")).to_have_value("upstream")
    page.get_by_label("Direction").select_option("both")

    # Pick another field: a join key. Downstream, it is copied (direct), joins on (the
    # indirect JOIN dependency of every customer_orders field) and is counted (aggregate).
    page.get_by_label("Field", exact=True).select_option("customer_id")
    expect(page.get_by_role("heading", level=1)).to_have_text("analytics.customers.customer_id")
    edges = page.get_by_role("list", name="Column lineage edges")
    expect(edges.locator("li.masked")).to_have_count(0)
    expect(edges.locator("li.direct")).to_have_count(2)
    expect(edges.locator("li.indirect")).to_have_count(7)
    expect(edges.locator("li.aggregate")).to_have_count(2)
    expect(edges.locator("li.indirect", has_text="indirect JOIN")).to_have_count(5)
    shot(page, "column-classes")
    # One edge deep: only the edges from the field itself.
    page.get_by_label("Depth").fill("1")
    page.get_by_label("Depth").press("Enter")
    expect(page).to_have_url(re.compile("depth=1"))
    expect(page.get_by_label("Depth")).to_have_value("1")
    edges = page.get_by_role("list", name="Column lineage edges")
    root = "analytics.customers.customer_id"
    # Waits for the depth-1 list (a count read at once could be the deeper one's, still
    # drawn: this failed once on a busy machine): every edge starts at the field.
    expect(edges.locator("li").filter(has_not_text=root)).to_have_count(0)
    expect(edges.locator("li").first).to_be_visible()
    total = edges.locator("li").count()
    assert 0 < total < 11
    expect(edges.locator("li", has_text=root)).to_have_count(total)


def test_job_page_shows_the_failed_run_its_error_and_sql(page: Page) -> None:
    page.goto("/#/job?namespace=ui-tests&name=refunds")
    runs = page.get_by_role("region", name="Runs")
    expect(runs.locator(".state").first).to_have_text("FAIL")
    expect(runs.get_by_role("note")).to_have_text("division by zero in refunds.amount")
    expect(page.locator("pre.code")).to_contain_text("INSERT INTO analytics.refunds")
    expect(page.get_by_role("region", name="Inputs")).to_contain_text("analytics.orders_clean")
    expect(page.get_by_role("region", name="Outputs")).to_contain_text("analytics.refunds")
    shot(page, "job")


def test_deliveries_page_shows_the_quarantine_reason_and_replays(page: Page) -> None:
    page.goto("/#/deliveries")
    quarantine = page.get_by_role("region", name="Quarantine")
    item = quarantine.locator("tr.quarantined-item")
    expect(item).to_have_count(1)
    expect(item.locator(".reason")).to_contain_text("runId")
    deliveries = page.get_by_role("region", name="Recent deliveries")
    expect(deliveries.locator("tr.delivery")).to_have_count(2)
    expect(deliveries.locator(".delivery-partially_projected")).to_have_count(1)
    # A delivery's items, with their outcomes, open in place.
    deliveries.locator("tr.delivery").first.get_by_role("button").click()
    expect(deliveries.locator("table.items .outcome-quarantined")).to_have_count(1)
    shot(page, "deliveries")

    item.get_by_role("button", name="Replay").click()
    expect(item.get_by_role("status")).to_contain_text("Still quarantined")

    # The quarantined item's delivery id opens that delivery's page, with its items.
    delivery_id = item.locator("a.delivery-link").inner_text()
    item.get_by_role("link", name=delivery_id).click()
    expect(page).to_have_url(re.compile(f"#/delivery\\?id={delivery_id}$"))
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Delivery {delivery_id}")
    expect(page.get_by_label("Delivery")).to_contain_text("partially projected")
    items = page.get_by_role("region", name="Items")
    expect(items.locator(".outcome-quarantined")).to_have_count(1)
    expect(items.locator(".reason")).to_contain_text("runId")
    page.go_back()

    # Filters: by provider (the demo's), then by state; each is part of the address.
    page.get_by_label("Provider key").fill(demo.PROVIDER_KEY)
    page.get_by_label("Provider key").press("Enter")
    expect(page).to_have_url(re.compile(f"provider_key={demo.PROVIDER_KEY}"))
    rows = page.get_by_role("region", name="Recent deliveries").locator("tr.delivery")
    expect(rows).to_have_count(1)
    expect(rows).to_contain_text(demo.PROVIDER_KEY)
    page.get_by_label("Delivery state").select_option("partially_projected")
    expect(page.get_by_role("region", name="Recent deliveries")).to_contain_text("No deliveries.")
    expect(page.get_by_label("Provider key")).to_have_value(demo.PROVIDER_KEY)


def test_a_dag_is_drawn_as_its_tasks_and_their_lineage(page: Page) -> None:
    page.goto(f"/#/job?namespace={demo.AIRFLOW_NS}&name={demo.DAG}")
    nodes = graph_nodes(page)
    # The tasks, the Spark job one submitted and the dbt models another ran: the jobs
    # under the DAG's latest run, each with its lineage.
    under = [*demo.TASKS, demo.SPARK_JOB, *(f"demo_shop.{m.split('.')[1]}" for m in demo.MODELS)]
    members = nodes.locator("li.member")
    for name in under:
        expect(members.get_by_role("link", name=name, exact=True)).to_be_visible()
    expect(members).to_have_count(len(under))
    for name in ("shop.public.orders", "orders", demo.TABLE, demo.MODELS[2]):
        expect(nodes.get_by_role("link", name=name, exact=True)).to_be_visible()
    status = page.locator(".graph-status")
    expect(status).to_contain_text(f"{len(under)} jobs under {demo.DAG}")
    expect(status).not_to_contain_text("1 nodes")
    expect(page.get_by_role("list", name="Legend")).to_contain_text("part of")
    # The DAG's inputs come from outside it; what its jobs write are its outputs, the
    # intermediate raw orders too.
    inputs = page.get_by_role("region", name="Inputs")
    outputs = page.get_by_role("region", name="Outputs")
    expect(inputs.get_by_role("link", name="shop.public.orders")).to_be_visible()
    expect(inputs.get_by_role("link", name=demo.CUSTOMERS, exact=True)).to_be_visible()
    expect(inputs.get_by_role("link", name="orders", exact=True)).to_have_count(0)
    for name in ("orders", demo.TABLE, *demo.MODELS):
        expect(outputs.get_by_role("link", name=name, exact=True)).to_be_visible()
    expect(page.locator(".family")).to_contain_text(f"the {len(under)} jobs under it")
    shot(page, "job-dag")

    # A task with no child runs draws its own lineage only.
    page.goto(f"/#/job?namespace={demo.AIRFLOW_NS}&name={demo.TASKS[0]}")
    expect(nodes.get_by_role("link", name="orders", exact=True)).to_be_visible()
    expect(nodes.locator("li.member")).to_have_count(0)
    expect(page.get_by_role("list", name="Legend")).not_to_contain_text("part of")


def test_job_page_opens_a_dag_runs_children(page: Page) -> None:
    page.goto(f"/#/job?namespace={demo.AIRFLOW_NS}&name={demo.DAG}")
    children = page.get_by_role("button", name="3 child runs")
    children.click()
    tasks = page.locator(".child-runs li")
    expect(tasks).to_have_count(3)
    for task in demo.TASKS:
        expect(tasks.get_by_role("link", name=task, exact=True)).to_be_visible()
    expect(tasks.locator(".state-complete")).to_have_count(3)
    # A task names its DAG as parent job; its page links back.
    tasks.get_by_role("link", name=demo.TASKS[0]).click()
    expect(page.get_by_role("link", name=demo.DAG, exact=True).first).to_be_visible()
    expect(page.get_by_role("region", name="Outputs")).to_contain_text("orders")


def test_a_dbt_run_pages_its_models_and_a_query_shows_its_parent_and_root(page: Page) -> None:
    page.goto(f"/#/job?namespace={pe.DBT_NS}&name={pe.BIG_INVOCATION}")
    page.get_by_role("button", name=f"{CHILD_PAGE + 5} child runs").click()
    models = page.get_by_role("list", name="Child runs")
    expect(models.get_by_role("listitem")).to_have_count(CHILD_PAGE)
    timeline = page.get_by_role("group", name="Child runs timeline")
    expect(timeline.get_by_role("link")).to_have_count(CHILD_PAGE)
    more = page.get_by_role("button", name="More child runs")
    more.click()
    expect(models.get_by_role("listitem")).to_have_count(CHILD_PAGE + 5)
    expect(more).to_be_hidden()
    # The timeline grows with the list: one bar per child, each a link to its run.
    bars = page.get_by_role("group", name="Child runs timeline").get_by_role("link")
    expect(bars).to_have_count(CHILD_PAGE + 5)
    last = f"model.{pe.BIG_PROJECT}.m{CHILD_PAGE + 4:05d}"  # in the order they started
    expect(models.get_by_role("listitem").last).to_contain_text(last)
    expect(models.locator(".state-complete")).to_have_count(CHILD_PAGE + 5)

    # Two levels down: a dbt test's query names the test as parent, the invocation as root.
    test = "test.dbt_test_project.assert_no_future_dates"
    page.goto(f"/#/job?namespace={pe.DBT_NS}&name={test}.sql.1")
    details = page.locator("tr.run-details").first
    expect(details.locator(".parent")).to_contain_text(test)
    expect(details.locator(".root")).to_contain_text(pe.DBT_RUN_JOB)
    details.locator(".root").get_by_role("link", name=pe.DBT_RUN_JOB).click()
    expect(page.get_by_role("heading", level=1)).to_have_text(pe.DBT_RUN_JOB)
    # The invocation is its own root: its tests show their parent only.
    page.get_by_role("button", name="2 child runs").click()
    page.get_by_role("list", name="Child runs").get_by_role("link", name=test).click()
    expect(page.get_by_role("heading", level=1)).to_have_text(test)
    details = page.locator("tr.run-details").first
    expect(details.locator(".parent")).to_contain_text(pe.DBT_RUN_JOB)
    expect(details.locator(".root")).to_have_count(0)
    shot(page, "job-hierarchy")


def test_the_graph_filters_by_last_run_state_and_by_time(page: Page) -> None:
    page.goto(f"/#/dataset?namespace={WAREHOUSE}&name={demo.TABLE}")
    nodes = graph_nodes(page)
    refunds = nodes.get_by_role("link", name="refunds", exact=True)
    spark = nodes.get_by_role("link", name="orders_clean", exact=True)
    expect(refunds).to_be_visible()
    expect(spark).to_be_visible()

    # No box ticked is no filter, and the page says so.
    hint = page.locator(".states-hint")
    expect(hint).to_have_text("none ticked: all states")
    # Only edges whose last run failed: the refunds job's, not the Spark job's.
    page.get_by_role("checkbox", name="FAIL").check()
    expect(hint).to_have_text("only edges whose last run is FAIL")
    expect(spark).to_have_count(0)
    expect(refunds).to_be_visible()
    page.get_by_role("checkbox", name="FAIL").uncheck()
    expect(hint).to_have_text("none ticked: all states")
    expect(spark).to_be_visible()

    # As of 02:30 UTC, after Spark wrote the table and before dbt or refunds read it:
    # typed without a zone, read as UTC and shown back in ISO 8601 with its Z.
    as_of = page.get_by_label("As of (UTC)")
    as_of.fill(f"{demo.DAY} 02:30")
    as_of.press("Enter")
    expect(as_of).to_have_value(f"{demo.DAY}T02:30:00Z")
    expect(refunds).to_have_count(0)
    expect(nodes.get_by_role("link", name="demo_shop.customer_orders")).to_have_count(0)
    expect(spark).to_be_visible()
    # Not a time: said so, and the graph stays as it was.
    as_of.fill("yesterday")
    as_of.press("Enter")
    expect(as_of).to_have_attribute("aria-invalid", "true")
    expect(page.locator(".graph-status")).to_contain_text('"yesterday" is not a time')
    expect(refunds).to_have_count(0)


def test_as_of_is_utc_whatever_the_browsers_time_zone(
    browser: Browser, server: ServerProcess
) -> None:
    # 02:30 in Auckland (UTC+13 in January) is 13:30 UTC the day before, when nothing had
    # run yet: had the page read the value as local time, the Spark job would be gone.
    context = browser.new_context(base_url=server.url, timezone_id="Pacific/Auckland")
    page = context.new_page()
    page.goto(f"/#/dataset?namespace={WAREHOUSE}&name={demo.TABLE}")
    spark = graph_nodes(page).get_by_role("link", name="orders_clean", exact=True)
    expect(spark).to_be_visible()
    as_of = page.get_by_label("As of (UTC)")
    as_of.fill(f"{demo.DAY}T02:30:00")
    as_of.press("Enter")
    expect(as_of).to_have_value(f"{demo.DAY}T02:30:00Z")
    expect(spark).to_be_visible()
    expect(graph_nodes(page).get_by_role("link", name="refunds", exact=True)).to_have_count(0)
    # A zone, when typed, is honoured: 15:30+13:00 is 02:30 UTC.
    as_of.fill(f"{demo.DAY}T15:30:00+13:00")
    as_of.press("Enter")
    expect(as_of).to_have_value(f"{demo.DAY}T02:30:00Z")
    context.close()


def test_an_unknown_dataset_shows_the_servers_problem(
    browser: Browser, server: ServerProcess
) -> None:
    # Its own page: the 404 is logged to the console, which the `page` fixture refuses.
    page = browser.new_page(base_url=server.url)
    page.goto("/#/dataset?namespace=s3://nowhere&name=nothing")
    expect(page.get_by_role("heading", level=1)).to_have_text("Could not load this page")
    expect(page.get_by_role("alert")).to_contain_text("404 No dataset s3://nowhere nothing")
    # A run nobody named, likewise.
    page.goto("/#/run?id=01943b00-0000-7000-9000-ffffffffffff")
    expect(page.get_by_role("heading", level=1)).to_have_text("Could not load this page")
    expect(page.get_by_role("alert")).to_contain_text("404 No run")
    page.close()


def test_the_shell_and_its_modules_are_served_with_a_strict_policy(server: ServerProcess) -> None:
    shell = HTTP.get(server.url + "/")
    assert shell.status_code == 200 and shell.headers["content-type"].startswith("text/html")
    policy = shell.headers["content-security-policy"]
    assert policy == ui.CONTENT_SECURITY_POLICY
    assert "default-src 'self'" in policy and "script-src" not in policy  # no inline script
    # Module scripts run only when served as JavaScript, .mjs included.
    for path in ("js/app.js", "vendor/cytoscape.esm.min.mjs", "vendor/cytoscape-dagre.min.mjs"):
        r = HTTP.get(f"{server.url}/ui/static/{path}")
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/javascript")
    # StaticFiles keeps to its folder: the package's Python files are not served.
    assert HTTP.get(server.url + "/ui/static/%2e%2e/__init__.py").status_code == 404


def test_runs_page_through_older_ones(page: Page) -> None:
    page.goto("/#/job?namespace=ui-tests&name=hourly")
    runs = page.get_by_role("region", name="Runs").locator("tr.run")
    expect(runs).to_have_count(25)
    expect(runs.first.locator(".state")).to_have_text("START")  # newest first, still going
    page.get_by_role("button", name="Older runs").click()
    expect(runs).to_have_count(HOURLY_RUNS)
    expect(page.get_by_role("button", name="Older runs")).to_be_hidden()
    states = set(runs.locator(".state").all_inner_texts())
    assert states == {"START", "COMPLETE", "FAIL", "ABORT"}

    page.goto(f"/#/dataset?namespace={WAREHOUSE}&name=analytics.hourly")
    writers = page.get_by_role("region", name="Runs that read or wrote it").locator("tr.run")
    expect(writers).to_have_count(20)
    page.get_by_role("button", name="Older runs").click()
    expect(writers).to_have_count(HOURLY_RUNS)


def test_a_server_with_tokens_asks_for_one_and_keeps_it_for_the_tab(
    browser: Browser, tmp_path: Path
) -> None:
    db_path = tmp_path / "secured.db"
    command = ["tokens", "create", "--scope", "read", "--db", f"sqlite:///{db_path}"]
    created = subprocess.run(
        [sys.executable, "-m", "embrasure", *command],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    token = created.stdout.splitlines()[-1]
    secured = ServerProcess(db_path).start()
    try:
        # Its own page: the 401s are logged to the console, which the `page` fixture refuses.
        page = browser.new_page(base_url=secured.url)
        page.goto("/#/deliveries")
        expect(page.get_by_role("heading", level=1)).to_have_text("Sign in")
        expect(page.get_by_role("alert")).to_contain_text("needs a bearer token")
        # The command is code, not text in backticks.
        label = page.locator("form.sign-in label")
        expect(label.locator("code")).to_have_text("embrasure tokens create --scope read")
        expect(label).not_to_contain_text("`")
        field = page.get_by_label("Bearer token with scope read")
        field.fill("emb_000000000000_wrong")
        page.get_by_role("button", name="Use this token").click()
        expect(page.get_by_role("alert")).to_contain_text("not one this server issued")
        field = page.get_by_label("Bearer token with scope read")
        field.fill(token)
        page.get_by_role("button", name="Use this token").click()
        expect(page.get_by_role("heading", level=1)).not_to_have_text("Sign in")
        page.goto("/#/")  # another page of the same tab: no second sign-in
        expect(page.get_by_role("heading", level=1)).not_to_have_text("Sign in")
        page.close()
    finally:
        secured.stop()


def test_nodes_are_named_with_their_namespace(page: Page) -> None:
    page.goto(f"/#/dataset?namespace={WAREHOUSE}&name={demo.TABLE}")
    nodes = graph_nodes(page)
    raw = nodes.locator("li", has=page.get_by_role("link", name="orders", exact=True))
    # The short form of s3://demo-raw beside the name, the whole name on hover.
    expect(raw.locator(".ns")).to_have_text("demo-raw")
    link = raw.get_by_role("link", name="orders", exact=True)
    expect(link).to_have_attribute("title", f"{demo.RAW}/orders")
    expect(nodes.locator("li.root .ns")).to_have_text("metastore.demo")
    # Keyboard focus on a node shows its whole name beside the list.
    link.focus()
    expect(page.locator(".node-details")).to_contain_text(f"dataset · {demo.RAW}/orders")
    # The runs that wrote it name their job's namespace too.
    runs = page.get_by_role("region", name="Runs that read or wrote it")
    writer = runs.locator("tr.role-output").first
    expect(writer.locator(".ns")).to_have_text(demo.SPARK_NS)
    expect(writer.get_by_role("link", name=demo.SPARK_JOB)).to_have_attribute(
        "title", f"{demo.SPARK_NS}/{demo.SPARK_JOB}"
    )

    page.goto("/")
    recent = page.get_by_role("region", name="Recent runs").locator("tr.run").first
    expect(recent.locator(".ns")).to_have_text("ui-tests")
    expect(recent.get_by_role("link", name="hourly")).to_have_attribute("title", "ui-tests/hourly")
    # The rule: a URI's last path segment, else its host without the port.
    short = page.evaluate(
        """async (names) => {
            const { shortNamespace } = await import("/ui/static/js/names.js");
            return names.map(shortNamespace);
        }""",
        [demo.SHOP_DB, demo.WAREHOUSE, demo.RAW, "postgres://db:5432/shop", demo.AIRFLOW_NS],
    )
    assert short == ["shop-db.demo", "metastore.demo", "demo-raw", "shop", "demo-airflow"]


def test_facets_shown_elsewhere_on_the_page_are_said_to_be_there(page: Page) -> None:
    # The customers table has a schema facet only: not "No facets." beside its fields.
    page.goto(f"/#/dataset?namespace={WAREHOUSE}&name={demo.CUSTOMERS}")
    facets = page.get_by_role("region", name="Facets")
    expect(facets).to_contain_text("No other facets.")
    expect(facets.locator(".facets-elsewhere")).to_have_text("schema: shown under Schema")
    expect(facets).not_to_contain_text("No facets.")
    # A dbt model: its column lineage is drawn in the column view of each field.
    page.goto(f"/#/dataset?namespace={WAREHOUSE}&name={demo.MODELS[0]}")
    expect(page.locator(".facets-elsewhere")).to_contain_text(
        "columnLineage: shown in each field's column view"
    )
    # The Spark table: its symlinks facet is its aliases; the catalog's facets are listed.
    page.goto(f"/#/dataset?namespace={WAREHOUSE}&name={demo.TABLE}")
    facets = page.get_by_role("region", name="Facets")
    expect(facets.locator("h3")).to_have_text(["documentation", "ownership", "dataSource"])
    expect(facets.locator(".facets-elsewhere")).to_have_text(
        "schema: shown under Schema; symlinks: shown above the graph (Also known as, Locations)"
    )
    expect(page.get_by_label("Identities")).to_contain_text("Also known as")


# -- what each run did (docs/ui.md#what-each-run-did; tests/ui/nightly.py) -------------------

FAIL_RED, COMPLETE_GREEN = "rgb(201, 54, 43)", "rgb(63, 143, 91)"  # --fail, --complete


def _bar(timeline: Any, job: str) -> Any:
    return timeline.get_by_role("link", name=f"{nightly.NS}/{job}: ")


def test_a_dag_run_shows_its_children_as_a_timeline(page: Page) -> None:
    # The job page's run id opens the run page.
    page.goto(f"/#/job?namespace={nightly.NS}&name={nightly.DAG}")
    dag_run = nightly.run_id(nightly.DAG, nightly.LAST)
    page.get_by_role("region", name="Runs").get_by_role("link", name=dag_run).click()
    expect(page).to_have_url(re.compile(f"#/run\\?id={dag_run}$"))
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Run of {nightly.DAG}")
    timeline = page.get_by_role("group", name="Child runs timeline")
    bars = timeline.get_by_role("link")
    expect(bars).to_have_count(4)
    # One bar per task, coloured by its state as run badges are.
    states = {
        nightly.LOAD: "complete",
        nightly.CHECK: "fail",
        nightly.REPORT_JOB: "abort",
        nightly.PUBLISH: "start",
    }
    for job, state in states.items():
        expect(_bar(timeline, job)).to_have_class(re.compile(f"\\bstate-{state}\\b"))
    colour = "e => getComputedStyle(e).backgroundColor"
    assert _bar(timeline, nightly.CHECK).evaluate(colour) == FAIL_RED
    assert _bar(timeline, nightly.LOAD).evaluate(colour) == COMPLETE_GREEN
    # Each bar says when; the task still running has an open end.
    expect(_bar(timeline, nightly.LOAD)).to_have_attribute(
        "aria-label",
        f"{nightly.NS}/{nightly.LOAD}: COMPLETE, started 2026-01-14 01:00:00 UTC, "
        "ended 2026-01-14 01:12:30 UTC (12 min 30 s)",
    )
    publish = _bar(timeline, nightly.PUBLISH)
    expect(publish).to_have_class(re.compile("\\bopen\\b"))
    expect(publish).to_have_attribute("aria-label", re.compile("no end yet$"))
    # Laid out in time: the tasks started one after another, left to right; the load (12.5
    # min) is wider than the check (2 min).
    boxes = bars.evaluate_all("es => es.map(e => e.getBoundingClientRect().toJSON())")
    assert [b["x"] for b in boxes] == sorted(b["x"] for b in boxes), boxes
    assert boxes[0]["width"] > 4 * boxes[1]["width"] > 0, boxes
    children = page.get_by_role("list", name="Child runs")
    expect(children.get_by_role("listitem")).to_have_count(4)
    shot(page, "run-timeline")

    # A bar opens the child's run page, which names its parent run.
    _bar(timeline, nightly.CHECK).click()
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Run of {nightly.CHECK}")
    summary = page.get_by_label("Run", exact=True)
    expect(summary).to_contain_text("Parent")
    expect(summary.get_by_role("link", name=dag_run)).to_be_visible()
    expect(page.get_by_role("note")).to_have_text("Got 3 results, configured to fail if != 0")


def test_the_dataset_page_charts_rows_written_and_flags_the_failed_check(page: Page) -> None:
    page.goto(f"/#/dataset?namespace={nightly.LAKE}&name={nightly.TABLE}")
    # The latest check failed: which assertion, on which column, by which run.
    alert = page.locator(".quality-alert")
    expect(alert).to_contain_text("The latest check failed: 1 of 3 assertions")
    expect(alert).to_contain_text(f"{nightly.FAILED[0]} on column {nightly.FAILED[1]}")
    expect(alert.get_by_role("link", name=nightly.CHECK)).to_be_visible()
    expect(graph_nodes(page).locator("li.root .badge.quality-failed")).to_have_text("check failed")

    # The chart: one point per write, as links named with the time, rows and state.
    writes = page.get_by_role("region", name="Rows written per run")
    rows = writes.get_by_role("group", name="Rows written")
    expect(rows.get_by_role("link")).to_have_count(len(nightly.NIGHTS))
    zero_night = nightly.NIGHTS[nightly.ZERO_NIGHT]
    zero = rows.get_by_role("link", name=f"{zero_night} 01:10:30 UTC: 0 rows, COMPLETE")
    expect(zero).to_have_count(1)
    expect(rows.get_by_role("link", name=re.compile(": 1,510 rows, COMPLETE"))).to_have_count(1)
    expect(rows.locator("circle.zero")).to_have_count(1)
    # Drawn where they belong: left to right in time, the empty night at the bottom.
    dots = rows.locator("circle").evaluate_all(
        "cs => cs.map(c => { const b = c.getBoundingClientRect(); return [b.x, b.y, b.width] })"
    )
    assert [d[0] for d in dots] == sorted(d[0] for d in dots) and all(d[2] > 0 for d in dots)
    assert max(dots, key=lambda d: d[1]) == dots[nightly.ZERO_NIGHT], dots
    assert min(dots, key=lambda d: d[1]) == dots[nightly.ROWS.index(max(nightly.ROWS))], dots
    bytes_chart = writes.get_by_role("group", name="Bytes written")
    expect(bytes_chart.get_by_role("link")).to_have_count(len(nightly.NIGHTS))
    empty = f"{zero_night} 01:10:30 UTC: 0 B written"
    expect(bytes_chart.get_by_role("link", name=empty)).to_have_count(1)

    # The schema changes between writes, newest first.
    changes = page.get_by_role("list", name="Schema changes between writes").get_by_role("listitem")
    expect(changes).to_have_count(2)
    expect(changes.nth(0)).to_contain_text("amount: int → decimal(10,2)")
    expect(changes.nth(1)).to_contain_text("added currency string")

    # The runs that read or wrote it: what each did, the failed checks with their column
    # (from inputFacets, and from the dataset facets where dbt's older integration put it).
    history = page.get_by_role("region", name="Runs that read or wrote it").locator("tr.run")
    expect(history).to_have_count(2 * len(nightly.NIGHTS) + 1)  # loads, checks, the report
    expect(history.first).to_contain_text("read")
    expect(history.first).to_contain_text(nightly.REPORT_JOB)
    failed = history.filter(has=page.locator(".checks.failed"))
    expect(failed).to_have_count(2)
    expect(failed.nth(0)).to_contain_text("2 passed, 1 failed")
    expect(failed.nth(0)).to_contain_text(f"{nightly.FAILED[0]} on {nightly.FAILED[1]}")
    expect(failed.nth(1)).to_contain_text(f"{nightly.DBT_FAILED[0]} on {nightly.DBT_FAILED[1]}")
    empty_write = page.get_by_role("cell", name="0 rows · 0 B · 0 files", exact=True)
    expect(history.filter(has=empty_write)).to_have_count(1)
    shot(page, "dataset-quality")

    # A point opens its run: what it wrote, with its statistics.
    zero.click()
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Run of {nightly.LOAD}")
    wrote = page.get_by_role("region", name="Wrote")
    expect(wrote.locator(".stats")).to_have_text("0 rows · 0 B · 0 files")
    expect(page.get_by_role("region", name="Read")).to_contain_text(nightly.RAW)


def test_the_run_page_lists_what_it_read_and_wrote_with_the_failed_assertion(page: Page) -> None:
    page.goto(f"/#/run?id={nightly.run_id(nightly.CHECK, nightly.LAST)}")
    read = page.get_by_role("region", name="Read")
    entry = read.get_by_role("listitem", name=f"Read {nightly.TABLE}")
    expect(entry.locator(".io-name .badge.quality-failed")).to_have_text("1 check failed")
    failed = entry.locator("table.assertions tr.failed")
    expect(failed).to_have_count(1)  # listed first, marked
    expect(failed.locator("td")).to_have_text([*nightly.FAILED, "failed"])
    expect(entry.locator("table.assertions tr.passed")).to_have_count(2)
    # A read's rows from its dataQualityMetrics (no inputStatistics), as datasets/runs counts.
    expect(entry.locator(".stats")).to_have_text(f"{nightly.ROWS[nightly.LAST]:,} rows")
    # Every other facet the run sent, under the dataset: the metrics as sent.
    entry.get_by_text("Facets (").click()
    metrics = entry.get_by_role("region", name="dataQualityMetrics facet")
    expect(metrics).to_contain_text('"nullCount": 3')
    expect(entry).to_contain_text("dataQualityAssertions: shown above (the assertions table)")
    expect(page.get_by_role("region", name="Wrote")).to_contain_text("None.")
    shot(page, "run")

    # The job page's runs say what each wrote.
    page.goto(f"/#/job?namespace={nightly.NS}&name={nightly.LOAD}")
    latest = page.get_by_role("region", name="Runs").locator("tr.run-details").first
    expect(latest.locator(".io").last).to_have_text(
        f"wrote {nightly.TABLE} (1,475 rows · 2.5 MiB · 3 files)"
    )

    # The load's write: rows, bytes and files, and the schema it saw.
    page.goto(f"/#/run?id={nightly.run_id(nightly.LOAD, nightly.LAST)}")
    wrote = page.get_by_role("region", name="Wrote")
    expect(wrote.locator(".stats")).to_have_text("1,475 rows · 2.5 MiB · 3 files")
    expect(wrote.locator(".run-schema")).to_contain_text(
        "order_id string, amount decimal(10,2), currency string"
    )


def test_a_failed_check_is_marked_in_lineage_and_impact(page: Page) -> None:
    # Downstream of the failed check: the report's graph marks the table it reads.
    page.goto(f"/#/dataset?namespace={nightly.LAKE}&name={nightly.REPORT}")
    nodes = graph_nodes(page)
    table = nodes.locator("li", has=page.get_by_role("link", name=nightly.TABLE, exact=True))
    expect(table.locator(".badge.quality-failed")).to_have_text("check failed")
    expect(nodes.locator("li.root .badge.quality-failed")).to_have_count(0)
    expect(nodes.locator(".badge.quality-failed")).to_have_count(1)
    expect(page.get_by_role("list", name="Legend")).to_contain_text("latest check failed")
    expect(page.locator(".quality-alert")).to_have_count(0)
    # What is downstream of the raw orders, and which of it failed a check.
    page.goto(f"/#/dataset?namespace={nightly.LAKE}&name={nightly.RAW}")
    page.get_by_text("Impact downstream").click()
    impact = page.locator("details.impact-section table.impact")
    flagged = impact.locator("tr", has=page.locator(".badge.quality-failed"))
    expect(flagged).to_have_count(1)
    expect(flagged).to_contain_text(nightly.TABLE)
    expect(impact).to_contain_text(nightly.REPORT)


def test_a_dataset_opened_by_an_alias_shows_the_canonical_history(page: Page) -> None:
    # The Spark path is the warehouse table (a symlink): the same runs either way.
    page.goto(f"/#/dataset?namespace={WAREHOUSE}&name={demo.TABLE}")
    runs = page.get_by_role("region", name="Runs that read or wrote it").locator("tr.run")
    expect(runs.first).to_be_visible()
    canonical = runs.all_inner_texts()
    page.goto(f"/#/dataset?namespace={demo.LAKE}&name={demo.SPARK_PATH}")
    expect(page.get_by_role("heading", level=1)).to_have_text(demo.TABLE)
    expect(runs).to_have_count(len(canonical))
    assert runs.all_inner_texts() == canonical
    expect(runs.filter(has_text="wrote")).to_contain_text([demo.SPARK_JOB])
    # The page is the node's, whichever name opened it, and so is its lineage graph:
    # drawn around the node, with the job that wrote it through the path.
    nodes = graph_nodes(page)
    expect(nodes.get_by_role("link", name=demo.TABLE, exact=True)).to_be_visible()
    expect(nodes.get_by_role("link", name=demo.SPARK_JOB, exact=True)).to_be_visible()
    expect(page.locator(".canvas canvas").first).to_be_visible()


def test_the_notifications_page_subscribes_and_shows_the_secret_once(
    page: Page, server: ServerProcess
) -> None:
    # From a dataset's page, "Notify me" opens the form filled in for it.
    page.goto(f"/#/dataset?namespace={WAREHOUSE}&name={demo.TABLE}")
    page.get_by_role("link", name="Notify me").click()
    expect(page).to_have_url(re.compile(r"#/subscriptions\?target=dataset"))
    form = page.get_by_role("form", name="New subscription")
    expect(form.get_by_label("Namespace", exact=True)).to_have_value(WAREHOUSE)
    expect(form.get_by_label("Name", exact=True)).to_have_value(demo.TABLE)
    form.get_by_label("Datasets downstream").fill("2")
    form.get_by_label("Stale after").fill("26")
    form.get_by_label("run.aborted").uncheck()
    form.get_by_label("Webhook URL").fill("https://93.184.215.14/orders")
    form.get_by_role("button", name="Subscribe").click()
    secret = form.locator("code.secret")
    expect(secret).to_contain_text("whsec_")
    rows = page.get_by_role("region", name="Subscriptions").locator("tr.subscription")
    expect(rows).to_have_count(1)
    expect(rows).to_contain_text(f"{WAREHOUSE} {demo.TABLE} and 2 downstream, stale after 26 h")
    expect(rows).to_contain_text("check.failed, check.recovered, schema.changed, run.failed")
    shot(page, "notifications")
    # Stored as asked; listed again without its secret.
    with httpx.Client(base_url=server.url) as http:
        (stored,) = http.get("/api/v1/subscriptions").json()["subscriptions"]
    assert (stored["depth"], stored["stale_after"]) == (2, 26 * 3600)
    assert stored["url"] == "https://93.184.215.14/orders"
    assert "run.aborted" not in stored["events"] and "secret" not in stored
    page.reload()
    expect(rows).to_have_count(1)
    expect(page.locator("code.secret")).to_have_count(0)
    form.get_by_label("Watch").select_option("namespace")
    expect(form.get_by_label("Name", exact=True)).to_be_disabled()
    rows.first.get_by_role("button", name="Remove").click()
    expect(rows).to_have_count(0)
    with httpx.Client(base_url=server.url) as http:
        assert http.get("/api/v1/subscriptions").json()["subscriptions"] == []


def test_a_refused_subscription_shows_the_servers_reason(
    browser: Browser, server: ServerProcess
) -> None:
    # Its own page: the 400 is logged to the console, which the `page` fixture refuses.
    page = browser.new_page(base_url=server.url)
    page.goto("/#/subscriptions")
    form = page.get_by_role("form", name="New subscription")
    form.get_by_label("Namespace", exact=True).fill("warehouse")
    form.get_by_label("Name", exact=True).fill("orders")
    for kind in KINDS:
        form.get_by_label(kind).uncheck()
    form.get_by_label("Webhook URL").fill("https://93.184.215.14/x")
    form.get_by_role("button", name="Subscribe").click()
    expect(form.locator(".error")).to_contain_text("events must be a non-empty list")
    expect(
        page.get_by_role("region", name="Subscriptions").locator("tr.subscription")
    ).to_have_count(0)
    page.close()
