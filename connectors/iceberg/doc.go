// Package iceberg is the built-in Apache Iceberg sink, path = "builtin:iceberg": upstream
// Iggy's iceberg_sink plugin_config keys, a SQL catalog (PostgreSQL) besides REST, the
// local filesystem or S3 as storage, tables created from a declared schema, and
// exactly-once appends.
//
// Exactly once rests on the table's snapshot history. A flush writes the buffered rows
// of each (table, Iggy partition) as Parquet data files, then makes one append commit per
// table whose snapshot summary carries, per Iggy (stream, topic, partition), the last
// offset the table holds (ferry.offset.<connector>.<stream>.<topic>.<partition>). The
// commit asserts the table's current snapshot (a compare-and-swap in the catalog); on a
// conflict or an error of unknown outcome it reloads the table and reads the offsets
// again before trying again, so a range already in the table (ours, or another owner's
// during a rebalance) is never appended twice. A partition's offset is committed to Iggy
// (offset_commit = "sink_controlled", required) only after the catalog commit, and on
// every assignment the sink walks each table's snapshot history to the newest offset of
// the partition and the runtime seeks past it (sdk.PartitionSeeker). Data files written
// by a flush that never committed are never referenced by any snapshot. docs/iceberg.md
// has the details.
//
// It imports sdk, apache/iceberg-go (with arrow-go), pgx's database/sql driver and
// fastjson only.
package iceberg
