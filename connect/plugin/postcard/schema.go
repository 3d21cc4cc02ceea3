package postcard

import (
	"fmt"

	"github.com/ferryio/ferry/sdk"
)

// schemas lists Schema variants in declaration order: the postcard index is the position.
var schemas = [...]sdk.Schema{
	sdk.SchemaJSON,       // 0
	sdk.SchemaRaw,        // 1
	sdk.SchemaText,       // 2
	sdk.SchemaProto,      // 3
	sdk.SchemaFlatBuffer, // 4
	sdk.SchemaAvro,       // 5 (plugins built with SDK <= 0.3.0 cannot decode it)
}

// SchemaIndex returns the postcard variant index of s.
func SchemaIndex(s sdk.Schema) (uint32, error) {
	for i, v := range schemas {
		if v == s {
			return uint32(i), nil
		}
	}
	return 0, fmt.Errorf("postcard: schema %q has no variant: %w", s, ErrUnknownVariant)
}

// SchemaFromIndex returns the schema whose postcard variant index is i.
func SchemaFromIndex(i uint32) (sdk.Schema, error) {
	if i >= uint32(len(schemas)) {
		return "", fmt.Errorf("postcard: schema index %d: %w", i, ErrUnknownVariant)
	}
	return schemas[i], nil
}

// Schema reads a Schema variant.
func (r *Reader) Schema() sdk.Schema {
	i := r.U32()
	if r.err != nil {
		return ""
	}
	s, err := SchemaFromIndex(i)
	if err != nil {
		r.fail(ErrUnknownVariant, "schema")
		return ""
	}
	return s
}
