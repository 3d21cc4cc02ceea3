package config

import (
	"bytes"
	"fmt"

	"strings"

	toml "github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// docIndex maps every key and table of a TOML document to the line it is written on, with
// array-of-tables indices resolved ("streams[1].batch_length").
type docIndex struct {
	lines map[string]int // path -> line
	byLn  map[int][]string
}

func (x *docIndex) add(path string, line int) {
	if _, ok := x.lines[path]; !ok {
		x.lines[path] = line
	}
	x.byLn[line] = append(x.byLn[line], path)
}

// line returns the line of path, or 0.
func (x *docIndex) line(path string) int { return x.lines[path] }

// has reports whether path is written in the document.
func (x *docIndex) has(path string) bool { _, ok := x.lines[path]; return ok }

// keyAt returns the indexed path on line whose last segment matches the last part of k
// (go-toml's key, which has no array indices); it falls back to k joined with dots.
func (x *docIndex) keyAt(line int, k toml.Key) string {
	if len(k) == 0 {
		return ""
	}
	last := k[len(k)-1]
	paths := x.byLn[line]
	for i := len(paths) - 1; i >= 0; i-- {
		p := paths[i]
		if p == last || strings.HasSuffix(p, "."+last) {
			return p
		}
	}
	return strings.Join(k, ".")
}

// indexDocument parses doc. A syntax error is returned as the go-toml error.
func indexDocument(doc []byte) (*docIndex, error) {
	x := &docIndex{lines: map[string]int{}, byLn: map[int][]string{}}
	lineOf := func(off uint32) int { return bytes.Count(doc[:off], []byte{'\n'}) + 1 }
	arrays := map[string]int{} // array-of-tables path (unindexed form resolved) -> count
	resolve := func(parts []string) string {
		var p string
		for i, s := range parts {
			if i > 0 {
				p += "."
			}
			p += s
			if n, ok := arrays[p]; ok {
				p = fmt.Sprintf("%s[%d]", p, n-1)
			}
		}
		return p
	}
	var table string
	var p unstable.Parser
	p.Reset(doc)
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			parts, first := keyParts(e)
			if e.Kind == unstable.ArrayTable {
				base := resolve(parts[:len(parts)-1])
				if base != "" {
					base += "."
				}
				base += parts[len(parts)-1]
				arrays[base]++
				table = fmt.Sprintf("%s[%d]", base, arrays[base]-1)
			} else {
				table = resolve(parts)
			}
			x.add(table, lineOf(first.Raw.Offset))
		case unstable.KeyValue:
			x.keyValue(e, table, lineOf)
		}
	}
	if err := p.Error(); err != nil {
		// Let go-toml produce its positioned DecodeError for the same input.
		var m map[string]any
		if derr := toml.Unmarshal(doc, &m); derr != nil {
			return nil, derr
		}
		return nil, err
	}
	return x, nil
}

func keyParts(n *unstable.Node) ([]string, *unstable.Node) {
	var parts []string
	var first *unstable.Node
	it := n.Key()
	for it.Next() {
		if first == nil {
			first = it.Node()
		}
		parts = append(parts, string(it.Node().Data))
	}
	return parts, first
}

func (x *docIndex) keyValue(kv *unstable.Node, table string, lineOf func(uint32) int) {
	parts, first := keyParts(kv)
	path := table
	for _, s := range parts {
		if path != "" {
			path += "."
		}
		path += s
		x.add(path, lineOf(first.Raw.Offset))
	}
	x.value(kv.Value(), path, lineOf)
}

func (x *docIndex) value(v *unstable.Node, path string, lineOf func(uint32) int) {
	switch v.Kind {
	case unstable.InlineTable:
		it := v.Children()
		for it.Next() {
			if it.Node().Kind == unstable.KeyValue {
				x.keyValue(it.Node(), path, lineOf)
			}
		}
	case unstable.Array:
		it := v.Children()
		for i := 0; it.Next(); i++ {
			n := it.Node()
			if n.Kind == unstable.InlineTable {
				ip := fmt.Sprintf("%s[%d]", path, i)
				x.add(ip, lineOf(firstOffset(n)))
				x.value(n, ip, lineOf)
			}
		}
	}
}

// firstOffset is the offset of an inline table's first key (inline tables carry no range).
func firstOffset(n *unstable.Node) uint32 {
	if n.Raw.Length > 0 {
		return n.Raw.Offset
	}
	it := n.Children()
	for it.Next() {
		if it.Node().Kind == unstable.KeyValue {
			_, first := keyParts(it.Node())
			return first.Raw.Offset
		}
	}
	return 0
}
