"""An outside writer and reader of the Iggy source (builtin:iggy): the official Iggy Python SDK.

A second `ferry server` (FERRY_BIN) is the remote; the SDK writes messages with ids and
user headers of its own there, `ferry run` replicates the remote topic into the server at
FERRY_ADDR with builtin:iggy, and is SIGKILLed once on the way. Both topics are then read
with the SDK only, and each local partition must equal its remote partition: ids,
payloads, origin timestamps and headers, in order, each message once, plus the origin
headers (iggy_origin_stream, _topic, _partition, _offset, _topic_created_at).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import tempfile
import time

import pytest

import apache_iggy as iggy
from apache_iggy import Consumer, PollingStrategy, SendMessage

from conftest import USERNAME, PASSWORD, new_client, run, server_addr, tcp_config

PARTITIONS = 3
PER_PARTITION = 400


def ferry_bin() -> str:
    path = os.environ.get("FERRY_BIN", "").strip()
    if not path:
        pytest.fail("FERRY_BIN is not set (tests/python/run.sh builds ferry and sets it)")
    return path


def free_addr() -> str:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    addr = "127.0.0.1:%d" % s.getsockname()[1]
    s.close()
    return addr


def wait_for(what: str, check, timeout: float = 90.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    pytest.fail(f"timed out after {timeout}s waiting for {what}")


async def remote_client(addr: str) -> iggy.IggyClient:
    client = iggy.IggyClient(tcp_config(server_address=addr))
    await client.connect()
    await client.login_user(USERNAME, PASSWORD)
    return client


async def write_remote(addr: str):
    client = await remote_client(addr)
    await client.create_stream("origin")
    await client.create_topic("origin", "events", partitions_count=PARTITIONS)
    for p in range(PARTITIONS):
        for start in range(0, PER_PARTITION, 100):
            msgs = [SendMessage(f"py p{p} m{i}".encode(), user_headers={"seq": i, "writer": "python"},
                                id=(p << 40) | (i + 1))
                    for i in range(start, start + 100)]
            await client.send_messages("origin", "events", p, msgs)


async def count(addr: str | None, stream: str, topic: str) -> int:
    client = await (remote_client(addr) if addr else new_client())
    t = await client.get_topic(stream, topic)
    return 0 if t is None else t.messages_count


async def read_all(addr: str | None, stream: str, topic: str):
    client = await (remote_client(addr) if addr else new_client())
    t = await client.get_topic(stream, topic)
    out = {}
    for p in range(PARTITIONS):
        got, offset = [], 0
        while True:
            msgs = await client.poll_messages(stream, topic, consumer=Consumer.Single("py-repl"),
                                              polling_strategy=PollingStrategy.Offset(offset), count=100,
                                              auto_commit=False, partition_id=p)
            if not msgs:
                break
            for m in msgs:
                h = m.user_headers()
                got.append((m.offset(), m.id(), m.payload(), m.origin_timestamp(),
                            {str(k): v for k, v in (h.to_scalar_dict() if h else {}).items()}))
                offset = m.offset() + 1
        out[p] = got
    return out, t.created_at if hasattr(t, "created_at") else None


def connector_file(remote: str, stream: str) -> str:
    return f"""type = "source"
key = "pyrepl"
enabled = true
version = 0
name = "python replication"
path = "builtin:iggy"
max_in_flight = 4

[[streams]]
stream = {json.dumps(stream)}
topic = "replica"
schema = "raw"
batch_length = 50

[plugin_config]
address = {json.dumps(remote)}
stream = "origin"
topic = "events"
batch_size = 50
"""


def config_file(addr: str, state: str, conns: str) -> str:
    return f"""[iggy]
address = {json.dumps(addr)}
username = "iggy"
password = "iggy"

[state]
path = {json.dumps(state)}

[connectors]
config_type = "local"
config_dir = {json.dumps(conns)}

[http]
enabled = false
"""


async def create_local(stream: str):
    client = await new_client()
    await client.create_stream(stream)
    await client.create_topic(stream, "replica", partitions_count=PARTITIONS)


def test_replica_read_by_the_official_sdk(stream_name):
    remote = free_addr()
    with tempfile.TemporaryDirectory(prefix="ferry-py-repl-") as tmp:
        srv_log = open(os.path.join(tmp, "remote.log"), "w+")
        srv = subprocess.Popen([ferry_bin(), "server", "--addr", remote, "--data", os.path.join(tmp, "remote-data")],
                               stdout=srv_log, stderr=subprocess.STDOUT)
        procs = [srv]
        try:
            wait_for("the remote server", lambda: "iggy server listening" in open(srv_log.name).read())
            run(write_remote, remote)
            run(create_local, stream_name)
            conns = os.path.join(tmp, "connectors")
            os.makedirs(conns)
            with open(os.path.join(conns, "repl.toml"), "w") as f:
                f.write(connector_file(remote, stream_name))
            cfg = os.path.join(tmp, "config.toml")
            with open(cfg, "w") as f:
                f.write(config_file(server_addr(), os.path.join(tmp, "state"), conns))
            log = open(os.path.join(tmp, "run.log"), "w+")

            def start():
                p = subprocess.Popen([ferry_bin(), "run", "--config", cfg, "--progress", "0"],
                                     stdout=log, stderr=subprocess.STDOUT)
                procs.append(p)
                return p

            first = start()
            wait_for("a part replicated", lambda: run(count, None, stream_name, "replica") >= 200)
            first.send_signal(signal.SIGKILL)
            first.wait()
            second = start()
            total = PARTITIONS * PER_PARTITION
            wait_for("the whole topic replicated",
                     lambda: second.poll() is None and run(count, None, stream_name, "replica") >= total)
            remote_msgs, _ = run(read_all, remote, "origin", "events")
            local_msgs, _ = run(read_all, None, stream_name, "replica")
        finally:
            for p in reversed(procs):
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
                    try:
                        p.wait(timeout=15)
                    except subprocess.TimeoutExpired:
                        p.kill()
                        p.wait()

    for p in range(PARTITIONS):
        r, l = remote_msgs[p], local_msgs[p]
        assert len(r) == PER_PARTITION, f"remote partition {p} holds {len(r)}"
        assert len(l) == len(r), f"local partition {p} holds {len(l)}, the remote {len(r)}"
        created = None
        for (ro, rid, rpay, rts, rh), (lo, lid, lpay, lts, lh) in zip(r, l):
            where = f"partition {p} offset {ro}"
            assert (lid, lpay, lts) == (rid, rpay, rts), where
            assert lh["seq"] == rh["seq"] and lh["writer"] == "python", where
            assert lh["iggy_origin_stream"] == "origin" and lh["iggy_origin_topic"] == "events", where
            assert lh["iggy_origin_partition"] == p and lh["iggy_origin_offset"] == ro, where
            created = created or lh["iggy_origin_topic_created_at"]
            assert lh["iggy_origin_topic_created_at"] == created, where
            assert set(lh) == set(rh) | {"iggy_origin_stream", "iggy_origin_topic", "iggy_origin_partition",
                                         "iggy_origin_offset", "iggy_origin_topic_created_at"}, where
