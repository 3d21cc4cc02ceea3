package transform

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/bufbuild/protocompile"
	"github.com/bufbuild/protocompile/linker"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// protoSchema is the message type proto_convert encodes JSON into and decodes binary
// protobuf from when its table names a schema (schema_path or descriptor_set).
type protoSchema struct {
	msg protoreflect.MessageDescriptor
}

// loadProtoSchema reads schema_path (a .proto file compiled in-process, imports resolved
// against include_paths) or else descriptor_set (a serialized FileDescriptorSet as an array
// of bytes), and finds message_type in it. Upstream prefers schema_path when both are set;
// so does Ferry. Neither set gives nil: the schemaless conversions. Upstream logs a missing
// file or message and falls back to those; Ferry refuses the table, naming the key.
func loadProtoSchema(t *table, includes []string, messageType string, hasType bool) (*protoSchema, error) {
	pathV, hasPath := t.get("schema_path")
	setV, hasSet := t.get("descriptor_set")
	var set []byte
	if hasSet {
		var err error
		if set, err = descriptorBytes(t, setV); err != nil {
			return nil, err
		}
	}
	if !hasPath && !hasSet {
		return nil, nil
	}
	key := "descriptor_set"
	if hasPath {
		key = "schema_path"
	}
	if !hasType {
		return nil, t.errorf("message_type", "required with %s (the message to convert)", key)
	}
	var find func(protoreflect.FullName) (protoreflect.Descriptor, error)
	if hasPath {
		path, isStr := pathV.(string)
		if !isStr {
			return nil, t.errorf("schema_path", "want a string, got %s", typeName(pathV))
		}
		files, err := compileProto(path, includes)
		if err != nil {
			return nil, t.errorf("schema_path", "%v", err)
		}
		find = files.AsResolver().FindDescriptorByName
	} else {
		var fds descriptorpb.FileDescriptorSet
		if err := proto.Unmarshal(set, &fds); err != nil {
			return nil, t.errorf("descriptor_set", "not a serialized FileDescriptorSet: %v", err)
		}
		files, err := protodesc.NewFiles(&fds)
		if err != nil {
			return nil, t.errorf("descriptor_set", "%v", err)
		}
		find = files.FindDescriptorByName
	}
	d, err := find(protoreflect.FullName(messageType))
	if err != nil {
		return nil, t.errorf("message_type", "no message %q in %s", messageType, key)
	}
	msg, isMsg := d.(protoreflect.MessageDescriptor)
	if !isMsg {
		return nil, t.errorf("message_type", "%q in %s is not a message", messageType, key)
	}
	return &protoSchema{msg: msg}, nil
}

// descriptorBytes reads descriptor_set as upstream's Vec<u8>: an array of integers 0–255.
func descriptorBytes(t *table, v any) ([]byte, error) {
	l, isList := v.([]any)
	if !isList {
		return nil, t.errorf("descriptor_set", "want an array of bytes (integers 0-255), got %s", typeName(v))
	}
	b := make([]byte, len(l))
	for i, e := range l {
		var n float64
		switch x := e.(type) {
		case int64:
			n = float64(x)
		case float64:
			n = x
		default:
			return nil, t.errorf(fmt.Sprintf("descriptor_set[%d]", i), "want a byte (an integer 0-255), got %s", typeName(e))
		}
		if n != math.Trunc(n) || n < 0 || n > 255 {
			return nil, t.errorf(fmt.Sprintf("descriptor_set[%d]", i), "want a byte (an integer 0-255), got %v", e)
		}
		b[i] = byte(n)
	}
	return b, nil
}

// compileProto compiles the .proto file at path. Its name (what imports and errors call it)
// is its path relative to the first include path holding it, as protoc and upstream's
// protox do; a file under none of them is named by its base name, with its own directory
// searched after the include paths. google/protobuf/*.proto (the well-known types) are
// always importable.
func compileProto(path string, includes []string) (linker.Files, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() { // a device or fifo could be read forever
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	name := ""
	for _, inc := range includes {
		root, err := filepath.Abs(inc)
		if err != nil {
			continue
		}
		if rel, err := filepath.Rel(root, abs); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			name = filepath.ToSlash(rel)
			break
		}
	}
	imports := append([]string(nil), includes...)
	if name == "" {
		name = filepath.Base(abs)
		imports = append(imports, filepath.Dir(abs))
	}
	c := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: imports}),
	}
	return c.Compile(context.Background(), name)
}

// encode writes v's JSON (protojson's mapping: proto or JSON field names, 64-bit integers
// as numbers or strings, enums by name or number, bytes as base64) as the message's binary
// form. Keys the message does not have are skipped, as upstream's encoder skips them.
func (s *protoSchema) encode(jsonText []byte) ([]byte, error) {
	m := dynamicpb.NewMessage(s.msg)
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(jsonText, m); err != nil {
		return nil, fmt.Errorf("json payload is not a %s: %w", s.msg.FullName(), err)
	}
	b, err := (proto.MarshalOptions{Deterministic: true}).Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", s.msg.FullName(), err)
	}
	return b, nil
}

// decode reads binary protobuf b as the message and writes its JSON (protojson with proto
// field names, as upstream names fields). A proto3 field at its default (0, "", false, the
// first enum value, an empty list) holds that value, so it is written: left out, a reader
// of the JSON would take it for missing (a NULL column downstream). Only a field with
// explicit presence (optional, a message, a oneof member) can be unset, and is left out.
func (s *protoSchema) decode(b []byte) ([]byte, error) {
	m := dynamicpb.NewMessage(s.msg)
	if err := proto.Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("raw payload is not a %s: %w", s.msg.FullName(), err)
	}
	out, err := (protojson.MarshalOptions{UseProtoNames: true, EmitDefaultValues: true}).Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", s.msg.FullName(), err)
	}
	return out, nil
}
