// A parent job's family: the jobs of its latest run's descendants (an Airflow DAG run's
// tasks, the Spark application a task submitted, the dbt models a task ran), read from
// the run hierarchy (ParentRunFacet; GET /api/v1/runs/{runId}/children, docs/queries.md#runs).
//
// The lineage graph has no job → job edge: a DAG's tasks are tied to it only through
// their runs' parent facets. The job page draws them from this walk, each child job
// with its own lineage and a "part of" edge from its parent job (docs/ui.md).

import { get } from "./api.js";

export const MAX_JOBS = 60; // child jobs drawn at most: each costs lineage requests
const MAX_LEVELS = 4; // DAG → task → Spark application → Spark query
const PAGE = 100;

const key = (job) => `${job.namespace}\u0000${job.name}`;

// → { jobs: [{namespace, name}], links: [[parent, child]] (as jobs), truncated }, the
// jobs in the order their runs started, level by level; empty for a job without runs.
export async function descendants(job) {
  const jobs = new Map(); // key → {namespace, name}
  const links = new Map(); // "parent→child" key → [parent, child]
  let truncated = false;
  if (!job.latest_run) return { jobs: [], links: [], truncated };
  const self = { namespace: job.namespace, name: job.name };
  let level = [{ runId: job.latest_run.runId, job: self }];
  for (let depth = 0; depth < MAX_LEVELS && level.length && !truncated; depth++) {
    const next = [];
    for (const parent of level) {
      let cursor = null;
      do {
        const page = await get(`/api/v1/runs/${encodeURIComponent(parent.runId)}/children`, {
          limit: PAGE,
          cursor,
        });
        for (const run of page.runs) {
          const child = { namespace: run.job.namespace, name: run.job.name };
          if (key(child) === key(self)) continue;
          if (!jobs.has(key(child))) {
            if (jobs.size >= MAX_JOBS) {
              truncated = true;
              break;
            }
            jobs.set(key(child), child);
          }
          links.set(`${key(parent.job)}→${key(child)}`, [parent.job, child]);
          if (run.child_count) next.push({ runId: run.runId, job: child });
        }
        cursor = truncated ? null : page.next_cursor;
      } while (cursor);
      if (truncated) break;
    }
    level = next;
  }
  return { jobs: [...jobs.values()], links: [...links.values()], truncated };
}
