"""Shared fixtures for the official Iggy Python SDK compatibility suite.

The suite talks to an already running Ferry server whose TCP address is in the
environment variable FERRY_ADDR (host:port); tests/python/run.sh starts one.
Credentials are the server's default root user iggy/iggy.

Every test body runs inside one asyncio.run() call (see `run`), so no
pytest-asyncio plugin is needed and no SDK object outlives the event loop it
was created on.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from datetime import timedelta

import pytest

import apache_iggy as iggy

USERNAME = "iggy"
PASSWORD = "iggy"

# Hard cap for one test body; a server that stops answering must fail the
# test, not hang CI (the SDK's own per-request budget is 30 s).
TEST_TIMEOUT_S = float(os.environ.get("FERRY_PY_TEST_TIMEOUT", "90"))


def server_addr() -> str:
    addr = os.environ.get("FERRY_ADDR", "").strip()
    if not addr:
        pytest.fail("FERRY_ADDR is not set (expected host:port of a running ferry server)")
    return addr


def tcp_config(**overrides) -> iggy.TcpConfig:
    """TCP config without reconnection, so a dead server fails fast."""
    kwargs = dict(
        server_address=server_addr(),
        reconnection=iggy.TcpReconnectionConfig(enabled=False),
        heartbeat_interval=timedelta(seconds=5),
        nodelay=True,
    )
    kwargs.update(overrides)
    return iggy.TcpConfig(**kwargs)


async def new_client(login: bool = True) -> iggy.IggyClient:
    client = iggy.IggyClient(tcp_config())
    await client.connect()
    if login:
        await client.login_user(USERNAME, PASSWORD)
    return client


def run(coro_fn, *args, **kwargs):
    """Run one async test body on a fresh event loop with a hard timeout."""

    async def guarded():
        return await asyncio.wait_for(coro_fn(*args, **kwargs), timeout=TEST_TIMEOUT_S)

    return asyncio.run(guarded())


def unique(prefix: str) -> str:
    # Never decimal-only: the SDK reads a decimal-only string as a numeric id.
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


async def _drop_stream(name: str) -> None:
    client = await new_client()
    try:
        if await client.get_stream(name) is not None:
            await client.delete_stream(name)
    finally:
        try:
            await client.logout_user()
        except RuntimeError:
            pass


@pytest.fixture
def stream_name():
    """A unique stream name; the stream (if created) is deleted afterwards."""
    name = unique("py-compat")
    yield name
    try:
        run(_drop_stream, name)
    except Exception as exc:  # cleanup must not mask the test's own failure
        print(f"cleanup of stream {name!r} failed: {exc!r}")
