// Package s3 is the built-in S3 sink, path = "builtin:s3": upstream Iggy's s3_sink
// plugin_config keys and object names, Parquet besides its JSON Lines, JSON array and raw
// formats, and exactly-once delivery.
//
// Exactly once rests on three rules. An object's key is a pure function of its messages
// (stream, topic, partition, first and last offset, and the first message's timestamp for
// {date}, {hour} and {timestamp}), and it is uploaded with a conditional PUT
// (If-None-Match: *), so writing the same messages again is refused. A partition's offset
// is committed (offset_commit = "sink_controlled", required) only after its object is in
// the bucket. And on every assignment the sink lists the partition's objects and the
// runtime seeks past the highest last offset found (sdk.PartitionSeeker), so what was
// uploaded but not yet committed when the process died is never written twice, and what
// was buffered but not uploaded is polled again. An object larger than part_size streams
// through a multipart upload to a partial key the listing ignores and is then copied
// inside the server to its key, completed with If-None-Match: * (stream.go). docs/s3.md
// has the details.
//
// It imports sdk, the AWS SDK for Go v2, parquet-go and fastjson only.
package s3
