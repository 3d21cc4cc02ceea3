package iceberg

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// offsetPrefix starts every snapshot summary property the sink writes.
const offsetPrefix = "ferry.offset."

// offsetKey is the snapshot summary property holding the last offset of one Iggy
// partition that the table holds, for one connector.
func offsetKey(connector, stream, topic string, partition uint32) string {
	return fmt.Sprintf("%s%s.%s.%s.%d", offsetPrefix, connector, stream, topic, partition)
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
						return nil, fmt.Errorf("snapshot %d of table %s: summary property %s = %q is not an offset",
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

// carried returns the sink's offset properties of the table's newest snapshot that has
// any, so a new snapshot keeps every partition's offset (also those it does not write).
func carried(tbl *table.Table) iceberg.Properties {
	out := iceberg.Properties{}
	md := tbl.Metadata()
	for snap := md.CurrentSnapshot(); snap != nil; {
		if snap.Summary != nil {
			for k, v := range snap.Summary.Properties {
				if strings.HasPrefix(k, offsetPrefix) {
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
