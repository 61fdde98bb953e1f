"""JWTs from the company's identity provider as bearer tokens
(docs/security.md#jwts-from-the-identity-provider).

The provider is found by its issuer URL (OpenID Connect Discovery 1.0: the document at
``{issuer}/.well-known/openid-configuration`` names the ``jwks_uri``), its signing keys
read from there and kept for JWKS_MAX_AGE. A token whose key id the kept set lacks makes
the set be read again (the provider rotated its keys), at most once per
JWKS_MIN_REFRESH: tokens with made-up key ids cannot make this server hammer the provider.

A token is accepted when it is a JWS signed by one of those keys with an asymmetric
algorithm (never ``none`` or HMAC: RFC 8725 §3.1), its ``iss`` is the issuer, its
``aud`` holds the audience, and ``exp`` (required), ``nbf`` and ``iat`` hold within the
allowed clock skew (RFC 7519 §4.1; RFC 9068 for access tokens). Each refusal says why,
never echoing the token.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import time
from collections.abc import Callable
from typing import Any

import httpx
import orjson
from joserfc import errors, jws, jwt
from joserfc.jwk import KeySet

ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512")
JWKS_MAX_AGE = 600.0  # seconds a key set is trusted before it is read again
JWKS_MIN_REFRESH = 5.0  # the fewest seconds between two reads of the key set
FETCH_TIMEOUT = httpx.Timeout(10.0, connect=5.0)
VERIFIED_KEPT = 10_000  # tokens whose signature was checked, kept until they expire


class Refused(Exception):
    """The token is not acceptable; the message says why (a 401's detail)."""


class ProviderUnavailable(Exception):
    """The identity provider's discovery document or keys could not be read (a 503)."""


@dataclasses.dataclass(frozen=True)
class Verified:
    """What a good token says about its bearer."""

    subject: str
    issuer: str
    token_id: str  # jti, "" when absent
    client: str  # azp, else client_id (RFC 9068 §2.2), "" when neither
    groups: tuple[str, ...]
    claims: dict[str, Any]


class IdentityProvider:
    """The issuer's discovery document and signing keys, read when first needed and
    kept (module docstring); shared by every verifier of its tokens."""

    def __init__(self, issuer: str) -> None:
        self.issuer = issuer
        self._document: dict[str, Any] | None = None
        self._keys: KeySet | None = None
        self._read_at = -JWKS_MIN_REFRESH
        self._lock = asyncio.Lock()
        self.generation = 0  # how many times the key set was read

    async def discovery(self) -> dict[str, Any]:
        """The discovery document (OpenID Connect Discovery 1.0 §4)."""
        if self._document is None:
            async with httpx.AsyncClient(timeout=FETCH_TIMEOUT) as http:
                self._document = await self._discover(http)
        return self._document

    async def _discover(self, http: httpx.AsyncClient) -> dict[str, Any]:
        url = f"{self.issuer.rstrip('/')}/.well-known/openid-configuration"
        document = await _get_json(http, url)
        # §4.3: the document's issuer must be the one it was found by.
        if document.get("issuer") != self.issuer:
            raise ProviderUnavailable(
                f"{url} names issuer {document.get('issuer')!r}, not {self.issuer!r}"
            )
        for endpoint in ("jwks_uri", "authorization_endpoint", "token_endpoint"):
            if not isinstance(document.get(endpoint), str):
                raise ProviderUnavailable(f"{url} has no {endpoint}")
        return document

    async def key_set(self, kid: object) -> KeySet:
        """The provider's keys: the kept set, unless it is old or lacks ``kid``."""
        keys, age = self._keys, time.monotonic() - self._read_at
        if keys is not None and age < JWKS_MAX_AGE and _has(keys, kid):
            return keys
        async with self._lock:  # one read at a time; the others use what it read
            keys, age = self._keys, time.monotonic() - self._read_at
            fresh = keys is not None and age < JWKS_MAX_AGE and _has(keys, kid)
            if not fresh and (keys is None or age >= JWKS_MIN_REFRESH):
                self._keys = keys = await self._fetch_keys()
                self._read_at = time.monotonic()
                self.generation += 1
        assert keys is not None
        return keys

    async def _fetch_keys(self) -> KeySet:
        async with httpx.AsyncClient(timeout=FETCH_TIMEOUT) as http:
            if self._document is None:
                self._document = await self._discover(http)
            jwks_uri = self._document["jwks_uri"]
            key_set = await _get_json(http, jwks_uri)
        try:
            return KeySet.import_key_set(
                {"keys": [k for k in key_set.get("keys", []) if k.get("use", "sig") == "sig"]}
            )
        except (errors.JoseError, ValueError, TypeError) as exc:
            raise ProviderUnavailable(f"{jwks_uri} is not a usable key set: {exc}") from None


class JwtVerifier:
    """The provider's JWTs for one audience: this API's access tokens, or the web UI
    client's ID tokens (sign_in.py)."""

    def __init__(
        self,
        provider: IdentityProvider,
        audience: str,
        groups_claim: str = "groups",
        leeway_seconds: int = 60,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.provider = provider
        self.issuer = provider.issuer
        self.audience = audience
        self.groups_claim = groups_claim
        self.leeway = leeway_seconds
        self._now = now
        self._verified: dict[str, Verified] = {}  # token text → what it proved (verify)
        self._generation = provider.generation  # of the key set they were checked with

    def for_audience(self, audience: str) -> JwtVerifier:
        return JwtVerifier(self.provider, audience, self.groups_claim, self.leeway, self._now)

    async def verify(self, text: str) -> Verified:
        """The token's bearer; Refused saying why not. A token verified before is not
        verified again until it expires (its claims are re-checked against the clock):
        a producer sends the same token with every event for minutes, and an RSA
        signature check costs more than the rest of a single event's receipt. Whenever
        the provider's keys are read again, every token is checked anew: a key it stopped
        publishing (a compromised one) signs nothing from then on."""
        if self._generation != self.provider.generation:
            self._verified.clear()
            self._generation = self.provider.generation
        known = self._verified.get(text)
        if known is not None:
            # Only the clock has moved since it was checked whole: nbf and iat held
            # then and hold still, exp may have passed.
            if self._now() - self.leeway >= known.claims["exp"]:
                raise Refused(self._expired(known.claims))
            return known
        verified = await self._verify(text)
        if len(self._verified) >= VERIFIED_KEPT:
            self._verified.clear()  # rare: that many live tokens at once
        self._verified[text] = verified
        return verified

    async def _verify(self, text: str) -> Verified:
        try:
            unverified = jws.extract_compact(text.encode())
            header = unverified.headers()
            claims = orjson.loads(unverified.payload)
            issued_by = claims.get("iss") if isinstance(claims, dict) else None  # unverified
        except (errors.JoseError, ValueError, TypeError) as exc:
            raise Refused(f"The bearer token is not a JWT ({_reason(exc)}).") from None
        if issued_by != self.issuer:
            raise Refused(
                f"The JWT was issued by {issued_by!r}, not by the identity provider this"
                f" server trusts ({self.issuer})."
            )
        alg, kid = header.get("alg"), header.get("kid")
        if alg not in ALGORITHMS:
            raise Refused(
                f"The JWT is signed with alg {alg!r}; this server accepts {', '.join(ALGORITHMS)}."
            )
        keys = await self.provider.key_set(kid)
        try:
            token = jwt.decode(text, keys, algorithms=list(ALGORITHMS))
        except errors.InvalidKeyIdError:
            raise Refused(
                f"The JWT is signed with a key (kid {kid!r}) the identity provider does not"
                " publish."
            ) from None
        except errors.BadSignatureError:
            raise Refused(
                f"The JWT's signature does not verify with the identity provider's key {kid!r}."
            ) from None
        except (errors.JoseError, ValueError) as exc:
            raise Refused(f"The JWT cannot be read ({_reason(exc)}).") from None
        claims = dict(token.claims)
        self._check_claims(claims)
        return Verified(
            subject=str(claims.get("sub", "")),
            issuer=self.issuer,
            token_id=str(claims.get("jti", "")),
            client=str(claims.get("azp") or claims.get("client_id") or ""),
            groups=groups_of(claims, self.groups_claim),
            claims=claims,
        )

    def _check_claims(self, claims: dict[str, Any]) -> None:
        registry = jwt.JWTClaimsRegistry(
            now=lambda: int(self._now()),
            leeway=self.leeway,
            aud={"essential": True, "value": self.audience},
            exp={"essential": True},
            sub={"essential": True},
        )
        try:
            registry.validate(claims)
        except errors.ExpiredTokenError:
            raise Refused(self._expired(claims)) from None
        except errors.MissingClaimError as exc:
            raise Refused(f"The JWT has no {exc.claim!r} claim.") from None
        except errors.InvalidClaimError as exc:
            if exc.claim == "aud":
                raise Refused(
                    f"The JWT is for {claims.get('aud')!r}, not for this server"
                    f" ({self.audience!r})."
                ) from None
            if exc.claim in ("nbf", "iat"):  # in the future, past the skew
                raise Refused(
                    f"The JWT is not valid before {_when(claims.get(exc.claim))} (this server"
                    f" allows {self.leeway} s of clock skew)."
                ) from None
            raise Refused(f"The JWT's {exc.claim!r} claim is not valid.") from None

    def _expired(self, claims: dict[str, Any]) -> str:
        return (
            f"The JWT expired at {_when(claims.get('exp'))} (this server allows"
            f" {self.leeway} s of clock skew)."
        )


def groups_of(claims: dict[str, Any], path: str) -> tuple[str, ...]:
    """The groups or roles at ``path`` in the claims: a claim name, or a dotted path into
    objects (Keycloak's ``realm_access.roles``); a list of strings, or one string of
    names separated by spaces. Nothing there is no groups."""
    value: Any = claims
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if isinstance(value, str):
        return tuple(value.split())
    if isinstance(value, list):
        return tuple(v for v in value if isinstance(v, str))
    return ()


async def _get_json(http: httpx.AsyncClient, url: str) -> dict[str, Any]:
    try:
        reply = await http.get(url)
        reply.raise_for_status()
        document = reply.json()
    except (httpx.HTTPError, ValueError) as exc:
        raise ProviderUnavailable(f"{url} could not be read: {exc}") from None
    if not isinstance(document, dict):
        raise ProviderUnavailable(f"{url} is not a JSON object")
    return document


def _has(keys: KeySet, kid: object) -> bool:
    return kid is None or any(k.kid == kid for k in keys.keys)


def _when(seconds: object) -> str:
    if not isinstance(seconds, int | float):
        return "?"
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).isoformat(timespec="seconds")


def _reason(exc: Exception) -> str:
    return getattr(exc, "description", "") or type(exc).__name__
