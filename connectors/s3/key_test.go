package s3

import (
	"regexp"
	"strings"
	"testing"
)

func TestObjectKeyIsUpstreamsName(t *testing.T) {
	// Names sanitizing leaves alone, under templates holding {stream} and {topic} as path
	// segments: upstream's keys, as older versions wrote them.
	c := keyCtx{stream: "app-logs", topic: "api.requests_v2", partition: 1, firstTS: 1_710_597_600_000_000} // 2024-03-16T14:00:00Z
	for _, tc := range []struct {
		prefix, tpl string
		format      format
		want        string
	}{
		{"iggy/raw", defaultPathTemplate, formatJSONLines, "iggy/raw/app-logs/api.requests_v2/2024-03-16/14/00001-00000000000000000000-00000000000000000099.jsonl"},
		{"", "{stream}/{topic}/{partition}/{date}", formatJSONArray, "app-logs/api.requests_v2/1/2024-03-16/00001-00000000000000000000-00000000000000000099.json"},
		{"/data/", "{topic}/{stream}", formatRaw, "data/api.requests_v2/app-logs/00001-00000000000000000000-00000000000000000099.bin"},
		{"p", "{timestamp}/{stream}/x/{topic}", formatParquet, "p/1710597600000/app-logs/x/api.requests_v2/00001-00000000000000000000-00000000000000000099.parquet"},
	} {
		tpl, err := newTemplate(tc.tpl)
		if err != nil {
			t.Fatal(err)
		}
		if got := objectKey(tc.prefix, tpl, c, 0, 99, tc.format); got != tc.want {
			t.Errorf("objectKey(%q, %q) = %q, want %q", tc.prefix, tc.tpl, got, tc.want)
		}
		if tpl.extended(c) {
			t.Errorf("%q: extended, want the key as written", tc.tpl)
		}
	}
}

// TestKeyTellsStreamsAndTopicsApart: whatever the template, keys differ when the stream or
// the topic does: a template lacking {stream} or {topic} as a path segment gets it
// appended, and a name that sanitizing changes is followed by '~' and a hash of the name
// (two names that sanitize alike, and a clean name equal to another's sanitized form,
// key apart). Each finder matches its own partition's keys only.
func TestKeyTellsStreamsAndTopicsApart(t *testing.T) {
	const ts = 1_710_597_600_000_000
	for _, tc := range []struct{ tpl, key string }{
		// What a template lacking a segment keys by, for stream "shop", topic "orders".
		{"{stream}/{date}", "shop/2024-03-16/orders/00000-00000000000000000000-00000000000000000099.jsonl"},
		{"{date}", "2024-03-16/shop/orders/00000-00000000000000000000-00000000000000000099.jsonl"},
		{"logs/", "logs/shop/orders/00000-00000000000000000000-00000000000000000099.jsonl"},
		{"{stream}-{topic}/{date}", "shop-orders/2024-03-16/shop/orders/00000-00000000000000000000-00000000000000000099.jsonl"},
		{"{topic}x/{stream}", "ordersx/shop/orders/00000-00000000000000000000-00000000000000000099.jsonl"},
		{defaultPathTemplate, "shop/orders/2024-03-16/14/00000-00000000000000000000-00000000000000000099.jsonl"},
	} {
		tpl, err := newTemplate(tc.tpl)
		if err != nil {
			t.Fatal(err)
		}
		if got := objectKey("", tpl, keyCtx{stream: "shop", topic: "orders", firstTS: ts}, 0, 99, formatJSONLines); got != tc.key {
			t.Errorf("%q: key %s, want %s", tc.tpl, got, tc.key)
		}
	}
	pairs := [][2]string{{"shop", "orders"}, {"shop", "refunds"}, {"é", "t"}, {"ü", "t"}, {"_", "t"},
		{"_~" + keyName("é")[2:], "t"}, {"a b", "t"}, {"a_b", "t"}, {"shop", "orders/x"}, {"shop", "orders_x"}}
	for _, tplText := range []string{"{stream}/{date}", "{topic}", "{date}/{hour}", "{stream}{topic}", defaultPathTemplate, "x"} {
		tpl, _ := newTemplate(tplText)
		keys := map[string][2]string{}
		for _, p := range pairs {
			c := keyCtx{stream: p[0], topic: p[1], partition: 3, firstTS: ts}
			k := objectKey("pre", tpl, c, 10, 19, formatParquet)
			if other, ok := keys[k]; ok {
				t.Errorf("%q: %v and %v share the key %s", tplText, other, p, k)
			}
			keys[k] = p
		}
		for _, p := range pairs {
			f := newFinder("pre", tpl, keyCtx{stream: p[0], topic: p[1], partition: 3})
			for k, owner := range keys {
				if _, _, ok := f.offsets(k); ok != (owner == p) {
					t.Errorf("%q: the finder of %v matches %s (of %v): %v", tplText, p, k, owner, ok)
				}
				if !strings.HasPrefix(k, f.listPrefix) && owner == p {
					t.Errorf("%q: %v lists under %s, its key is %s", tplText, p, f.listPrefix, k)
				}
			}
		}
	}
	if got := keyName("é"); !regexp.MustCompile(`^_~[0-9a-f]{8}$`).MatchString(got) || got == keyName("ü") {
		t.Errorf("keyName(é) = %s, keyName(ü) = %s", got, keyName("ü"))
	}
}

// TestLegacyFinder: where objects are keyed otherwise than path_template says alone, the
// legacy finder matches the keys older versions wrote (template as written, names only
// sanitized), never a key of the new layout; where nothing changed there is none.
func TestLegacyFinder(t *testing.T) {
	tpl, _ := newTemplate("{stream}/{date}")
	c := keyCtx{stream: "shop", topic: "orders", partition: 0, firstTS: 1_710_597_600_000_000}
	f, ok := newLegacyFinder("pre", tpl, c)
	if !ok || f.listPrefix != "pre/shop/" {
		t.Fatalf("legacy finder %v, %+v", ok, f)
	}
	old := "pre/shop/2024-03-16/00000-00000000000000000000-00000000000000000099.jsonl"
	if _, last, ok := f.offsets(old); !ok || last != 99 {
		t.Fatalf("legacy key %s: %d, %v", old, last, ok)
	}
	if _, _, ok := f.offsets(objectKey("pre", tpl, c, 0, 99, formatJSONLines)); ok {
		t.Fatal("the legacy finder matches a key of the new layout")
	}
	if _, _, ok := newFinder("pre", tpl, c).offsets(old); ok {
		t.Fatal("the finder matches a legacy key")
	}
	tpl, _ = newTemplate(defaultPathTemplate)
	if _, ok := newLegacyFinder("pre", tpl, c); ok {
		t.Fatal("a legacy finder for a layout that did not change")
	}
	c.stream = "é"
	if f, ok := newLegacyFinder("pre", tpl, c); !ok || f.listPrefix != "pre/_/orders/" {
		t.Fatalf("legacy finder of a sanitized name: %v, %+v", ok, f)
	}
}

func TestFinderMatchesEveryDateOfOnePartitionOnly(t *testing.T) {
	tpl, _ := newTemplate(defaultPathTemplate)
	c := keyCtx{stream: "s", topic: "t", partition: 2}
	f := newFinder("pre", tpl, c)
	if f.listPrefix != "pre/s/t/" {
		t.Fatalf("listPrefix %q, want pre/s/t/", f.listPrefix)
	}
	for key, want := range map[string]int64{
		"pre/s/t/2024-03-16/14/00002-00000000000000000000-00000000000000000099.parquet": 99,
		"pre/s/t/2031-01-01/00/00002-00000000000000000100-00000000000000000250.jsonl":   250,
		"pre/s/t/2024-03-16/14/00003-00000000000000000000-00000000000000000999.parquet": -1, // another partition
		"pre/s/tt/2024-03-16/14/00002-00000000000000000000-00000000000000000999.jsonl":  -1, // another topic
		"pre/s/t/2024-03-16/14/00002-00000000000000000000-00000000000000000999.csv":     -1,
		"pre/s/t/x/14/00002-00000000000000000000-00000000000000000999.jsonl":            -1,
	} {
		_, last, ok := f.offsets(key)
		if got := map[bool]int64{true: int64(last), false: -1}[ok]; got != want {
			t.Errorf("%s: last %d, want %d", key, got, want)
		}
	}
	// A streamed object's partial key: of this partition, never an object key.
	for key, want := range map[string]bool{
		"pre/s/t/2024-03-16/14/00002-00000000000000000100.0123456789abcdef.partial": true,
		"pre/s/t/2024-03-16/14/00003-00000000000000000100.0123456789abcdef.partial": false,
		"pre/s/t/2024-03-16/14/00002-00000000000000000100.0123456789abcdef.parquet": false,
	} {
		if got := f.partial(key); got != want {
			t.Errorf("%s: partial %v, want %v", key, got, want)
		}
		if _, _, ok := f.offsets(key); ok {
			t.Errorf("%s: counted as an object", key)
		}
	}
	// No time variable: list the partition's directory itself.
	tpl, _ = newTemplate("{stream}/{topic}/{partition}")
	if f := newFinder("", tpl, c); f.listPrefix != "s/t/2/" {
		t.Fatalf("listPrefix %q, want s/t/2/", f.listPrefix)
	}
	// The date first: list everything under the prefix.
	tpl, _ = newTemplate("{date}/{stream}")
	if f := newFinder("x", tpl, c); f.listPrefix != "x/" {
		t.Fatalf("listPrefix %q, want x/", f.listPrefix)
	}
}

func TestConfigErrorsNameTheField(t *testing.T) {
	for cfg, want := range map[string]string{
		`{"region":"r"}`: "plugin_config.bucket: required field is missing",
		`{"bucket":"b","region":"r","output_format":"x"}`:                                 `plugin_config.output_format: unknown value "x" (want json_lines, json_array, raw or parquet)`,
		`{"bucket":"b","region":"r","max_file_size":"lots"}`:                              `plugin_config.max_file_size: "lots" is not a size`,
		`{"bucket":"b","region":"r","file_rotation":"messages"}`:                          "plugin_config.max_messages_per_file: required with file_rotation",
		`{"bucket":"b","region":"r","access_key_id":"a"}`:                                 "plugin_config.access_key_id: access_key_id and secret_access_key go together",
		`{"bucket":"b","region":"r","path_template":"{stream}/{day}"}`:                    "plugin_config.path_template: unknown variable {day} at byte 9",
		`{"bucket":"b","region":"r","compression":"lz5"}`:                                 `plugin_config.compression: unknown value "lz5" (want zstd, snappy, gzip or none)`,
		`{"bucket":"b","region":"r","compression_level":"max"}`:                           `plugin_config.compression_level: unknown value "max" (want fastest, default or better)`,
		`{"bucket":"b","region":"r","compression":"snappy","compression_level":"better"}`: `plugin_config.compression_level: applies to zstd only (compression is "snappy")`,
		`{"bucket":"b","region":"r","max_attempts":2,"max_retries":3}`:                    "plugin_config.max_retries: is an alias of max_attempts",
		`{"bucket":"b","region":"r","max_file_size":"6GiB"}`:                              `plugin_config.max_file_size: "6GiB" is above the maximum "5GiB"`,
		`{"bucket":"b","region":"r","retry_delay":"soon"}`:                                `plugin_config.retry_delay`,
		`{"bucket":"b","region":"r","bukket":"x"}`:                                        "plugin_config.bukket: unknown field",
		`{"bucket":"b","region":"r","part_size":"4MiB"}`:                                  `plugin_config.part_size: "4MiB" is below the minimum "5MiB"`,
	} {
		_, err := Config.Parse([]byte(cfg))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want it to contain %q", cfg, err, want)
		}
	}
}

func TestUpstreamConfigAccepted(t *testing.T) {
	// Upstream's example plugin_config, as the runtime hands it over (JSON).
	s, err := Config.Parse([]byte(`{"bucket":"my-data-lake","prefix":"iggy/raw","region":"us-east-1",
		"path_template":"{stream}/{topic}/{date}/{hour}","file_rotation":"size","max_file_size":"8MiB",
		"output_format":"json_lines","include_metadata":true,"include_headers":true,"max_attempts":3,"retry_delay":"1s"}`))
	if err != nil {
		t.Fatal(err)
	}
	if s.maxBytes != 8<<20 || s.Format != formatJSONLines || s.MaxAttempts != 3 || s.PathStyle || !s.IncludeHeaders {
		t.Fatalf("resolved %+v", s)
	}
	s, err = Config.Parse([]byte(`{"bucket":"b","region":"r","endpoint":"http://x","output_format":"JSONL","max_retries":5,"max_file_size":"10MB"}`))
	if err != nil {
		t.Fatal(err)
	}
	if !s.PathStyle || s.Format != formatJSONLines || s.MaxAttempts != 5 || s.maxBytes != 10_000_000 || s.IncludeHeaders || !s.IncludeMetadata {
		t.Fatalf("resolved %+v", s)
	}
}

func TestColumnErrorsNameTheEntry(t *testing.T) {
	for cols, want := range map[string]string{
		`[{"name":"x","type":"int64","path":"a"}]`:                                          `plugin_config.columns: typed columns need output_format = "parquet"`,
		`[{"name":"offset","type":"int64","path":"a"}]`:                                     `plugin_config.columns[0].name: "offset" is taken`,
		`[{"name":"x","type":"int64","path":"a"},{"name":"y","type":"decimal","path":"b"}]`: `plugin_config.columns[1].type: unknown value "decimal" (want string, int64, float64, bool or json)`,
		`[{"name":"x","type":"bool","path":""}]`:                                            `plugin_config.columns[0].path: "" is not a dot-separated field path`,
	} {
		format := `"parquet"`
		if strings.Contains(want, "need output_format") {
			format = `"json_lines"`
		}
		_, err := Config.Parse([]byte(`{"bucket":"b","region":"r","output_format":` + format + `,"columns":` + cols + `}`))
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: %v, want %q", cols, err, want)
		}
	}
}
