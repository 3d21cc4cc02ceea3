package wire

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImports enforces doc.go's promise: no I/O, clock, randomness or Ferry packages.
func TestImports(t *testing.T) {
	allowed := map[string]bool{
		"bytes": true, "encoding/binary": true, "errors": true, "fmt": true, "math": true,
		"math/bits": true, "slices": true, "strconv": true, "unicode/utf8": true,
		"github.com/zeebo/xxh3": true,
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if !allowed[path] {
				t.Errorf("%s imports %q, outside the allowed set", name, path)
			}
		}
	}
}
