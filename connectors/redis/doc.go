// Package redis is the built-in Redis Streams sink and source, path = "builtin:redis" in a
// [type = sink] or [type = source] connector file (go-redis v9).
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
// The source (source.go) reads streams through a consumer group (XREADGROUP) and is at
// least once with no loss, and exactly once into Iggy across its own crashes: an entry is
// acknowledged (XACK) only in the AckFunc of its batch, after Iggy confirmed it, so it stays
// pending until then; at open the topic's last messages are read back (sdk.ReadBack, the
// entry's stream and id are headers) and a pending entry found there is acknowledged
// instead of sent again. Entries pending with a dead consumer are claimed (XAUTOCLAIM)
// after claim_idle. Duplicates can come only from entries beyond the read-back (an XACK
// that kept failing, a claim from a consumer that was slow, not dead); they are counted.
//
// It imports only sdk and go-redis.
package redis
