"""An outside reader of the PostgreSQL CDC source: the official Iggy Python SDK.

`ferry run` (FERRY_BIN, built by run.sh) runs `builtin:postgres` in cdc mode against the
ferry server at FERRY_ADDR and the PostgreSQL at FERRY_POSTGRES_URL (.ci/run starts one;
the test is skipped without it). A fixed workload over two tables (inserts, an update
that changes the key, a delete, one TRUNCATE of both tables, an insert after it) is
committed with psql; the topic is read back with the SDK only, and the exact records
(table_name, operation_type, data, old_data) and headers (pg_commit_lsn, pg_txn_index,
pg_table) are asserted, in commit order and per partition.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import time
import uuid

import pytest

from apache_iggy import Consumer, PollingStrategy

from conftest import new_client, run, server_addr

PARTITIONS = 3
TOPIC = "cdc"


def pg_url() -> str:
    url = os.environ.get("FERRY_POSTGRES_URL", "").strip()
    if not url:
        pytest.skip("FERRY_POSTGRES_URL is not set (.ci/run starts PostgreSQL)")
    return url


def psql(url: str, sql: str) -> str:
    out = subprocess.run(
        ["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", sql],
        check=True, capture_output=True, text=True, timeout=30,
    )
    return out.stdout.strip()


def ferry_bin() -> str:
    path = os.environ.get("FERRY_BIN", "").strip()
    if not path:
        pytest.fail("FERRY_BIN is not set (tests/python/run.sh builds ferry and sets it)")
    return path


def wait_for(what: str, check, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    pytest.fail(f"timed out after {timeout}s waiting for {what}")


def connector_file(url: str, stream: str, slot: str, tables: list[str]) -> str:
    return f"""type = "source"
key = "cdc"
enabled = true
version = 0
name = "pg cdc"
path = "builtin:postgres"

[[streams]]
stream = {json.dumps(stream)}
topic = "{TOPIC}"
schema = "json"
batch_length = 100

[plugin_config]
connection_string = {json.dumps(url)}
mode = "cdc"
tables = {json.dumps(tables)}
replication_slot = {json.dumps(slot)}
capture_operations = ["INSERT", "UPDATE", "DELETE", "TRUNCATE"]
status_interval = "200ms"
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


async def create_topic(stream: str):
    client = await new_client()
    await client.create_stream(stream)
    await client.create_topic(stream, TOPIC, partitions_count=PARTITIONS)


async def read_all(stream: str):
    """Every message of every partition: (partition, offset, record, headers)."""
    client = await new_client()
    out = []
    for p in range(PARTITIONS):
        offset = 0
        while True:
            msgs = await client.poll_messages(
                stream, TOPIC, consumer=Consumer.Single("py-cdc"),
                polling_strategy=PollingStrategy.Offset(offset), count=100,
                auto_commit=False, partition_id=p,
            )
            if not msgs:
                break
            for m in msgs:
                headers = m.user_headers()
                assert headers is not None, f"partition {p} offset {m.offset()}: no headers"
                out.append((p, m.offset(), json.loads(m.payload()), headers.to_scalar_dict()))
                offset = m.offset() + 1
    return out


async def topic_count(stream: str) -> int:
    client = await new_client()
    topic = await client.get_topic(stream, TOPIC)
    return 0 if topic is None else topic.messages_count


def test_cdc_topic_read_by_the_official_sdk(stream_name):
    url = pg_url()
    tag = uuid.uuid4().hex[:10]
    slot = f"py_cdc_{tag}"
    a, b = f"py_cdc_{tag}_a", f"py_cdc_{tag}_b"
    for t in (a, b):
        psql(url, f"CREATE TABLE {t} (id int PRIMARY KEY, v text NOT NULL)")
    run(create_topic, stream_name)

    with tempfile.TemporaryDirectory(prefix="ferry-py-cdc-") as tmp:
        conns = os.path.join(tmp, "connectors")
        os.makedirs(conns)
        with open(os.path.join(conns, "cdc.toml"), "w") as f:
            f.write(connector_file(url, stream_name, slot, [a, b]))
        cfg = os.path.join(tmp, "config.toml")
        with open(cfg, "w") as f:
            f.write(config_file(server_addr(), os.path.join(tmp, "state"), conns))
        log = open(os.path.join(tmp, "run.log"), "w+")
        proc = subprocess.Popen([ferry_bin(), "run", "--config", cfg, "--progress", "0"],
                                stdout=log, stderr=subprocess.STDOUT)
        try:
            # Changes are captured from the slot's creation on.
            wait_for("the replication slot", lambda: proc.poll() is None and psql(
                url, f"SELECT count(*) FROM pg_replication_slots WHERE slot_name = '{slot}'") == "1")
            txns = [
                f"BEGIN; INSERT INTO {a} VALUES (1, 'a1'); INSERT INTO {a} VALUES (2, 'a2');"
                f" INSERT INTO {b} VALUES (1, 'b1'); COMMIT",
                f"UPDATE {a} SET id = 3, v = 'a3' WHERE id = 1",
                f"UPDATE {a} SET v = 'a2x' WHERE id = 2",
                f"DELETE FROM {b} WHERE id = 1",
                f"TRUNCATE {a}, {b}",
                f"INSERT INTO {b} VALUES (5, 'b5')",
            ]
            for sql in txns:
                psql(url, sql)
            want = [
                # (transaction, table, operation, data, old_data)
                (0, a, "INSERT", {"id": 1, "v": "a1"}, None),
                (0, a, "INSERT", {"id": 2, "v": "a2"}, None),
                (0, b, "INSERT", {"id": 1, "v": "b1"}, None),
                (1, a, "UPDATE", {"id": 3, "v": "a3"}, {"id": 1}),
                (2, a, "UPDATE", {"id": 2, "v": "a2x"}, None),
                (3, b, "DELETE", {"id": 1}, None),
                (4, a, "TRUNCATE", {}, None),
                (4, b, "TRUNCATE", {}, None),
                (5, b, "INSERT", {"id": 5, "v": "b5"}, None),
            ]
            wait_for(f"{len(want)} messages in the topic",
                     lambda: proc.poll() is None and run(topic_count, stream_name) >= len(want))
            got = run(read_all, stream_name)
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            log.seek(0)
            out = log.read()
            log.close()
            for _ in range(100):  # the walsender releases the slot once ferry is gone
                try:
                    psql(url, f"SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
                              f" WHERE slot_name = '{slot}'")
                    break
                except subprocess.CalledProcessError:
                    time.sleep(0.1)
            psql(url, f"DROP PUBLICATION IF EXISTS {slot}_pub")
            psql(url, f"DROP TABLE IF EXISTS {a}, {b}")
        assert url not in out, "ferry run logged the connection string"

    assert len(got) == len(want), f"topic holds {len(got)} messages, want {len(want)}: {got}"
    # Per partition, (commit LSN, index in the transaction) strictly grows with the offset.
    last = {}
    for p, off, _, h in got:
        pos = (h["pg_commit_lsn"], h["pg_txn_index"])
        assert p not in last or pos > last[p], f"partition {p} offset {off}: {pos} not after {last[p]}"
        last[p] = pos
    # In commit order the records are exactly the workload's changes.
    ordered = sorted(got, key=lambda g: (g[3]["pg_commit_lsn"], g[3]["pg_txn_index"]))
    lsns = []
    for i, ((p, off, rec, h), (txn, table, op, data, old)) in enumerate(zip(ordered, want)):
        where = f"change {i} (partition {p} offset {off})"
        assert rec["table_name"] == table, where
        assert rec["operation_type"] == op, where
        assert rec["data"] == data, where
        assert rec.get("old_data") == old, where
        assert h["pg_table"] == f"public.{table}", where
        first = next(j for j, w in enumerate(want) if w[0] == txn)
        assert h["pg_txn_index"] == i - first, where
        if h["pg_txn_index"] == 0:
            lsns.append(h["pg_commit_lsn"])
        else:
            assert h["pg_commit_lsn"] == lsns[-1], f"{where}: a transaction's changes share its commit LSN"
    assert len(lsns) == len(txns) and lsns == sorted(set(lsns)), f"commit LSNs {lsns} not strictly increasing"
