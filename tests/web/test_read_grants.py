"""Reads within the reader's grants (docs/security.md#what-a-reader-sees, query/hidden.py):
no read answer of a reader with grants G names anything outside G, over random graphs and
grants (hypothesis), and every read route of both APIs, walked from the OpenAPI document
and the Marquez port's route table, keeps to it (OWASP API1, broken object-level
authorization).

The namespaces are named so that a leak is a substring: each has a word (amber, blue,
coral, dune) that every dataset and job in it carries in its name and that appears nowhere
else, so "no name outside G" is "no word of a namespace outside G in the answer's bytes",
the words of the request itself left out (a 404 repeats what it was asked).
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import re
import secrets
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from starlette.routing import Route
from starlette.testclient import TestClient

from embrasure.model import Grant, Token
from embrasure.projector.worker import Projector
from embrasure.store import open_store
from embrasure.web import auth

from conftest import make_client, sqlite_url
from graph_api import DBT, at, column_lineage, ds, facet, input_field, run_event, run_id, schema

WORDS = ("amber", "blue", "coral", "dune")


def namespace(word: str) -> str:
    return f"team-{word}"


def dataset(word: str, i: int) -> tuple[str, str]:
    return namespace(word), f"{word}_t{i}"


def job(word: str, i: int) -> tuple[str, str]:
    return namespace(word), f"{word}_job{i}"


@dataclasses.dataclass(frozen=True)
class Run:
    job: tuple[str, int]
    inputs: tuple[tuple[str, int], ...]
    outputs: tuple[tuple[str, int], ...]
    column_lineage: bool
    symlink: tuple[str, int] | None  # the first output is also known by this identity
    parent: tuple[str, int] | None  # a parent facet naming this job
    state: str

    def event(self, n: int) -> dict[str, Any]:
        first_input = dataset(*self.inputs[0])
        outputs = []
        for k, out in enumerate(self.outputs):
            facets: dict[str, Any] = {"schema": schema("id", "v")}
            if self.column_lineage:
                facets["columnLineage"] = column_lineage({"v": [input_field(first_input, "v")]})
            if k == 0 and self.symlink is not None and self.symlink != out:
                ns, name = dataset(*self.symlink)
                facets["symlinks"] = facet(
                    "SymlinksDatasetFacet",
                    "1-0-1",
                    identifiers=[{"namespace": ns, "name": name, "type": "TABLE"}],
                )
            outputs.append(ds(*dataset(*out), **facets))
        run_facets: dict[str, Any] = {}
        if self.parent is not None:
            ns, name = job(*self.parent)
            run_facets["parent"] = facet(
                "ParentRunFacet",
                "1-1-0",
                DBT,
                run={"runId": run_id(1000 + n)},
                job={"namespace": ns, "name": name},
            )
        ns, name = job(*self.job)
        return run_event(
            self.state,
            name,
            run_id(n),
            at(9, n % 60),
            inputs=[ds(*dataset(*i), schema=schema("id", "v")) for i in self.inputs],
            outputs=outputs,
            run_facets=run_facets,
            namespace=ns,
            producer=DBT,
        )


WORD = st.sampled_from(WORDS)
DATASET = st.tuples(WORD, st.integers(0, 2))
RUNS = st.lists(
    st.builds(
        Run,
        job=st.tuples(WORD, st.integers(0, 1)),
        inputs=st.lists(DATASET, min_size=1, max_size=3, unique=True).map(tuple),
        outputs=st.lists(DATASET, min_size=1, max_size=2, unique=True).map(tuple),
        column_lineage=st.booleans(),
        symlink=st.none() | DATASET,
        parent=st.none() | st.tuples(WORD, st.integers(0, 1)),
        state=st.sampled_from(("COMPLETE", "FAIL")),
    ),
    min_size=1,
    max_size=6,
)
# What the reader may read: some of the words, granted one rule per namespace or as one
# glob (team-[ab]* is amber and blue: the words' first letters differ).
READABLE = st.tuples(
    st.lists(WORD, min_size=1, max_size=3, unique=True).map(frozenset), st.booleans()
)


def rules(readable: frozenset[str], as_glob: bool) -> list[str]:
    if as_glob:
        return ["team-[" + "".join(sorted(w[0] for w in readable)) + "]*"]
    return [namespace(w) for w in sorted(readable)]


@dataclasses.dataclass
class Served:
    """The app over one database, as an admin (who wrote the events) and a reader."""

    client: TestClient
    marquez: TestClient
    admin: dict[str, str]
    reader: dict[str, str]

    def get(self, app: str, path: str, params: dict[str, str]) -> Any:
        """The reader's answer (an httpx Response: TestClient's own)."""
        client = self.marquez if app == "marquez" else self.client
        return client.get(path, params=params, headers=self.reader)


def token(store: Any, scope: str) -> tuple[str, str]:
    token_id, text = auth.new_token()
    store.add_token(Token(token_id, auth.digest(text), frozenset([scope]), None, "", scope, None))
    return token_id, text


@contextlib.contextmanager
def served(db_url: str, events: list[dict[str, Any]], globs: list[str]) -> Iterator[Served]:
    store = open_store(db_url)
    _, admin = token(store, "admin")
    reader_id, reader = token(store, "read")
    for glob in globs:
        store.add_grant(Grant(secrets.token_hex(6), f"token:{reader_id}", "read", glob, "", None))
    store.close()
    with make_client(db_url) as client, TestClient(client.app.state.marquez) as marquez:  # type: ignore[attr-defined]
        headers = {"Authorization": f"Bearer {admin}", "Content-Type": "application/json"}
        reply = client.post("/api/v1/lineage/batch", content=orjson.dumps(events), headers=headers)
        assert reply.status_code == 202, reply.text
        Projector(client.app.state.store).run_until_caught_up()  # type: ignore[attr-defined]
        try:
            yield Served(
                client,
                marquez,
                {"Authorization": f"Bearer {admin}"},
                {"Authorization": f"Bearer {reader}"},
            )
        finally:
            client.app.state.store.close()  # type: ignore[attr-defined]


# -- the requests: every read route, every entity --------------------------------------


def entities(events: list[dict[str, Any]]) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """The datasets (every identity named) and jobs the events name."""
    datasets: set[tuple[str, str]] = set()
    jobs: set[tuple[str, str]] = set()
    for e in events:
        jobs.add((e["job"]["namespace"], e["job"]["name"]))
        parent = e["run"]["facets"].get("parent")
        if parent:
            jobs.add((parent["job"]["namespace"], parent["job"]["name"]))
        for d in (*e["inputs"], *e["outputs"]):
            datasets.add((d["namespace"], d["name"]))
            for i in d["facets"].get("symlinks", {}).get("identifiers", []):
                datasets.add((i["namespace"], i["name"]))
    return datasets, jobs


def openapi_requests(
    doc: dict[str, Any], events: list[dict[str, Any]]
) -> Iterator[tuple[str, str, dict[str, str]]]:
    """Embrasure's read routes from its OpenAPI document (those answering within the
    reader's namespaces), each asked about every entity its parameters can name."""
    datasets, jobs = entities(events)
    runs = [e["run"]["runId"] for e in events]
    for path, item in doc["paths"].items():
        op = item.get("get")
        if op is None or op.get("x-namespaces") != "granted":
            continue
        names = {p["name"]: p for p in op.get("parameters", [])}
        if "run_id" in names:
            for r in runs:
                yield "api", path.replace("{run_id}", r), {}
            continue
        if "{" in path:  # a delivery: tests/web/test_auth.py checks who sees which
            continue
        types = names.get("type", {}).get("schema", {}).get("enum", [None])
        if "namespace" not in names:
            yield "api", path, ({"q": "_"} if "q" in names else {})
            continue
        for kind in types:
            pool = jobs if kind in ("job", "service") else datasets
            if path == "/api/v1/jobs":
                pool = jobs
            for ns, name in sorted(pool):
                params = {"namespace": ns, "name": name}
                if kind is not None:
                    params["type"] = kind
                if "field" in names:
                    params["field"] = "v"
                yield "api", path, params
                if "asOf" in names:  # the graph at an instant: its own identities
                    yield "api", path, {**params, "asOf": "2030-01-01T00:00:00Z"}
        if not names["namespace"].get("required"):
            for word in WORDS:
                yield "api", path, {"namespace": namespace(word)}


def marquez_requests(
    routes: list[Any], events: list[dict[str, Any]]
) -> Iterator[tuple[str, str, dict[str, str]]]:
    """The Marquez port's read routes (its app's route table), each asked about every
    entity its path and Marquez's parameters can name."""
    datasets, jobs = entities(events)
    runs = [e["run"]["runId"] for e in events]
    queries: dict[str, list[dict[str, str]]] = {
        "/api/v1/lineage": [{"nodeId": f"dataset:{ns}:{n}"} for ns, n in sorted(datasets)]
        + [{"nodeId": f"job:{ns}:{n}"} for ns, n in sorted(jobs)],
        "/api/v1/column-lineage": [
            {"nodeId": f"datasetField:{ns}:{n}:v", "withDownstream": "true"}
            for ns, n in sorted(datasets)
        ]
        + [{"nodeId": f"dataset:{ns}:{n}"} for ns, n in sorted(datasets)],
        "/api/v1/runlineage/upstream": [{"runId": r} for r in runs],
        "/api/v1/search": [{"q": "_"}],
        "/api/v2beta/search/jobs": [{"q": "_"}],
        "/api/v2beta/search/datasets": [{"q": "_"}],
    }
    for route in routes:
        if not isinstance(route, Route) or "GET" not in (route.methods or ()):
            continue
        endpoint = route.endpoint
        if not getattr(endpoint, "required_scopes", ()) or getattr(endpoint, "everywhere", False):
            continue
        path = route.path
        fill: list[dict[str, str]] = [{}]
        if "{namespace}" in path:
            pool = datasets if "{dataset}" in path else jobs if "{job}" in path else set()
            fill = [
                {"namespace": ns, "dataset": n, "job": n, "version": "v"} for ns, n in sorted(pool)
            ] or [{"namespace": namespace(w)} for w in WORDS]
        elif "{run_id}" in path:
            fill = [{"run_id": r} for r in runs]
        elif "{source}" in path:
            fill = [{"source": namespace(w)} for w in WORDS]
        for values in fill:
            url = re.sub(r"\{(\w+)\}", lambda m, v=values: v[m.group(1)], path)  # type: ignore[misc]
            for params in queries.get(path, [{}]):
                yield "marquez", url, params


def leaked(reply: Any, unreadable: set[str], asked: str) -> set[str]:
    """The words of namespaces outside the grants in an answer, but for those the
    request itself named (a 404 says what it was asked)."""
    text = reply.text
    for word in WORDS:
        if word in asked:
            text = re.sub(rf"team-{word}|{word}_\w+", "", text)
    return {w for w in unreadable if w in text}


def check_reads(s: Served, events: list[dict[str, Any]], readable: frozenset[str]) -> int:
    """Asks every read route about every entity as the reader; fails on a name outside
    the grants. Returns how many answers were 200."""
    unreadable = set(WORDS) - readable
    doc = s.client.get("/openapi.json").json()
    asked = itertools.chain(
        openapi_requests(doc, events),
        marquez_requests(s.marquez.app.routes, events),  # type: ignore[attr-defined]
    )
    ok = 0
    for app, path, params in asked:
        reply = s.get(app, path, params)
        where = f"{app} GET {path} {params}"
        assert reply.status_code in (200, 400, 404), f"{where}: {reply.status_code} {reply.text}"
        words = leaked(reply, unreadable, f"{path} {params}")
        assert not words, f"{where} names {words} outside read grants {sorted(readable)}"
        ok += reply.status_code == 200
    return ok


def visible_namespaces(s: Served, who: dict[str, str]) -> set[str]:
    doc = s.client.get("/api/v1/namespaces", headers=who).json()
    return {n["name"] for n in doc["namespaces"]}


# -- the property -----------------------------------------------------------------------


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(RUNS, READABLE)
def test_no_read_answer_names_anything_outside_the_readers_grants(
    runs: list[Run], readable_as: tuple[frozenset[str], bool]
) -> None:
    readable, as_glob = readable_as
    note(f"runs {runs!r}, readable {sorted(readable)}, as a glob: {as_glob}")
    events = [r.event(n) for n, r in enumerate(runs)]
    with tempfile.TemporaryDirectory() as tmp:
        url = sqlite_url(Path(tmp) / "g.db")
        with served(url, events, rules(readable, as_glob)) as s:
            assert check_reads(s, events, readable) > 0
            # Not vacuous: the reader sees every namespace the admin sees that it may read.
            seen = visible_namespaces(s, s.admin)
            assert visible_namespaces(s, s.reader) == {n for n in seen if n[5:] in readable}


# -- one graph, every route, both backends --------------------------------------------------

PLATFORM = [
    # amber's job reads blue's table and coral's, writes amber's; coral's job reads amber's.
    Run(("amber", 0), (("blue", 0), ("coral", 0)), (("amber", 0),), True, None, None, "COMPLETE"),
    Run(("coral", 0), (("amber", 0),), (("coral", 2),), True, None, ("amber", 0), "FAIL"),
    Run(("blue", 1), (("blue", 1),), (("blue", 0),), True, None, ("coral", 0), "COMPLETE"),
    # dune's output is also known in amber's namespace: one node, two identities.
    Run(("dune", 0), (("dune", 0),), (("dune", 1),), True, ("amber", 2), None, "COMPLETE"),
]


def test_every_read_route_keeps_to_the_readers_namespaces(db_url: str) -> None:
    events = [r.event(n) for n, r in enumerate(PLATFORM)]
    with served(db_url, events, ["team-amber"]) as s:
        assert check_reads(s, events, frozenset({"amber"})) > 20
        assert visible_namespaces(s, s.reader) == {"team-amber"}
        # Another team's dataset is "not known", like one that does not exist.
        missing = s.get("api", "/api/v1/datasets", {"namespace": "team-coral", "name": "nothing"})
        other = s.get("api", "/api/v1/datasets", {"namespace": "team-coral", "name": "coral_t2"})
        assert missing.status_code == other.status_code == 404
        assert "namespaces you may read" in other.json()["detail"]
        # The walk stops at what lies outside, with one placeholder saying how much.
        lineage = s.get(
            "api", "/api/v1/lineage", {"namespace": "team-amber", "name": "amber_t0"}
        ).json()
        (placeholder,) = [n for n in lineage["nodes"] if n["type"] == "hidden"]
        # blue_t0, coral_t0 upstream of amber_job0; coral_job0 downstream of amber_t0.
        assert placeholder["count"] == 3
        assert placeholder["name"] == "hidden: 3 nodes in namespaces you cannot read"
        assert set(placeholder["next_to"]) == {
            "job:team-amber:amber_job0",
            "dataset:team-amber:amber_t0",
        }
        ids = {n["id"] for n in lineage["nodes"]}
        assert ids == {"dataset:team-amber:amber_t0", "job:team-amber:amber_job0", "hidden:"}
        # Column lineage stops the same way: amber_t0.v comes from blue_t0.v and goes to
        # coral_t2.v.
        columns = s.get(
            "api",
            "/api/v1/column-lineage",
            {"namespace": "team-amber", "name": "amber_t0", "field": "v"},
        ).json()
        (placeholder,) = [n for n in columns["nodes"] if n["type"] == "hidden"]
        assert placeholder["count"] == 2
        assert placeholder["next_to"] == ["field:team-amber:amber_t0:v"]
        assert columns["edges"] == []
        impact = s.get("api", "/api/v1/impact", {"namespace": "team-amber", "name": "amber_t0"})
        assert impact.json()["hidden"]["count"] == 2  # coral_job0, and the field coral_t2.v
        # The admin sees it all, and no placeholder.
        full = s.client.get(
            "/api/v1/lineage",
            params={"namespace": "team-amber", "name": "amber_t0"},
            headers=s.admin,
        ).json()
        assert all(n["type"] != "hidden" for n in full["nodes"]) and len(full["nodes"]) > 3
        # The log's views span every namespace: a narrow read grant does not open them.
        for path in ("/api/v1/deliveries", "/api/v1/quarantine", "/api/v1/events", "/metrics"):
            reply = s.client.get(path, headers=s.reader)
            assert reply.status_code == 403, (path, reply.text)
            assert "needs its scope on '*'" in reply.json()["detail"]
