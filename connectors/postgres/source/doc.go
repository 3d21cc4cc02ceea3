// Package source is the built-in PostgreSQL source, path = "builtin:postgres" in a
// [type = source] connector file: change data capture by logical replication (pgoutput),
// exactly once into Iggy.
//
// It takes the plugin_config keys of Iggy's postgres_source and its message shape
// (table_name, operation_type, timestamp, data, old_data). Changes are read from a
// persistent replication slot through a publication; the slot's confirmed flush position
// advances only after Iggy acknowledged every change up to it, so a crash replays, never
// loses. Each message carries its transaction's commit LSN and its position inside the
// transaction (headers and a deterministic message id); after a crash the source reads the
// last message of each partition back from Iggy and skips the changes already there, so a
// replay appends nothing twice.
//
// mode = "polling" reads tables past a tracking column as upstream does; the tracking value,
// deletes and marks advance only after Iggy acknowledged the batch (at least once).
//
// It imports only sdk and PostgreSQL drivers (pgx, pglogrepl).
package source
