"""Who may talk to ``corrective-rag mcp --http``: Host and Origin checks, and a bearer token.

A browser page on another site can reach a server on 127.0.0.1 by DNS rebinding: its own name
is made to resolve to 127.0.0.1, and its requests then carry ``Host: evil.example`` (and an
``Origin`` naming it). :class:`HttpGuard` answers 403 to any request whose ``Host`` or
``Origin`` names a host that is neither a loopback address (in any spelling: ``127.0.0.2``,
``127.1``, ``LOCALHOST``, ``[::1]``) nor one the user allowed with ``--allow-host``; with a token
(``CORRECTIVE_RAG_MCP_TOKEN``) every request must also carry ``Authorization: Bearer TOKEN``
(401 otherwise, compared in constant time). :func:`check_bind` refuses to bind anything but a
loopback address unless both an allowed host list and a token are given.
"""

from __future__ import annotations

import hmac
import ipaddress
import socket
import sys
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from corrective_rag.errors import ConfigError

__all__ = [
    "TOKEN_VARIABLE",
    "HttpGuard",
    "check_bind",
    "host_name",
    "is_loopback",
    "listen",
    "serve_http",
]

TOKEN_VARIABLE = "CORRECTIVE_RAG_MCP_TOKEN"


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
    """The host part of a ``Host`` header value (``name:port``, ``[v6]:port``), lower-cased."""
    value = header.strip().lower()
    if value.startswith("["):
        return value[1:].split("]", 1)[0]
    if value.count(":") == 1:
        value = value.split(":", 1)[0]
    return value.rstrip(".")


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
        allowed_hosts: host names (no port) allowed besides loopback ones, lower-case.
        token: when set, every request needs ``Authorization: Bearer <token>``.
    """

    app: Any
    allowed_hosts: frozenset[str] = frozenset()
    token: str | None = None

    def allowed(self, host: str) -> bool:
        """True when ``host`` (a name, no port) may appear in ``Host`` or ``Origin``."""
        return is_loopback(host) or host in self.allowed_hosts

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
            expected = b"bearer " + self.token.encode()
            given = headers.get(b"authorization", b"")
            scheme, _, value = given.partition(b" ")
            if not hmac.compare_digest(scheme.lower() + b" " + value.strip(), expected):
                return 401, "a bearer token is required"
        return None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Serve the request, or answer it with the refusal (a websocket is closed)."""
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = {k.lower(): v for k, v in scope.get("headers", ())}
        refused = self.refusal(headers)
        if refused is None:
            await self.app(scope, receive, send)
            return
        status, reason = refused
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        extra = [(b"www-authenticate", b"Bearer")] if status == 401 else []
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
