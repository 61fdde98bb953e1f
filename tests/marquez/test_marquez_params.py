"""The Marquez port's query parameters read as Marquez reads them, where scripts and
marquez-web rely on its leniency (docs/marquez.md#parameters): enum constants in any
case with ``-`` for ``_`` (Dropwizard's fuzzy enums), any int as a depth, Jersey's 404
for a parameter that is not a Java int, the jobs list's ``totalCount`` unfiltered, a
run's nominal times as Java Instants; on both backends."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from graph_api import ORDERS, REPORT, Api, at, ds, facet, run_event, run_id


def get(marquez: TestClient, path: str, status: int = 200, **params: Any) -> Any:
    r = marquez.get("/api/v1" + path, params=params)
    assert r.status_code == status, r.text
    return r.json() if r.content else None


def load(api: Api) -> None:
    nominal = facet(
        "NominalTimeRunFacet",
        "1-0-1",
        nominalStartTime="2026-11-30T09:00:00+01:00",
        nominalEndTime="2026-11-30T10:00:00.500+01:00",
    )
    api.ingest(
        run_event(
            "COMPLETE",
            "daily",
            run_id(1),
            at(9),
            inputs=[ds(*ORDERS)],
            outputs=[ds(*REPORT)],
            run_facets={"nominalTime": nominal},
        ),
        run_event("FAIL", "broken", run_id(2), at(10), outputs=[ds("spark", "tmp")]),
        run_event("START", "running", run_id(3), at(11)),
    )


def test_enum_parameters_are_read_fuzzily(api: Api, marquez: TestClient) -> None:
    load(api)
    exact = get(marquez, "/jobs", lastRunStates="FAILED")
    assert [j["name"] for j in exact["jobs"]] == ["broken"]
    for spelling in ("failed", "Failed", " failed "):
        assert get(marquez, "/jobs", lastRunStates=spelling) == exact
    by_time = get(marquez, "/search", q="a", sort="UPDATE_AT")
    assert get(marquez, "/search", q="a", sort="update-at") == by_time
    assert get(marquez, "/search", q="a", filter="job")["results"]
    assert get(marquez, "/stats/jobs", period="day") == get(marquez, "/stats/jobs", period="DAY")
    get(marquez, "/jobs", 400, lastRunStates="DONE")


def test_the_jobs_total_counts_every_job_whatever_the_filter(api: Api, marquez: TestClient) -> None:
    load(api)
    every = get(marquez, "/jobs")["totalCount"]
    assert every == 3
    failed = get(marquez, "/jobs", lastRunStates="FAILED")
    assert (failed["totalCount"], len(failed["jobs"])) == (every, 1)
    other = get(marquez, "/jobs", lastRunStates="OTHER")  # a RunState no run is in here
    assert (other["totalCount"], other["jobs"]) == (every, [])


@pytest.mark.parametrize("value", ["abc", "1.5", "99999999999", " 5", "1_0", "٣"])
def test_a_parameter_that_is_no_java_int_is_jerseys_404(
    api: Api, marquez: TestClient, value: str
) -> None:
    load(api)
    assert get(marquez, "/jobs", 404, limit=value) == {"code": 404, "message": "HTTP 404 Not Found"}


def test_a_negative_limit_is_a_400_and_a_negative_depth_walks_nothing(
    api: Api, marquez: TestClient
) -> None:
    load(api)
    assert get(marquez, "/jobs", 400, limit="-1")["message"] == (
        "query param limit must be greater than or equal to 0"
    )
    node = "job:spark:daily"
    assert get(marquez, "/lineage", nodeId=node, depth="-1") == get(
        marquez, "/lineage", nodeId=node, depth="0"
    )


def test_run_times_and_facets_as_marquez_answers_them(api: Api, marquez: TestClient) -> None:
    load(api)
    run = get(marquez, f"/jobs/runs/{run_id(1)}")
    assert run["nominalStartTime"] == "2026-11-30T08:00:00Z"
    assert run["nominalEndTime"] == "2026-11-30T09:00:00.500Z"
    assert get(marquez, f"/jobs/runs/{run_id(1)}/facets", type="dataset") is None
    assert "nominalTime" in get(marquez, f"/jobs/runs/{run_id(1)}/facets", type="RUN")["facets"]
    get(marquez, f"/jobs/runs/{run_id(9)}/facets", 404, type="dataset")
