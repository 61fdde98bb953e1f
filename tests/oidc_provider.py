"""A real OpenID provider on loopback for the tests: node's oidc-provider (OpenID
Certified; tests/oidc/provider.mjs), installed from npm once into
``~/.cache/embrasure/oidc-provider-VERSION`` (``EMBRASURE_OIDC_CACHE`` names another
parent).

Chosen over the Python ``oidc-provider-mock``: that one accepts any client id and secret
and signs with one fixed key, so client authentication, key rotation and a second issuer
could not be tested against it; node's serves client credentials, code + PKCE with its
own sign-in form, RFC 9068 JWT access tokens and whatever signing keys it is started
with.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
from joserfc.jwk import RSAKey

from conftest import free_port
from http_client import HTTP

VERSION = "9.13.3"
SCRIPT = Path(__file__).parent / "oidc" / "provider.mjs"
RESOURCE = "https://embrasure.test/api"  # the API's identifier: the tokens' audience


def cache_dir() -> Path:
    parent = os.environ.get("EMBRASURE_OIDC_CACHE")
    base = Path(parent) if parent else Path.home() / ".cache" / "embrasure"
    return base / f"oidc-provider-{VERSION}"


def installed() -> Path:
    """The directory holding node_modules/oidc-provider, installed if missing."""
    where = cache_dir()
    where.mkdir(parents=True, exist_ok=True)
    # Two test workers may get here at once: one installs, the other waits for it.
    with open(where / ".install-lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (where / "node_modules" / "oidc-provider" / "package.json").exists():
            subprocess.run(
                ["npm", "install", "--no-audit", "--no-fund", f"oidc-provider@{VERSION}"],
                cwd=where,
                check=True,
                capture_output=True,
            )
    return where


def new_key(kid: str) -> RSAKey:
    return RSAKey.generate_key(2048, parameters={"kid": kid, "use": "sig", "alg": "RS256"})


class OidcProvider:
    """One provider process. ``clients`` maps a client id to its secret (client
    credentials) and ``groups`` a client id or an account to its groups."""

    def __init__(
        self,
        work: Path,
        *,
        clients: dict[str, str],
        groups: dict[str, list[str]],
        keys: list[RSAKey] | None = None,
        ttl: int = 300,
        redirect_uris: list[str] | None = None,
    ) -> None:
        self.work = work
        self.port = free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.clients = clients
        self.groups = groups
        self.keys = keys or [new_key("key-1")]
        self.ttl = ttl
        self.redirect_uris = redirect_uris or []
        self.proc: subprocess.Popen[bytes] | None = None

    def _config(self) -> dict[str, Any]:
        clients: list[dict[str, Any]] = [
            {
                "client_id": client_id,
                "client_secret": secret,
                "grant_types": ["client_credentials"],
                "response_types": [],
                "redirect_uris": [],
            }
            for client_id, secret in self.clients.items()
        ]
        if self.redirect_uris:
            clients.append(
                {
                    "client_id": "embrasure-ui",
                    "client_secret": "ui-secret",
                    "grant_types": ["authorization_code"],
                    "response_types": ["code"],
                    "redirect_uris": self.redirect_uris,
                }
            )
        return {
            "issuer": self.issuer,
            "resource": RESOURCE,
            "jwks": {"keys": [k.as_dict(private=True) for k in self.keys]},
            "clients": clients,
            "groups": self.groups,
            "ttl": self.ttl,
        }

    def start(self) -> OidcProvider:
        where = installed()
        # Beside node_modules, where an ES module resolves it; a copy per provider, so two
        # test workers never start one while the other rewrites it.
        script = where / f"provider-{self.port}.mjs"
        shutil.copyfile(SCRIPT, script)
        config = self.work / f"oidc-{self.port}.json"
        config.write_text(json.dumps(self._config()))
        with open(self.work / f"oidc-{self.port}.log", "ab") as log:  # the child keeps its own
            self.proc = subprocess.Popen(
                ["node", str(script), str(config)], cwd=where, stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(self.log())
            with contextlib.suppress(httpx.HTTPError):
                discovery = f"{self.issuer}/.well-known/openid-configuration"
                if HTTP.get(discovery, timeout=1).status_code == 200:
                    return self
            time.sleep(0.1)
        raise RuntimeError(f"the OpenID provider did not start:\n{self.log()}")

    def log(self) -> str:
        return (self.work / f"oidc-{self.port}.log").read_text(errors="replace")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        (cache_dir() / f"provider-{self.port}.mjs").unlink(missing_ok=True)

    def restart(self, keys: list[RSAKey]) -> None:
        """The same issuer, signing with other keys (a key rotation)."""
        self.stop()
        self.keys = keys
        self.start()

    def ui_client(self) -> tuple[str, str]:
        """The web UI's client id and secret (code flow; ``redirect_uris`` given)."""
        return "embrasure-ui", "ui-secret"

    def client_token(self, client_id: str, resource: str = RESOURCE) -> str:
        """An access token (a JWT) by the client credentials grant (RFC 6749 §4.4)."""
        reply = HTTP.post(
            f"{self.issuer}/token",
            data={"grant_type": "client_credentials", "resource": resource},
            auth=(client_id, self.clients[client_id]),
            timeout=10,
        )
        assert reply.status_code == 200, reply.text
        return str(reply.json()["access_token"])
