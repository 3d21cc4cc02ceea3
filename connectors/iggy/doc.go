// Package iggy is the built-in Iggy source, path = "builtin:iggy" in a [type = source]
// connector file: it replicates one topic of another Iggy server (the remote) into the
// topic of its [[streams]] entry on the runtime's own server, exactly once.
//
// The remote topic is read by a member of a consumer group on the remote server
// (consumer_group, default ferry-replicate-<key>) with Ferry's own client. Each message
// is appended with its id, user headers, origin timestamp and payload as the remote
// holds them, plus origin headers naming where it came from (iggy_origin_stream,
// iggy_origin_topic, iggy_origin_partition, iggy_origin_offset and
// iggy_origin_topic_created_at, the remote topic's creation time, which tells a topic
// recreated under the same name from the old one).
//
// The guarantee is exactly once, kept in two halves:
//
//   - the group's offset on the remote is stored only in the batch's AckFunc, which the
//     runtime calls after the local server acknowledged the append and the batch's state
//     was saved: a crash replays, never loses;
//   - at Open the source reads back the last messages of each local partition
//     (sdk.ReadBack), checks that the newest one of each remote partition is still the
//     remote's message at that offset (a purged or recreated remote topic voids the
//     read-back), and skips every remote message at or below it: a replay appends
//     nothing twice.
//
// With partitioning = "same" (remote partition n → local partition n) and "key" (the
// remote partition's number as the partition key) each remote partition's messages go
// to one local partition in order, which the read-back needs; "balanced" spreads batches
// round robin and is at least once (a crash may append the batches in flight again).
//
// It imports only sdk and Ferry's Iggy client: a connector to Iggy is an Iggy client by
// nature (internal/archtest's rule for connectors/iggy says so).
package iggy
