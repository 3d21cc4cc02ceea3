"""Publishes numbered QoS 1 messages with paho-mqtt (an MQTT client nobody at Ferry wrote).

usage: mqtt_publish.py HOST PORT PREFIX TOPICS FROM TO

Message i (FROM <= i < TO) goes to PREFIX/t<i % TOPICS> with the payload "t<k>:<j>", k the
topic's number and j = i // TOPICS its index in that topic. Exits 0 once the broker
acknowledged every message (PUBACK), 1 on a failure.
"""
import sys

import paho.mqtt.client as mqtt

host, port, prefix, topics, first, last = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="", clean_session=True)
c.max_inflight_messages_set(1000)
c.max_queued_messages_set(0)
c.connect(host, port, keepalive=30)
c.loop_start()
infos = []
for i in range(first, last):
    k, j = i % topics, i // topics
    infos.append(c.publish(f"{prefix}/t{k}", f"t{k}:{j}", qos=1))
for info in infos:
    info.wait_for_publish(timeout=60)
    if not info.is_published():
        print("not acknowledged:", info.mid, file=sys.stderr)
        sys.exit(1)
c.disconnect()
c.loop_stop()
