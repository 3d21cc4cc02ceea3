package store

import (
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Pebble tuning for a small embedded store (issue 11: the quickstart's 33 MB
// of messages took ~490 MB on disk, seven write-ahead log files of ~72 MB).
//
// The log is what costs disk, not the tables. Pebble preallocates every WAL
// file to 1.1 × MemTableSize and keeps up to MemTableStopWritesThreshold + 1
// obsolete WAL files to recycle, each at its full size; with a 64 MiB
// memtable that is ~280 MB of WAL whatever the data. Here:
//
//   - WAL recycling is off: an obsolete log file is deleted at once
//     (walCleaner), so on disk there are only the logs of unflushed memtables.
//   - WAL preallocation is off (noPreallocFS): a log file takes the blocks
//     written to it, not 1.1 × MemTableSize up front.
//   - The memtable stays at 64 MiB: smaller memtables were measured to cost
//     half the append throughput (many more flushes and L0 compactions of
//     large values), and with the two changes above the memtable size no
//     longer decides the disk footprint: at most MemTableStopWritesThreshold
//     (2) unflushed memtables' worth of log, i.e. ≤ 128 MiB above the tables
//     under sustained writes, and only the data itself for a store smaller
//     than that.
//
// TestQuickstartFootprint holds the result to at most 2× the messages' bytes.
const memTableSize = 64 << 20

func pebbleOptions(fs vfs.FS, logger pebble.Logger) *pebble.Options {
	return &pebble.Options{
		FS:                 noPreallocFS{fs},
		Logger:             logger,
		FormatMajorVersion: pebble.FormatNewest,
		MemTableSize:       memTableSize,
		Cleaner:            walCleaner{},
	}
}

// walCleaner deletes obsolete files like pebble.DeleteCleaner and turns off
// WAL recycling: Pebble recycles no log when its Cleaner needs the contents
// of the files it cleans, which it learns from a marker method only
// pebble.ArchiveCleaner has. walCleaner carries that marker one embedding
// level down, where it is promoted, while DeleteCleaner's Clean, one level
// up, is the one that runs.
type walCleaner struct {
	pebble.DeleteCleaner
	noRecycleMarker
}

type noRecycleMarker struct{ pebble.ArchiveCleaner }

// noPreallocFS is fs whose created files ignore Preallocate. Pebble
// preallocates only WAL and MANIFEST files; without it they take the blocks
// actually written.
type noPreallocFS struct{ vfs.FS }

func (f noPreallocFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.FS.Create(name, category)
	if err != nil {
		return nil, err
	}
	return noPreallocFile{file}, nil
}

type noPreallocFile struct{ vfs.File }

func (noPreallocFile) Preallocate(offset, length int64) error { return nil }
