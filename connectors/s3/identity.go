package s3

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// identity is what an object holds: a range of one partition of one stream's topic. It is
// written into the object's user metadata at upload, so that an existing object can be
// told apart from someone else's: a conditional PUT refused with 412 counts as written
// only when the object there is this very range (its metadata says so), and the listing on
// assignment resumes after an object only if it is this partition's.
type identity struct {
	stream, topic string
	partition     uint32
	first, last   uint64
	// lastTS is the server timestamp of the message at last (0: not recorded). A seek
	// gives it to the runtime, which checks that the partition still holds that message:
	// one purged while the sink was stopped is then found rewound, not resumed past.
	lastTS uint64
}

// User metadata keys (x-amz-meta-…); stream and topic names are percent-encoded, as
// metadata must be ASCII.
const (
	metaStream    = "ferry-stream"
	metaTopic     = "ferry-topic"
	metaPartition = "ferry-partition"
	metaOffsets   = "ferry-offsets" // "<first>-<last>"
	metaLastTS    = "ferry-last-timestamp"
)

func (id identity) meta() map[string]string {
	m := map[string]string{
		metaStream:    url.PathEscape(id.stream),
		metaTopic:     url.PathEscape(id.topic),
		metaPartition: strconv.FormatUint(uint64(id.partition), 10),
		metaOffsets:   fmt.Sprintf("%d-%d", id.first, id.last),
	}
	if id.lastTS > 0 {
		m[metaLastTS] = strconv.FormatUint(id.lastTS, 10)
	}
	return m
}

// same reports whether two identities name the same range of the same partition (the
// timestamp counts only when both know it).
func (id identity) same(o identity) bool {
	a, b := id, o
	if a.lastTS == 0 || b.lastTS == 0 {
		a.lastTS, b.lastTS = 0, 0
	}
	return a == b
}

// String names the identity in errors and logs.
func (id identity) String() string {
	return fmt.Sprintf("stream %q topic %q partition %d offsets %d-%d", id.stream, id.topic, id.partition, id.first, id.last)
}

// identityOf reads an object's identity from its user metadata (keys in any case, as
// servers return them); ok is false when it has none (an object an older version, or
// anything but Ferry, wrote) or a malformed one.
func identityOf(meta map[string]string) (id identity, ok bool) {
	get := func(k string) (string, bool) {
		for mk, v := range meta {
			if strings.EqualFold(mk, k) {
				return v, true
			}
		}
		return "", false
	}
	st, ok1 := get(metaStream)
	tp, ok2 := get(metaTopic)
	pt, ok3 := get(metaPartition)
	of, ok4 := get(metaOffsets)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return id, false
	}
	var err error
	if id.stream, err = url.PathUnescape(st); err != nil {
		return id, false
	}
	if id.topic, err = url.PathUnescape(tp); err != nil {
		return id, false
	}
	p, err := strconv.ParseUint(pt, 10, 32)
	if err != nil {
		return id, false
	}
	id.partition = uint32(p)
	if _, err := fmt.Sscanf(of, "%d-%d", &id.first, &id.last); err != nil {
		return id, false
	}
	if ts, ok := get(metaLastTS); ok {
		if id.lastTS, err = strconv.ParseUint(ts, 10, 64); err != nil {
			return id, false
		}
	}
	return id, true
}

// errForeign is what an upload answers when its key already holds an object that is not
// its range (another identity, or none): never counted as written.
var errForeign = errors.New("the key holds another object")

// foreignError is errForeign with both identities.
type foreignError struct {
	bucket, key string
	want        identity
	got         identity
	known       bool // got is set: the object has Ferry's identity metadata
}

func (e *foreignError) Error() string {
	held := "an object without Ferry's identity metadata (written by an older version, or not by Ferry)"
	if e.known {
		held = "the object of " + e.got.String()
	}
	return fmt.Sprintf("upload of %s to s3://%s/%s refused: the key already holds %s; not counted as written "+
		"(another sink or tool writes the same keys: a bucket, prefix and path_template of its own for each sink keeps them apart)",
		e.want, e.bucket, e.key, held)
}

func (e *foreignError) Is(target error) bool { return target == errForeign }
