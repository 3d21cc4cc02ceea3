package docstest

import (
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	doc := "# T\n\n<!-- docs-test: run -->\n```sh\necho a\necho b\n```\n\n```toml\n[x]\n```\n" +
		"<!-- docs-test: run until \"caught up\" cleanup \"bash stop.sh\" needs \"PG\" -->\n```sh\nferry run\n```\n" +
		"<!-- docs-test: skip: needs systemd -->\n```bash\nsystemctl start ferry\n```\n" +
		"<!-- docs-test: run ferry \"testdata/api.toml\" needs \"PROM\" -->\n```sh\ncurl -f http://127.0.0.1:8081/health\n```\n"
	got, err := Parse("d.md", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := []Block{
		{File: "d.md", Line: 4, Script: "echo a\necho b\n", Run: true},
		{File: "d.md", Line: 13, Script: "ferry run\n", Run: true, Until: "caught up", Cleanup: "bash stop.sh", Needs: "PG"},
		{File: "d.md", Line: 17, Script: "systemctl start ferry\n", Reason: "needs systemd"},
		{File: "d.md", Line: 21, Script: "curl -f http://127.0.0.1:8081/health\n", Run: true, Ferry: "testdata/api.toml", Needs: "PROM"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
	if got[1].Name() != "d.md:13" {
		t.Fatalf("name %q", got[1].Name())
	}
}

func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"text\n```sh\nls\n```\n", "d.md:2: the sh block has no marker"},
		{"<!-- docs-test: maybe -->\n```sh\nls\n```\n", `d.md:1: marker "<!-- docs-test: maybe -->"`},
		{"<!-- docs-test: skip: -->\n```sh\nls\n```\n", `d.md:1: marker`},
		{"<!-- docs-test: run -->\n```sh\nls\n", "d.md:2: the sh block is never closed"},
		{"<!-- docs-test: run until x -->\n```sh\nls\n```\n", `d.md:1: marker "<!-- docs-test: run until x -->": cannot read " until x"`},
		{"<!-- docs-test: run cleanup \"x\" -->\n```sh\nls\n```\n", `d.md:1: marker "<!-- docs-test: run cleanup \"x\" -->": cleanup goes with until`},
		{"<!-- docs-test: run ferry testdata/api.toml -->\n```sh\nls\n```\n", `d.md:1: marker "<!-- docs-test: run ferry testdata/api.toml -->": cannot read " ferry testdata/api.toml" (want until, cleanup, needs or ferry`},
		{"<!-- docs-test: running -->\n```sh\nls\n```\n", `d.md:1: marker "<!-- docs-test: running -->": want run`},
	} {
		_, err := Parse("d.md", []byte(tc.doc))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want it to start with %q", tc.doc, err, tc.want)
		}
	}
}

// TestRepositoryDocs: every sh block of the repository's docs carries a marker.
func TestRepositoryDocs(t *testing.T) {
	docs, err := Docs("../..")
	if err != nil {
		t.Fatal(err)
	}
	run := 0
	for _, d := range docs {
		blocks, err := Read("../..", d)
		if err != nil {
			t.Error(err)
		}
		for _, b := range blocks {
			if b.Run {
				run++
			}
		}
	}
	if run == 0 {
		t.Fatal("no block of the docs is marked to run")
	}
}
