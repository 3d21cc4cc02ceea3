package config

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

func scanSink(key string, version int, batch string) string {
	return fmt.Sprintf("type = \"sink\"\nkey = %q\nenabled = true\nversion = %d\nname = \"n\"\npath = \"builtin:null\"\n\n[[streams]]\nstream = \"s\"\ntopics = [\"t\"]\nschema = \"raw\"\nbatch_length = %s\n", key, version, batch)
}

// TestScanConnectors: the files that load are loaded, each one that does not is listed
// with its error (and the type and key its header names, when it can be read), two files
// for one (type, key, version) are both listed and leave that key out, and the same
// directory fails LoadConnectors whole.
func TestScanConnectors(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "a.toml", scanSink("a", 0, "10"))
	writeFile(t, dir, "b.toml", scanSink("b", 0, `"ten"`))
	junk := writeFile(t, dir, "c.toml", "[[[ not toml")
	writeFile(t, dir, "d1.toml", scanSink("d", 3, "10"))
	writeFile(t, dir, "d2.toml", scanSink("d", 3, "20"))
	writeFile(t, dir, "e.toml", scanSink("e", 0, "5"))

	conns, bad, err := ScanConnectors(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, s := range conns.Sinks {
		keys = append(keys, s.Key)
	}
	if !slices.Equal(keys, []string{"a", "e"}) || len(conns.Sources) != 0 {
		t.Fatalf("loaded sinks %v, sources %d; want a and e only", keys, len(conns.Sources))
	}
	type got struct {
		file, typ, key string
	}
	var gots []got
	for _, fe := range bad {
		gots = append(gots, got{fe.File, string(fe.Type), fe.Key})
		var ce *Error
		if !errors.As(fe.Err, &ce) || ce.File != fe.File {
			t.Errorf("refusal of %s: %v is not a *config.Error naming the file", fe.File, fe.Err)
		}
	}
	want := []got{{dir + "/b.toml", "sink", "b"}, {junk, "", ""}, {dir + "/d2.toml", "sink", "d"}}
	if !slices.Equal(gots, want) {
		t.Fatalf("refused %v, want %v", gots, want)
	}
	wantErr(t, bad[0].Err, dir+"/b.toml", 12, "streams[0].batch_length", "")
	if msg := bad[2].Error(); msg != dir+`/d2.toml: key: sink "d" version 3 is also defined in `+dir+"/d1.toml; remove one of the two files or change its version" {
		t.Fatalf("duplicate refused with %q", msg)
	}
	if _, err := LoadConnectors(dir, nil); err == nil {
		t.Fatal("LoadConnectors accepted the directory")
	}
	if _, _, err := ScanConnectors(dir+"/missing", nil); !errors.Is(err, ErrConfigDirMissing) {
		t.Fatalf("missing dir: %v, want ErrConfigDirMissing", err)
	}
}
