"""Keep page fetching off internal addresses: checked after DNS, on the address connected to.

A search result is a URL chosen by someone else. Fetched as it is, ``http://127.0.0.1:8080/admin``,
``http://169.254.169.254/latest/meta-data/`` (a cloud's instance credentials) or a public page
answering ``302 Location: http://10.0.0.5/`` would be read and handed to the judge (OWASP's SSRF
guidance). The check therefore runs where the socket is opened: every address a name resolves to
must be public (:func:`public_address`), and the connection goes to an address that was checked,
so a name that resolves differently the second time (DNS rebinding) gains nothing. Redirects are
followed by the fetcher itself, one hop at a time, each hop through the same connections.

:func:`guarded_session` returns a ``requests.Session`` whose connections are checked; users who
search an intranet opt in with ``allow_private=True`` or name the networks to allow.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Sequence
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import NewConnectionError
from urllib3.util import connection

from corrective_rag.errors import ConfigError, SearchError

__all__ = ["BlockedAddressError", "check_networks", "guarded_session", "public_address"]

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address

_SHARED = ipaddress.ip_network("100.64.0.0/10")  # carrier-grade NAT: not reachable from outside
_NAT64 = ipaddress.ip_network("64:ff9b::/96")  # IPv4 embedded in its last 32 bits


class BlockedAddressError(SearchError):
    """A page's host resolved to an address that is not public (and was not allowed)."""


def _parse(address: str | Address) -> Address:
    if isinstance(address, str):
        return ipaddress.ip_address(address.split("%", 1)[0])  # drop an IPv6 zone (fe80::1%eth0)
    return address


def public_address(address: str | Address) -> bool:
    """Whether ``address`` is a public unicast address, the only kind a result may point at.

    Refused: loopback, private, link-local (169.254.0.0/16, fe80::/10), shared (100.64.0.0/10),
    multicast, reserved and unspecified addresses, and IPv6 forms that carry such an IPv4
    address (``::ffff:127.0.0.1``, NAT64 ``64:ff9b::7f00:1``, 6to4 ``2002:7f00:1::``).
    """
    ip = _parse(address)
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = ip.ipv4_mapped or ip.sixtofour
        if embedded is None and ip in _NAT64:
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is not None:
            return public_address(embedded)
    if ip.version == 4 and ip in _SHARED:
        return False
    return ip.is_global and not (
        ip.is_private
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
    )


def check_networks(networks: Sequence[str]) -> tuple[Network, ...]:
    """``networks`` (CIDR strings such as ``"10.1.0.0/16"``) parsed, or ConfigError."""
    if isinstance(networks, str):
        raise ConfigError(f"allow_networks must be a sequence of CIDR strings, got {networks!r}")
    out = []
    for item in networks:
        try:
            out.append(ipaddress.ip_network(item, strict=False))
        except (TypeError, ValueError):
            raise ConfigError(f"allow_networks: not a network in CIDR form: {item!r}") from None
    return tuple(out)


def _allowed(ip: Address, networks: tuple[Network, ...]) -> bool:
    return public_address(ip) or any(ip in net for net in networks if net.version == ip.version)


def _checked_conn(conn: HTTPConnection, networks: tuple[Network, ...]) -> socket.socket:
    """Resolve the host, refuse it if any address is not allowed, connect to a checked address."""
    host, port = conn._dns_host, conn.port
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise NewConnectionError(conn, f"cannot resolve {host!r}: {exc}") from exc
    addresses = list(dict.fromkeys(_parse(str(info[4][0])) for info in found))
    refused = [str(ip) for ip in addresses if not _allowed(ip, networks)]
    if refused or not addresses:
        # Any internal address refuses the name: which one a client picks is not ours to choose.
        raise BlockedAddressError(
            f"{host} resolves to {', '.join(refused) or 'nothing'}, not a public address "
            "(internal addresses are fetched only with allow_private=True / --fetch-private)"
        )
    error: OSError | None = None
    for ip in addresses:  # the checked literal: no second lookup can swap it
        try:
            return connection.create_connection(
                (str(ip), port),
                conn.timeout,
                source_address=conn.source_address,
                socket_options=conn.socket_options,
            )
        except OSError as exc:
            error = exc
    raise NewConnectionError(conn, f"failed to connect to {host}: {error}")


class _GuardedHTTPConnection(HTTPConnection):
    networks: tuple[Network, ...] = ()

    def _new_conn(self) -> socket.socket:
        return _checked_conn(self, self.networks)


class _GuardedHTTPSConnection(HTTPSConnection):
    networks: tuple[Network, ...] = ()

    def _new_conn(self) -> socket.socket:
        return _checked_conn(self, self.networks)


class _GuardedAdapter(HTTPAdapter):
    """An adapter whose pools open only checked connections, and never through a proxy."""

    def __init__(self, networks: tuple[Network, ...]) -> None:
        self._networks = networks
        super().__init__()

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        networks = self._networks
        http = type("GuardedHTTPConnection", (_GuardedHTTPConnection,), {"networks": networks})
        https = type("GuardedHTTPSConnection", (_GuardedHTTPSConnection,), {"networks": networks})
        self.poolmanager.pool_classes_by_scheme = {
            "http": type("GuardedHTTPPool", (HTTPConnectionPool,), {"ConnectionCls": http}),
            "https": type("GuardedHTTPSPool", (HTTPSConnectionPool,), {"ConnectionCls": https}),
        }

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        # Through a proxy the name is resolved where it cannot be checked.
        raise BlockedAddressError(
            "pages are not fetched through a proxy unless allow_private=True: the proxy would "
            "resolve the page's host where its address cannot be checked"
        )


def guarded_session(
    *, allow_private: bool = False, allow_networks: Sequence[str] = ()
) -> requests.Session:
    """A session for fetching result pages (never for keyed API calls).

    Args:
        allow_private: connect to any address (an intranet search); only scheme and host are
            checked then.
        allow_networks: networks allowed besides public addresses (``("10.1.0.0/16",)``).

    The session ignores the environment (proxies, ``.netrc`` credentials): a page chosen by a
    search result gets no credential of the user's, and its address is the one checked.
    """
    session = requests.Session()
    session.trust_env = False
    if not allow_private:
        adapter = _GuardedAdapter(check_networks(allow_networks))
        session.mount("http://", adapter)
        session.mount("https://", adapter)
    return session
