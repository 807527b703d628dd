"""Fixtures of the integration tests."""

from __future__ import annotations

import socket

import pytest


@pytest.fixture
def elsewhere(monkeypatch):
    """Refuses every connection but to 127.0.0.1 during the test; lists the refused ones."""
    real_connect = socket.socket.connect
    refused: list[object] = []

    def loopback_only(sock, address):
        if isinstance(address, tuple) and address[0] not in ("127.0.0.1", "localhost"):
            refused.append(address)
            raise OSError(f"test blocks {address}")
        return real_connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", loopback_only)
    return refused
