"""Webhook targets (notify/targets.py, docs/security.md#webhook-targets): a subscription
may not make the server call what only the server can reach. Every address class with
a resolver the test controls, the spellings the system's resolver reads, the allow-list,
the API's 422 and the CLI's line, the sender's recorded refusal, and a name that changes
address between the check and the send (DNS rebinding)."""

from __future__ import annotations

import ipaddress
import socket
import ssl
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
import trustme
from click.testing import CliRunner
from starlette.testclient import TestClient
from test_check_notifications import later
from webhook_receiver import LOOPBACK, Receiver

from embrasure.app import build_app
from embrasure.cli.main import main
from embrasure.model import Subscription, utc_now
from embrasure.notify.sender import Sender
from embrasure.notify.targets import TargetPolicy, TargetRefused
from embrasure.notify.webhooks import new_secret
from embrasure.settings import Settings
from embrasure.store import open_store

from graph_api import Api, at, run_event, run_id

JSON = {"content-type": "application/json"}


def resolving(*answers: str) -> tuple[Any, list[str]]:
    """A resolver answering ``answers`` in turn (the last one from then on), and the
    names it was asked."""
    asked: list[str] = []

    def resolve(host: str, port: int, **kwargs: Any) -> list[tuple[Any, ...]]:
        asked.append(host)
        address = answers[min(len(asked), len(answers)) - 1]
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        return [(family, socket.SOCK_STREAM, 6, "", (address, port))]

    return resolve, asked


REFUSED_CLASSES = {
    "127.0.0.1": "a loopback address",
    "127.8.9.10": "a loopback address",
    "::1": "a loopback address",
    "10.0.0.7": "a private address",
    "172.16.4.4": "a private address",
    "192.168.1.20": "a private address",
    "fd12:3456::1": "a private address",
    "fd00:ec2::254": "a private address",  # AWS's metadata service over IPv6
    "169.254.169.254": "a link-local address",  # the cloud metadata service
    "fe80::1": "a link-local address",
    "224.0.0.251": "a multicast address",
    "ff02::1": "a multicast address",
    "0.0.0.0": "an unspecified address",
    "::": "an unspecified address",
    "240.0.0.1": "a reserved address",
    "100.100.100.200": "not globally routable",  # Alibaba Cloud's metadata service
    "192.0.2.10": "a private address",  # documentation (TEST-NET-1)
    "::ffff:127.0.0.1": "a loopback address",  # IPv4-mapped
    "::ffff:169.254.169.254": "a link-local address",
    "2002:a00:1::": "a private address",  # 6to4 around 10.0.0.1
}


@pytest.mark.parametrize("address", sorted(REFUSED_CLASSES))
def test_a_name_resolving_to_a_private_class_is_refused(address: str) -> None:
    resolve, _ = resolving(address)
    policy = TargetPolicy(resolve=resolve)
    with pytest.raises(TargetRefused) as refused:
        policy.check("https://hooks.example.com/in")
    message = str(refused.value)
    assert message.startswith(f"hooks.example.com resolves to {ipaddress.ip_address(address)}")
    assert REFUSED_CLASSES[address] in message
    assert "--webhook-allow" in message


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://2130706433/", "2130706433 resolves to 127.0.0.1, a loopback address"),
        ("http://0177.0.0.1/", "0177.0.0.1 resolves to 127.0.0.1, a loopback address"),
        ("http://0x7f.1/", "0x7f.1 resolves to 127.0.0.1, a loopback address"),
        ("http://127.1:8080/", "127.1 resolves to 127.0.0.1, a loopback address"),
        ("http://[::ffff:7f00:1]/", "::ffff:7f00:1 is a loopback address"),
        ("http://169.254.169.254/latest/meta-data/iam", "169.254.169.254 is a link-local"),
        ("http://127.0.0.1:5432/", "127.0.0.1 is a loopback address"),
        ("http://localhost:8080/", "localhost resolves to 127.0.0.1, a loopback address"),
        ("file:///etc/passwd", "only http and https webhooks are sent; got 'file'"),
        ("gopher://1.1.1.1/", "only http and https webhooks are sent; got 'gopher'"),
        ("https://me:pw@1.1.1.1/", "may not hold a user name or password"),
        ("https://1.1.1.1@127.0.0.1/", "may not hold a user name or password"),
        ("https://1.1.1.1:22/", "port 22 is not one webhooks may use (80, 443, 8080, 8443"),
        ("http://[0]/", "not a URL"),  # brackets around no IPv6 address
    ],
)
def test_spellings_the_system_resolver_reads_are_judged_by_the_address(url: str, why: str) -> None:
    """The real resolver: decimal, octal, hexadecimal and short IPv4 spellings reach
    127.0.0.1 as any HTTP client would, and are refused as it."""
    with pytest.raises(TargetRefused) as refused:
        TargetPolicy().check(url)
    assert why in str(refused.value)


def test_a_name_that_does_not_resolve_yet_may_be_subscribed_but_is_not_sent_to() -> None:
    policy = TargetPolicy()
    policy.vet("https://no-such-host.invalid/hook")  # its name may come later
    with pytest.raises(TargetRefused, match=r"no-such-host\.invalid does not resolve"):
        policy.check("https://no-such-host.invalid/hook")
    with pytest.raises(TargetRefused, match="a loopback address"):
        policy.vet("http://localhost:8080/")  # one that resolves is judged


def test_a_public_address_is_taken_and_connected_to_by_address() -> None:
    resolve, asked = resolving("93.184.215.14", "127.0.0.1")
    target = TargetPolicy(resolve=resolve).check("https://hooks.example.com/in?x=1")
    assert asked == ["hooks.example.com"]
    assert target.request_url() == "https://93.184.215.14:443/in?x=1"
    assert target.host_header() == "hooks.example.com"
    assert target.host == "hooks.example.com"  # the TLS server name: the certificate's


def test_every_address_a_name_resolves_to_must_be_public() -> None:
    def resolve(host: str, port: int, **kwargs: Any) -> list[tuple[Any, ...]]:
        return [
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.215.14", port)),
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.1.1.1", port)),
        ]

    with pytest.raises(TargetRefused, match=r"10\.1\.1\.1, a private address"):
        TargetPolicy(resolve=resolve).check("https://both.example.com/")


def test_the_allow_list_takes_networks_and_names_at_any_port() -> None:
    resolve, _ = resolving("10.20.30.40")
    policy = TargetPolicy.from_settings("10.20.0.0/16\nhooks.corp.example", "443")
    internal = TargetPolicy(policy.networks, policy.hosts, policy.ports, resolve)
    assert internal.check("http://receiver.corp.example:9000/x").address == "10.20.30.40"
    assert internal.check("http://hooks.corp.example:9000/x").port == 9000
    with pytest.raises(TargetRefused, match="port 9000"):
        TargetPolicy(resolve=resolving("93.184.215.14")[0]).check("http://x.example:9000/")
    assert LOOPBACK.check("http://127.0.0.1:5999/hook").address == "127.0.0.1"
    assert TargetPolicy.from_settings("", "any").ports is None
    with pytest.raises(ValueError, match="neither a network"):
        TargetPolicy.from_settings("not a host!", "443")
    with pytest.raises(ValueError, match="is not a port"):
        TargetPolicy.from_settings("", "443,http")


@pytest.fixture
def app_api(db_url: str) -> Iterator[Api]:
    store = open_store(db_url)
    with TestClient(build_app(Settings(db=db_url), store)) as client:
        yield Api(client)
    store.close()


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/iam",
        "http://127.0.0.1:5432/",
        "http://[::ffff:127.0.0.1]/",
        "http://2130706433/",
    ],
)
def test_the_api_refuses_a_private_target_with_422(app_api: Api, url: str) -> None:
    body = {"target": "namespace", "namespace": "spark", "url": url}
    r = app_api.client.post("/api/v1/subscriptions", content=orjson.dumps(body), headers=JSON)
    assert r.status_code == 422, r.text
    assert r.headers["content-type"] == "application/problem+json"
    problem = r.json()
    assert problem["type"].endswith("/webhook-target-refused")
    assert "--webhook-allow" in problem["detail"]
    assert app_api.store.subscriptions() == []


def test_the_cli_refuses_a_private_target_in_one_line(db_url: str) -> None:
    args = ["subscriptions", "add", "--db", db_url, "--namespace", "spark"]
    result = CliRunner().invoke(main, [*args, "--url", "http://10.0.0.1/hook"])
    assert result.exit_code == 1
    assert result.output.startswith("embrasure: error: --url http://10.0.0.1/hook: 10.0.0.1 is a")
    assert len(result.output.strip().splitlines()) == 1
    allowed = ["--webhook-allow", "10.0.0.0/8", "--url", "http://10.0.0.1/hook"]
    assert CliRunner().invoke(main, [*args, *allowed]).exit_code == 0


def failed_run(api: Api) -> None:
    api.ingest(run_event("FAIL", "load", run_id(1), at(9)))


def subscribe(api: Api, url: str, secret: str) -> None:
    s = Subscription("sub1", "job", "spark", "load", ("run.failed",), url, secret, utc_now(), None)
    api.store.add_subscription(s)


def test_a_name_that_turns_private_after_it_was_subscribed_is_refused_at_send(
    api: Api,
) -> None:
    """Checked at creation (public then), it resolves to loopback by the time of the
    send: the sender refuses, records why, and calls nothing."""
    receiver = Receiver(new_secret())
    try:
        resolve, _ = resolving("93.184.215.14", "127.0.0.1")
        policy = TargetPolicy(ports=None, resolve=resolve)  # the receiver's port: any
        url = f"http://rebind.example:{receiver.port}/hook"
        policy.check(url)  # as the API did when it was subscribed
        subscribe(api, url, receiver.secret)
        failed_run(api)
        assert Sender(api.store, targets=policy).run_once(later()) == 1
        (n,) = api.store.notifications()
        assert n.state == "pending" and n.attempts == 1
        assert n.last_error is not None
        assert n.last_error.startswith("target refused: rebind.example resolves to 127.0.0.1")
        assert receiver.ids_seen == []
    finally:
        receiver.close()


def test_the_send_connects_to_the_address_it_checked(api: Api) -> None:
    """The name resolves to an allowed address once, and to another ever after: the
    request reaches the one checked (a receiver on 127.0.0.2), under the name, and the
    name is resolved once: no second lookup for a rebinding name to answer."""
    receiver = Receiver(new_secret(), host="127.0.0.2")
    try:
        resolve, asked = resolving("127.0.0.2", "127.0.0.1")
        allowed = TargetPolicy.from_settings("127.0.0.2/32", "any")
        policy = TargetPolicy(allowed.networks, allowed.hosts, allowed.ports, resolve)
        subscribe(api, f"http://rebind.example:{receiver.port}/hook", receiver.secret)
        failed_run(api)
        assert Sender(api.store, targets=policy).run_once(later()) == 1
        assert [doc["type"] for _, doc in receiver.received] == ["run.failed"]
        assert receiver.hosts == [f"rebind.example:{receiver.port}"]
        assert asked == ["rebind.example"]
    finally:
        receiver.close()


def test_an_https_receiver_is_reached_by_address_and_verified_by_name(api: Api) -> None:
    """TLS to the checked address: the certificate (for hooks.test only, not the
    address) is verified against the URL's name, sent as the TLS server name."""
    ca = trustme.CA()
    receiver = Receiver(new_secret())
    ca.issue_cert("hooks.test").configure_cert(server := ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER))
    receiver.server.socket = server.wrap_socket(receiver.server.socket, server_side=True)
    client_tls = ssl.create_default_context()
    ca.configure_trust(client_tls)
    try:
        resolve, asked = resolving("127.0.0.1")
        allowed = TargetPolicy.from_settings("127.0.0.0/8", "any")
        policy = TargetPolicy(allowed.networks, allowed.hosts, allowed.ports, resolve)
        subscribe(api, f"https://hooks.test:{receiver.port}/hook", receiver.secret)
        failed_run(api)
        with httpx.Client(verify=client_tls, follow_redirects=False, timeout=10) as client:
            assert Sender(api.store, client=client, targets=policy).run_once(later()) == 1
        assert [doc["type"] for _, doc in receiver.received] == ["run.failed"]
        assert receiver.hosts == [f"hooks.test:{receiver.port}"]
        assert asked == ["hooks.test"]
    finally:
        receiver.close()
