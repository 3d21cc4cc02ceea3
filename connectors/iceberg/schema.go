package iceberg

import (
	"encoding/base64"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	"github.com/valyala/fastjson"
)

// columnTypes maps each declarable type name to its Iceberg type.
var columnTypes = map[string]iceberg.Type{
	"string": iceberg.PrimitiveTypes.String, "long": iceberg.PrimitiveTypes.Int64, "int": iceberg.PrimitiveTypes.Int32,
	"double": iceberg.PrimitiveTypes.Float64, "float": iceberg.PrimitiveTypes.Float32, "boolean": iceberg.PrimitiveTypes.Bool,
	"timestamptz": iceberg.PrimitiveTypes.TimestampTz, "timestamp": iceberg.PrimitiveTypes.Timestamp,
	"date": iceberg.PrimitiveTypes.Date, "binary": iceberg.PrimitiveTypes.Binary,
}

func typeNames() string {
	names := make([]string, 0, len(columnTypes))
	for n := range columnTypes {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// The metadata columns include_metadata fills.
const (
	colStream    = "iggy_stream"
	colTopic     = "iggy_topic"
	colPartition = "iggy_partition"
	colOffset    = "iggy_offset"
	colTimestamp = "iggy_timestamp"
)

var metadataColumns = []column{
	{colStream, "string", true}, {colTopic, "string", true}, {colPartition, "int", true},
	{colOffset, "long", true}, {colTimestamp, "timestamptz", true},
}

func metadataColumn(name string) bool {
	return slices.ContainsFunc(metadataColumns, func(c column) bool { return c.Name == name })
}

// declaredSchema is the schema of a table the sink creates: the declared columns, then
// the metadata columns when include_metadata is on.
func declaredSchema(c *config) *iceberg.Schema {
	cols := slices.Clone(c.Schema)
	if c.IncludeMetadata {
		cols = append(cols, metadataColumns...)
	}
	fields := make([]iceberg.NestedField, len(cols))
	for i, col := range cols {
		fields[i] = iceberg.NestedField{ID: i + 1, Name: col.Name, Type: columnTypes[strings.ToLower(col.Type)], Required: col.Required}
	}
	return iceberg.NewSchema(0, fields...)
}

var partitionRE = regexp.MustCompile(`^\s*([a-z]+)(\[\d+\])?\(\s*([^()\s]+)\s*\)\s*$`)

// parsePartition reads one partition_by entry: a transform and its source column.
func parsePartition(s string) (iceberg.Transform, string, error) {
	m := partitionRE.FindStringSubmatch(s)
	if m == nil {
		return nil, "", fmt.Errorf("%q: want transform(column), e.g. day(ts) or bucket[16](id)", s)
	}
	tr, err := iceberg.ParseTransform(m[1] + m[2])
	if err != nil {
		return nil, "", fmt.Errorf("%q: %w", s, err)
	}
	return tr, m[3], nil
}

// partitionSpec builds a created table's spec from partition_by; an error names the entry.
func partitionSpec(c *config, sc *iceberg.Schema) (iceberg.PartitionSpec, error) {
	var opts []iceberg.PartitionOption
	for i, p := range c.PartitionBy {
		tr, col, _ := parsePartition(p) // the config's check parsed it
		f, ok := sc.FindFieldByName(col)
		if !ok {
			return iceberg.PartitionSpec{}, fmt.Errorf("plugin_config.partition_by[%d]: %q names no column of the schema", i, col)
		}
		name := col
		if _, id := tr.(iceberg.IdentityTransform); !id {
			name = col + "_" + strings.SplitN(tr.String(), "[", 2)[0]
		}
		opts = append(opts, iceberg.AddPartitionFieldBySourceID(f.ID, name, tr, sc, nil))
	}
	spec, err := iceberg.NewPartitionSpecOpts(opts...)
	if err != nil {
		return spec, fmt.Errorf("plugin_config.partition_by: %w", err)
	}
	return spec, nil
}

// filler appends one value to one column of a record being built.
type filler struct {
	name     string
	required bool
	meta     string // a metadata column's name, "" for a payload field
	typ      arrow.DataType
}

// fillers maps an arrow schema (the table's, as written) to how each column is filled.
func fillers(sc *arrow.Schema, withMeta bool) ([]filler, error) {
	out := make([]filler, sc.NumFields())
	for i, f := range sc.Fields() {
		fl := filler{name: f.Name, required: !f.Nullable, typ: f.Type}
		if withMeta && metadataColumn(f.Name) {
			fl.meta = f.Name
		}
		switch f.Type.ID() {
		case arrow.STRING, arrow.LARGE_STRING, arrow.INT64, arrow.INT32, arrow.FLOAT64, arrow.FLOAT32, arrow.BOOL,
			arrow.TIMESTAMP, arrow.DATE32, arrow.BINARY, arrow.LARGE_BINARY:
		default:
			return nil, fmt.Errorf("column %q has type %s, which the sink does not fill from JSON", f.Name, f.Type)
		}
		out[i] = fl
	}
	return out, nil
}

// value is one converted cell: exactly one field set, or null.
type value struct {
	null bool
	i    int64
	f    float64
	b    bool
	s    string
	raw  []byte
}

// msgMeta is what the metadata columns hold for one message.
type msgMeta struct {
	stream, topic string
	partition     uint32
	offset        uint64
	timestamp     uint64 // µs
}

// convert computes one row of the JSON payload doc; an error names the column and what
// the field held (the message is rejected).
func convert(fs []filler, doc *fastjson.Value, m *msgMeta, out []value) error {
	for i := range fs {
		f := &fs[i]
		if f.meta != "" {
			out[i] = metaValue(f.meta, m)
			continue
		}
		v := doc.Get(f.name)
		if v == nil || v.Type() == fastjson.TypeNull {
			if f.required {
				return fmt.Errorf("column %q: the payload has no field %q (the column is required)", f.name, f.name)
			}
			out[i] = value{null: true}
			continue
		}
		cv, err := toValue(f.typ, v)
		if err != nil {
			return fmt.Errorf("column %q (%s): %w", f.name, f.typ, err)
		}
		out[i] = cv
	}
	return nil
}

func metaValue(name string, m *msgMeta) value {
	switch name {
	case colStream:
		return value{s: m.stream}
	case colTopic:
		return value{s: m.topic}
	case colPartition:
		return value{i: int64(m.partition)}
	case colOffset:
		return value{i: int64(m.offset)}
	}
	return value{i: int64(m.timestamp)}
}

func toValue(t arrow.DataType, v *fastjson.Value) (value, error) {
	switch t.ID() {
	case arrow.STRING, arrow.LARGE_STRING:
		if s, err := v.StringBytes(); err == nil {
			return value{s: string(s)}, nil
		}
		return value{s: string(v.MarshalTo(nil))}, nil // an object, array, number or bool: its JSON text
	case arrow.INT64, arrow.INT32:
		n, err := integer(v)
		if err != nil {
			return value{}, err
		}
		if t.ID() == arrow.INT32 && (n < math.MinInt32 || n > math.MaxInt32) {
			return value{}, fmt.Errorf("%d is out of range of an int", n)
		}
		return value{i: n}, nil
	case arrow.FLOAT64, arrow.FLOAT32:
		if v.Type() != fastjson.TypeNumber {
			return value{}, fmt.Errorf("want a number, got %s", kind(v))
		}
		f, _ := v.Float64()
		return value{f: f}, nil
	case arrow.BOOL:
		b, err := v.Bool()
		if err != nil {
			return value{}, fmt.Errorf("want true or false, got %s", kind(v))
		}
		return value{b: b}, nil
	case arrow.TIMESTAMP:
		return timestamp(t.(*arrow.TimestampType), v)
	case arrow.DATE32:
		s, err := v.StringBytes()
		if err != nil {
			return value{}, fmt.Errorf("want a date \"YYYY-MM-DD\", got %s", kind(v))
		}
		d, err := time.Parse(time.DateOnly, string(s))
		if err != nil {
			return value{}, fmt.Errorf("want a date \"YYYY-MM-DD\", got %q", s)
		}
		return value{i: d.Unix() / 86400}, nil
	}
	s, err := v.StringBytes() // binary: base64 text
	if err != nil {
		return value{}, fmt.Errorf("want base64 text, got %s", kind(v))
	}
	b, err := base64.StdEncoding.DecodeString(string(s))
	if err != nil {
		return value{}, fmt.Errorf("want base64 text: %w", err)
	}
	return value{raw: b}, nil
}

// integer reads a JSON integer (a number without a fraction, within int64).
func integer(v *fastjson.Value) (int64, error) {
	if v.Type() != fastjson.TypeNumber {
		return 0, fmt.Errorf("want an integer, got %s", kind(v))
	}
	n, err := v.Int64()
	if err != nil {
		return 0, fmt.Errorf("want an integer, got the number %s", v.MarshalTo(nil))
	}
	return n, nil
}

// timestamp reads an RFC 3339 string or an integer of microseconds since the epoch.
func timestamp(t *arrow.TimestampType, v *fastjson.Value) (value, error) {
	var us int64
	switch v.Type() {
	case fastjson.TypeNumber:
		n, err := integer(v)
		if err != nil {
			return value{}, err
		}
		us = n
	case fastjson.TypeString:
		s, _ := v.StringBytes()
		ts, err := time.Parse(time.RFC3339Nano, string(s))
		if err != nil {
			return value{}, fmt.Errorf("want an RFC 3339 time or microseconds since the epoch, got %q", s)
		}
		us = ts.UnixMicro()
	default:
		return value{}, fmt.Errorf("want an RFC 3339 time or microseconds since the epoch, got %s", kind(v))
	}
	if t.Unit == arrow.Nanosecond {
		us *= 1000
	}
	return value{i: us}, nil
}

func kind(v *fastjson.Value) string {
	switch v.Type() {
	case fastjson.TypeString:
		s, _ := v.StringBytes()
		return strconv.Quote(string(s))
	case fastjson.TypeNumber:
		return "the number " + string(v.MarshalTo(nil))
	case fastjson.TypeTrue, fastjson.TypeFalse:
		return string(v.MarshalTo(nil))
	case fastjson.TypeObject:
		return "an object"
	}
	return "an array"
}

// appendRow appends one converted row to b, whose fields are fs in order.
func appendRow(b *array.RecordBuilder, fs []filler, row []value) {
	for i := range fs {
		v := &row[i]
		fb := b.Field(i)
		if v.null {
			fb.AppendNull()
			continue
		}
		switch x := fb.(type) {
		case *array.StringBuilder:
			x.Append(v.s)
		case *array.LargeStringBuilder:
			x.Append(v.s)
		case *array.Int64Builder:
			x.Append(v.i)
		case *array.Int32Builder:
			x.Append(int32(v.i))
		case *array.Float64Builder:
			x.Append(v.f)
		case *array.Float32Builder:
			x.Append(float32(v.f))
		case *array.BooleanBuilder:
			x.Append(v.b)
		case *array.TimestampBuilder:
			x.Append(arrow.Timestamp(v.i))
		case *array.Date32Builder:
			x.Append(arrow.Date32(v.i))
		case *array.BinaryBuilder:
			x.Append(v.raw)
		}
	}
}
