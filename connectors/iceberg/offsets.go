package iceberg

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// The snapshot summary properties the sink writes, per connector and Iggy partition: the
// last offset the table holds (offsetPrefix), the server timestamp of that message
// (timestampPrefix: the runtime checks it to find a partition purged while the sink was
// away) and, once the partition was purged, its generation (generationPrefix; none is
// generation 0): offsets of an older generation belong to purged messages.
const (
	ferryPrefix      = "ferry."
	offsetPrefix     = ferryPrefix + "offset."
	timestampPrefix  = ferryPrefix + "timestamp."
	generationPrefix = ferryPrefix + "generation."
)

// offsetKey is the snapshot summary property holding the last offset of one Iggy
// partition that the table holds, for one connector.
func offsetKey(connector, stream, topic string, partition uint32) string {
	return fmt.Sprintf("%s%s.%s.%s.%d", offsetPrefix, connector, stream, topic, partition)
}

// siblingKey is the property of prefix (timestampPrefix, generationPrefix) for the
// partition of an offsetKey.
func siblingKey(offKey, prefix string) string {
	return prefix + strings.TrimPrefix(offKey, offsetPrefix)
}

// mark is what the table's snapshots say of one partition.
type mark struct {
	last       uint64 // the last offset the table holds
	timestamp  uint64 // its message's server timestamp, 0 when not recorded
	generation uint64
}

// tableMarks is tableOffsets with each partition's timestamp and generation, read from
// the snapshot that holds its offset (the three are written and carried together).
func tableMarks(tbl *table.Table, keys []string) (map[string]mark, error) {
	all := make([]string, 0, 3*len(keys))
	for _, k := range keys {
		all = append(all, k, siblingKey(k, timestampPrefix), siblingKey(k, generationPrefix))
	}
	found, err := tableOffsets(tbl, all)
	if err != nil {
		return nil, err
	}
	out := map[string]mark{}
	for _, k := range keys {
		last, ok := found[k]
		if !ok {
			continue
		}
		out[k] = mark{last: last, timestamp: found[siblingKey(k, timestampPrefix)], generation: found[siblingKey(k, generationPrefix)]}
	}
	return out, nil
}

// tableOffsets walks the table's snapshots from the current one back through its
// parents and returns, for each key asked, the value of the newest snapshot that holds
// it: the last offset of that partition in the table. A snapshot another writer made
// (without the keys) is passed over. Every snapshot the sink commits carries forward
// the keys of the one before, so the walk usually ends at the first snapshot.
func tableOffsets(tbl *table.Table, keys []string) (map[string]uint64, error) {
	out := map[string]uint64{}
	md := tbl.Metadata()
	for snap := md.CurrentSnapshot(); snap != nil && len(out) < len(keys); {
		if snap.Summary != nil {
			for _, k := range keys {
				if _, done := out[k]; done {
					continue
				}
				if v, ok := snap.Summary.Properties[k]; ok {
					n, err := strconv.ParseUint(v, 10, 64)
					if err != nil {
						return nil, fmt.Errorf("snapshot %d of table %s: summary property %s = %q is not a number",
							snap.SnapshotID, strings.Join(tbl.Identifier(), "."), k, v)
					}
					out[k] = n
				}
			}
		}
		if snap.ParentSnapshotID == nil {
			break
		}
		snap = md.SnapshotByID(*snap.ParentSnapshotID)
	}
	return out, nil
}

// carried returns the sink's properties of the table's newest snapshot that has any, so
// a new snapshot keeps every partition's offset, timestamp and generation (also those of
// partitions it does not write).
func carried(tbl *table.Table) iceberg.Properties {
	out := iceberg.Properties{}
	md := tbl.Metadata()
	for snap := md.CurrentSnapshot(); snap != nil; {
		if snap.Summary != nil {
			for k, v := range snap.Summary.Properties {
				if strings.HasPrefix(k, ferryPrefix) {
					out[k] = v
				}
			}
			if len(out) > 0 {
				return out
			}
		}
		if snap.ParentSnapshotID == nil {
			break
		}
		snap = md.SnapshotByID(*snap.ParentSnapshotID)
	}
	return out
}
