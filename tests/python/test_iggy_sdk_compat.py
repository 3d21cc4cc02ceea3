"""Compatibility proof: the OFFICIAL Iggy Python SDK (apache-iggy 0.9.x) against Ferry.

Only the SDK is used to talk to the server (consumer-offset get/store go through
the SDK's `send_binary_request`, see offsets_raw.py, because 0.9.0 has no method
for them). Every test owns a uniquely named stream and asserts exact outcomes.
Facts assumed from iggy-wire-protocol.md: ids are 0-based (streams, topics,
partitions, groups); MessagesKey partition = XXH32(key) % n ("key-1" -> 1 of 3).
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import pytest

import apache_iggy as iggy
from apache_iggy import (
    Consumer,
    HeaderKey,
    HeaderValue,
    Partitioning,
    PollingStrategy,
    SendMessage,
)

from conftest import PASSWORD, USERNAME, new_client, run, server_addr, tcp_config
import offsets_raw as raw
import pat_raw

TOPIC = "events"


async def setup_topic(client, stream, topic=TOPIC, partitions=3):
    await client.create_stream(stream)
    await client.create_topic(
        stream,
        topic,
        partitions_count=partitions,
        compression_algorithm="none",
        message_expiry=iggy.IggyExpiry.NeverExpire(),
        max_topic_size=iggy.MaxTopicSize.Unlimited(),
    )


async def poll(client, stream, strategy, *, partition, count=100, consumer="py-reader",
               auto_commit=False, topic=TOPIC):
    return await client.poll_messages(
        stream,
        topic,
        consumer=Consumer.Single(consumer),
        polling_strategy=strategy,
        count=count,
        auto_commit=auto_commit,
        partition_id=partition,
    )


def offsets(msgs):
    return [m.offset() for m in msgs]


def payloads(msgs):
    return [m.payload() for m in msgs]


# --------------------------------------------------------------------------- session


def test_ping_before_and_after_login():
    async def body():
        client = await new_client(login=False)
        await client.ping()  # Ping is allowed before login
        await client.login_user(USERNAME, PASSWORD)
        await client.ping()
        assert isinstance(await client.get_streams(), list)
        await client.logout_user()

    run(body)


def test_connection_string_auto_login(stream_name):
    async def body():
        client = iggy.IggyClient.from_connection_string(
            f"iggy://{USERNAME}:{PASSWORD}@{server_addr()}"
        )
        await client.connect()  # auto-login from the connection string
        await client.create_stream(stream_name)
        details = await client.get_stream(stream_name)
        assert details is not None
        assert details.name == stream_name

    run(body)


def test_personal_access_token_login(stream_name):
    """Create a PAT (raw command), log in with it through the SDK's connection string
    (PAT auto-login), run a command, delete it: a new login with it is refused."""
    async def body():
        admin = await new_client()
        token_name = "py-" + stream_name[-12:]
        token = await pat_raw.create_pat(admin, token_name)
        assert len(token) == 68
        assert (token_name, 0) in await pat_raw.list_pats(admin)

        client = iggy.IggyClient.from_connection_string(f"iggy://{token}@{server_addr()}")
        await client.connect()  # logs in with the token
        await client.create_stream(stream_name)
        assert (await client.get_stream(stream_name)).name == stream_name

        assert await pat_raw.delete_pat(admin, token_name) == b""
        assert all(n != token_name for n, _ in await pat_raw.list_pats(admin))
        refused = iggy.IggyClient.from_connection_string(f"iggy://{token}@{server_addr()}")
        with pytest.raises(RuntimeError) as err:
            await refused.connect()  # the auto-login gets Eviction 10
        assert str(err.value) == "Invalid personal access token", str(err.value)

    run(body)


def test_wrong_password_is_rejected():
    async def body():
        client = await new_client(login=False)
        with pytest.raises(RuntimeError) as err:
            await client.login_user(USERNAME, "definitely-wrong")
        assert "credential" in str(err.value).lower(), str(err.value)

    run(body)


def test_request_before_login_is_rejected():
    async def body():
        client = await new_client(login=False)
        with pytest.raises(RuntimeError) as err:
            await client.get_streams()
        assert "authenticat" in str(err.value).lower(), str(err.value)

    run(body)


# --------------------------------------------------------------------------- metadata


def test_create_stream_and_topic_details(stream_name):
    async def body():
        client = await new_client()
        before = {s.name for s in await client.get_streams()}
        assert stream_name not in before
        await setup_topic(client, stream_name)

        stream = await client.get_stream(stream_name)
        assert stream is not None
        assert stream.name == stream_name
        assert stream.topics_count == 1
        assert stream.messages_count == 0
        assert stream.size == 0
        assert stream.created_at > 0
        assert [t.name for t in stream.topics] == [TOPIC]
        by_id = await client.get_stream(stream.id)
        assert by_id is not None and by_id.name == stream_name

        streams = {s.name: s for s in await client.get_streams()}
        assert streams[stream_name].id == stream.id
        assert streams[stream_name].topics_count == 1

        topic = await client.get_topic(stream_name, TOPIC)
        assert topic is not None
        assert topic.name == TOPIC
        assert topic.id == 0  # first topic of a fresh stream
        assert topic.partitions_count == 3
        assert topic.messages_count == 0
        assert topic.size == 0
        parts = topic.partitions
        assert [p.id for p in parts] == [0, 1, 2]
        assert [p.messages_count for p in parts] == [0, 0, 0]
        assert [p.current_offset for p in parts] == [0, 0, 0]
        assert isinstance(topic.message_expiry, iggy.IggyExpiry.NeverExpire)
        assert isinstance(topic.max_topic_size, iggy.MaxTopicSize.Unlimited)
        assert topic.compression_algorithm.lower() == "none"

        topics = await client.get_topics(stream_name)
        assert [(t.id, t.name, t.partitions_count) for t in topics] == [(0, TOPIC, 3)]
        assert await client.get_topic(stream_name, "no-such-topic") is None

    run(body)


# --------------------------------------------------------------------------- send / poll


def test_send_by_partition_id_with_headers_and_poll_by_offset(stream_name):
    async def body():
        client = await new_client()
        await setup_topic(client, stream_name)

        batch = [
            SendMessage(f"order-{i}", user_headers={"kind": f"k{i}", "seq": i}, id=1000 + i)
            for i in range(5)
        ]
        resp = await client.send_messages(stream_name, TOPIC, Partitioning.partition_id(1), batch)
        assert [(c.partition_id, c.base_offset) for c in resp.confirmations] == [(1, 0)]

        msgs = await poll(client, stream_name, PollingStrategy.Offset(0), partition=1, count=10)
        assert offsets(msgs) == [0, 1, 2, 3, 4]
        assert payloads(msgs) == [f"order-{i}".encode() for i in range(5)]
        assert [m.partition_id() for m in msgs] == [1] * 5
        assert [m.id() for m in msgs] == [1000 + i for i in range(5)]
        assert [m.length() for m in msgs] == [len(f"order-{i}") for i in range(5)]
        for i, m in enumerate(msgs):
            headers = m.user_headers()
            assert headers is not None
            assert headers.to_scalar_dict() == {"kind": f"k{i}", "seq": i}
            assert m.timestamp() > 0

        assert offsets(await poll(client, stream_name, PollingStrategy.Offset(2), partition=1, count=2)) == [2, 3]
        assert offsets(await poll(client, stream_name, PollingStrategy.Offset(4), partition=1, count=10)) == [4]
        assert await poll(client, stream_name, PollingStrategy.Offset(5), partition=1) == []
        assert await poll(client, stream_name, PollingStrategy.Offset(0), partition=0) == []
        assert await poll(client, stream_name, PollingStrategy.Offset(0), partition=2) == []

        # A second batch continues the partition's offsets; int shorthand = partition_id.
        resp = await client.send_messages(stream_name, TOPIC, 1, [SendMessage(b"\x00\x01raw"), SendMessage("tail")])
        assert [(c.partition_id, c.base_offset) for c in resp.confirmations] == [(1, 5)]
        msgs = await poll(client, stream_name, PollingStrategy.Offset(5), partition=1)
        assert offsets(msgs) == [5, 6]
        assert payloads(msgs) == [b"\x00\x01raw", b"tail"]
        assert [m.user_headers() for m in msgs] == [None, None]

        topic = await client.get_topic(stream_name, TOPIC)
        assert topic.messages_count == 7
        assert [(p.id, p.messages_count) for p in topic.partitions] == [(0, 0), (1, 7), (2, 0)]
        assert topic.partitions[1].current_offset == 6
        stream = await client.get_stream(stream_name)
        assert stream.messages_count == 7

    run(body)


def test_typed_user_headers_round_trip(stream_name):
    async def body():
        client = await new_client()
        await setup_topic(client, stream_name, partitions=1)
        headers = {
            HeaderKey.String("str"): HeaderValue.String("hello"),
            HeaderKey.String("i32"): HeaderValue.Int32(-7),
            HeaderKey.String("u64"): HeaderValue.UnsignedInt64(2**63 + 5),
            HeaderKey.String("bool"): HeaderValue.Bool(True),
            HeaderKey.String("f64"): HeaderValue.Float64(2.5),
            HeaderKey.String("raw"): HeaderValue.Raw(b"\x01\x02\xff"),
        }
        await client.send_messages(stream_name, TOPIC, 0, [SendMessage("typed", user_headers=headers)])
        (msg,) = await poll(client, stream_name, PollingStrategy.First(), partition=0)
        got = msg.user_headers()
        assert got is not None
        assert dict(got) == headers
        assert got.to_scalar_dict() == {
            "str": "hello", "i32": -7, "u64": 2**63 + 5, "bool": True, "f64": 2.5, "raw": b"\x01\x02\xff",
        }

    run(body)


def test_partitioning_balanced_and_by_key(stream_name):
    async def body():
        client = await new_client()
        await setup_topic(client, stream_name)
        await client.create_topic(stream_name, "keyed", partitions_count=3)

        # Balanced: three single-message sends land on three distinct partitions.
        seen = []
        for i in range(3):
            resp = await client.send_messages(stream_name, TOPIC, Partitioning.balanced(), [SendMessage(f"b{i}")])
            assert len(resp.confirmations) == 1
            assert resp.confirmations[0].base_offset == 0
            seen.append(resp.confirmations[0].partition_id)
        assert sorted(seen) == [0, 1, 2]
        for i, pid in enumerate(seen):
            msgs = await poll(client, stream_name, PollingStrategy.First(), partition=pid)
            assert payloads(msgs) == [f"b{i}".encode()]
            assert [m.partition_id() for m in msgs] == [pid]

        # By key: XXH32("key-1") % 3 == 1, every time.
        r1 = await client.send_messages(stream_name, "keyed", Partitioning.messages_key("key-1"),
                                        [SendMessage("k0"), SendMessage("k1")])
        r2 = await client.send_messages(stream_name, "keyed", Partitioning.messages_key(b"key-1"),
                                        [SendMessage("k2")])
        assert [(c.partition_id, c.base_offset) for c in r1.confirmations] == [(1, 0)]
        assert [(c.partition_id, c.base_offset) for c in r2.confirmations] == [(1, 2)]
        msgs = await poll(client, stream_name, PollingStrategy.First(), partition=1, topic="keyed")
        assert offsets(msgs) == [0, 1, 2]
        assert payloads(msgs) == [b"k0", b"k1", b"k2"]
        for pid in (0, 2):
            assert await poll(client, stream_name, PollingStrategy.First(), partition=pid, topic="keyed") == []
        topic = await client.get_topic(stream_name, "keyed")
        assert [p.messages_count for p in topic.partitions] == [0, 3, 0]

    run(body)


def test_poll_next_auto_commit_and_consumer_offsets(stream_name):
    async def body():
        client = await new_client()
        await setup_topic(client, stream_name)
        await client.send_messages(stream_name, TOPIC, 0, [SendMessage(f"m{i}") for i in range(10)])
        nxt = PollingStrategy.Next()

        # No stored offset yet.
        assert await raw.get_consumer_offset(client, stream_name, TOPIC, 0, "c-next") is None

        # Next without auto-commit never advances.
        assert offsets(await poll(client, stream_name, nxt, partition=0, count=3, consumer="c-next")) == [0, 1, 2]
        assert offsets(await poll(client, stream_name, nxt, partition=0, count=3, consumer="c-next")) == [0, 1, 2]
        assert await raw.get_consumer_offset(client, stream_name, TOPIC, 0, "c-next") is None

        # Next with auto-commit stores the last returned offset.
        msgs = await poll(client, stream_name, nxt, partition=0, count=3, consumer="c-next", auto_commit=True)
        assert offsets(msgs) == [0, 1, 2]
        assert await raw.get_consumer_offset(client, stream_name, TOPIC, 0, "c-next") == raw.ConsumerOffset(0, 9, 2)
        msgs = await poll(client, stream_name, nxt, partition=0, count=3, consumer="c-next", auto_commit=True)
        assert offsets(msgs) == [3, 4, 5]
        assert payloads(msgs) == [b"m3", b"m4", b"m5"]
        assert await raw.get_consumer_offset(client, stream_name, TOPIC, 0, "c-next") == raw.ConsumerOffset(0, 9, 5)

        # Auto-commit with Offset strategy also stores (and never moves backwards).
        msgs = await poll(client, stream_name, PollingStrategy.Offset(1), partition=0, count=2,
                          consumer="c-next", auto_commit=True)
        assert offsets(msgs) == [1, 2]
        assert (await raw.get_consumer_offset(client, stream_name, TOPIC, 0, "c-next")).stored_offset == 5

        # An explicit store sets the value exactly, even backwards.
        ack = await raw.store_consumer_offset(client, stream_name, TOPIC, 0, "c-next", 1)
        assert ack in (b"", b"\x00\x00\x00\x00")
        assert await raw.get_consumer_offset(client, stream_name, TOPIC, 0, "c-next") == raw.ConsumerOffset(0, 9, 1)
        assert offsets(await poll(client, stream_name, nxt, partition=0, count=3, consumer="c-next")) == [2, 3, 4]

        # Storing beyond the current offset is refused (4100 InvalidOffset).
        with pytest.raises(RuntimeError):
            await raw.store_consumer_offset(client, stream_name, TOPIC, 0, "c-next", 10)
        assert (await raw.get_consumer_offset(client, stream_name, TOPIC, 0, "c-next")).stored_offset == 1

        # Offsets are per consumer and per partition; numeric consumer ids work too.
        assert offsets(await poll(client, stream_name, nxt, partition=0, count=2, consumer=7, auto_commit=True)) == [0, 1]
        assert (await raw.get_consumer_offset(client, stream_name, TOPIC, 0, 7)).stored_offset == 1
        assert await raw.get_consumer_offset(client, stream_name, TOPIC, 1, "c-next") is None
        # Drained: Next past the end is an empty poll, not an error.
        await raw.store_consumer_offset(client, stream_name, TOPIC, 0, "c-drained", 9)
        assert await poll(client, stream_name, nxt, partition=0, consumer="c-drained") == []

    run(body)


def test_first_last_timestamp_strategies(stream_name):
    async def body():
        client = await new_client()
        await setup_topic(client, stream_name)
        await client.send_messages(stream_name, TOPIC, 2, [SendMessage("a0"), SendMessage("a1")])
        await asyncio.sleep(0.05)
        await client.send_messages(stream_name, TOPIC, 2, [SendMessage("b0"), SendMessage("b1")])
        await asyncio.sleep(0.05)
        await client.send_messages(stream_name, TOPIC, 2, [SendMessage("c0")])

        first = await poll(client, stream_name, PollingStrategy.First(), partition=2, count=2)
        assert offsets(first) == [0, 1] and payloads(first) == [b"a0", b"a1"]
        last = await poll(client, stream_name, PollingStrategy.Last(), partition=2, count=2)
        assert offsets(last) == [3, 4] and payloads(last) == [b"b1", b"c0"]
        assert offsets(await poll(client, stream_name, PollingStrategy.Last(), partition=2, count=1)) == [4]
        assert offsets(await poll(client, stream_name, PollingStrategy.Last(), partition=2, count=50)) == [0, 1, 2, 3, 4]

        everything = await poll(client, stream_name, PollingStrategy.First(), partition=2)
        ts = [m.timestamp() for m in everything]
        assert ts == sorted(ts)
        assert ts[2] > ts[1]  # batches were appended >= 50 ms apart
        assert ts[4] > ts[3]

        from_b = await poll(client, stream_name, PollingStrategy.Timestamp(ts[2]), partition=2)
        assert offsets(from_b) == [2, 3, 4]
        between = await poll(client, stream_name, PollingStrategy.Timestamp(ts[1] + 1), partition=2)
        assert offsets(between) == [2, 3, 4]
        assert offsets(await poll(client, stream_name, PollingStrategy.Timestamp(0), partition=2)) == [0, 1, 2, 3, 4]
        future = int(time.time() * 1_000_000) + 3_600_000_000
        assert await poll(client, stream_name, PollingStrategy.Timestamp(future), partition=2) == []
        # Empty partitions return nothing for every strategy.
        for strategy in (PollingStrategy.First(), PollingStrategy.Last(), PollingStrategy.Next(),
                         PollingStrategy.Timestamp(0)):
            assert await poll(client, stream_name, strategy, partition=0) == []

    run(body)


# --------------------------------------------------------------------------- consumer groups


def test_consumer_group_low_level(stream_name):
    async def body():
        client = await new_client()
        await setup_topic(client, stream_name)
        for pid in range(3):
            await client.send_messages(stream_name, TOPIC, pid, [SendMessage(f"p{pid}-{i}") for i in range(2)])

        await client.create_consumer_group(stream_name, TOPIC, "g1")
        group = await client.get_consumer_group(stream_name, TOPIC, "g1")
        assert group is not None
        assert (group.id, group.name, group.partitions_count, group.members_count) == (0, "g1", 3, 0)
        assert group.members == []
        assert [(g.id, g.name, g.members_count) for g in await client.get_consumer_groups(stream_name, TOPIC)] == [(0, "g1", 0)]
        by_id = await client.get_consumer_group(stream_name, TOPIC, 0)
        assert by_id is not None and by_id.name == "g1"

        with pytest.raises(RuntimeError):
            await client.create_consumer_group(stream_name, TOPIC, "g1")  # 5004 duplicate

        await client.join_consumer_group(stream_name, TOPIC, "g1")
        await client.join_consumer_group(stream_name, TOPIC, "g1")  # joining twice is a no-op
        group = await client.get_consumer_group(stream_name, TOPIC, "g1")
        assert group.members_count == 1
        (member,) = group.members
        assert member.partitions_count == 3
        assert sorted(member.partitions) == [0, 1, 2]

        # Poll through the group (the SDK picks among the member's partitions) with auto-commit.
        got = {}
        for _ in range(12):
            msgs = await client.poll_messages(
                stream_name, TOPIC, consumer=Consumer.Group("g1"),
                polling_strategy=PollingStrategy.Next(), count=10, auto_commit=True,
            )
            for m in msgs:
                key = (m.partition_id(), m.offset())
                assert key not in got, f"duplicate delivery {key}"
                got[key] = m.payload()
            if len(got) == 6:
                break
        assert got == {(p, i): f"p{p}-{i}".encode() for p in range(3) for i in range(2)}
        for _ in range(3):  # everything committed: nothing more for the group
            assert await client.poll_messages(
                stream_name, TOPIC, consumer=Consumer.Group("g1"),
                polling_strategy=PollingStrategy.Next(), count=10, auto_commit=True,
            ) == []

        # The group's stored offsets (keyed by the group, kind 2).
        for pid in range(3):
            off = await raw.get_consumer_offset(client, stream_name, TOPIC, pid, "g1", kind=raw.CONSUMER_KIND_GROUP)
            assert off == raw.ConsumerOffset(pid, 1, 1)

        # Explicit partition + explicit store through the group.
        await raw.store_consumer_offset(client, stream_name, TOPIC, 2, "g1", 0, kind=raw.CONSUMER_KIND_GROUP)
        msgs = await client.poll_messages(
            stream_name, TOPIC, consumer=Consumer.Group("g1"), polling_strategy=PollingStrategy.Next(),
            count=10, auto_commit=False, partition_id=2,
        )
        assert offsets(msgs) == [1] and payloads(msgs) == [b"p2-1"]

        await client.leave_consumer_group(stream_name, TOPIC, "g1")
        group = await client.get_consumer_group(stream_name, TOPIC, "g1")
        assert (group.members_count, group.members) == (0, [])
        with pytest.raises(RuntimeError):
            await client.leave_consumer_group(stream_name, TOPIC, "g1")  # 5006 not a member

        await client.delete_consumer_group(stream_name, TOPIC, "g1")
        assert await client.get_consumer_group(stream_name, TOPIC, "g1") is None
        assert await client.get_consumer_groups(stream_name, TOPIC) == []

    run(body)


def test_high_level_consumer_group(stream_name):
    async def body():
        client = await new_client()
        await setup_topic(client, stream_name)
        expected = {}
        for pid in range(3):
            batch = [f"h{pid}-{i}" for i in range(3)]
            await client.send_messages(stream_name, TOPIC, pid, [SendMessage(p) for p in batch])
            expected.update({(pid, i): p.encode() for i, p in enumerate(batch)})

        consumer = await client.consumer_group(
            "hl-group", stream_name, TOPIC,
            polling_strategy=PollingStrategy.Next(),
            batch_length=10,
            auto_commit=iggy.AutoCommit.Disabled(),
            poll_interval=timedelta(milliseconds=20),
        )
        assert consumer.name() == "hl-group"
        assert consumer.stream() == stream_name
        assert consumer.topic() == TOPIC

        got = {}
        done = asyncio.Event()

        async def on_message(m):
            key = (m.partition_id(), m.offset())
            assert key not in got, f"duplicate delivery {key}"
            got[key] = m.payload()
            if len(got) == len(expected):
                done.set()

        await asyncio.wait_for(consumer.consume_messages(on_message, done), timeout=30)
        assert got == expected
        for pid in range(3):
            assert consumer.get_last_consumed_offset(pid) == 2

        group = await client.get_consumer_group(stream_name, TOPIC, "hl-group")
        assert group is not None
        assert group.members_count == 1
        assert sorted(group.members[0].partitions) == [0, 1, 2]

        # Commit: store the group's offset per partition, then read it back from the server.
        for pid in range(3):
            await consumer.store_offset(2, pid)
        for pid in range(3):
            off = await raw.get_consumer_offset(client, stream_name, TOPIC, pid, "hl-group",
                                                kind=raw.CONSUMER_KIND_GROUP)
            assert off == raw.ConsumerOffset(pid, 2, 2)

        # A committed group has nothing left for a Next poll on any partition.
        for pid in range(3):
            assert await client.poll_messages(
                stream_name, TOPIC, consumer=Consumer.Group("hl-group"),
                polling_strategy=PollingStrategy.Next(), count=10, auto_commit=False, partition_id=pid,
            ) == []

    run(body)


# --------------------------------------------------------------------------- errors / deletion


def test_error_cases(stream_name):
    async def body():
        client = await new_client()
        await setup_topic(client, stream_name)

        with pytest.raises(RuntimeError) as dup:
            await client.create_stream(stream_name)
        text = str(dup.value)
        assert "already exists" in text.lower() or "1012" in text, text

        with pytest.raises(RuntimeError) as dup_topic:
            await client.create_topic(stream_name, TOPIC, partitions_count=1)
        assert "already exists" in str(dup_topic.value).lower() or "2013" in str(dup_topic.value)

        missing = stream_name + "-missing"
        assert await client.get_stream(missing) is None
        with pytest.raises(RuntimeError):
            await client.delete_stream(missing)
        with pytest.raises(RuntimeError):
            await client.create_topic(missing, TOPIC, partitions_count=1)
        with pytest.raises(RuntimeError):
            await client.send_messages(missing, TOPIC, 0, [SendMessage("x")])
        with pytest.raises(RuntimeError):
            await poll(client, missing, PollingStrategy.First(), partition=0)
        with pytest.raises(RuntimeError):
            await poll(client, stream_name, PollingStrategy.First(), partition=0, topic="no-topic")
        with pytest.raises(RuntimeError):
            await poll(client, stream_name, PollingStrategy.First(), partition=7)  # 3007
        with pytest.raises(RuntimeError):
            await client.send_messages(stream_name, TOPIC, 7, [SendMessage("x")])
        with pytest.raises(RuntimeError):
            await client.join_consumer_group(stream_name, TOPIC, "no-group")  # 5000
        # The connection is still healthy after all those errors.
        await client.ping()
        assert (await client.get_stream(stream_name)).topics_count == 1

    run(body)


def test_internal_reply_operations(stream_name):
    """Ferry answers CreateTopic as CreateTopicWithAssignments (64) and CreatePartitions as
    CreatePartitionsWithAssignments (65), like a real Iggy server: the SDK takes both, and a
    committed rejection under 64 is still an error."""
    async def body():
        client = await new_client()
        await setup_topic(client, stream_name, partitions=2)
        await client.create_partitions(stream_name, TOPIC, 3)
        topic = await client.get_topic(stream_name, TOPIC)
        assert topic.partitions_count == 5
        assert [p.id for p in topic.partitions] == [0, 1, 2, 3, 4]
        with pytest.raises(RuntimeError) as dup:
            await client.create_topic(stream_name, TOPIC, partitions_count=1)
        assert "already exists" in str(dup.value).lower() or "2013" in str(dup.value)
        with pytest.raises(RuntimeError):
            await client.create_partitions(stream_name, "no-topic", 1)  # R:2010 under 65
        await client.delete_partitions(stream_name, TOPIC, 1)
        assert (await client.get_topic(stream_name, TOPIC)).partitions_count == 4
        await client.ping()

    run(body)


def test_delete_topic_and_stream(stream_name):
    async def body():
        client = await new_client()
        await setup_topic(client, stream_name)
        await client.send_messages(stream_name, TOPIC, 0, [SendMessage("gone")])

        await client.delete_topic(stream_name, TOPIC)
        assert await client.get_topic(stream_name, TOPIC) is None
        assert await client.get_topics(stream_name) == []
        stream = await client.get_stream(stream_name)
        assert (stream.topics_count, stream.messages_count) == (0, 0)
        with pytest.raises(RuntimeError):
            await client.delete_topic(stream_name, TOPIC)

        # A topic re-created under the same name starts empty.
        await client.create_topic(stream_name, TOPIC, partitions_count=1)
        assert await poll(client, stream_name, PollingStrategy.First(), partition=0) == []

        await client.delete_stream(stream_name)
        assert await client.get_stream(stream_name) is None
        assert stream_name not in {s.name for s in await client.get_streams()}
        with pytest.raises(RuntimeError):
            await client.delete_stream(stream_name)

    run(body)


def test_tcp_config_object_is_accepted():
    # Guards the fixture plumbing itself: the config must carry FERRY_ADDR.
    assert tcp_config().server_address == server_addr()
