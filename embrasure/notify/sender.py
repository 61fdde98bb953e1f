"""Delivering the outbox (docs/notifications.md#delivery): due notifications, oldest
first; each is checked to still hold, then sent, and on a refusal tried again with
exponential backoff (capped), until it is sent or GIVE_UP after it was decided.

The sender reads and writes only the outbox and reads the graph: a slow or dead receiver
holds up no ingest and no projection, only its own notifications. Each notification is
claimed before it is sent (LEASE) and its attempt recorded after, so a sender killed
mid-delivery leaves it to whichever sender runs once the claim runs out, under the same
``webhook-id``: at least once, with the id to drop repeats.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import orjson

from embrasure.errors import StoreUnavailable
from embrasure.model import DatasetId, Decided, Notification, Subscription
from embrasure.notify import impact
from embrasure.notify.secrets import Unsealable, unseal
from embrasure.notify.targets import TargetPolicy
from embrasure.notify.webhooks import Refused, send
from embrasure.projector import causes
from embrasure.projector.quality import check_id
from embrasure.projector.shapes import entity
from embrasure.store import Store
from embrasure.store.rows import DatasetCheckRow, FacetRow, RunRow

log = logging.getLogger("embrasure.notify")

BATCH = 100  # notifications handled per run_once, each claimed on its own
# How long a claimed notification is this sender's: past its send's time-out, after
# which another sender (or this one, restarted) takes what a dead one claimed.
LEASE = timedelta(seconds=30)
FIRST_RETRY = timedelta(seconds=5)
MAX_RETRY = timedelta(minutes=10)
GIVE_UP = timedelta(hours=72)  # a receiver down for hours is still caught up
TIMEOUT = httpx.Timeout(10.0)
# How often an idle sender looks for due notifications: a read on the outbox's index,
# no write lock (bench/results/notify-latency.md: most of the idle latency).
POLL_SECONDS = 0.25
# The outbox stays bounded: pending rows end within GIVE_UP, and rows done are deleted
# KEEP after (checked every FORGET_EVERY).
KEEP = timedelta(days=30)
FORGET_EVERY = timedelta(hours=1)
# How often the sender looks for datasets not written for longer than a subscription's
# ``stale_after`` (docs/notifications.md#freshness): a stale dataset is heard of within it.
FRESHNESS_EVERY = timedelta(minutes=1)


DEFAULT_URL = "http://127.0.0.1:5000"  # serve's --host and --port defaults


def backoff(attempts: int) -> timedelta:
    """The wait after the ``attempts``-th refusal: 5 s doubling, at most 10 minutes."""
    wait: timedelta = FIRST_RETRY * (2 ** min(attempts - 1, 20))
    return min(wait, MAX_RETRY)


def stamp(at: datetime) -> str:
    return at.isoformat(timespec="microseconds")


class Sender:
    def __init__(
        self,
        store: Store,
        public_url: str = DEFAULT_URL,
        secrets_key: str = "",
        client: httpx.Client | None = None,
        targets: TargetPolicy | None = None,
    ) -> None:
        self.store = store
        self.targets = targets or TargetPolicy()  # where it may send (notify/targets.py)
        self.public_url = public_url  # the UI's address, for the links in bodies
        self.secrets_key = secrets_key  # what the signing secrets are stored under
        self.client = client or httpx.Client(timeout=TIMEOUT, follow_redirects=False)
        self.forgotten_at: datetime | None = None  # the last trim of the outbox
        self.freshness_at: datetime | None = None  # the last look for stale datasets

    def run_once(self, now: datetime | None = None) -> int:
        """Handle the notifications due at ``now``, one claim at a time (another sender
        may take the next): how many were handled."""
        now = now or datetime.now(UTC)
        if self.forgotten_at is None or now - self.forgotten_at >= FORGET_EVERY:
            self.forgotten_at = now
            forgotten = self.store.forget_notifications(stamp(now - KEEP))
            if forgotten:
                log.info("forgot %d notifications done before %s", forgotten, stamp(now - KEEP))
        if self.freshness_at is None or now - self.freshness_at >= FRESHNESS_EVERY:
            self.freshness_at = now
            self._decide_stale(now)
        if not self.store.any_notification_due(stamp(now)):
            return 0
        subscriptions: dict[str, Subscription] | None = None
        handled = 0
        while handled < BATCH:
            claimed = self.store.claim_notifications(stamp(now), stamp(now + LEASE), 1)
            if not claimed:
                break
            if subscriptions is None:
                subscriptions = {s.subscription_id: s for s in self.store.subscriptions()}
            (n,) = claimed
            self.store.update_notification(
                self._handle(subscriptions.get(n.subscription_id), n, now)
            )
            handled += 1
        return handled

    def run(self, stop: threading.Event, poll_seconds: float = POLL_SECONDS) -> None:
        """Until ``stop``: what is due, then a wait of ``poll_seconds`` when nothing was.
        A store that cannot be reached is logged and tried again: what is due stays in
        the outbox meanwhile."""
        while not stop.is_set():
            try:
                handled = self.run_once()
            except StoreUnavailable as exc:
                log.warning("notifications wait for the store: %s", exc)
                handled = 0
            if handled == 0:
                stop.wait(poll_seconds)

    def _handle(self, s: Subscription | None, n: Notification, now: datetime) -> Notification:
        done = stamp(now)
        if s is None:
            return dataclasses.replace(
                n, state="failed", last_error="the subscription was removed", done_at=done
            )
        body = self._holding(n)  # at every attempt: a receiver down for hours is not
        if body is None:  # told of what stopped being true meanwhile
            return dataclasses.replace(n, state="superseded", done_at=done)
        if n.attempts == 0:  # what lies downstream, added once: retries send these bytes
            n = dataclasses.replace(
                n, body=orjson.dumps(body, option=orjson.OPT_SORT_KEYS).decode()
            )
        try:
            # Signed at the wall clock's time, whatever ``now`` says: receivers refuse a
            # webhook-timestamp more than minutes away from theirs.
            send(self.client, self._unsealed(s), n, datetime.now(UTC), self.targets)
        except Refused as exc:
            attempts = n.attempts + 1
            decided = datetime.fromisoformat(n.decided_at)
            error = str(exc)
            if now - decided >= GIVE_UP:
                log.warning("notification %s given up: %s", n.notification_id, error)
                return dataclasses.replace(
                    n, state="failed", attempts=attempts, last_error=error, done_at=done
                )
            retry = stamp(now + backoff(attempts))
            return dataclasses.replace(n, attempts=attempts, next_at=retry, last_error=error)
        return dataclasses.replace(
            n, state="sent", attempts=n.attempts + 1, last_error=None, done_at=done
        )

    def _decide_stale(self, now: datetime) -> None:
        """The freshness notifications due (causes.stale): no event causes them, so the
        sender decides them, into the same outbox; the key names the write the dataset
        waits after, so each stale spell is decided once, by whichever sender looks."""
        watching = [
            s
            for s in self.store.subscriptions()
            if s.stale_after and s.target == "dataset" and "dataset.stale" in s.events
        ]
        if not watching:
            return
        rows = []
        with self.store.reader() as reader:
            for s in watching:
                last = impact.latest_write(reader, DatasetId(s.namespace, s.name))
                if last is not None:
                    text = last.ended_text or last.started_text
                    rows.append(causes.stale(s, last.run_id, last.latest_key, text, now))
        self.store.add_stale_notifications([n for n in rows if n is not None])

    def _unsealed(self, s: Subscription) -> Subscription:
        """The subscription with its signing secret readable (secrets.py); a secret this
        sender cannot read is a refusal, tried again (the key may come) and reported."""
        try:
            return dataclasses.replace(s, secret=unseal(s.secret, self.secrets_key))
        except Unsealable as exc:
            raise Refused(f"not signed: {exc}") from None

    def _holding(self, n: Notification) -> dict[str, Any] | None:
        """The body to send, when the cause still holds (None: superseded): what the graph
        says now — a check is still failed (or passing, for a recovery), a schema is
        still the one the change made current (and, at the first attempt, changed
        something against the write before), a run is still failed or aborted, a
        dataset still not written since; no newer change of the same check or schema
        was decided (it says what is true now); and a recovery's failure was sent (no
        "recovered" for a failure nobody heard of). At the first attempt, after the
        settle time, with what lies downstream (notify/impact.py), read in the same
        snapshot."""
        first = n.attempts == 0
        body: dict[str, Any] = orjson.loads(n.body)
        with self.store.reader() as reader:
            if n.kind.startswith("check."):
                dataset = DatasetId(body["dataset"]["namespace"], body["dataset"]["name"])
                checked = check_id(body["check"])
                key = (*dataset, checked)
                rows = reader.rows(DatasetCheckRow, ("ds_ns", "ds_name", "check_id"), [key])
                if not rows or rows[0].failed != (n.kind == "check.failed"):
                    return None
                prefixes = (causes.check_prefix(k, dataset, checked) for k in causes.CHECK_KINDS)
                decided = self._decided(n, *prefixes)
                if decided[-1].cause != n.cause:
                    return None  # failed or recovered again since: the newest says it
                if n.kind == "check.recovered":
                    failures = [d for d in decided if d.cause.startswith("check.failed ")]
                    if not failures or failures[-1].state != "sent":
                        return None  # no "recovered" for a failure nobody heard of
                    body["recovers"] = failures[-1].cause
            elif n.kind == "schema.changed":
                dataset = DatasetId(body["dataset"]["namespace"], body["dataset"]["name"])
                slot = (entity("dataset", *dataset), "schema")
                facets = reader.rows(FacetRow, ("entity", "name"), [slot])
                if not facets or not causes.schema_holds(n.cause, facets[0]):
                    return None
                # Changed again since (A to B, back to A, to B again): the newest says it.
                if self._decided(n, causes.schema_prefix(dataset))[-1].cause != n.cause:
                    return None
                if first:
                    body["changes"] = impact.schema_change(reader, dataset)
                    if body["changes"] is None:
                        return None
            elif n.kind == "dataset.stale":
                dataset = DatasetId(body["dataset"]["namespace"], body["dataset"]["name"])
                last = impact.latest_write(reader, dataset)
                if last is None or causes.stale_key(dataset, last.run_id) != n.cause:
                    return None  # written since: fresh again
            else:
                runs = reader.rows(RunRow, ("run_id",), [(body["run"]["runId"],)])
                if not runs or causes.RUN_KINDS.get(runs[0].state or "") != n.kind:
                    return None
            return impact.Describer(reader, self.public_url).describe(body) if first else body

    def _decided(self, n: Notification, *prefixes: str) -> list[Decided]:
        """The subscription's notifications of the same thing as ``n`` (its causes
        start with one of ``prefixes``), ``n`` among them, oldest decided first."""
        rows = [d for p in prefixes for d in self.store.decided(n.subscription_id, p)]
        return sorted(rows, key=lambda d: (d.decided_at, d.cause))
