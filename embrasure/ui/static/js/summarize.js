// Which nodes of a loaded graph to draw. A hub read by hundreds of jobs would bury the
// page (and freeze the layout), so each node shows at most CAP new neighbours on each
// side; the rest become one "+N more" node that opens them when asked.
//
// Walks breadth-first from the root over edges either way round; a neighbour is "new"
// when no node nearer the root has shown it yet. Pure: nodes and edges in, ids out.

export const CAP = 12;

export function summarize(rootId, nodeIds, edges, openedHubs = new Set(), cap = CAP) {
  const upstream = new Map(); // node → the nodes with an edge into it
  const downstream = new Map();
  for (const id of nodeIds) {
    upstream.set(id, []);
    downstream.set(id, []);
  }
  for (const e of edges) {
    if (!downstream.has(e.source) || !upstream.has(e.target)) continue;
    downstream.get(e.source).push(e.target);
    upstream.get(e.target).push(e.source);
  }
  const visible = new Set([rootId]);
  const hidden = new Map(); // "id|up" or "id|down" → ids left out there
  const queue = [rootId];
  while (queue.length) {
    const id = queue.shift();
    for (const [side, neighbours] of [
      ["up", upstream],
      ["down", downstream],
    ]) {
      const fresh = [...new Set(neighbours.get(id) || [])].filter((n) => !visible.has(n)).sort();
      const key = `${id}|${side}`;
      const shown = openedHubs.has(key) ? fresh : fresh.slice(0, cap);
      for (const n of shown) {
        visible.add(n);
        queue.push(n);
      }
      if (shown.length < fresh.length) hidden.set(key, fresh.slice(shown.length));
    }
  }
  // A node left out by one hub may have been shown through another path since.
  const summaries = [];
  for (const [key, ids] of hidden) {
    const still = ids.filter((n) => !visible.has(n));
    const [id, side] = key.split("|");
    if (still.length) summaries.push({ key, node: id, side, count: still.length });
  }
  return { visible, summaries };
}
