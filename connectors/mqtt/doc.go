// Package mqtt is the built-in MQTT source and sink, path = "builtin:mqtt" in a
// [type = source] or a [type = sink] connector file, on Eclipse Paho's MQTT 3.1.1 client
// (github.com/eclipse/paho.mqtt.golang).
//
// The source (MQTT → Iggy) is at least once with no gap: it keeps a persistent session on
// the broker (clean session off, a stable client id), subscribes at QoS 1 or 2, and
// acknowledges each message to the broker (PUBACK, PUBREC) only in the batch's AckFunc,
// which the runtime calls after Iggy acknowledged the batch. A crash before that leaves the
// messages unacknowledged in the session, and the broker sends them again: duplicates,
// never a loss. MQTT has no way to ask the broker what a subscriber already received, so
// it is not exactly once: after a crash expect again at most the broker's in-flight
// window per client (mosquitto's max_inflight_messages) — the messages sent and not yet
// acknowledged.
//
// The sink (Iggy → MQTT) publishes each message's payload as is, on a topic rendered from
// a template ({stream}, {topic}, {partition}, {header:NAME}, {json:a.b}), at QoS 0, 1 or 2;
// with offset_commit = "sink_controlled" a partition's offset is committed only after the
// broker acknowledged every message up to it (PUBACK at QoS 1, PUBCOMP at QoS 2): at least
// once, the offset never ahead of the broker.
//
// It imports only sdk and the Paho client.
package mqtt
