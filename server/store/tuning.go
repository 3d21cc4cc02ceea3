package store

import (
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Pebble tuning for a small embedded store (issue 11: the quickstart's 33 MB
// of messages took ~490 MB on disk, seven write-ahead log files of ~72 MB).
//
// The log is what cost the disk, not the tables. Pebble preallocates every
// WAL file to 1.1 × MemTableSize (72 MB for 64 MiB), and a new memtable (so
// a new WAL file) starts at 256 KiB and doubles up to MemTableSize: a fresh
// store writing 33 MB opens eight log files and allocates 72 MB to each.
// With WAL preallocation off (noPreallocFS) a log file takes the blocks
// written to it, so the quickstart's data takes 1.00× its bytes.
//
// Measured and kept as they are:
//
//   - WAL recycling stays on: turning it off (a fresh file for every
//     memtable) cost 10–25% of append throughput. At most
//     MemTableStopWritesThreshold + 1 = 3 flushed log files are kept for
//     reuse, each the size of what was written to it (≤ a memtable).
//   - The memtable stays at 64 MiB: 4 MiB cost half the append throughput
//     (many more flushes and L0 compactions of large values).
//
// So under sustained writes the directory holds the tables plus at most
// about five memtables' worth of log (active, queued, recycled: ~320 MiB);
// a store smaller than one memtable holds just its data.
// TestQuickstartFootprint holds the quickstart to at most 2× the messages'
// bytes and TestLogsAreNotPreallocated keeps preallocation off.
const memTableSize = 64 << 20

func pebbleOptions(fs vfs.FS, logger pebble.Logger) *pebble.Options {
	return &pebble.Options{
		FS:                 noPreallocFS{fs},
		Logger:             logger,
		FormatMajorVersion: pebble.FormatNewest,
		MemTableSize:       memTableSize,
	}
}

// noPreallocFS is fs whose created and recycled files ignore Preallocate. Pebble
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

func (f noPreallocFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.FS.ReuseForWrite(oldname, newname, category)
	if err != nil {
		return nil, err
	}
	return noPreallocFile{file}, nil
}
