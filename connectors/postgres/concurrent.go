package postgres

// MaxInFlight implements sdk.ConcurrentSink: each Consume writes its partition's rows and
// offsets row in a transaction of its own on a pooled connection (with flush_interval, its
// partition's open group), so batches of different partitions may be written at once, as
// many as the pool has connections.
func (s *Sink) MaxInFlight() int { return max(s.cfg.MaxConnections, 1) }
