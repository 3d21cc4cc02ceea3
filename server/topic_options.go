package server

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/ferryio/ferry/iggy/wire"
)

// Topic option rules.
const (
	defaultSegmentSize   = 1 << 30
	minSegmentSize       = 1 << 20
	maxSegmentSize       = 1 << 30
	maxMessagesToSave    = 16_777_216
	defaultMessagesSave  = 1024
	defaultBytesSave     = 1 << 20
	maxPreallocatedBytes = 64 << 30

	// Keys the released apache-iggy 0.9 SDKs send with every CreateTopic (String
	// "replicated" by default) that the protocol reference does not list. They are
	// accepted at creation with any String value and stored verbatim.
	optDurability               = "durability"
	optConsumerOffsetDurability = "consumer_offset_durability"
)

// topicSettings are a topic's settings resolved from an options block.
type topicSettings struct {
	expiry, maxSize uint64
	compression     uint8
	segmentSize     uint64    // the segment size the topic has (or gets) in bytes
	explicit        []wire.KV // canonical kinds, in the order sent
	derived         []wire.KV // defaults filled in at creation
}

var (
	errUnsupportedKey = wire.ErrUnsupportedOptionKey
	errBadValue       = wire.ErrInvalidOptionValue
)

// parseTopicOptions resolves a CreateTopic options block (create = true) or an
// UpdateTopic one. It returns a *wire.ServerError (4041, 4042, 1019) on failure.
func parseTopicOptions(opts []wire.KV, create bool, partitions uint32, segment uint64) (topicSettings, error) {
	ts := topicSettings{expiry: wire.ExpiryNever, maxSize: wire.SizeUnlimited, compression: wire.CompressionNone}
	seg := uint64(defaultSegmentSize)
	if !create {
		seg = segment
	}
	prealloc := false
	seen := map[string]bool{}
	for _, kv := range opts {
		key := string(kv.Key.Raw)
		seen[key] = true
		var canon wire.HeaderValue
		switch key {
		case wire.OptCompressionAlgorithm:
			c, err := compressionValue(kv.Value)
			if err != nil {
				return ts, err
			}
			ts.compression = c
			canon = wire.StringValue(compressionName(c))
		case wire.OptMessageExpiry:
			v, err := uintOrString(kv.Value, parseDuration)
			if err != nil {
				return ts, err
			}
			ts.expiry = v
			if create && v == wire.ExpiryServerDefault {
				ts.expiry = wire.ExpiryNever
			}
			canon = wire.Uint64Value(v)
		case wire.OptMaxTopicSize:
			v, err := uintOrString(kv.Value, parseSize)
			if err != nil {
				return ts, err
			}
			ts.maxSize = v
			if create && v == wire.SizeServerDefault {
				ts.maxSize = wire.SizeUnlimited
			}
			canon = wire.Uint64Value(v)
		case wire.OptSegmentSize, wire.OptEnforceFsync, wire.OptMessagesRequiredToSave,
			wire.OptSizeOfMessagesRequiredToSave, wire.OptPreallocateSegments:
			if !create {
				return ts, fmt.Errorf("option %q cannot be updated: %w", key, errUnsupportedKey)
			}
			var err error
			canon, err = creationOnly(key, kv.Value, &seg, &prealloc)
			if err != nil {
				return ts, err
			}
		case optDurability, optConsumerOffsetDurability:
			if !create {
				return ts, fmt.Errorf("option %q cannot be updated: %w", key, errUnsupportedKey)
			}
			if _, err := kv.Value.AsString(); err != nil || kv.Value.Kind != wire.KindString {
				return ts, fmt.Errorf("option %q: %w", key, errBadValue)
			}
			canon = kv.Value
		default:
			return ts, fmt.Errorf("option %q: %w", key, errUnsupportedKey)
		}
		ts.explicit = append(ts.explicit, wire.StringKV(key, canon))
	}
	ts.segmentSize = seg
	if ts.maxSize != wire.SizeUnlimited && ts.maxSize != wire.SizeServerDefault && ts.maxSize < seg {
		return ts, fmt.Errorf("max_topic_size %d below segment size %d: %w", ts.maxSize, seg, wire.ErrInvalidTopicSize)
	}
	if prealloc && seg*uint64(partitions) > maxPreallocatedBytes {
		return ts, fmt.Errorf("preallocated segments exceed 64 GiB: %w", errBadValue)
	}
	if create {
		for _, d := range []wire.KV{
			wire.StringKV(wire.OptCompressionAlgorithm, wire.StringValue("none")),
			wire.StringKV(wire.OptMessageExpiry, wire.Uint64Value(wire.ExpiryNever)),
			wire.StringKV(wire.OptMaxTopicSize, wire.Uint64Value(wire.SizeUnlimited)),
			wire.StringKV(wire.OptSegmentSize, wire.Uint64Value(defaultSegmentSize)),
			wire.StringKV(wire.OptEnforceFsync, wire.BoolValue(false)),
			wire.StringKV(wire.OptMessagesRequiredToSave, wire.Uint32Value(defaultMessagesSave)),
			wire.StringKV(wire.OptSizeOfMessagesRequiredToSave, wire.Uint64Value(defaultBytesSave)),
			wire.StringKV(wire.OptPreallocateSegments, wire.BoolValue(false)),
		} {
			if !seen[string(d.Key.Raw)] {
				ts.derived = append(ts.derived, d)
			}
		}
	}
	return ts, nil
}

func creationOnly(key string, v wire.HeaderValue, seg *uint64, prealloc *bool) (wire.HeaderValue, error) {
	switch key {
	case wire.OptSegmentSize:
		n, err := uintOrString(v, parseSize)
		if err != nil || n < minSegmentSize || n > maxSegmentSize || n%512 != 0 {
			return v, fmt.Errorf("segment_size: %w", errBadValue)
		}
		*seg = n
		return wire.Uint64Value(n), nil
	case wire.OptEnforceFsync, wire.OptPreallocateSegments:
		b, err := boolOrString(v)
		if err != nil {
			return v, err
		}
		if key == wire.OptPreallocateSegments {
			*prealloc = b
		}
		return wire.BoolValue(b), nil
	case wire.OptMessagesRequiredToSave:
		n, err := uintOrString(v, func(s string) (uint64, error) { return strconv.ParseUint(strings.TrimSpace(s), 10, 32) })
		if err != nil || n < 1 || n > maxMessagesToSave {
			return v, fmt.Errorf("messages_required_to_save: %w", errBadValue)
		}
		return wire.Uint32Value(uint32(n)), nil
	default: // size_of_messages_required_to_save
		n, err := uintOrString(v, parseSize)
		if err != nil || n > 1<<30 {
			return v, fmt.Errorf("size_of_messages_required_to_save: %w", errBadValue)
		}
		return wire.Uint64Value(n), nil
	}
}

func compressionValue(v wire.HeaderValue) (uint8, error) {
	if v.Kind == wire.KindString || v.Kind == wire.KindRaw {
		switch strings.ToLower(strings.TrimSpace(string(v.Raw))) {
		case "none":
			return wire.CompressionNone, nil
		case "gzip":
			return wire.CompressionGzip, nil
		}
		return 0, fmt.Errorf("compression_algorithm %q: %w", v.Raw, errBadValue)
	}
	n, err := v.AsUint64()
	if err != nil || (n != uint64(wire.CompressionNone) && n != uint64(wire.CompressionGzip)) {
		return 0, fmt.Errorf("compression_algorithm: %w", errBadValue)
	}
	return uint8(n), nil
}

func compressionName(c uint8) string {
	if c == wire.CompressionGzip {
		return "gzip"
	}
	return "none"
}

func uintOrString(v wire.HeaderValue, parse func(string) (uint64, error)) (uint64, error) {
	if v.Kind == wire.KindString {
		n, err := parse(string(v.Raw))
		if err != nil {
			return 0, fmt.Errorf("%q: %w: %w", v.Raw, err, errBadValue)
		}
		return n, nil
	}
	n, err := v.AsUint64()
	if err != nil {
		return 0, fmt.Errorf("%w: %w", err, errBadValue)
	}
	return n, nil
}

func boolOrString(v wire.HeaderValue) (bool, error) {
	if v.Kind == wire.KindString {
		switch strings.ToLower(strings.TrimSpace(string(v.Raw))) {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
		return false, fmt.Errorf("%q: %w", v.Raw, errBadValue)
	}
	b, err := v.AsBool()
	if err != nil {
		return false, fmt.Errorf("%w: %w", err, errBadValue)
	}
	return b, nil
}

// parseDuration reads a humantime duration ("7 days", "1h 30m", "500ms") into µs;
// "none"/"never"/"unlimited" mean never, "0"/"server_default" the server default.
func parseDuration(s string) (uint64, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	switch s {
	case "never", "none", "unlimited", "never_expire":
		return wire.ExpiryNever, nil
	case "0", "server_default", "default":
		return wire.ExpiryServerDefault, nil
	}
	units := map[string]float64{
		"us": 1, "usec": 1, "µs": 1, "ms": 1e3, "msec": 1e3, "millis": 1e3,
		"s": 1e6, "sec": 1e6, "secs": 1e6, "second": 1e6, "seconds": 1e6,
		"m": 60e6, "min": 60e6, "mins": 60e6, "minute": 60e6, "minutes": 60e6,
		"h": 3600e6, "hr": 3600e6, "hrs": 3600e6, "hour": 3600e6, "hours": 3600e6,
		"d": 86400e6, "day": 86400e6, "days": 86400e6,
		"w": 7 * 86400e6, "week": 7 * 86400e6, "weeks": 7 * 86400e6,
		"month": 30.44 * 86400e6, "months": 30.44 * 86400e6, "mo": 30.44 * 86400e6,
		"y": 365.25 * 86400e6, "year": 365.25 * 86400e6, "years": 365.25 * 86400e6,
	}
	return parseQuantities(s, units, 1)
}

// parseSize reads a size ("1 GiB", "512MB", "1000") into bytes; "unlimited" is the max.
func parseSize(s string) (uint64, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	switch s {
	case "unlimited", "none":
		return wire.SizeUnlimited, nil
	case "server_default", "default":
		return wire.SizeServerDefault, nil
	}
	units := map[string]float64{
		"b": 1, "kb": 1e3, "kib": 1 << 10, "mb": 1e6, "mib": 1 << 20,
		"gb": 1e9, "gib": 1 << 30, "tb": 1e12, "tib": 1 << 40,
	}
	return parseQuantities(s, units, 1)
}

// parseQuantities sums "<number><unit>" terms; a bare number uses bare as its unit.
func parseQuantities(s string, units map[string]float64, bare float64) (uint64, error) {
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return 0, fmt.Errorf("empty value")
	}
	var total float64
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		j := 0
		for j < len(f) && (f[j] >= '0' && f[j] <= '9' || f[j] == '.') {
			j++
		}
		if j == 0 {
			return 0, fmt.Errorf("no number in %q", f)
		}
		n, err := strconv.ParseFloat(f[:j], 64)
		if err != nil {
			return 0, err
		}
		unit := f[j:]
		if unit == "" && i+1 < len(fields) {
			if _, ok := units[fields[i+1]]; ok {
				unit = fields[i+1]
				i++
			}
		}
		mult := bare
		if unit != "" {
			m, ok := units[unit]
			if !ok {
				return 0, fmt.Errorf("unknown unit %q", unit)
			}
			mult = m
		}
		total += n * mult
	}
	if total >= math.MaxUint64 {
		return math.MaxUint64, nil
	}
	return uint64(total), nil
}

// encodeTopicOptions stores the explicit and derived blocks in TopicConfig.Options:
// [explicit_len u32][explicit TLV][derived TLV].
func encodeTopicOptions(explicit, derived []wire.KV) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(wire.KVsSize(explicit)))
	return wire.AppendKVs(wire.AppendKVs(b, explicit), derived)
}

func decodeTopicOptions(b []byte) (explicit, derived []wire.KV) {
	if len(b) < 4 {
		return nil, nil
	}
	n := int(binary.LittleEndian.Uint32(b))
	if n > len(b)-4 {
		return nil, nil
	}
	explicit, _ = wire.DecodeOptions(b[4 : 4+n])
	derived, _ = wire.DecodeOptions(b[4+n:])
	return explicit, derived
}

// mergeOptions replaces or appends the entries of upd in kvs (by key).
func mergeOptions(kvs, upd []wire.KV) []wire.KV {
	out := slices.Clone(kvs)
	for _, u := range upd {
		i := slices.IndexFunc(out, func(kv wire.KV) bool { return string(kv.Key.Raw) == string(u.Key.Raw) })
		if i >= 0 {
			out[i] = u
		} else {
			out = append(out, u)
		}
	}
	return out
}

func dropOptions(kvs, drop []wire.KV) []wire.KV {
	return slices.DeleteFunc(slices.Clone(kvs), func(kv wire.KV) bool {
		return slices.ContainsFunc(drop, func(d wire.KV) bool { return string(d.Key.Raw) == string(kv.Key.Raw) })
	})
}

func segmentSizeOf(explicit []wire.KV) uint64 {
	if v, ok := wire.LookupKV(explicit, wire.OptSegmentSize); ok {
		if n, err := v.AsUint64(); err == nil {
			return n
		}
	}
	return defaultSegmentSize
}
