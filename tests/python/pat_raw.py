"""Personal-access-token commands the Python SDK 0.9.0 has no method for.

`apache-iggy` 0.9.0 exposes no PAT methods, but `send_binary_request(code, payload)`
sends a command through the SDK's own framing and session, and a connection string
`iggy://<token>@host:port` makes the SDK log in with a PAT. These helpers only encode
the bodies (iggy-wire-protocol.md §4.8) and decode the replies.
"""

from __future__ import annotations

import struct

import apache_iggy as iggy

GET_PATS = 41
CREATE_PAT = 42
DELETE_PAT = 43


def name(value: str) -> bytes:
    raw = value.encode()
    return struct.pack("<B", len(raw)) + raw


async def create_pat(client: iggy.IggyClient, token_name: str, expiry_us: int = 0) -> str:
    reply = bytes(await client.send_binary_request(CREATE_PAT, name(token_name) + struct.pack("<Q", expiry_us)))
    (n,) = struct.unpack_from("<B", reply)
    if len(reply) != 1 + n:
        raise AssertionError(f"CreatePersonalAccessToken reply {reply.hex()}")
    return reply[1:].decode()


async def delete_pat(client: iggy.IggyClient, token_name: str) -> bytes:
    return bytes(await client.send_binary_request(DELETE_PAT, name(token_name)))


async def list_pats(client: iggy.IggyClient) -> list[tuple[str, int]]:
    reply = bytes(await client.send_binary_request(GET_PATS, b""))
    out, i = [], 0
    while i < len(reply):
        (n,) = struct.unpack_from("<B", reply, i)
        token_name = reply[i + 1 : i + 1 + n].decode()
        (expiry,) = struct.unpack_from("<Q", reply, i + 1 + n)
        out.append((token_name, expiry))
        i += 1 + n + 8
    return out
