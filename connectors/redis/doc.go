// Package redis is the built-in Redis Streams sink, path = "builtin:redis" in a
// [type = sink] connector file (go-redis v9).
//
// Each message becomes one entry (XADD) of the stream its stream_key template names, its
// payload in one field (field, default "payload") or its JSON object's top-level fields
// as the entry's fields (fields_from_json). The guarantee is exactly once without state of
// its own, when stream_key names {partition}: each entry's id is derived from the Iggy
// offset (<offset+1>-<partition>), so a stream's ids grow with the offsets of the one
// partition that writes it, and a replay after a crash is refused by Redis as an id equal
// to or below the stream's top (counted as written). The offset is committed to Iggy only
// after Redis acknowledged the entries (sink_controlled, through sdk.Positions; or by the
// runtime after Consume, after_consuming).
//
// A stream_key without {partition} mixes partitions in one stream, whose ids could not
// grow with each partition's offsets: Redis then assigns the ids ("*") and the sink is at
// least once (a crash may append the batch in flight again).
//
// It imports only sdk and go-redis.
package redis
