"""Consumer-offset commands the Python SDK 0.9.0 has no method for.

`apache-iggy` 0.9.0's IggyClient exposes no get/store_consumer_offset, but it
does expose `send_binary_request(code, payload)`, which sends one command
through the SDK's own framing/session (same connection, same login). These
helpers only encode the command bodies (iggy-wire-protocol.md §3.2–§3.4, §4.6)
and decode the GetConsumerOffset reply; everything on the wire around them is
the SDK's.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import apache_iggy as iggy

GET_CONSUMER_OFFSET = 120
STORE_CONSUMER_OFFSET = 121

CONSUMER_KIND_SINGLE = 1
CONSUMER_KIND_GROUP = 2

ACK_QUORUM = 1


def identifier(value: str | int) -> bytes:
    if isinstance(value, int):
        return struct.pack("<BBI", 1, 4, value)
    raw = value.encode()
    if not 1 <= len(raw) <= 255:
        raise ValueError(f"identifier length {len(raw)} outside 1..255")
    return struct.pack("<BB", 2, len(raw)) + raw


def consumer(kind: int, consumer_id: str | int) -> bytes:
    return struct.pack("<B", kind) + identifier(consumer_id)


def partition(partition_id: int) -> bytes:
    return struct.pack("<BI", 1, partition_id)


@dataclass(frozen=True)
class ConsumerOffset:
    partition_id: int
    current_offset: int
    stored_offset: int


async def get_consumer_offset(
    client: iggy.IggyClient,
    stream: str | int,
    topic: str | int,
    partition_id: int,
    consumer_id: str | int,
    kind: int = CONSUMER_KIND_SINGLE,
) -> ConsumerOffset | None:
    """Returns None when the server reports no stored offset (empty reply)."""
    body = consumer(kind, consumer_id) + identifier(stream) + identifier(topic) + partition(partition_id)
    reply = bytes(await client.send_binary_request(GET_CONSUMER_OFFSET, body))
    if not reply:
        return None
    if len(reply) != 20:
        raise AssertionError(f"GetConsumerOffset reply is {len(reply)} bytes, want 20: {reply.hex()}")
    pid, current, stored = struct.unpack("<IQQ", reply)
    return ConsumerOffset(pid, current, stored)


async def store_consumer_offset(
    client: iggy.IggyClient,
    stream: str | int,
    topic: str | int,
    partition_id: int,
    consumer_id: str | int,
    offset: int,
    kind: int = CONSUMER_KIND_SINGLE,
) -> bytes:
    body = (
        consumer(kind, consumer_id)
        + identifier(stream)
        + identifier(topic)
        + partition(partition_id)
        + struct.pack("<QB", offset, ACK_QUORUM)
    )
    return bytes(await client.send_binary_request(STORE_CONSUMER_OFFSET, body))
