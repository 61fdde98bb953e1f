"""Jobs under the names Marquez gives them (docs/marquez.md#job-names).

Marquez names a job whose run has a ParentRunFacet ``{parent job}.{job}``: it keeps the
event's name less a leading ``{parent}.`` as the job's simple name, and serves
``{parent}.{simple name}`` (its ``jobs_fqn``). An Airflow task sent as ``dag.task`` with
parent ``dag`` keeps its name; a dbt model sent as ``project.model.orders`` with parent
``dbt-run-project`` becomes ``dbt-run-project.project.model.orders``. A Marquez user's
scripts, bookmarks and marquez-web's URLs hold those names, so the Marquez port serves
and finds jobs by them; Embrasure's own port keeps the names producers sent.

The parent is the one the job's latest run names (Marquez: the event that last wrote the
job), so these names follow a job's latest run as Marquez's do. A parent in a namespace
the reader may not read is not named (query/hidden.py): that reader is served the job's
own name.
"""

from __future__ import annotations

from collections.abc import Iterable

from embrasure.access.grants import may_read
from embrasure.model import JobId
from embrasure.store.base import GraphReader
from embrasure.store.rows import JobRow, RunRow


def parent_name(row: RunRow) -> str | None:
    """The parent job a run names, when the reader may read its namespace."""
    return row.parent_job_name if may_read(row.parent_job_ns or "") else None


def marquez_name(name: str, parent: str | None) -> str:
    """The name Marquez serves a job sent as ``name`` under the parent job ``parent``."""
    if not parent or name.startswith(parent + "."):
        return name
    return f"{parent}.{name}"


def simple_name(name: str, parent: str | None) -> str:
    """Marquez's ``simpleName``: the name less its parent's and a dot."""
    return name[len(parent) + 1 :] if parent and name.startswith(parent + ".") else name


def parents(reader: GraphReader, jobs: Iterable[JobId]) -> dict[JobId, str | None]:
    """The parent job name each job's latest run names (None: none)."""
    out: dict[JobId, str | None] = {}
    for job in jobs:
        if job not in out:
            latest = reader.runs_of_job((job.namespace, job.name), None, 1)
            out[job] = parent_name(latest[0]) if latest else None
    return out


def marquez_names(reader: GraphReader, jobs: Iterable[JobId]) -> dict[JobId, str]:
    """Each job's name on the Marquez port."""
    return {job: marquez_name(job.name, parent) for job, parent in parents(reader, jobs).items()}


def find(reader: GraphReader, namespace: str, name: str) -> JobId | None:
    """The job the Marquez port serves as ``name`` in ``namespace``: the job sent under
    that name when it is served so, else the job whose name is the part after a dot and
    whose parent is the part before it."""
    candidates = [JobId(namespace, name)]
    at = name.find(".")
    while at > 0:
        candidates.append(JobId(namespace, name[at + 1 :]))
        at = name.find(".", at + 1)
    keys = [(j.namespace, j.name) for j in candidates]
    known = {JobId(r.ns, r.name) for r in reader.rows(JobRow, ("ns", "name"), keys)}
    for job in candidates:
        if job in known and marquez_names(reader, [job])[job] == name:
            return job
    return None
