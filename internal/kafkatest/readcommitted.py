"""Reads a Kafka topic from its start to its end with kafka-python, read_committed, and
prints one JSON line per record: partition, offset, key and value (base64; null when
absent) and headers ([name, base64 value] pairs). The tests judge the Kafka sink with it: a
client nobody here wrote.

usage: python readcommitted.py BOOTSTRAP TOPIC
"""
import base64
import json
import sys
import time

from kafka import KafkaConsumer, TopicPartition


def b64(b):
    return None if b is None else base64.b64encode(b).decode()


def main():
    bootstrap, topic = sys.argv[1], sys.argv[2]
    c = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed",
                      enable_auto_commit=False, auto_offset_reset="earliest", group_id=None,
                      consumer_timeout_ms=1000)
    parts = c.partitions_for_topic(topic)
    deadline = time.time() + 60
    while parts is None and time.time() < deadline:
        time.sleep(0.2)
        parts = c.partitions_for_topic(topic)
    if parts is None:
        sys.exit("no topic %s" % topic)
    tps = [TopicPartition(topic, p) for p in sorted(parts)]
    c.assign(tps)
    c.seek_to_beginning(*tps)
    # Under read_committed the end offsets are the last stable offsets. A transaction's
    # markers are written after its commit returned: wait until no transaction is open
    # (the stable offsets reach the high watermarks, read by a read_uncommitted client).
    hw = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_uncommitted", group_id=None)
    while True:
        ends, highs = c.end_offsets(tps), hw.end_offsets(tps)
        if all(ends[tp] >= highs[tp] for tp in tps):
            break
        if time.time() > deadline:
            sys.exit("transactions still open on %s: stable offsets %s, high watermarks %s" % (topic, ends, highs))
        time.sleep(0.2)
    hw.close()
    out = sys.stdout
    while any(c.position(tp) < ends[tp] for tp in tps):
        if time.time() > deadline + 240:
            sys.exit("timed out reading %s: positions %s, ends %s" % (topic, {tp.partition: c.position(tp) for tp in tps}, {tp.partition: e for tp, e in ends.items()}))
        for tp, recs in c.poll(timeout_ms=500).items():
            for r in recs:
                out.write(json.dumps({"partition": r.partition, "offset": r.offset, "key": b64(r.key),
                                      "value": b64(r.value), "headers": [[k, b64(v)] for k, v in r.headers]}) + "\n")
    c.close()


if __name__ == "__main__":
    main()
