"""Who may talk to ``corrective-rag mcp --http``: Host and Origin checks, and a bearer token.

A browser page on another site can reach a server on 127.0.0.1 by DNS rebinding: its own name
is made to resolve to 127.0.0.1, and its requests then carry ``Host: evil.example`` (and an
``Origin`` naming it). :class:`HttpGuard` answers 403 to any request whose ``Host`` or
``Origin`` names a host that is neither a loopback address (in any spelling: ``127.0.0.2``,
``127.1``, ``LOCALHOST``, ``[::1]``) nor one the user allowed with ``--allow-host``; with a token
(``CORRECTIVE_RAG_MCP_TOKEN``) every request must also carry ``Authorization: Bearer TOKEN``
(401 otherwise, compared in constant time; a missing token and a wrong one are told apart).
:func:`check_bind` refuses to bind anything but a loopback address unless both an allowed host
list and a token are given; :func:`allowed_hosts` and :func:`check_token` refuse, at start and in
one line each, settings that could never work (a host with a port, a wildcard, a token with
spaces or shorter than :data:`MIN_TOKEN_CHARS`).

The guard also tells the MCP layer who is calling and whether they are still there: each
response carries a cookie naming the client (:data:`CLIENT_COOKIE`, a random key the server
made), which HTTP clients keep and send back, so a client of the stateless 2026-07-28 protocol
(no ``Mcp-Session-Id``) is still one client; and an event set when the client hangs up, so
that its call stops (:data:`CLIENT_KEY` and :data:`HANGUP` in the ASGI scope).
"""

from __future__ import annotations

import hmac
import ipaddress
import re
import secrets
import socket
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from corrective_rag.errors import ConfigError

__all__ = [
    "CLIENT_COOKIE",
    "CLIENT_KEY",
    "HANGUP",
    "MIN_TOKEN_CHARS",
    "TOKEN_VARIABLE",
    "HttpGuard",
    "allowed_hosts",
    "check_bind",
    "check_token",
    "host_name",
    "is_loopback",
    "listen",
    "serve_http",
]

TOKEN_VARIABLE = "CORRECTIVE_RAG_MCP_TOKEN"
# 16 characters of `openssl rand -hex` are 64 bits: far past guessing over HTTP (at 10,000
# requests a second, 2^63 tries take 29 million years). A length cannot measure randomness; it
# refuses the placeholders and typos ("x", "test", "changeme") that would open a public bind.
MIN_TOKEN_CHARS = 16
CLIENT_COOKIE = "corrective_rag_client"  # the cookie naming a client, sent with every response
CLIENT_KEY = "corrective_rag.client"  # ASGI scope: the client's key (its cookie's value)
HANGUP = "corrective_rag.hangup"  # ASGI scope: an anyio.Event set when the client hangs up
_KEY = re.compile(r"[A-Za-z0-9_-]{32}")  # secrets.token_urlsafe(24): 192 random bits
_LABEL = re.compile(r"(?!-)[a-z0-9_-]{1,63}(?<!-)")


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and every spelling of a loopback address (``127.1``, ``[::1]``).

    A name other than ``localhost`` is not resolved: what it points at is the attacker's choice.
    """
    name = host.strip().strip("[]").rstrip(".").lower()
    if name == "localhost":
        return True
    try:
        address = ipaddress.ip_address(name.split("%", 1)[0])
    except ValueError:
        try:  # the shorthand forms the C library (and so the bind) accepts: 127.1, 0x7f.1
            packed = socket.inet_aton(name)
        except OSError:
            return False
        address = ipaddress.IPv4Address(packed)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


def host_name(header: str) -> str:
    """The host part of a ``Host`` header value (``name:port``, ``[v6]:port``), lower-cased.

    An IP address is written in its one canonical form (``2001:db8::1``, however it was
    spelled), so that it compares equal to an allowed one.
    """
    value = header.strip().lower()
    if value.startswith("["):
        value = value[1:].split("]", 1)[0]
    elif value.count(":") == 1:
        value = value.split(":", 1)[0]
    return _canonical(value.rstrip("."))


def _canonical(name: str) -> str:
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        return name


def allowed_hosts(values: Iterable[str]) -> frozenset[str]:
    """The ``--allow-host`` values (each may be comma-separated), checked and canonical.

    A value is a host name (``team.example``, lower-cased, a final dot dropped) or an IP
    address (``10.0.0.5``, ``2001:db8::1``, bracketed or not).

    Raises:
        ConfigError: a value that no ``Host`` or ``Origin`` could ever match, in one line: one
            with a port, a wildcard, a URL, or characters a host name does not hold.
    """
    found = set()
    for given in values:
        for part in given.split(","):
            if part.strip():
                found.add(_allowed_host(part.strip()))
    return frozenset(found)


def _allowed_host(value: str) -> str:
    name = value.lower()
    if "*" in name:
        raise ConfigError(
            f"--allow-host {value!r}: wildcards are not supported; list each host name "
            "clients use (comma-separated)"
        )
    if "/" in name:
        raise ConfigError(f"--allow-host {value!r}: give a host name, not a URL")
    if name.startswith("["):
        inside, _, rest = name[1:].partition("]")
        if rest:
            raise ConfigError(_port_refusal(value))
        try:
            return str(ipaddress.IPv6Address(inside))
        except ValueError:
            raise ConfigError(f"--allow-host {value!r}: not an IPv6 address") from None
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        pass
    if ":" in name:
        raise ConfigError(_port_refusal(value))
    name = name.removesuffix(".")
    if len(name) > 253 or not all(_LABEL.fullmatch(label) for label in name.split(".")):
        raise ConfigError(f"--allow-host {value!r} is not a host name")
    return name


def _port_refusal(value: str) -> str:
    return (
        f"--allow-host {value!r}: give the host without a port (Host and Origin are allowed "
        "by name, on any port)"
    )


def check_token(token: str | None) -> None:
    """Refuse a bearer token no client could send, or one too short to guard anything.

    Raises:
        ConfigError: blank, spaces around it (HTTP trims them from the header, so no request
            could ever match), a space, control or non-ASCII character inside, or fewer than
            :data:`MIN_TOKEN_CHARS` characters. The message never holds the token.
    """
    if token is None:
        return
    if not token.strip():
        raise ConfigError(f"{TOKEN_VARIABLE} is blank: unset it, or set a random token")
    if token != token.strip():
        raise ConfigError(
            f"{TOKEN_VARIABLE} has spaces around it: HTTP drops them from the Authorization "
            "header, so no request could match it"
        )
    if not all("!" <= c <= "~" for c in token):
        raise ConfigError(
            f"{TOKEN_VARIABLE} holds a space, control or non-ASCII character: a bearer token "
            "is ASCII letters, digits and punctuation (make one: openssl rand -hex 32)"
        )
    if len(token) < MIN_TOKEN_CHARS:
        raise ConfigError(
            f"{TOKEN_VARIABLE} is too short ({len(token)} of the {MIN_TOKEN_CHARS} characters "
            "needed; make one: openssl rand -hex 32)"
        )


def check_bind(host: str, *, allowed_hosts: tuple[str, ...], token: str | None) -> None:
    """Refuse a bind other than loopback unless hosts are allowed and a token is set.

    Raises:
        ConfigError: a public bind (``0.0.0.0``, ``::``, a LAN address) without both.
    """
    if is_loopback(host):
        return
    if not allowed_hosts or not token:
        missing = " and ".join(
            what
            for what, given in (("--allow-host NAME", allowed_hosts), (TOKEN_VARIABLE, token))
            if not given
        )
        raise ConfigError(
            f"--http {host} is reachable from other machines: give {missing} (every request "
            f"must then carry 'Authorization: Bearer <token>'), or bind 127.0.0.1"
        )


@dataclass(frozen=True, slots=True)
class HttpGuard:
    """ASGI middleware: Host/Origin must name loopback or an allowed host; the token must match.

    Args:
        app: the application to guard.
        allowed_hosts: host names (no port) allowed besides loopback ones, as
            :func:`allowed_hosts` writes them.
        token: when set, every request needs ``Authorization: Bearer <token>``.
    """

    app: Any
    allowed_hosts: frozenset[str] = frozenset()
    token: str | None = None

    def allowed(self, host: str) -> bool:
        """True when ``host`` (a name, no port) may appear in ``Host`` or ``Origin``."""
        return is_loopback(host) or _canonical(host) in self.allowed_hosts

    def refusal(self, headers: dict[bytes, bytes]) -> tuple[int, str] | None:
        """The status and reason to refuse a request with these headers, or None to serve it."""
        host = headers.get(b"host", b"").decode("latin-1")
        if not host or not self.allowed(host_name(host)):
            return 403, "Host not allowed"
        origin = headers.get(b"origin")
        if origin is not None:
            try:
                origin_host = urlsplit(origin.decode("latin-1").strip()).hostname or ""
            except ValueError:
                origin_host = ""
            if not self.allowed(origin_host.rstrip(".")):
                return 403, "Origin not allowed"
        if self.token is not None:
            scheme, _, value = headers.get(b"authorization", b"").strip().partition(b" ")
            if scheme.lower() != b"bearer" or not value.strip():
                return 401, "a bearer token is required: send 'Authorization: Bearer <token>'"
            if not hmac.compare_digest(value.strip(), self.token.encode()):
                return 401, "the bearer token is not this server's"
        return None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Serve the request, or answer it with the refusal (a websocket is closed)."""
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = {k.lower(): v for k, v in scope.get("headers", ())}
        refused = self.refusal(headers)
        if refused is None:
            await self._serve(scope, receive, send, headers)
            return
        status, reason = refused
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        extra = []
        if status == 401:  # RFC 6750: a token sent but refused is an invalid_token
            wrong = reason.startswith("the bearer token")
            extra = [(b"www-authenticate", b'Bearer error="invalid_token"' if wrong else b"Bearer")]
        body = reason.encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"text/plain; charset=utf-8"),
                    (b"content-length", str(len(body)).encode()),
                    *extra,
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    async def _serve(
        self, scope: dict[str, Any], receive: Any, send: Any, headers: dict[bytes, bytes]
    ) -> None:
        """Serve with the client's key and a hang-up event in the scope (see the module)."""
        import anyio

        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        key = _client_key(headers.get(b"cookie", b""))
        fresh = key is None
        if key is None:
            key = secrets.token_urlsafe(24)
        gone = anyio.Event()

        async def receiving() -> Any:
            message = await receive()
            if message.get("type") == "http.disconnect":
                gone.set()
            return message

        async def sending(message: dict[str, Any]) -> None:
            if fresh and message.get("type") == "http.response.start":
                cookie = f"{CLIENT_COOKIE}={key}; Path=/; HttpOnly; SameSite=Strict"
                extra = [(b"set-cookie", cookie.encode())]
                message = {**message, "headers": [*message.get("headers", ()), *extra]}
            await send(message)

        await self.app({**scope, CLIENT_KEY: key, HANGUP: gone}, receiving, sending)


def _client_key(cookies: bytes) -> str | None:
    """The client key a ``Cookie`` header carries, if it has the form the server makes."""
    for pair in cookies.decode("latin-1").split(";"):
        name, _, value = pair.strip().partition("=")
        if name == CLIENT_COOKIE and _KEY.fullmatch(value):
            return value
    return None


def listen(host: str, port: int) -> socket.socket:
    """A listening socket at ``host:port`` (port 0: a free one).

    Raises:
        OSError: the address cannot be bound (in use, not this machine's), in one line.
    """
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise OSError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise OSError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def serve_http(app: Any, host: str, port: int) -> None:
    """Serve ``app`` with uvicorn; one stderr line says where once the socket is bound.

    Port 0 picks a free one (the line names it), so a user or a test knows where to connect.
    The socket is bound here, not by uvicorn, so a busy port is our one-line error (exit 1).

    Raises:
        OSError: the address cannot be bound.
    """
    import anyio
    import uvicorn

    sock = listen(host, port)

    class Announcing(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            if self.started:
                bound = sock.getsockname()
                name = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
                sys.stderr.write(f"corrective-rag mcp: serving http://{name}:{bound[1]}/mcp\n")
                sys.stderr.flush()

    server = Announcing(uvicorn.Config(app, log_level="warning"))
    with sock:
        anyio.run(server.serve, [sock])
