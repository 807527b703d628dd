"""``corrective-rag mcp --http``: who may talk to it, over real HTTP on loopback addresses."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from corrective_rag.cli.main import main
from corrective_rag.cli.mcp_http import (
    HttpGuard,
    allowed_hosts,
    check_bind,
    check_token,
    host_name,
    is_loopback,
)
from corrective_rag.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "s3cret-token-for-the-team"
INITIALIZE = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        },
    }
).encode()


def _env(**extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        **extra,
    }
    env.pop("CORRECTIVE_RAG_MCP_TOKEN", None)
    env.update(extra)
    return env


class Served:
    """A ``corrective-rag mcp --http`` process and where it listens."""

    def __init__(self, proc: subprocess.Popen[str], host: str, port: int) -> None:
        self.proc, self.host, self.port = proc, host, port

    def post(self, headers: dict[str, str]) -> int:
        """POST an initialize request with these headers; the HTTP status."""
        return self.exchange(headers)[0]

    def exchange(self, headers: dict[str, str]) -> tuple[int, str]:
        """POST an initialize request with these headers; the HTTP status and body."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
        base = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        conn.putrequest("POST", "/mcp", skip_host=True)
        for key, value in {**base, **headers}.items():
            conn.putheader(key, value)
        conn.putheader("Content-Length", str(len(INITIALIZE)))
        conn.endheaders(INITIALIZE)
        response = conn.getresponse()
        body = response.read()
        conn.close()
        return response.status, body.decode("utf-8", "replace")


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[object]:
    procs: list[subprocess.Popen[str]] = []

    def start(bind: str, *extra: str, env: dict[str, str] | None = None) -> Served:
        args = ["mcp", "--store", str(tmp_path / "nowhere"), "--http", f"{bind}:0", *extra]
        proc = subprocess.Popen(
            [sys.executable, "-m", "corrective_rag", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env or _env(),
        )
        procs.append(proc)
        assert proc.stderr is not None
        line = proc.stderr.readline()  # the marker line, written once the socket is bound
        assert line.startswith("corrective-rag mcp: serving http://"), line
        where = line.rsplit(" ", 1)[1].strip().removeprefix("http://").removesuffix("/mcp")
        host, _, port = where.rpartition(":")
        return Served(proc, host.strip("[]"), int(port))

    yield start
    for proc in procs:
        proc.kill()
        proc.wait(timeout=60)


def test_every_loopback_spelling_is_loopback_and_nothing_else_is():
    """127.0.0.0/8 in any form, localhost in any case and ::1 (bracketed, mapped) are loopback;
    public, private and unspecified addresses and other names are not."""
    for host in ("127.0.0.1", "127.0.0.2", "127.1", "127.255.255.254", "LOCALHOST", "localhost."):
        assert is_loopback(host), host
    for host in ("::1", "[::1]", "::ffff:127.0.0.1", "0x7f.1"):
        assert is_loopback(host), host
    for host in ("0.0.0.0", "::", "[::]", "", "10.0.0.1", "evil.example", "127.0.0.1.evil.example"):
        assert not is_loopback(host), host
    assert "127.0.0.2" == host_name("127.0.0.2:8000")
    assert "::1" == host_name("[::1]:8000")
    assert "evil.example" == host_name("EVIL.example.")


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("bind", ["127.0.0.2", "127.1", "LOCALHOST", "[::1]"])
def test_a_request_naming_another_site_is_refused_on_every_loopback_bind(serve, bind):
    """Whatever loopback spelling the server binds, a request whose Host or Origin names
    another site gets 403 (DNS rebinding), and one naming the server itself is served."""
    if bind == "[::1]" and not socket.has_ipv6:
        pytest.skip("no IPv6 loopback")
    served = serve(bind)
    mine = f"[{served.host}]" if ":" in served.host else served.host
    own = f"{mine}:{served.port}"
    assert 200 == served.post({"Host": own})
    assert 200 == served.post({"Host": own, "Origin": f"http://{own}"})
    assert 200 == served.post({"Host": f"localhost:{served.port}", "Origin": "http://127.1"})
    assert 403 == served.post({"Host": f"evil.example:{served.port}"})
    assert 403 == served.post({"Host": own, "Origin": "http://evil.example"})
    assert 403 == served.post({"Host": own, "Origin": "null"})
    assert 403 == served.post(
        {"Host": f"evil.example:{served.port}", "Origin": "http://evil.example"}
    )


def test_a_public_bind_needs_an_allowed_host_list_and_a_token():
    """0.0.0.0, [::] and a LAN address are refused unless both --allow-host and a token are
    given; loopback binds need neither."""
    for host in ("0.0.0.0", "::", "192.168.1.10"):
        for hosts, token in (((), None), (("team.example",), None), ((), TOKEN)):
            with pytest.raises(ConfigError, match="reachable from other machines"):
                check_bind(host, allowed_hosts=hosts, token=token)
        check_bind(host, allowed_hosts=("team.example",), token=TOKEN)
    check_bind("127.0.0.2", allowed_hosts=(), token=None)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_command_refuses_a_public_bind_without_a_token(tmp_path):
    """``mcp --http 0.0.0.0:0`` without a token exits 2 with one line naming what is missing,
    before it binds anything."""
    args = ["mcp", "--store", str(tmp_path / "x"), "--http", "0.0.0.0:0", "--allow-host", "a.b"]
    done = subprocess.run(
        [sys.executable, "-m", "corrective_rag", *args],
        check=False,
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )
    assert 2 == done.returncode
    assert "CORRECTIVE_RAG_MCP_TOKEN" in done.stderr
    assert "serving" not in done.stderr


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_with_a_token_every_request_needs_it(serve):
    """With CORRECTIVE_RAG_MCP_TOKEN set on a public bind, a request without the bearer token
    (or with a wrong one) gets 401, the missing and the wrong token each with its own text
    (neither holding the token); the allowed host name is served with it, and another host
    name is still refused."""
    served = serve(
        "0.0.0.0", "--allow-host", "team.example", env=_env(CORRECTIVE_RAG_MCP_TOKEN=TOKEN)
    )
    served.host = "127.0.0.1"
    host = f"team.example:{served.port}"
    missing = served.exchange({"Host": host})
    wrong = served.exchange({"Host": host, "Authorization": f"Bearer {TOKEN}x"})
    assert (401, 401) == (missing[0], wrong[0])
    assert missing[1] != wrong[1]
    assert "required" in missing[1] and "not this server's" in wrong[1]
    assert TOKEN not in missing[1] + wrong[1]
    assert 401 == served.post({"Host": host, "Authorization": TOKEN})
    assert 200 == served.post({"Host": host, "Authorization": f"Bearer {TOKEN}"})
    assert 200 == served.post(
        {"Host": host, "Origin": "https://team.example", "Authorization": f"Bearer {TOKEN}"}
    )
    assert 403 == served.post(
        {"Host": f"evil.example:{served.port}", "Authorization": f"Bearer {TOKEN}"}
    )


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_busy_port_is_one_line_and_exit_1(tmp_path):
    """``mcp --http`` on a port another socket holds prints one error line of ours (not
    uvicorn's) and exits 1, as other runtime errors do."""
    with socket.create_server(("127.0.0.1", 0)) as busy:
        port = busy.getsockname()[1]
        args = ["mcp", "--store", str(tmp_path / "x"), "--http", f"127.0.0.1:{port}"]
        done = subprocess.run(
            [sys.executable, "-m", "corrective_rag", *args],
            check=False,
            capture_output=True,
            text=True,
            env=_env(),
            timeout=120,
        )
    assert 1 == done.returncode
    lines = done.stderr.strip().splitlines()
    assert 1 == len(lines), done.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in lines[0]


def test_allowed_hosts_are_names_or_addresses_written_one_way():
    """--allow-host takes names (lower-cased, a final dot dropped) and IP addresses, a
    bracketed IPv6 address too, each written in its canonical form, comma-separated or
    repeated."""
    given = ["Team.Example.", "10.0.0.5,[2001:DB8:0::1]", " 2001:db8::2 ", "api.example.com"]
    assert {
        "team.example",
        "10.0.0.5",
        "2001:db8::1",
        "2001:db8::2",
        "api.example.com",
    } == allowed_hosts(given)


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("api.example.com:8443", "without a port"),
        ("[2001:db8::1]:8443", "without a port"),
        ("*.example", "wildcards are not supported"),
        ("https://team.example", "not a URL"),
        ("[team.example]", "not an IPv6 address"),
        ("team example", "is not a host name"),
        ("-team.example", "is not a host name"),
    ],
)
def test_an_allowed_host_that_could_never_match_is_refused_in_one_line(value, says):
    """A host with a port, a wildcard (it was matched literally), a URL or a string no host
    name holds is a ConfigError saying why."""
    with pytest.raises(ConfigError, match=says):
        allowed_hosts([value])


def test_a_bracketed_ipv6_allowed_host_is_served_in_host_and_origin():
    """An allowed IPv6 address matches Host ``[v6]:port`` and Origin ``http://[v6]:port``
    however the address is spelled (it was compared with its brackets, and never matched)."""
    guard = HttpGuard(None, allowed_hosts(["[2001:db8::1]"]))
    host = {b"host": b"[2001:DB8:0::1]:8443"}
    assert guard.refusal(host) is None
    assert guard.refusal({**host, b"origin": b"http://[2001:db8::1]:8443"}) is None
    assert (403, "Host not allowed") == guard.refusal({b"host": b"[2001:db8::2]:8443"})


@pytest.mark.parametrize(
    ("token", "says"),
    [
        ("   ", "blank"),
        (f" {TOKEN} ", "spaces around it"),
        ("s3cret token for the team", "a space, control or non-ASCII character"),
        ("s3cret-tökén-for-the-team", "a space, control or non-ASCII character"),
        ("Q", r"too short \(1 of the 16 characters"),
    ],
)
def test_a_token_no_client_could_send_or_too_short_is_refused(token, says):
    """A blank token, one with spaces around it (HTTP trims them: everyone is locked out), one
    holding a space or a non-ASCII character, or one shorter than 16 characters is refused, in a
    message that does not hold it; a long random one passes."""
    with pytest.raises(ConfigError, match=says) as refused:
        check_token(token)
    assert not token.strip() or token.strip() not in str(refused.value)
    check_token(TOKEN)


@pytest.mark.parametrize(
    ("args", "token", "says"),
    [
        (["--http", "127.0.0.1:0", "--allow-host", "api.example.com:8443"], None, "port"),
        (["--http", "127.0.0.1:0", "--allow-host", "*.example"], None, "wildcards"),
        (["--allow-host", "team.example"], None, "applies to --http only"),
        (["--http", "127.0.0.1:0"], f" {TOKEN}", "spaces around it"),
        (["--http", "0.0.0.0:0", "--allow-host", "team.example"], "Q", "too short"),
    ],
)
def test_the_command_refuses_settings_that_could_never_work(
    tmp_path, capsys, monkeypatch, args, token, says
):
    """``corrective-rag mcp`` with such a setting exits 2 at start with one line saying what is
    wrong, before it binds or serves anything."""
    monkeypatch.delenv("CORRECTIVE_RAG_MCP_TOKEN", raising=False)
    if token is not None:
        monkeypatch.setenv("CORRECTIVE_RAG_MCP_TOKEN", token)
    assert 2 == main(["mcp", "--store", str(tmp_path / "x"), *args])
    err = capsys.readouterr().err.strip().splitlines()
    assert 1 == len(err), err
    assert says in err[0]
