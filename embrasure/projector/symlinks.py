"""Dataset identity: which identities are one node, and its canonical identity.

Implements docs/projection.md#entities-and-identity (symlinks, lifecycleStateChange RENAME) over
SymlinksDatasetFacet 1-0-1 identifiers and LifecycleStateChangeDatasetFacet 1-0-1.

Rule, over the SET of links ever seen (links are never removed, so the answer does not
depend on arrival order, duplicates or batching — docs/architecture.md#order-independence):

- A ``TABLE`` link (a dataset and one of its symlinks identifiers of type TABLE) says both
  identities are the same dataset. A ``RENAME`` link (old = ``previousIdentifier``, new =
  the dataset carrying the facet) says the same of old and new. Both join groups in one
  union-find, transitively.
- The group's canonical identity is the smallest (namespace, name) among its members that
  is not the old side of any RENAME link, so a rename moves the node to its new name and a
  TABLE alias of the new name still competes as usual. When every member was renamed away
  (a rename cycle: a→b then b→a), it falls back to the smallest member overall — a choice
  that only depends on the set of links, as the links carry no time to prefer a latest.
- Every member stays resolvable (an alias of the node); the old side of a rename is
  flagged ``renamed``. A self-link joins nothing; a self-rename renames nothing.
- Any other identifier type (``LOCATION`` and whatever a producer invents) merges nothing:
  the identifier is kept on the node as a location, and is not an identity of the node.

Incremental use: links only ever join groups, so a store that receives new links needs to
recompute only the groups those links touch. ``group_of`` walks one group through a
``neighbours`` callback (the store's index of links by identity) and ``resolve_group``
resolves that group alone, with the same answer as resolving every link at once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import NamedTuple

from embrasure.model import DatasetId, Symlink

TABLE = "TABLE"
RENAME = "RENAME"
LOCATION = "LOCATION"
JOINING = frozenset({TABLE, RENAME})


class Link(NamedTuple):
    """One identity link. TABLE: a ↔ b. RENAME: a = old identity, b = new identity.
    LOCATION (or any other kind): b is a location of dataset a, of symlink type ``type``
    (default: the kind), so an identifier a producer typed "RENAME" or "TABLE_COPY" stays
    a location and never joins anything."""

    a: DatasetId
    b: DatasetId
    kind: str
    type: str | None = None

    @property
    def joins(self) -> bool:
        return self.kind in JOINING


@dataclasses.dataclass(frozen=True, slots=True)
class Resolution:
    """How one identity resolves: its node's canonical identity and the node's facts."""

    canonical: DatasetId
    aliases: tuple[DatasetId, ...]  # every identity of the node but the canonical, sorted
    locations: tuple[Symlink, ...]  # non-TABLE identifiers of any member, sorted
    renamed: bool  # this identity is the old side of a RENAME


def links_of(
    dataset: DatasetId, symlinks: Iterable[Symlink], previous: DatasetId | None = None
) -> list[Link]:
    """The links one dataset's facets declare: its symlinks identifiers, and the rename
    from ``previous`` (lifecycleStateChange RENAME previousIdentifier) when given."""
    links = [
        Link(dataset, s.target, TABLE)
        if s.type == TABLE
        else Link(dataset, s.target, LOCATION, s.type)
        for s in symlinks
    ]
    if previous is not None:
        links.append(Link(previous, dataset, RENAME))
    return links


def _find(parent: dict[DatasetId, DatasetId], x: DatasetId) -> DatasetId:
    root = x
    while parent[root] != root:
        root = parent[root]
    while parent[x] != root:  # path compression
        parent[x], x = root, parent[x]
    return root


def resolve_identities(links: Iterable[Link]) -> dict[DatasetId, Resolution]:
    """Resolve every identity the links name (both sides of TABLE/RENAME links and the
    dataset side of location links). An identity named by no link is not in
    the result: it is its own canonical identity."""
    parent: dict[DatasetId, DatasetId] = {}
    renamed: set[DatasetId] = set()
    located: dict[DatasetId, set[Symlink]] = {}
    for link in links:
        a, b = link.a, link.b
        parent.setdefault(a, a)
        if link.joins:
            parent.setdefault(b, b)
            ra, rb = _find(parent, a), _find(parent, b)
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)
            if link.kind == RENAME and a != b:
                renamed.add(a)
        else:
            located.setdefault(a, set()).add(Symlink(b, link.type or link.kind))

    groups: dict[DatasetId, list[DatasetId]] = {}
    for x in parent:
        groups.setdefault(_find(parent, x), []).append(x)

    out: dict[DatasetId, Resolution] = {}
    for members in groups.values():
        members.sort()
        live = [m for m in members if m not in renamed]
        canonical = live[0] if live else members[0]
        aliases = tuple(m for m in members if m != canonical)
        locations = tuple(sorted({s for m in members for s in located.get(m, ())}, key=_sym))
        for m in members:
            out[m] = Resolution(canonical, aliases, locations, m in renamed)
    return out


def _sym(s: Symlink) -> tuple[DatasetId, str]:
    return (s.target, s.type)


def group_of(
    start: DatasetId, neighbours: Callable[[DatasetId], Iterable[Link]]
) -> frozenset[DatasetId]:
    """Every identity in ``start``'s group, walking TABLE and RENAME links.

    ``neighbours(x)`` returns the links that name x on either side (a store's index of
    links by identity); location links may be included and are not followed.
    """
    seen = {start}
    todo = [start]
    while todo:
        x = todo.pop()
        for link in neighbours(x):
            if not link.joins:
                continue
            for y in (link.a, link.b):
                if y not in seen:
                    seen.add(y)
                    todo.append(y)
    return frozenset(seen)


def resolve_group(
    start: DatasetId, neighbours: Callable[[DatasetId], Iterable[Link]]
) -> dict[DatasetId, Resolution]:
    """Resolve only ``start``'s group: what a store recomputes after adding links that
    touch ``start`` (call it once per touched identity not yet covered by an earlier
    call). Equal, on the group, to ``resolve_identities`` over every link ever seen."""
    members = group_of(start, neighbours)
    links: set[Link] = set()
    for x in members:
        # A group's links are all the links naming a member: a joining link naming one
        # member names two (the group is closed), and a location link belongs to its
        # dataset side. Location links whose *target* is a member belong elsewhere.
        links.update(link for link in neighbours(x) if link.joins or link.a in members)
    links.add(Link(start, start, TABLE))  # a lone identity still resolves (to itself)
    return {k: v for k, v in resolve_identities(links).items() if k in members}
