"""JWTs of the company's identity provider as bearer tokens, and grant rules
(docs/security.md#jwts-from-the-identity-provider and #grants; embrasure/access/): a
real OpenID provider (tests/oidc_provider.py) issues machine tokens by the client
credentials grant, and a real server checks them over HTTP."""

from __future__ import annotations

import base64
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from joserfc import jwt

from embrasure.access.grants import allows_in, jwt_principal, reaches, token_principal
from embrasure.model import Grant, Token
from embrasure.store import open_store

from conftest import MINIMAL_EVENT as EVENT
from conftest import ServerProcess, sqlite_url
from http_client import HTTP
from oidc_provider import RESOURCE, OidcProvider, new_key

JSON = {"Content-Type": "application/json"}
EMBRASURE = (sys.executable, "-m", "embrasure")
CLIENTS = {"airflow": "airflow-secret", "spark": "spark-secret"}
GROUPS = {"airflow": ["data-eng"], "spark": ["analysts"]}


@pytest.fixture
def provider(tmp_path: Path) -> Iterator[OidcProvider]:
    p = OidcProvider(tmp_path, clients=CLIENTS, groups=GROUPS).start()
    yield p
    p.stop()


def grant(db: Path, who: str, scope: str, namespaces: str = "*") -> str:
    given = ("--to", who, "--scope", scope, "--namespaces", namespaces)
    done = subprocess.run(
        [*EMBRASURE, "grants", "add", "--db", sqlite_url(db), *given],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()[1].rstrip(":")


def serve(db: Path, issuer: str, leeway: int = 60) -> ServerProcess:
    env = {
        "EMBRASURE_OIDC_ISSUER": issuer,
        "EMBRASURE_OIDC_AUDIENCE": RESOURCE,
        "EMBRASURE_OIDC_LEEWAY_SECONDS": str(leeway),
    }
    return ServerProcess(db, env=env).start()


@pytest.fixture
def server(tmp_path: Path, provider: OidcProvider) -> Iterator[ServerProcess]:
    db = tmp_path / "jwt.db"
    grant(db, "group:data-eng", "ingest")
    grant(db, "client:spark", "read")
    s = serve(db, provider.issuer)
    yield s
    s.stop()


def post(server: ServerProcess, token: str) -> httpx.Response:
    return HTTP.post(
        f"{server.url}/api/v1/lineage",
        content=orjson.dumps(EVENT),
        headers={**JSON, "Authorization": f"Bearer {token}"},
    )


def get(server: ServerProcess, token: str, path: str = "/api/v1/namespaces") -> httpx.Response:
    return HTTP.get(f"{server.url}{path}", headers={"Authorization": f"Bearer {token}"})


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def refusal(reply: httpx.Response, status: int = 401) -> str:
    assert reply.status_code == status, reply.text
    assert reply.headers["content-type"] == "application/problem+json"
    return str(reply.json()["detail"])


def test_a_machine_token_gets_what_its_group_and_client_are_granted(
    server: ServerProcess, provider: OidcProvider
) -> None:
    airflow = provider.client_token("airflow")
    assert post(server, airflow).status_code == 202  # group:data-eng may ingest
    detail = refusal(get(server, airflow), 403)  # and nothing more
    assert "'read'" in detail and "data-eng" in detail and "airflow" in detail
    spark = provider.client_token("spark")
    assert get(server, spark).status_code == 200  # client:spark may read
    refusal(post(server, spark), 403)


def test_each_bad_token_is_refused_with_its_reason(
    server: ServerProcess, provider: OidcProvider, tmp_path: Path
) -> None:
    token = provider.client_token("airflow", resource="https://another.api/")
    assert "not for this server" in refusal(post(server, token))
    claims = jwt.decode(provider.client_token("airflow"), provider.keys[0]).claims
    # Signed by a key that is not the provider's, under the provider's key id.
    forged = jwt.encode({"alg": "RS256", "kid": "key-1"}, claims, new_key("key-1"))
    assert "signature does not verify" in refusal(post(server, forged))
    rogue = jwt.encode({"alg": "RS256", "kid": "rogue"}, claims, new_key("rogue"))
    assert "does not publish" in refusal(post(server, rogue))
    unsigned = ".".join(  # RFC 7519 §6.1: an unsecured JWT, whose signature is empty
        [*(_b64(orjson.dumps(part)) for part in ({"alg": "none"}, claims)), ""]
    )
    assert "alg 'none'" in refusal(post(server, unsigned))
    assert "not a JWT" in refusal(post(server, "not-a-token"))
    other = OidcProvider(tmp_path, clients=CLIENTS, groups=GROUPS).start()
    try:
        detail = refusal(post(server, other.client_token("airflow")))
        assert f"issued by '{other.issuer}'" in detail
    finally:
        other.stop()
    reply = post(server, forged)
    assert reply.headers["www-authenticate"].endswith('error="invalid_token"')
    assert forged not in reply.text  # the reason, never the token


def test_expiry_honours_the_allowed_clock_skew(tmp_path: Path) -> None:
    provider = OidcProvider(tmp_path, clients=CLIENTS, groups=GROUPS, ttl=1).start()
    strict = tolerant = None
    try:
        grant(tmp_path / "strict.db", "group:data-eng", "ingest")
        grant(tmp_path / "tolerant.db", "group:data-eng", "ingest")
        strict = serve(tmp_path / "strict.db", provider.issuer, leeway=0)
        tolerant = serve(tmp_path / "tolerant.db", provider.issuer, leeway=30)
        token = provider.client_token("airflow")
        time.sleep(2.1)  # past its exp
        assert "expired at" in refusal(post(strict, token))
        assert post(tolerant, token).status_code == 202  # within 30 s of skew
    finally:
        for s in (strict, tolerant):
            if s is not None:
                s.stop()
        provider.stop()


def test_a_rotated_key_is_fetched_and_the_retired_one_refused(
    server: ServerProcess, provider: OidcProvider
) -> None:
    old = provider.client_token("airflow")
    assert post(server, old).status_code == 202
    provider.restart([new_key("key-2")])
    new = provider.client_token("airflow")
    deadline = time.monotonic() + 15  # the key set is read again at most every 5 s
    while (reply := post(server, new)).status_code != 202:
        assert time.monotonic() < deadline, reply.text
        time.sleep(0.5)
    assert "does not publish" in refusal(post(server, old))


def test_each_delivery_records_its_writer(server: ServerProcess, provider: OidcProvider) -> None:
    """docs/security.md#audit: who appended a delivery, queryable."""
    airflow = provider.client_token("airflow")
    delivery = post(server, airflow).json()["delivery_id"]
    jti = jwt.decode(airflow, provider.keys[0]).claims["jti"]
    spark = provider.client_token("spark")  # may read
    shown = get(server, spark, f"/api/v1/deliveries/{delivery}").json()["writer"]
    assert shown == {
        "kind": "jwt",
        "subject": "airflow",
        "issuer": provider.issuer,
        "token_id": jti,
    }
    mine = get(server, spark, "/api/v1/deliveries?writer=airflow").json()["deliveries"]
    assert [d["delivery_id"] for d in mine] == [delivery]
    assert get(server, spark, "/api/v1/deliveries?writer=spark").json()["deliveries"] == []


def test_static_tokens_keep_working_beside_jwts(
    server: ServerProcess, provider: OidcProvider, tmp_path: Path
) -> None:
    created = subprocess.run(
        [*EMBRASURE, "tokens", "create", "--scope", "read", "--db", server.db_url],
        capture_output=True,
        text=True,
        check=True,
    )
    static = created.stdout.splitlines()[-1]
    assert get(server, static).status_code == 200
    refusal(post(server, static), 403)
    token_id = static.split("_")[1]
    grant(Path(server.db_url.removeprefix("sqlite:///")), f"token:{token_id}", "admin")
    deadline = time.monotonic() + 10  # grants are read again within 2 s
    while (reply := post(server, static)).status_code != 202:
        assert time.monotonic() < deadline, reply.text
        time.sleep(0.2)
    writer = get(server, static, f"/api/v1/deliveries/{reply.json()['delivery_id']}").json()
    assert writer["writer"] == {
        "kind": "token",
        "subject": token_id,
        "issuer": "embrasure",
        "token_id": token_id,
    }
    assert "not one this server issued" in refusal(get(server, "emb_0000_nope"))


def test_an_unreachable_provider_is_a_503_not_a_401(tmp_path: Path) -> None:
    provider = OidcProvider(tmp_path, clients=CLIENTS, groups=GROUPS).start()
    token = provider.client_token("airflow")
    issuer = provider.issuer
    provider.stop()
    s = serve(tmp_path / "down.db", issuer)
    try:
        reply = post(s, token)
        assert reply.status_code == 503, reply.text
        assert reply.json()["type"].endswith("identity-provider-unavailable")
        assert reply.headers["retry-after"]
    finally:
        s.stop()


def test_items_outside_the_writers_namespaces_are_quarantined(
    provider: OidcProvider, tmp_path: Path
) -> None:
    db = tmp_path / "ns.db"
    grant(db, "group:data-eng", "ingest", "airflow-prod/*")
    grant(db, "group:data-eng", "read", "airflow-prod/*")
    grant(db, "client:spark", "admin")
    s = serve(db, provider.issuer)
    try:

        def event(n: int, job_ns: str, output_ns: str) -> dict[str, Any]:
            run = {"runId": f"0190a2d4-5f1c-7d2e-9a3b-4c5d6e7f80{n:02d}"}
            job = {"namespace": job_ns, "name": f"job{n}"}
            outputs = [{"namespace": output_ns, "name": f"t{n}"}]
            return {**EVENT, "run": run, "job": job, "outputs": outputs}

        batch = [
            event(1, "airflow-prod/dags", "airflow-prod/warehouse"),
            event(2, "airflow-prod/dags", "finance.ledger"),  # writes a finance dataset
            event(3, "airflow-dev/dags", "airflow-prod/warehouse"),
        ]
        airflow = provider.client_token("airflow")
        reply = HTTP.post(
            f"{s.url}/api/v1/lineage/batch",
            content=orjson.dumps(batch),
            headers={**JSON, "Authorization": f"Bearer {airflow}"},
        )
        assert reply.status_code == 202, reply.text  # the batch's other items go on
        delivery = reply.json()["delivery_id"]
        status = get(s, airflow, f"/api/v1/deliveries/{delivery}").json()
        assert status["invalid_item_count"] == 2
        reasons = {i["index"]: i.get("reason") for i in status["items"]}
        assert "'finance.ledger' is outside the ingest grants of airflow" in reasons[1]
        assert "'airflow-dev/dags' is outside" in reasons[2]
        # The log's views span every namespace: a read grant on a narrower glob does
        # not open them.
        detail = refusal(get(s, airflow, "/api/v1/deliveries"), 403)
        assert "read on 'airflow-prod/*' only" in detail and "needs its scope on '*'" in detail
        admin = provider.client_token("spark")  # admin on *: anything goes
        assert post(s, admin).status_code == 202
        deadline = time.monotonic() + 30
        while (jobs := get(s, admin, "/api/v1/jobs").json()["jobs"]) and len(jobs) < 2:
            assert time.monotonic() < deadline, jobs
            time.sleep(0.2)
        assert sorted(j["name"] for j in jobs) == ["hello", "job1"]
        # Reads answer within the reader's namespaces (query/hidden.py).
        mine = get(s, airflow, "/api/v1/jobs").json()["jobs"]
        assert [(j["namespace"], j["name"]) for j in mine] == [("airflow-prod/dags", "job1")]
    finally:
        s.stop()


# -- grant rules ------------------------------------------------------------------------


def rule(who: str, scope: str, namespaces: str) -> Grant:
    return Grant(f"{who}-{scope}-{namespaces}", who, scope, namespaces, "t", None)


def test_what_grant_rules_give() -> None:
    rules = [
        rule("group:data-eng", "ingest", "airflow-prod/*"),
        rule("group:finance", "read", "finance.*"),
        rule("subject:alice", "admin", "sandbox"),
        rule("token:t2", "read", "public.*"),
    ]
    p = jwt_principal(
        subject="bob", issuer="i", token_id="", client="c", groups=["data-eng"], grants=rules
    )
    assert allows_in(p, "ingest", "airflow-prod/dag1")
    assert reaches(p, "ingest")  # checked item by item
    assert not reaches(p, "read")
    assert not allows_in(p, "ingest", "airflow-dev/dag1")
    assert not allows_in(p, "read", "airflow-prod/dag1")
    alice = jwt_principal(
        subject="alice", issuer="i", token_id="", client="", groups=[], grants=rules
    )
    assert allows_in(alice, "read", "sandbox") and allows_in(alice, "ingest", "sandbox")
    assert not reaches(alice, "admin") and reaches(alice, "read")  # reads: within sandbox
    assert not reaches(alice, "read", everywhere=True)
    assert not allows_in(alice, "read", "sandboxes")  # a glob matches the whole name
    nobody = jwt_principal(
        subject="eve", issuer="i", token_id="", client="", groups=["FINANCE"], grants=rules
    )
    assert nobody.scopes == ()  # group names are case-sensitive
    # A static token no rule names keeps its scopes everywhere; a named one gets its rules.
    t1 = Token("t1", "d", frozenset({"ingest", "read"}), None, "", "t", None)
    assert allows_in(token_principal(t1, rules), "ingest", "anything")
    assert reaches(token_principal(t1, rules), "read")
    t2 = Token("t2", "d", frozenset({"admin"}), None, "", "t", None)
    assert token_principal(t2, rules).scopes == (("read", "public.*"),)


def test_the_grants_cli(tmp_path: Path) -> None:
    db = tmp_path / "g.db"
    grant_id = grant(db, "group:finance", "read", "finance.*")

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*EMBRASURE, "grants", *args, "--db", sqlite_url(db)],
            capture_output=True,
            text=True,
        )

    listed: list[dict[str, Any]] = orjson.loads(cli("list", "--json").stdout)
    assert [(g["grant_id"], g["who"], g["scope"], g["namespaces"]) for g in listed] == [
        (grant_id, "group:finance", "read", "finance.*")
    ]
    bad = cli("add", "--to", "team:x", "--scope", "read")
    assert bad.returncode == 1 and "must be KIND:NAME" in bad.stderr
    assert cli("remove", grant_id).returncode == 0
    missing = cli("remove", grant_id)
    assert missing.returncode == 1 and "no grant" in missing.stderr
    store = open_store(sqlite_url(db))
    try:
        assert store.grants() == []
    finally:
        store.close()
