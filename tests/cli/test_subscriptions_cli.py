"""`embrasure subscriptions add | list | remove | listen` (docs/cli.md): what each
subscription watches, the one-line refusals, and the receiver a newcomer watches
notifications arrive with — a real process on loopback, verifying signatures."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import UTC, datetime

import standardwebhooks
from click.testing import CliRunner, Result
from cryptography.fernet import Fernet

from embrasure.cli.main import main
from embrasure.notify.secrets import SEALED, unseal
from embrasure.notify.webhooks import new_secret
from embrasure.projector.causes import KINDS
from embrasure.store import open_store

from conftest import free_port
from http_client import HTTP


def cli(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_add_list_and_remove_what_each_watches(db_url: str) -> None:
    url = "https://93.184.215.14/x"
    added = cli(
        "subscriptions",
        "add",
        "--db",
        db_url,
        "--dataset",
        "pg",
        "orders",
        "--depth",
        "2",
        "--stale-after",
        "1d",
        "--url",
        url,
    )
    assert added.exit_code == 0, added.output
    said = "of dataset pg orders and 2 downstream, stale after 1d to https://93.184.215.14/x"
    assert said in added.stdout
    assert added.stdout.splitlines()[-1].startswith("whsec_")
    job = cli("subscriptions", "add", "--db", db_url, "--job", "airflow", "dag.load",
              "--events", "run.failed", "--url", url)  # fmt: skip
    assert job.exit_code == 0, job.output
    listed = json.loads(cli("subscriptions", "list", "--db", db_url, "--json").stdout)
    assert [(s["target"], s["namespace"], s["name"], s["depth"], s["events"]) for s in listed] == [
        ("dataset", "pg", "orders", 2, list(KINDS)),
        ("job", "airflow", "dag.load", 0, ["run.failed"]),
    ]  # fmt: skip
    assert [s["stale_after_seconds"] for s in listed] == [86_400, 0]
    assert all("secret" not in s for s in listed)
    removed = cli("subscriptions", "remove", listed[1]["subscription"], "--db", db_url)
    assert removed.exit_code == 0, removed.output
    assert len(json.loads(cli("subscriptions", "list", "--db", db_url, "--json").stdout)) == 1


def test_refusals_are_one_line_with_the_cause(db_url: str) -> None:
    assert cli("db", "upgrade", "--db", db_url).exit_code == 0
    url = ["--url", "https://93.184.215.14/x"]
    cases = {
        ("--dataset", "pg", "orders", "--job", "a", "b"): "name one thing to watch",
        ("--namespace", "pg", "--depth", "1"): "--depth is for --dataset",
        ("--dataset", "pg", "orders", "--depth", "11"): "11 is not in the range 0<=x<=10",
        ("--namespace", "pg", "--events", "run.exploded"): "--events takes",
        ("--job", "a", "b", "--stale-after", "1h"): "--stale-after is for --dataset",
        ("--dataset", "pg", "orders", "--stale-after", "30s"): "from a minute",
        ("--dataset", "pg", "orders", "--stale-after", "soon"): "is not a duration",
    }
    for args, said in cases.items():
        result = cli("subscriptions", "add", "--db", db_url, *args, *url)
        assert result.exit_code != 0, args
        assert said in result.output, (args, result.output)
    assert json.loads(cli("subscriptions", "list", "--db", db_url, "--json").stdout) == []


def test_listen_prints_what_verifies_and_refuses_the_rest() -> None:
    secret, port = new_secret(), free_port()
    listener = subprocess.Popen(
        [sys.executable, "-m", "embrasure", "subscriptions", "listen", "--port", str(port),
         "--secret", secret],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert listener.stdout is not None
        assert listener.stdout.readline().startswith(f"listening on http://127.0.0.1:{port}/")
        body = b'{"type": "check.failed", "subscription": "sub_1"}'
        at = datetime.now(UTC)
        signature = standardwebhooks.Webhook(secret).sign("msg_1", at, body.decode())
        headers = {
            "webhook-id": "msg_1",
            "webhook-timestamp": str(int(at.timestamp())),
            "webhook-signature": signature,
        }
        url = f"http://127.0.0.1:{port}/hook"
        assert HTTP.post(url, content=body, headers=headers).status_code == 204
        forged = {**headers, "webhook-signature": "v1,AAAA"}
        assert HTTP.post(url, content=body, headers=forged).status_code == 401
        time.sleep(0.2)
    finally:
        listener.terminate()
        out, err = listener.communicate(timeout=10)
    assert "msg_1 check.failed, verified:" in out and '"subscription": "sub_1"' in out
    assert "refused a request" in err


def test_new_key_then_add_stores_the_secret_encrypted(db_url: str) -> None:
    key = cli("subscriptions", "new-key").stdout.strip()
    Fernet(key)  # cryptography's own check of the key's form
    added = CliRunner().invoke(
        main,
        [
            "subscriptions",
            "add",
            "--db",
            db_url,
            "--namespace",
            "pg",
            "--url",
            "https://93.184.215.14/x",
        ],
        env={"EMBRASURE_SUBSCRIPTION_SECRETS_KEY": key},
        catch_exceptions=False,
    )
    assert added.exit_code == 0, added.output
    shown = added.stdout.splitlines()[-1]
    store = open_store(db_url)
    try:
        (stored,) = store.subscriptions()
    finally:
        store.close()
    assert stored.secret.startswith(SEALED) and unseal(stored.secret, key) == shown
