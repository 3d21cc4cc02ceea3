// Package kafka is the built-in Kafka sink, path = "builtin:kafka" in a [type = sink]
// connector file: it writes Iggy messages to Kafka topics (franz-go), exactly once. The
// Kafka source, Kafka to Iggy, is package connectors/kafka/source.
//
// Exactly once rests on Kafka transactions and one transactional id per Iggy partition
// ("ferry-<connector key>-<stream>-<topic>-<partition id>"). Each batch of a partition is
// one transaction holding its records and one record in the compacted offsets topic
// (offsets_topic, default "ferry-offsets"; key "<connector key>/<stream>/<topic>/<partition
// id>", value the last Iggy offset written): the records and the position land together or
// not at all. The offset is committed to Iggy (offset_commit = "sink_controlled", required)
// only after the transaction committed. On every assignment of a partition
// (sdk.PartitionSeeker) the sink starts the partition's producer, whose InitProducerID
// fences any earlier producer of the same id (the previous owner, a zombie after a
// rebalance) and settles its open transaction, then reads the offsets topic read_committed
// and the runtime seeks past what it holds. A transaction that fails, whatever the reason
// (a conflict, a fencing, a commit whose answer was lost), is settled the same way before
// anything is written again: the producer is fenced anew and the offsets topic read, so the
// batch is known to be in Kafka (done) or not (retried), never written twice or skipped.
//
// A transactional id per Iggy partition, rather than per sink instance, is what lets a new
// owner fence the old one: Iggy's consumer group, not Kafka's, decides who owns a
// partition, so Kafka's group-generation fencing (KIP-447) cannot apply; the id is the
// only thing two owners of one partition share.
//
// It imports sdk, franz-go and the Kafka connectors' internal client package only.
package kafka
