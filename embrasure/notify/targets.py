"""Where the sender may POST a notification (docs/security.md#webhook-targets).

Whoever may create a subscription chooses the URL the server calls, from the server's
place in the network: without a rule, ``http://169.254.169.254/latest/meta-data/`` (a
cloud's metadata service) or ``http://127.0.0.1:5432/`` (a database beside the server)
would be called on their behalf — server-side request forgery, OWASP API Security Top
10 (2023) API7. So a webhook target is checked when it is subscribed and again at every
attempt to send:

- ``http`` or ``https``, no user or password in the URL, a port from ``--webhook-ports``;
- its host resolved once, and every address it resolves to globally routable: not
  loopback, private (RFC 1918, fc00::/7), link-local (169.254/16, fe80::/10: the
  metadata services), multicast, unspecified, reserved, or another range IANA marks as
  not global (100.64/10, where one cloud keeps its metadata service; the documentation
  ranges). An IPv6 address that carries an IPv4 one (mapped, 6to4, Teredo) is judged
  by the IPv4 one; ``2130706433`` and ``0177.0.0.1`` resolve to 127.0.0.1 like any
  other spelling, since the system's resolver reads them;
- unless ``--webhook-allow`` names the host or holds its address (CIDRs and host names:
  a company's internal receivers), which also lifts the port rule.

The send connects to the address that was checked (``Target.address``), with the URL's
host in the Host header and as the TLS server name (httpx's ``sni_hostname``), so the
certificate is still checked against the name: nothing resolves the name a second time,
and a name that answers a public address to the check and a private one a moment later
(DNS rebinding) reaches nothing it should not. Redirects are not followed (webhooks.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
import socket
import urllib.parse
from collections.abc import Callable, Sequence
from typing import Any

from embrasure.settings import Settings

DEFAULT_PORTS = "80,443,8080,8443"
Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[..., Sequence[tuple[Any, ...]]]  # socket.getaddrinfo's shape


class TargetRefused(Exception):
    """The URL is not one the server may call; the message names the rule."""


class Unresolved(TargetRefused):
    """The URL's host does not resolve (now): nothing to call, nothing to judge."""


@dataclasses.dataclass(frozen=True)
class Target:
    """A checked webhook URL: where to connect, and what to call the host."""

    url: str  # as subscribed
    host: str  # as in the URL: the Host header and the TLS server name
    address: str  # the address checked, connected to
    port: int

    def request_url(self) -> str:
        """The URL with the checked address in place of the host."""
        parts = urllib.parse.urlsplit(self.url)
        ip = ipaddress.ip_address(self.address)
        shown = f"[{ip}]" if ip.version == 6 else str(ip)
        return urllib.parse.urlunsplit(parts._replace(netloc=f"{shown}:{self.port}"))

    def host_header(self) -> str:
        parts = urllib.parse.urlsplit(self.url)
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{parts.port}" if parts.port is not None else host


@dataclasses.dataclass(frozen=True)
class TargetPolicy:
    """The rules above: ``networks`` and ``hosts`` allowed whatever their class,
    ``ports`` the ports any other target may use (None: any)."""

    networks: tuple[Network, ...] = ()
    hosts: frozenset[str] = frozenset()
    ports: frozenset[int] | None = frozenset(int(p) for p in DEFAULT_PORTS.split(","))
    resolve: Resolver = socket.getaddrinfo

    @classmethod
    def from_settings(cls, allow: str, ports: str) -> TargetPolicy:
        """From ``--webhook-allow`` (one CIDR, address or host name per line) and
        ``--webhook-ports`` (comma-separated, or ``any``); ValueError naming a bad entry."""
        networks: list[Network] = []
        hosts: set[str] = set()
        for entry in filter(None, (e.strip() for e in allow.replace(",", "\n").splitlines())):
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                if not all(part.isalnum() or part == "-" for part in entry.replace(".", "")):
                    raise ValueError(
                        f"{entry!r} is neither a network (CIDR) nor a host name"
                    ) from None
                hosts.add(entry.lower().rstrip("."))
        return cls(tuple(networks), frozenset(hosts), _ports(ports))

    def check(self, url: str) -> Target:
        """The target of ``url``, or TargetRefused saying which rule it breaks."""
        try:
            parts = urllib.parse.urlsplit(url)
            parts.hostname  # noqa: B018  (Python checks a bracketed IPv6 literal here)
        except ValueError as exc:
            raise TargetRefused(f"not a URL: {exc}") from None
        if parts.scheme not in ("http", "https"):
            raise TargetRefused(f"only http and https webhooks are sent; got {parts.scheme!r}")
        if "@" in parts.netloc:
            raise TargetRefused("a webhook URL may not hold a user name or password")
        host = (parts.hostname or "").rstrip(".")
        if not host:
            raise TargetRefused("the webhook URL has no host")
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            raise TargetRefused("the webhook URL's port is not a number from 1 to 65535") from None
        try:
            answers = self.resolve(host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError) as exc:
            raise Unresolved(f"{host} does not resolve: {exc}") from None
        addresses = list(dict.fromkeys(_address(a[4][0]) for a in answers))
        if not addresses:
            raise Unresolved(f"{host} does not resolve")
        if not (host.lower() in self.hosts or all(map(self._allows, addresses))):
            for address in addresses:
                judged = _carried(address)
                refused = None if self._allows(address) else _refused_class(judged)
                if refused:
                    shown = str(address) if judged == address else f"{address} ({judged})"
                    said = f"{host} is" if host == str(address) else f"{host} resolves to {shown},"
                    raise TargetRefused(
                        f"{said} {refused}: webhooks go to public addresses unless"
                        " --webhook-allow names the host or its network"
                    )
            if self.ports is not None and port not in self.ports:
                ports = ", ".join(str(p) for p in sorted(self.ports))
                raise TargetRefused(
                    f"port {port} is not one webhooks may use ({ports}: --webhook-ports)"
                )
        return Target(url, host, str(addresses[0]), port)

    def vet(self, url: str) -> None:
        """``check`` for a new subscription: the same rules, but a host that does not
        resolve yet passes (a receiver's name may come later; every send checks it and
        records "does not resolve" until it does)."""
        with contextlib.suppress(Unresolved):
            self.check(url)

    def _allows(self, address: Address) -> bool:
        """Whether ``--webhook-allow`` holds the address (or the IPv4 one it carries)."""
        return any(
            a in n
            for a in {address, _carried(address)}
            for n in self.networks
            if n.version == a.version
        )


def webhook_targets(settings: Settings) -> TargetPolicy:
    """The policy of --webhook-allow and --webhook-ports; ValueError naming both flags
    and the bad entry (cli/options.load_settings checks it at start-up)."""
    try:
        return TargetPolicy.from_settings(settings.webhook_allow, settings.webhook_ports)
    except ValueError as exc:
        raise ValueError(
            f"--webhook-allow / --webhook-ports (EMBRASURE_WEBHOOK_ALLOW,"
            f" EMBRASURE_WEBHOOK_PORTS): {exc}"
        ) from None


def _ports(text: str) -> frozenset[int] | None:
    if text.strip().lower() == "any":
        return None
    ports = set()
    for part in filter(None, (p.strip() for p in text.split(","))):
        if not part.isdigit() or not 1 <= int(part) <= 65535:
            raise ValueError(f"{part!r} is not a port (1 to 65535)")
        ports.add(int(part))
    return frozenset(ports)


def _address(text: str) -> Address:
    return ipaddress.ip_address(text.split("%", 1)[0])  # fe80::1%eth0: the scope aside


def _carried(address: Address) -> Address:
    """The IPv4 address an IPv6 one carries (mapped, 6to4, Teredo's client), or itself."""
    if isinstance(address, ipaddress.IPv6Address):
        carried = address.ipv4_mapped or address.sixtofour
        if carried is None and address.teredo is not None:
            carried = address.teredo[1]
        if carried is not None:
            return carried
    return address


def _refused_class(address: Address) -> str | None:
    """Why ``address`` is not a webhook's to call, or None when it is global."""
    for refused, label in (
        (address.is_unspecified, "an unspecified address"),
        (address.is_loopback, "a loopback address"),
        (address.is_link_local, "a link-local address (cloud metadata services live there)"),
        (address.is_multicast, "a multicast address"),
        (address.is_reserved, "a reserved address"),
        (address.is_private, "a private address"),
        (not address.is_global, "an address that is not globally routable"),
    ):
        if refused:
            return label
    return None
