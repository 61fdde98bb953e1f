"""Grant rules and what they give a principal (docs/security.md#grants).

A rule says who (``group:NAME``, ``subject:SUB``, ``client:ID`` or ``token:ID``) may use
a scope (``ingest``, ``read`` or ``admin``, which allows the other two) on the namespaces
a glob matches (``airflow-prod/*``, ``finance.*``, ``*``; Python's ``fnmatchcase``: ``*``
any run of characters, ``?`` one, ``[…]`` a set; case matters, as in OpenLineage
namespaces).

A static token no rule names keeps its scopes on every namespace, as before grants
existed; once a rule names ``token:ID``, that token has what its rules give and nothing
else. A JWT has what the rules naming its subject, its client or one of its groups give:
nothing when none does.
"""

from __future__ import annotations

import contextvars
import dataclasses
import fnmatch
import functools
from collections.abc import Iterable, Sequence

from embrasure.model import Grant, Principal, Token

SCOPES = ("ingest", "read", "subscriptions", "admin")
KINDS = ("group", "subject", "client", "token")
EVERYWHERE = "*"
TOKEN_ISSUER = "embrasure"  # Principal.issuer of this server's own static tokens


def check_rule(who: str, scope: str, namespaces: str) -> None:
    """ValueError saying what is wrong with a rule before it is stored."""
    kind, sep, name = who.partition(":")
    if not sep or kind not in KINDS or not name:
        raise ValueError(f"who {who!r} must be KIND:NAME, KIND one of {', '.join(KINDS)}")
    if scope not in SCOPES:
        raise ValueError(f"scope {scope!r} must be one of {', '.join(SCOPES)}")
    if not namespaces.strip():
        raise ValueError("namespaces must be a glob such as airflow-prod/* or *")


def token_principal(token: Token, grants: Sequence[Grant]) -> Principal:
    named = [g for g in grants if g.who == f"token:{token.token_id}"]
    scopes = (
        tuple((g.scope, g.namespaces) for g in named)
        if named
        else tuple((s, EVERYWHERE) for s in sorted(token.scopes))
    )
    return Principal(
        kind="token",
        subject=token.token_id,
        issuer=TOKEN_ISSUER,
        token_id=token.token_id,
        name=token.name,
        groups=frozenset(),
        provider_key=token.provider_key,
        scopes=scopes,
    )


def jwt_principal(
    *,
    subject: str,
    issuer: str,
    token_id: str,
    client: str,
    groups: Iterable[str],
    grants: Sequence[Grant],
    kind: str = "jwt",
) -> Principal:
    """A JWT's bearer, or (``kind`` "session") a person signed in to the web UI."""
    groups = frozenset(groups)
    names = {f"subject:{subject}", *(f"group:{g}" for g in groups)}
    if client:
        names.add(f"client:{client}")
    return Principal(
        kind=kind,
        subject=subject,
        issuer=issuer,
        token_id=token_id,
        name=client,
        groups=groups,
        provider_key=None,
        scopes=tuple((g.scope, g.namespaces) for g in grants if g.who in names),
    )


def allows_in(principal: Principal, scope: str, namespace: str) -> bool:
    """Whether ``principal`` may use ``scope`` (or admin) on ``namespace``."""
    return any(
        s in (scope, "admin") and fnmatch.fnmatchcase(namespace, pattern)
        for s, pattern in principal.scopes
    )


@dataclasses.dataclass(frozen=True)
class NamespaceGrants:
    """The namespaces ``principal`` may use ``scope`` on, when those are not all of them;
    each namespace's answer is kept (a producer writes the same few again and again)."""

    principal: Principal
    scope: str
    _answers: dict[str, bool] = dataclasses.field(default_factory=dict, compare=False)

    def allows(self, namespace: str) -> bool:
        answer = self._answers.get(namespace)
        if answer is None:
            if len(self._answers) >= ANSWERS_KEPT:
                self._answers.clear()
            answer = self._answers[namespace] = allows_in(self.principal, self.scope, namespace)
        return answer


ANSWERS_KEPT = 10_000


@functools.lru_cache(maxsize=1024)  # one per live principal and scope: its answers kept
def restricted(principal: Principal | None, scope: str) -> NamespaceGrants | None:
    """None when ``principal`` may use ``scope`` everywhere (or auth is off): then nothing
    needs checking namespace by namespace."""
    if principal is None or any(
        s in (scope, "admin") and pattern == EVERYWHERE for s, pattern in principal.scopes
    ):
        return None
    return NamespaceGrants(principal, scope)


# What the request being answered may read: None when it may read every namespace (or
# auth is off). The guard sets it for each request (web/auth.py ``requires``); the read
# side's one visibility rule (query/hidden.py) reads it, so that no read path has to
# carry it and none can forget it. Starlette's thread pool runs a read in a copy of the
# request's context, so the value follows the read into its thread.
READING: contextvars.ContextVar[NamespaceGrants | None] = contextvars.ContextVar(
    "reading", default=None
)


def may_read(namespace: str) -> bool:
    """Whether the request being answered may read ``namespace`` (READING)."""
    reading = READING.get()
    return reading is None or reading.allows(namespace)


def reaches(principal: Principal, scope: str, everywhere: bool = False) -> bool:
    """Whether a route needing ``scope`` serves ``principal``. Ingest is checked item by
    item (the receiver quarantines what lies outside) and reads answer within the
    reader's namespaces (query/hidden.py), so a grant on any namespace will do; admin
    actions, and the routes that span every namespace (``everywhere``: the delivery log,
    metrics), need their scope on every namespace."""
    if scope == "admin" or everywhere:
        return restricted(principal, scope) is None
    return principal.allows(scope)
