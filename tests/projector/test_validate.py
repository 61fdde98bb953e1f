"""The per-event rules of ``project_event`` (docs/projection.md#validation,
docs/projection.md#entities-and-identity), facet checking, canonical JSON, and that no
JSON value makes it raise."""

from __future__ import annotations

import copy
import hashlib
import json
from importlib import resources
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from embrasure.model import (
    DatasetFacts,
    DatasetId,
    EventFacts,
    JobId,
    Lifecycle,
    ParentRef,
    Quarantined,
    Symlink,
)
from embrasure.projector.canonical import canonical_json, event_id
from embrasure.projector.facet_schemas import STANDARD_FACETS, check_facets
from embrasure.projector.pipeline import project_event

RUN_ID = "3f5e83fa-3480-44ff-99c5-ff943904e5e8"
PARENT_ID = "b1c9a6b4-5d1e-4c57-9b8f-2a6c1f0e7d21"
ROOT_ID = "0190a8f2-7c3e-7b1a-8f00-123456789abc"  # a UUIDv7


def run_event(**changes: Any) -> dict[str, Any]:
    """A valid RunEvent; ``changes`` replace top-level keys (None deletes one)."""
    event: dict[str, Any] = {
        "eventType": "COMPLETE",
        "eventTime": "2026-11-30T09:00:00.123Z",
        "producer": "https://example.com/producer",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {"runId": RUN_ID},
        "job": {"namespace": "airflow", "name": "dag.task"},
        "inputs": [{"namespace": "postgres://db:5432", "name": "public.src"}],
        "outputs": [{"namespace": "s3://bucket", "name": "out/table"}],
    }
    for key, value in changes.items():
        if value is None:
            event.pop(key, None)
        else:
            event[key] = value
    return event


def projected(event: Any) -> EventFacts:
    result = project_event(event)
    assert isinstance(result, EventFacts), result
    return result


def quarantined(event: Any) -> Quarantined:
    result = project_event(event)
    assert isinstance(result, Quarantined), result
    assert not result.retriable
    return result


# -- kind ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("event", "kind"),
    [
        (run_event(), "RunEvent"),
        (run_event(run=None), "JobEvent"),
        ({"dataset": {"namespace": "n", "name": "d"}}, "DatasetEvent"),
        # run wins over job and dataset; job over dataset
        ({**run_event(), "dataset": {"namespace": "n", "name": "d"}}, "RunEvent"),
        ({**run_event(run=None), "dataset": {"namespace": "n", "name": "d"}}, "JobEvent"),
        # null counts as absent
        ({**run_event(), "run": None}, "JobEvent"),
        ({"job": None, "dataset": {"namespace": "n", "name": "d"}}, "DatasetEvent"),
    ],
)
def test_kind(event: dict[str, Any], kind: str) -> None:
    assert projected(event).kind == kind


@pytest.mark.parametrize(
    ("event", "kind", "reason"),
    [
        (
            {},
            "DatasetEvent",
            "DatasetEvent: dataset is missing (an event needs run, job or dataset)",
        ),
        ({"eventType": "START"}, "DatasetEvent", "DatasetEvent: dataset is missing"),
        ({"dataset": "d"}, "DatasetEvent", "DatasetEvent: dataset is a string, not an object"),
        ([run_event()], None, "the event is an array, not a JSON object"),
        ("event", None, "the event is a string, not a JSON object"),
        (None, None, "the event is null, not a JSON object"),
        (3, None, "the event is a number, not a JSON object"),
    ],
)
def test_kind_rules(event: Any, kind: str | None, reason: str) -> None:
    result = quarantined(event)
    assert result.kind == kind
    assert result.reason.startswith(reason)


# -- job ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind_of", ["RunEvent", "JobEvent"])
@pytest.mark.parametrize(
    ("job", "reason"),
    [
        (None, "job is missing (it needs job.namespace and job.name)"),
        ("dag.task", "job is a string, not an object"),
        ([], "job is an array, not an object"),
        ({"name": "t"}, "job.namespace is missing"),
        ({"namespace": "n"}, "job.name is missing"),
        ({"namespace": 1, "name": "t"}, "job.namespace is a number, not a string"),
        ({"namespace": "n", "name": None}, "job.name is missing"),
        ({"namespace": "n", "name": ["t"]}, "job.name is an array, not a string"),
        ({"namespace": "n", "name": ""}, "job.name is empty"),
    ],
)
def test_job_rules(kind_of: str, job: Any, reason: str) -> None:
    event = run_event(job=job) if kind_of == "RunEvent" else run_event(run=None, job=job)
    if job is None and kind_of == "JobEvent":
        return  # without run and job it is a DatasetEvent: see test_kind_rules
    result = quarantined(event)
    assert (result.kind, result.reason) == (kind_of, f"{kind_of}: {reason}")


def test_job_identity_is_kept_as_sent() -> None:
    facts = projected(run_event(job={"namespace": "", "name": " Dag.Task "}))
    assert facts.job == JobId("", " Dag.Task ")


# -- run ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("run_id", "stored"),
    [
        (RUN_ID, RUN_ID),
        (RUN_ID.upper(), RUN_ID),
        ("00000000-0000-0000-0000-000000000000", "00000000-0000-0000-0000-000000000000"),
        ("FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF", "ffffffff-ffff-ffff-ffff-ffffffffffff"),
        (ROOT_ID, ROOT_ID),  # v7
        ("6ba7b810-9dad-11d1-80b4-00c04fd430c8", "6ba7b810-9dad-11d1-80b4-00c04fd430c8"),  # v1
    ],
)
def test_run_id_is_a_uuid_in_lowercase(run_id: str, stored: str) -> None:
    assert projected(run_event(run={"runId": run_id})).run_id == stored


@pytest.mark.parametrize(
    ("run", "reason"),
    [
        ({}, "RunEvent: run.runId is missing"),
        ({"runId": None}, "RunEvent: run.runId is missing"),
        ({"runId": 42}, "RunEvent: run.runId is a number, not a string"),
        ({"runId": "abc"}, "RunEvent: run.runId 'abc' is not a UUID"),
        ({"runId": ""}, "RunEvent: run.runId '' is not a UUID"),
        ({"runId": RUN_ID.replace("-", "")}, "is not a UUID"),
        ({"runId": "{" + RUN_ID + "}"}, "is not a UUID"),
        ({"runId": "urn:uuid:" + RUN_ID}, "is not a UUID"),
        ({"runId": RUN_ID + " "}, "is not a UUID"),
        ({"runId": RUN_ID[:-1] + "g"}, "is not a UUID"),
        ({"runId": "x" * 500}, "is not a UUID"),
        ("r", "RunEvent: run is a string, not an object"),
        ([RUN_ID], "RunEvent: run is an array, not an object"),
    ],
)
def test_run_rules(run: Any, reason: str) -> None:
    result = quarantined(run_event(run=run))
    assert result.kind == "RunEvent"
    assert reason in result.reason
    assert len(result.reason) < 200


def test_job_and_dataset_events_have_no_run() -> None:
    assert projected(run_event(run=None)).run_id is None
    assert projected({"dataset": {"namespace": "n", "name": "d"}}).job is None


# -- eventTime, eventType -----------------------------------------------------------------------


def test_event_time() -> None:
    facts = projected(run_event(eventTime="2026-11-30T10:00:00.123456789+01:00"))
    assert facts.time is not None
    assert facts.time.key == "2026-11-30T09:00:00.123456789Z"
    assert facts.warnings == ()


def test_missing_event_time_is_unknown() -> None:
    assert projected(run_event(eventTime=None)).time is None


def test_time_without_timezone_is_a_warning() -> None:
    facts = projected(run_event(eventTime="2021-11-03T10:53:52.427343"))
    assert facts.time is not None and facts.time.text == "2021-11-03T10:53:52.427343Z"
    assert facts.warnings == (
        "eventTime '2021-11-03T10:53:52.427343' has no timezone; read as UTC",
    )


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("2026-02-30T00:00:00Z", "RunEvent: eventTime '2026-02-30T00:00:00Z' is not a valid date"),
        ("soon", "RunEvent: eventTime 'soon' is not an ISO-8601 date and time"),
        (1700000000, "RunEvent: eventTime is a number, not a string"),
    ],
)
def test_unparseable_event_time_quarantines(value: Any, reason: str) -> None:
    assert quarantined(run_event(eventTime=value)).reason.startswith(reason)


@pytest.mark.parametrize("state", ["START", "RUNNING", "COMPLETE", "FAIL", "ABORT", "OTHER"])
def test_event_types(state: str) -> None:
    facts = projected(run_event(eventType=state))
    assert (facts.event_type, facts.event_type_raw, facts.warnings) == (state, state, ())


@pytest.mark.parametrize("raw", ["complete", "SUCCESS", "", "START "])
def test_unknown_event_type_is_kept_and_read_as_other(raw: str) -> None:
    facts = projected(run_event(eventType=raw))
    assert (facts.event_type, facts.event_type_raw) == ("OTHER", raw)
    assert len(facts.warnings) == 1 and "treated as OTHER" in facts.warnings[0]


def test_missing_event_type_is_none() -> None:
    facts = projected(run_event(eventType=None))
    assert (facts.event_type, facts.event_type_raw) == (None, None)


@pytest.mark.parametrize(("value", "what"), [(1, "a number"), (["START"], "an array")])
def test_event_type_must_be_a_string(value: Any, what: str) -> None:
    assert quarantined(run_event(eventType=value)).reason == (
        f"RunEvent: eventType is {what}, not a string"
    )


# -- datasets ------------------------------------------------------------------------------------


def test_datasets_in_order_with_roles() -> None:
    facts = projected(
        run_event(
            inputs=[{"namespace": "a", "name": "1"}, {"namespace": "a", "name": "2"}],
            outputs=[{"namespace": "b", "name": "3"}],
        )
    )
    assert [(d.id, d.role) for d in facts.datasets] == [
        (DatasetId("a", "1"), "input"),
        (DatasetId("a", "2"), "input"),
        (DatasetId("b", "3"), "output"),
    ]


@pytest.mark.parametrize("key", ["inputs", "outputs"])
@pytest.mark.parametrize(
    ("dataset", "reason"),
    [
        ({"name": "t"}, "{key}[1].namespace is missing"),
        ({"namespace": "n"}, "{key}[1].name is missing"),
        ({"namespace": "n", "name": ""}, "{key}[1].name is empty"),
        ({"namespace": None, "name": "t"}, "{key}[1].namespace is missing"),
        ({"namespace": 5, "name": "t"}, "{key}[1].namespace is a number, not a string"),
        ({"namespace": "n", "name": {"a": 1}}, "{key}[1].name is an object, not a string"),
        (
            {"namespace": "n", "name": "x" * 1001},
            "{key}[1].name is 1,001 characters long; at most 1,000 are allowed",
        ),
        ("n.t", "{key}[1] is a string, not an object"),
        (None, "{key}[1] is null, not an object"),
    ],
)
def test_dataset_rules_name_the_position(key: str, dataset: Any, reason: str) -> None:
    event = run_event(**{key: [{"namespace": "n", "name": "ok"}, dataset]})
    assert quarantined(event).reason == "RunEvent: " + reason.format(key=key)


def test_dataset_name_limits() -> None:
    longest = "é" * 1000  # characters, not bytes
    facts = projected(run_event(outputs=[{"namespace": "", "name": longest}]))
    assert facts.datasets[-1].id == DatasetId("", longest)


@pytest.mark.parametrize(("value", "what"), [({}, "an object"), ("s3://b/t", "a string")])
def test_inputs_must_be_an_array(value: Any, what: str) -> None:
    assert quarantined(run_event(inputs=value)).reason == (
        f"RunEvent: inputs is {what}, not an array"
    )


def test_absent_or_null_inputs_are_none() -> None:
    assert projected({**run_event(inputs=None), "outputs": None}).datasets == ()


def test_job_event_datasets() -> None:
    facts = projected(run_event(run=None, eventType=None))
    assert facts.kind == "JobEvent" and [d.role for d in facts.datasets] == ["input", "output"]


def test_dataset_event() -> None:
    facts = projected(
        {
            "eventTime": "2026-11-30T09:00:00Z",
            "dataset": {
                "namespace": "n",
                "name": "d",
                "facets": {"documentation": {"description": "the d table"}},
            },
            "inputs": [{"namespace": "n", "name": "ignored"}],
        }
    )
    (dataset,) = facts.datasets
    assert dataset == DatasetFacts(
        DatasetId("n", "d"), "dataset", {"documentation": {"description": "the d table"}}, {}
    )
    assert facts.warnings == ("inputs ignored: a DatasetEvent carries only dataset",)


@pytest.mark.parametrize(
    ("dataset", "reason"),
    [
        ({"namespace": "n"}, "DatasetEvent: dataset.name is missing"),
        ({"namespace": "n", "name": ""}, "DatasetEvent: dataset.name is empty"),
    ],
)
def test_dataset_event_rules(dataset: dict[str, Any], reason: str) -> None:
    assert quarantined({"dataset": dataset}).reason == reason


# -- facets ----------------------------------------------------------------------------------------

BAD_OWNERSHIP = {"owners": [{"type": "MAINTAINER"}]}  # OwnershipJobFacet 1-0-1 needs name


def test_a_facet_breaking_its_schema_is_dropped_with_a_warning() -> None:
    facts = projected(
        run_event(job={"namespace": "n", "name": "j", "facets": {"ownership": BAD_OWNERSHIP}})
    )
    assert facts.job_facets == {}
    assert facts.warnings == (
        'job.facets.ownership dropped: it breaks OwnershipJobFacet 1-0-1 at /owners/0: "name" '
        "is a required property",
    )


def test_valid_facets_are_kept_without_producer_or_schema_url() -> None:
    facets = {
        "jobType": {"processingType": "BATCH", "integration": "SPARK", "jobType": "SQL_JOB"},
        "sql": {"query": "select 1"},
    }
    facts = projected(run_event(job={"namespace": "n", "name": "j", "facets": facets}))
    assert facts.job_facets == facets and facts.warnings == ()


@pytest.mark.parametrize(
    ("location", "facets", "kept", "warning"),
    [
        # custom facets are kept unchecked, whatever they hold
        ("run", {"spark.logicalPlan": {"plan": [1, 2]}}, ["spark.logicalPlan"], None),
        ("job", {"additionalProp1": {}}, ["additionalProp1"], None),
        # but a facet must be an object
        ("run", {"custom": "text"}, [], "run.facets.custom dropped: a facet must be an object"),
        ("run", {"nominalTime": None}, [], "a facet must be an object, not null"),
        ("dataset", {"schema": [1]}, [], "a facet must be an object, not an array"),
        # a deletion marker on a job or dataset facet is not checked (proposal 1837)
        ("job", {"sql": {"_deleted": True}}, ["sql"], None),
        ("dataset", {"schema": {"_deleted": True}}, ["schema"], None),
        # … and on a run's input/output facets, which Embrasure keeps per run and lets a
        # later event of the run take back (docs/projection.md#what-each-run-did) …
        (
            "outputFacets",
            {"outputStatistics": {"_deleted": True, "rowCount": "x"}},
            ["outputStatistics"],
            None,
        ),
        ("inputFacets", {"inputStatistics": {"_deleted": True}}, ["inputStatistics"], None),
        # … but "_deleted" means nothing on run facets, and false is no marker: checked
        ("run", {"errorMessage": {"_deleted": True}}, [], "breaks ErrorMessageRunFacet"),
        (
            "outputFacets",
            {"outputStatistics": {"_deleted": False, "rowCount": "x"}},
            [],
            "breaks Output",
        ),
        # null members read as absent (openlineage-dbt): _deleted null, optional nulls
        (
            "job",
            {
                "jobType": {
                    "processingType": "BATCH",
                    "integration": "DBT",
                    "jobType": "JOB",
                    "_deleted": None,
                }
            },
            ["jobType"],
            None,
        ),
        (
            "run",
            {
                "errorMessage": {
                    "message": "boom",
                    "programmingLanguage": "python",
                    "stackTrace": None,
                }
            },
            ["errorMessage"],
            None,
        ),
        (
            "run",
            {"errorMessage": {"message": None, "programmingLanguage": "python"}},
            [],
            '"message" is a required property',
        ),
        ("job", {"sql": {"query": "q", "_deleted": "yes"}}, [], 'at /_deleted: "yes" is not of'),
        # the same key is a different facet at each place
        ("dataset", {"ownership": {"owners": [{"name": "team:data"}]}}, ["ownership"], None),
        ("inputFacets", {"dataQualityMetrics": {"rowCount": 3}}, [], '"columnMetrics" is a'),
        (
            "dataset",
            {"dataQualityMetrics": {"rowCount": 3, "columnMetrics": {}}},
            ["dataQualityMetrics"],
            None,
        ),
        ("outputFacets", {"outputStatistics": {"rowCount": "wrong"}}, [], "at /rowCount: "),
        # an input facet in outputFacets is a custom facet there
        ("outputFacets", {"dataQualityMetrics": {"rowCount": 3}}, ["dataQualityMetrics"], None),
    ],
)
def test_facet_policy(
    location: str, facets: dict[str, Any], kept: list[str], warning: str | None
) -> None:
    result, warnings = check_facets(location, facets, f"{location}.facets")
    assert sorted(result) == kept
    if warning is None:
        assert warnings == []
    else:
        assert len(warnings) == 1 and warning in warnings[0], warnings


def test_facet_warnings_are_bounded() -> None:
    huge = {"rowCount": "x" * 100_000}
    _, (warning,) = check_facets("outputFacets", {"outputStatistics": huge}, "outputs[0]")
    assert len(warning) < 500 and warning.endswith('is not of type "integer"')


def test_role_facets_are_checked_by_role() -> None:
    facts = projected(
        run_event(
            inputs=[
                {
                    "namespace": "n",
                    "name": "in",
                    "inputFacets": {"dataQualityMetrics": {"rowCount": 1}},
                }
            ],
            outputs=[
                {
                    "namespace": "n",
                    "name": "out",
                    "outputFacets": {"outputStatistics": {"rowCount": 5, "size": 10}},
                    "inputFacets": {"ignored": {}},
                }
            ],
        )
    )
    source, target = facts.datasets
    assert source.role_facets == {}
    assert target.role_facets == {"outputStatistics": {"rowCount": 5, "size": 10}}
    assert facts.warnings == (
        "inputs[0].inputFacets.dataQualityMetrics dropped: it breaks "
        'DataQualityMetricsInputDatasetFacet 1-0-3 at /: "columnMetrics" is a required property',
    )


@pytest.mark.parametrize("facets", [[], "x", 1])
def test_facets_that_are_not_an_object_are_ignored(facets: Any) -> None:
    facts = projected(run_event(run={"runId": RUN_ID, "facets": facets}))
    assert facts.run_facets == {}
    assert facts.warnings[0].startswith("run.facets ignored: facets must be an object")


def test_standard_facet_table() -> None:
    expected = {
        ("run", "parent"): "ParentRunFacet",
        ("run", "tags"): "TagsRunFacet",
        ("job", "tags"): "TagsJobFacet",
        ("job", "lineage"): "LineageJobFacet",
        ("dataset", "lineage"): "LineageDatasetFacet",
        ("dataset", "symlinks"): "SymlinksDatasetFacet",
        ("inputFacets", "subset"): "InputSubsetInputDatasetFacet",
        ("outputFacets", "subset"): "OutputSubsetOutputDatasetFacet",
        ("inputFacets", "dataQualityAssertions"): "DataQualityAssertionsDatasetFacet",
    }
    for (location, key), name in expected.items():
        assert STANDARD_FACETS[location][key].name == name
    assert "dataQualityAssertions" not in STANDARD_FACETS["dataset"]
    assert sum(len(keys) for keys in STANDARD_FACETS.values()) == 40


def test_schemas_are_package_data() -> None:
    folder = resources.files("embrasure.projector").joinpath("schemas")
    names = {entry.name for entry in folder.iterdir()}
    assert "OpenLineage.json" in names and "ParentRunFacet.json" in names
    assert len([n for n in names if n.endswith(".json")]) == 39


# -- symlinks, version, lifecycle -------------------------------------------------------------


def output(**facets: Any) -> dict[str, Any]:
    return {"namespace": "file", "name": "/warehouse/t", "facets": facets}


def one_output(dataset: dict[str, Any]) -> DatasetFacts:
    return projected(run_event(inputs=None, outputs=[dataset])).datasets[0]


def test_symlinks() -> None:
    identifiers = [
        {"namespace": "hive://h:9083", "name": "db.t", "type": "TABLE"},
        {"namespace": "s3://b", "name": "warehouse/t", "type": "LOCATION"},
        {"namespace": "hive://h:9083", "name": "db.t", "type": "table"},  # same, lowercase
        {"namespace": "hive://h:9083", "name": "", "type": "TABLE"},
    ]
    facts = projected(
        run_event(inputs=None, outputs=[output(symlinks={"identifiers": identifiers})])
    )
    assert facts.datasets[0].symlinks == (
        Symlink(DatasetId("hive://h:9083", "db.t"), "TABLE"),
        Symlink(DatasetId("s3://b", "warehouse/t"), "LOCATION"),
    )
    assert facts.warnings == (
        "outputs[0].facets.symlinks.identifiers[3] ignored: its name is empty or longer than "
        "1,000 characters",
    )


@pytest.mark.parametrize(
    "facet",
    [
        {"identifiers": [{"namespace": "n", "name": "t"}]},  # breaks the schema: no type
        {"_deleted": True, "identifiers": [{"namespace": "n", "name": "t", "type": "TABLE"}]},
    ],
)
def test_no_symlinks_from_a_dropped_or_deleted_facet(facet: dict[str, Any]) -> None:
    assert one_output(output(symlinks=facet)).symlinks == ()


@pytest.mark.parametrize(
    ("dataset", "version"),
    [
        ({**output(version={"datasetVersion": "v7"}), "version": "v8"}, "v8"),  # field first
        (output(version={"datasetVersion": "v7"}), "v7"),
        (output(version={"datasetVersion": "v7", "_deleted": True}), None),
        (output(version={"datasetVersion": 7}), None),  # dropped: breaks its schema
        (output(), None),
    ],
)
def test_version(dataset: dict[str, Any], version: str | None) -> None:
    assert one_output(dataset).version == version


def test_version_field_that_is_not_a_string_is_a_warning() -> None:
    facts = projected(run_event(inputs=None, outputs=[{**output(), "version": 3}]))
    assert facts.datasets[0].version is None
    assert facts.warnings == ("outputs[0].version ignored: it is a number, not a string",)


@pytest.mark.parametrize(
    ("facet", "lifecycle"),
    [
        ({"lifecycleStateChange": "DROP"}, Lifecycle("DROP")),
        ({"lifecycleStateChange": "OVERWRITE"}, Lifecycle("OVERWRITE")),
        (
            {
                "lifecycleStateChange": "RENAME",
                "previousIdentifier": {"namespace": "file", "name": "/warehouse/old"},
            },
            Lifecycle("RENAME", DatasetId("file", "/warehouse/old")),
        ),
        ({"lifecycleStateChange": "EXPLODE"}, None),  # not in the 1-0-1 enum: dropped
        ({"lifecycleStateChange": "DROP", "_deleted": True}, None),
    ],
)
def test_lifecycle(facet: dict[str, Any], lifecycle: Lifecycle | None) -> None:
    assert one_output(output(lifecycleStateChange=facet)).lifecycle == lifecycle


def test_rename_without_previous_identifier_is_a_warning() -> None:
    facts = projected(
        run_event(
            inputs=None, outputs=[output(lifecycleStateChange={"lifecycleStateChange": "RENAME"})]
        )
    )
    assert facts.datasets[0].lifecycle == Lifecycle("RENAME", None)
    assert "RENAME without a usable previousIdentifier" in facts.warnings[0]


# -- parent ---------------------------------------------------------------------------------------


def with_run_facets(**facets: Any) -> dict[str, Any]:
    return run_event(run={"runId": RUN_ID, "facets": facets})


PARENT = {
    "run": {"runId": PARENT_ID.upper()},
    "job": {"namespace": "airflow", "name": "dag"},
    "root": {"run": {"runId": ROOT_ID}, "job": {"namespace": "airflow", "name": "root_dag"}},
}


@pytest.mark.parametrize(
    ("facets", "parent", "warnings"),
    [
        (
            {"parent": PARENT},
            ParentRef(PARENT_ID, JobId("airflow", "dag"), ROOT_ID, JobId("airflow", "root_dag")),
            0,
        ),
        (
            {"parent": {"run": {"runId": PARENT_ID}, "job": {"namespace": "a", "name": "d"}}},
            ParentRef(PARENT_ID, JobId("a", "d")),
            0,
        ),
        # partial matchers: "run": {} — the facet breaks ParentRunFacet 1-2-0 and is dropped,
        # but the parent job is still a fact
        (
            {"parent": {"run": {}, "job": {"namespace": "a", "name": "d"}}},
            ParentRef(None, JobId("a", "d")),
            1,
        ),
        # openlineage-airflow's pre-standard key, job only
        (
            {"parentRun": {"job": {"namespace": "a", "name": "d"}}},
            ParentRef(None, JobId("a", "d")),
            0,
        ),
        # parent wins over parentRun
        (
            {"parent": PARENT, "parentRun": {"job": {"namespace": "x", "name": "y"}}},
            ParentRef(PARENT_ID, JobId("airflow", "dag"), ROOT_ID, JobId("airflow", "root_dag")),
            0,
        ),
        # a parent runId that is not a UUID links no run
        (
            {"parent": {"run": {"runId": "manual__2026"}, "job": {"namespace": "a", "name": "d"}}},
            ParentRef(None, JobId("a", "d")),
            1,
        ),
        # the run's own id is no parent
        (
            {"parent": {"run": {"runId": RUN_ID}, "job": {"namespace": "a", "name": "d"}}},
            ParentRef(None, JobId("a", "d")),
            1,
        ),
        ({"parent": {"run": {}, "job": {}}}, None, 1),
        ({"parent": "dag"}, None, 1),
        ({}, None, 0),
    ],
)
def test_parent(facets: dict[str, Any], parent: ParentRef | None, warnings: int) -> None:
    facts = projected(with_run_facets(**facets))
    assert facts.parent == parent
    assert len(facts.warnings) == warnings, facts.warnings


def test_parent_facet_that_breaks_its_schema_is_dropped_from_the_run_facets() -> None:
    facts = projected(
        with_run_facets(parent={"run": {"noRunId": "x"}, "job": {"namespace": "a", "name": "d"}})
    )
    assert "parent" not in facts.run_facets
    assert facts.warnings[0].startswith("run.facets.parent dropped: it breaks ParentRunFacet 1-2-0")


def test_job_events_have_no_parent() -> None:
    facts = projected({**run_event(run=None), "facets": {"parent": PARENT}})
    assert facts.parent is None and facts.run_facets == {}


# -- column lineage hook -----------------------------------------------------------------------


def test_column_lineage_of_outputs_is_extracted() -> None:
    lineage = {
        "fields": {
            "total": {
                "inputFields": [
                    {
                        "namespace": "postgres://db:5432",
                        "name": "public.src",
                        "field": "amount",
                        "transformations": [{"type": "DIRECT", "subtype": "AGGREGATION"}],
                    }
                ]
            }
        }
    }
    facts = projected(
        run_event(
            outputs=[
                {
                    "namespace": "s3://bucket",
                    "name": "out/table",
                    "facets": {"columnLineage": lineage},
                }
            ]
        )
    )
    (column,) = facts.columns
    assert (column.source, column.source_field, column.target_field, column.klass) == (
        DatasetId("postgres://db:5432", "public.src"),
        "amount",
        "total",
        "aggregate",
    )


# -- identity ------------------------------------------------------------------------------


def test_event_id_is_the_sha256_of_the_canonical_json() -> None:
    event = run_event()
    canonical = canonical_json(event)
    assert (
        canonical
        == json.dumps(event, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    )
    assert projected(event).event_id == hashlib.sha256(canonical).hexdigest() == event_id(event)


def test_event_id_ignores_key_order_and_whitespace_but_not_content() -> None:
    event = run_event()
    reordered = json.loads(json.dumps(dict(reversed(list(event.items()))), indent=4))
    assert event_id(reordered) == event_id(event)
    assert event_id(run_event(eventType="START")) != event_id(event)
    assert event_id({"a": 1}) != event_id({"a": 1.0})


def test_event_id_is_of_the_event_as_received_not_as_projected() -> None:
    event = run_event(job={"namespace": "n", "name": "j", "facets": {"ownership": BAD_OWNERSHIP}})
    assert projected(event).event_id == event_id(event)


def test_integers_beyond_64_bits_read_as_orjson_reads_them() -> None:
    # orjson.loads turns 2**64 into a double; a value from another parser gets the same id.
    assert canonical_json({"n": 2**64}) == b'{"n":1.8446744073709552e+19}'
    assert event_id({"n": 2**64}) == event_id({"n": float(2**64)})
    assert canonical_json({"n": 2**64 - 1}) == b'{"n":18446744073709551615}'
    assert canonical_json({"n": -(2**63)}) == b'{"n":-9223372036854775808}'


@pytest.mark.parametrize("value", [{"n": 10**400}, {"s": "\ud800"}, {1: "non-string key"}])
def test_values_without_a_json_form_quarantine(value: Any) -> None:
    with pytest.raises(ValueError):
        canonical_json(value)
    assert quarantined(value).reason.startswith("the event cannot be identified: ")


# -- never raises ----------------------------------------------------------------------------------

_KEYS = st.sampled_from(
    [
        "run",
        "job",
        "dataset",
        "inputs",
        "outputs",
        "eventTime",
        "eventType",
        "facets",
        "runId",
        "namespace",
        "name",
        "parent",
        "symlinks",
        "identifiers",
        "type",
        "_deleted",
        "version",
        "columnLineage",
        "fields",
        "inputFields",
        "inputFacets",
        "outputFacets",
        "root",
    ]
) | st.text(max_size=6)
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from([RUN_ID, "2026-11-30T09:00:00Z", "START", "TABLE", "", "x" * 1001])
)
JSON = st.recursive(
    _SCALARS,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_KEYS, children, max_size=5),
    max_leaves=40,
)


def _assert_total(result: EventFacts | Quarantined) -> None:
    if isinstance(result, Quarantined):
        assert result.reason and not result.retriable, result.reason
    else:
        assert len(result.event_id) == 64


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(JSON)
def test_never_raises_on_any_json_value(value: Any) -> None:
    _assert_total(project_event(value))


RICH = run_event(
    run={
        "runId": RUN_ID,
        "facets": {"parent": PARENT, "errorMessage": {"message": "m", "programmingLanguage": "py"}},
    },
    job={"namespace": "n", "name": "j", "facets": {"sql": {"query": "select"}}},
    inputs=[
        {
            "namespace": "n",
            "name": "in",
            "facets": {
                "symlinks": {"identifiers": [{"namespace": "h", "name": "t", "type": "TABLE"}]}
            },
            "inputFacets": {"dataQualityMetrics": {"columnMetrics": {}}},
        }
    ],
    outputs=[
        {
            "namespace": "n",
            "name": "out",
            "version": "v1",
            "facets": {
                "lifecycleStateChange": {
                    "lifecycleStateChange": "RENAME",
                    "previousIdentifier": {"namespace": "n", "name": "old"},
                },
                "version": {"datasetVersion": "v2"},
                "columnLineage": {
                    "fields": {
                        "c": {"inputFields": [{"namespace": "h", "name": "t", "field": "c"}]}
                    },
                    "dataset": [{"namespace": "n", "name": "in", "field": "k"}],
                },
            },
            "outputFacets": {"outputStatistics": {"rowCount": 1}},
        }
    ],
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, child in value.items():
            found += _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += _paths(child, (*prefix, index))
    return found


def test_the_rich_event_is_valid() -> None:
    facts = projected(RICH)
    assert facts.warnings == () and facts.parent is not None and facts.columns


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_never_raises_on_near_valid_events(data: st.DataObject) -> None:
    event = copy.deepcopy(RICH)
    for _ in range(data.draw(st.integers(1, 3))):
        paths = _paths(event)
        if not paths:
            break
        *parents, last = data.draw(st.sampled_from(paths))
        holder = event
        for step in parents:
            holder = holder[step]
        if data.draw(st.booleans()) and isinstance(holder, dict):
            del holder[last]
        else:
            holder[last] = data.draw(JSON)
    _assert_total(project_event(event))
