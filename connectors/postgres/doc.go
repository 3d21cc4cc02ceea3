// Package postgres is the built-in exactly-once PostgreSQL sink, path = "builtin:postgres".
//
// It takes the official Iggy PostgreSQL sink's plugin_config keys and table layout, so a
// table that sink filled can be continued, and adds exactly-once delivery: each batch is
// written in one transaction together with the partition's last offset in the offsets
// table (default ferry_offsets); on every assignment the sink reads those offsets back and
// the runtime seeks there (sdk.PartitionSeeker). Rows at or below the stored offset are
// skipped inside the transaction, so a batch delivered twice (a crash between the database
// commit and Iggy's offset store, a rebalance race) is written once. Rows the database
// refuses (a constraint, a type) are returned as sdk.RejectedMessages for on_failure.
//
// With flush_interval set (group commit, group.go) one transaction per partition spans
// several batches and commits by age, size, reassignment or Close; the offset goes to the
// Committer only after that commit, so the guarantee is the same.
package postgres
