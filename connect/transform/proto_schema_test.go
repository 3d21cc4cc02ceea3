package transform

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/ferryio/ferry/sdk"
)

const (
	orderSchema = "include_paths = [\"testdata/proto\"]\nschema_path = \"testdata/proto/shop/order.proto\"\nmessage_type = \"shop.Order\"\n"
	// orderJSON is a shop.Order with every field set, and a key the message does not have.
	orderJSON = `{"id":7,"customer_name":"Ann","status":"PAID","lines":[{"sku":"a","qty":2}],` +
		`"total":{"currency":"EUR","amount":1.5},"note":"AQI=","placed":"1970-01-01T00:00:01Z","extra":true}`
	// orderHex is orderJSON's shop.Order, worked out by hand from the wire format.
	orderHex = "0807" + // 1 id = 7
		"1203416e6e" + // 2 customer_name = "Ann"
		"1801" + // 3 status = PAID
		"2205" + "0a0161" + "1002" + // 4 lines[0] = {sku "a", qty 2}
		"2a0e" + "0a03455552" + "11000000000000f83f" + // 5 total = {currency "EUR", amount 1.5}
		"32020102" + // 6 note = {1, 2}
		"3a020801" // 7 placed = {seconds 1}
	// orderDefaults is protojson's mapping of an empty shop.Order: every implicit-presence
	// field at its default; total, placed and discount (explicit presence) left out.
	orderDefaults = `{"id":"0","customer_name":"","status":"STATUS_UNSPECIFIED","lines":[],"note":""}`
	// orderOut is protojson's mapping of orderHex with proto field names.
	orderOut = `{"id":"7","customer_name":"Ann","status":"PAID","lines":[{"sku":"a","qty":2}],` +
		`"total":{"currency":"EUR","amount":1.5},"note":"AQI=","placed":"1970-01-01T00:00:01Z"}`
)

// orderDescriptorSet compiles testdata/proto/shop/order.proto and returns a serialized
// FileDescriptorSet of it and its imports (dependencies first, as protoc writes one), as a
// TOML array of bytes; withDeps false leaves the imports out.
func orderDescriptorSet(t testing.TB, withDeps bool) string {
	t.Helper()
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: []string{"testdata/proto"}})}
	files, err := c.Compile(context.Background(), "shop/order.proto")
	if err != nil {
		t.Fatal(err)
	}
	var fds descriptorpb.FileDescriptorSet
	seen := map[string]bool{}
	var add func(f protoreflect.FileDescriptor)
	add = func(f protoreflect.FileDescriptor) {
		if seen[f.Path()] {
			return
		}
		seen[f.Path()] = true
		if withDeps {
			for i := range f.Imports().Len() {
				add(f.Imports().Get(i).FileDescriptor)
			}
		}
		fds.File = append(fds.File, protodesc.ToFileDescriptorProto(f))
	}
	add(files[0])
	b, err := proto.Marshal(&fds)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	sb.WriteString("[")
	for i, x := range b {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprint(&sb, x)
	}
	sb.WriteString("]")
	return sb.String()
}

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestProtoConvertSchema(t *testing.T) {
	fixClock(t)
	ms := now().UnixMilli()
	withMeta := strings.Replace(protoOpts, "include_metadata = false", "include_metadata = true", 1)
	set := "include_paths = []\nmessage_type = \"shop.Order\"\ndescriptor_set = " + orderDescriptorSet(t, true) + "\n"
	noInclude := func(s string) string { return strings.Replace(s, "include_paths = [\".\"]\n", "", 1) }
	type tc struct {
		name, doc string
		in        Payload
		want      string // render(payload), or the error after "transform proto_convert: "
		wantErr   bool
	}
	var tests []tc
	for _, src := range []struct{ name, keys string }{{"schema_path", orderSchema}, {"descriptor_set", set}} {
		doc := func(from, to, opts string) string { return noInclude(protoTable(from, to, opts, src.keys)) }
		tests = append(tests,
			tc{src.name + ": json to proto", doc("json", "proto", protoOpts), jsonPayload(t, orderJSON),
				"raw " + string(mustHex(t, orderHex)), false},
			tc{src.name + ": json to proto, keys renamed first", noInclude(protoTable("json", "proto", protoOpts, src.keys+"field_mappings = { n = \"customer_name\" }\n")),
				jsonPayload(t, `{"n":"Ann"}`), "raw \x12\x03Ann", false},
			tc{src.name + ": json to proto, JSON names and numbers accepted", doc("json", "proto", protoOpts), jsonPayload(t, `{"id":"7","customerName":"Ann","status":1}`),
				"raw \x08\x07\x12\x03Ann\x18\x01", false},
			tc{src.name + ": text to proto", doc("text", "proto", protoOpts), Payload{Format: sdk.SchemaText, Bytes: []byte(orderJSON)},
				"raw " + string(mustHex(t, orderHex)), false},
			tc{src.name + ": text to proto, not JSON: as is (upstream)", doc("text", "proto", protoOpts), Payload{Format: sdk.SchemaText, Bytes: []byte("id: 7")},
				"proto id: 7", false},
			tc{src.name + ": proto to json", doc("proto", "json", protoOpts), Payload{Format: sdk.SchemaRaw, Bytes: mustHex(t, orderHex)},
				"json " + orderOut, false},
			// A proto3 field at its default (0, "", false, the first enum value, no
			// element) is that value, not a missing key: downstream a missing key is null.
			// Only an explicit-presence field (optional, a message) can be unset.
			tc{src.name + ": proto to json, empty message", doc("proto", "json", protoOpts), Payload{Format: sdk.SchemaRaw},
				"json " + orderDefaults, false},
			tc{src.name + ": proto to json, zero values kept", doc("proto", "json", protoOpts),
				Payload{Format: sdk.SchemaRaw, Bytes: mustHex(t, "2203"+"0a0161"+"4000")}, // lines[0] = {sku "a"}, discount = 0
				`json {"id":"0","customer_name":"","status":"STATUS_UNSPECIFIED","lines":[{"sku":"a","qty":0}],"note":"","discount":0}`, false},
			tc{src.name + ": proto to json with metadata", doc("proto", "json", withMeta), Payload{Format: sdk.SchemaRaw, Bytes: []byte{0x08, 0x07}},
				fmt.Sprintf(`json {"data":%s,"metadata":{"converted_from":"protobuf","timestamp":%d,"message_type":"shop.Order"}}`,
					strings.Replace(orderDefaults, `"id":"0"`, `"id":"7"`, 1), ms), false},
			tc{src.name + ": proto text to json: schemaless path", doc("proto", "json", protoOpts), Payload{Format: sdk.SchemaProto, Bytes: []byte(`{"a":1}`)},
				`json {"a":1}`, false},
			tc{src.name + ": json not fitting the message", doc("json", "proto", protoOpts), jsonPayload(t, `{"id":"x"}`),
				"json payload is not a shop.Order: ", true},
			tc{src.name + ": json not an object", doc("json", "proto", protoOpts), jsonPayload(t, `[1]`),
				"json payload is not a shop.Order: ", true},
			tc{src.name + ": bytes not a message", doc("proto", "json", protoOpts), Payload{Format: sdk.SchemaRaw, Bytes: []byte{0xff}},
				"raw payload is not a shop.Order: ", true},
			tc{src.name + ": truncated message", doc("proto", "json", protoOpts), Payload{Format: sdk.SchemaRaw, Bytes: mustHex(t, orderHex)[:5]},
				"raw payload is not a shop.Order: ", true},
		)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Build(specsFromTOML(t, tt.doc, "proto_convert"))
			if err != nil {
				t.Fatal(err)
			}
			checkProtoApply(t, c, tt.in, tt.want, tt.wantErr)
		})
	}
}

func TestProtoConvertSchemaConfigErrors(t *testing.T) {
	doc := func(keys string) string {
		return strings.Replace(protoTable("json", "proto", protoOpts, keys), "include_paths = [\".\"]\n", "", 1)
	}
	const inc = "include_paths = [\"testdata/proto\"]\n"
	tests := []struct{ name, doc, want string }{
		{"missing file", doc(inc + "schema_path = \"testdata/proto/nope.proto\"\nmessage_type = \"shop.Order\"\n"),
			"transforms.proto_convert.schema_path: invalid transform: stat testdata/proto/nope.proto: no such file or directory"},
		{"unparsable .proto", doc(inc + "schema_path = \"testdata/proto/broken.proto\"\nmessage_type = \"Broken\"\n"),
			"transforms.proto_convert.schema_path: invalid transform: broken.proto:4:1: syntax error"},
		{"import not under include_paths", doc("include_paths = [\"testdata\"]\nschema_path = \"testdata/proto/shop/order.proto\"\nmessage_type = \"shop.Order\"\n"),
			"transforms.proto_convert.schema_path: invalid transform: proto/shop/order.proto:8:8: open testdata/shop/money.proto: no such file or directory"},
		{"schema_path a directory", doc(inc + "schema_path = \"testdata/proto\"\nmessage_type = \"shop.Order\"\n"),
			"transforms.proto_convert.schema_path: invalid transform: testdata/proto: not a regular file"},
		{"schema_path not a string", doc(inc + "schema_path = 1\nmessage_type = \"shop.Order\"\n"),
			"transforms.proto_convert.schema_path: invalid transform: want a string, got an integer"},
		{"unknown message type", doc(inc + "schema_path = \"testdata/proto/shop/order.proto\"\nmessage_type = \"shop.Nope\"\n"),
			"transforms.proto_convert.message_type: invalid transform: no message \"shop.Nope\" in schema_path"},
		{"type not a message", doc(inc + "schema_path = \"testdata/proto/shop/order.proto\"\nmessage_type = \"shop.Order.Status\"\n"),
			"transforms.proto_convert.message_type: invalid transform: \"shop.Order.Status\" in schema_path is not a message"},
		{"message_type missing", doc(inc + "schema_path = \"testdata/proto/shop/order.proto\"\n"),
			"transforms.proto_convert.message_type: invalid transform: required with schema_path"},
		{"descriptor_set not a FileDescriptorSet", doc("include_paths = []\ndescriptor_set = [255]\nmessage_type = \"shop.Order\"\n"),
			"transforms.proto_convert.descriptor_set: invalid transform: not a serialized FileDescriptorSet: "},
		{"descriptor_set without the imports", doc("include_paths = []\ndescriptor_set = " + orderDescriptorSet(t, false) + "\nmessage_type = \"shop.Order\"\n"),
			"transforms.proto_convert.descriptor_set: invalid transform: "},
		{"descriptor_set unknown message type", doc("include_paths = []\ndescriptor_set = " + orderDescriptorSet(t, true) + "\nmessage_type = \"Order\"\n"),
			"transforms.proto_convert.message_type: invalid transform: no message \"Order\" in descriptor_set"},
		{"descriptor_set element not a byte", doc("include_paths = []\ndescriptor_set = [1, 256]\nmessage_type = \"shop.Order\"\n"),
			"transforms.proto_convert.descriptor_set[1]: invalid transform: want a byte (an integer 0-255), got 256"},
		{"descriptor_set element a string", doc("include_paths = []\ndescriptor_set = [\"a\"]\nmessage_type = \"shop.Order\"\n"),
			"transforms.proto_convert.descriptor_set[0]: invalid transform: want a byte (an integer 0-255), got a string"},
		{"descriptor_set not an array", doc("include_paths = []\ndescriptor_set = \"x\"\nmessage_type = \"shop.Order\"\n"),
			"transforms.proto_convert.descriptor_set: invalid transform: want an array of bytes (integers 0-255), got a string"},
		{"descriptor_set checked with schema_path", doc(inc + "schema_path = \"testdata/proto/shop/order.proto\"\ndescriptor_set = \"x\"\nmessage_type = \"shop.Order\"\n"),
			"transforms.proto_convert.descriptor_set: invalid transform: want an array"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Build(specsFromTOML(t, tt.doc, "proto_convert"))
			if err == nil || !errors.Is(err, ErrConfig) || !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("got %v, want prefix %q", err, tt.want)
			}
		})
	}
}
