package s3

import (
	"strings"
	"testing"
)

func TestObjectKeyIsUpstreamsName(t *testing.T) {
	c := keyCtx{stream: "app logs", topic: "api/requests", partition: 1, firstTS: 1_710_597_600_000_000} // 2024-03-16T14:00:00Z
	for _, tc := range []struct{ prefix, tpl, format, want string }{
		{"iggy/raw", DefaultPathTemplate, FormatJSONLines, "iggy/raw/app_logs/api_requests/2024-03-16/14/00001-00000000000000000000-00000000000000000099.jsonl"},
		{"", "{stream}/{topic}/{partition}/{date}", FormatJSONArray, "app_logs/api_requests/1/2024-03-16/00001-00000000000000000000-00000000000000000099.json"},
		{"/data/", "{topic}", FormatRaw, "data/api_requests/00001-00000000000000000000-00000000000000000099.bin"},
		{"p", "{timestamp}", FormatParquet, "p/1710597600000/00001-00000000000000000000-00000000000000000099.parquet"},
	} {
		tpl, err := newTemplate(tc.tpl)
		if err != nil {
			t.Fatal(err)
		}
		if got := objectKey(tc.prefix, tpl, c, 0, 99, tc.format); got != tc.want {
			t.Errorf("objectKey(%q, %q) = %q, want %q", tc.prefix, tc.tpl, got, tc.want)
		}
	}
}

func TestFinderMatchesEveryDateOfOnePartitionOnly(t *testing.T) {
	tpl, _ := newTemplate(DefaultPathTemplate)
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
		`{"bucket":"b","region":"r","output_format":"x"}`:                                 `plugin_config.output_format: unknown format "x"`,
		`{"bucket":"b","region":"r","max_file_size":"lots"}`:                              `plugin_config.max_file_size: "lots" is not a size`,
		`{"bucket":"b","region":"r","file_rotation":"messages"}`:                          "plugin_config.max_messages_per_file: required with file_rotation",
		`{"bucket":"b","region":"r","access_key_id":"a"}`:                                 "plugin_config.access_key_id: access_key_id and secret_access_key go together",
		`{"bucket":"b","region":"r","path_template":"{stream}/{day}"}`:                    "plugin_config.path_template: unknown variable {day} at byte 9",
		`{"bucket":"b","region":"r","compression":"lz5"}`:                                 `plugin_config.compression: unknown codec "lz5"`,
		`{"bucket":"b","region":"r","compression_level":"max"}`:                           `plugin_config.compression_level: unknown level "max" (want fastest, default or better)`,
		`{"bucket":"b","region":"r","compression":"snappy","compression_level":"better"}`: `plugin_config.compression_level: applies to zstd only (compression is "snappy")`,
		`{"bucket":"b","region":"r","max_attempts":2,"max_retries":3}`:                    "plugin_config.max_retries: is an alias of max_attempts",
		`{"bucket":"b","region":"r","max_file_size":"6GiB"}`:                              `plugin_config.max_file_size: "6GiB": want more than 0 and at most 5GiB`,
		`{"bucket":"b","region":"r","retry_delay":"soon"}`:                                `plugin_config.retry_delay`,
		`{"bucket":"b","region":"r","bukket":"x"}`:                                        "plugin_config.bukket: unknown field",
		`{"bucket":"b","region":"r","part_size":"4MiB"}`:                                  `plugin_config.part_size: "4MiB": want a size from 5MiB`,
	} {
		_, err := parseConfig([]byte(cfg))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want it to contain %q", cfg, err, want)
		}
	}
}

func TestUpstreamConfigAccepted(t *testing.T) {
	// Upstream's example plugin_config, as the runtime hands it over (JSON).
	s, err := parseConfig([]byte(`{"bucket":"my-data-lake","prefix":"iggy/raw","region":"us-east-1",
		"path_template":"{stream}/{topic}/{date}/{hour}","file_rotation":"size","max_file_size":"8MiB",
		"output_format":"json_lines","include_metadata":true,"include_headers":true,"max_attempts":3,"retry_delay":"1s"}`))
	if err != nil {
		t.Fatal(err)
	}
	if s.maxBytes != 8<<20 || s.format != FormatJSONLines || s.maxAttempts != 3 || s.pathStyle || !s.IncludeHeaders {
		t.Fatalf("resolved %+v", s)
	}
	s, err = parseConfig([]byte(`{"bucket":"b","region":"r","endpoint":"http://x","output_format":"JSONL","max_retries":5,"max_file_size":"10MB"}`))
	if err != nil {
		t.Fatal(err)
	}
	if !s.pathStyle || s.format != FormatJSONLines || s.maxAttempts != 5 || s.maxBytes != 10_000_000 || s.IncludeHeaders || !s.IncludeMetadata {
		t.Fatalf("resolved %+v", s)
	}
}

func TestColumnErrorsNameTheEntry(t *testing.T) {
	for cols, want := range map[string]string{
		`[{"name":"x","type":"int64","path":"a"}]`:                                          `plugin_config.columns: typed columns need output_format = "parquet"`,
		`[{"name":"offset","type":"int64","path":"a"}]`:                                     `plugin_config.columns[0].name: "offset" is taken`,
		`[{"name":"x","type":"int64","path":"a"},{"name":"y","type":"decimal","path":"b"}]`: `plugin_config.columns[1].type: unknown type "decimal"`,
		`[{"name":"x","type":"bool","path":""}]`:                                            `plugin_config.columns[0].path: "" is not a dot-separated field path`,
	} {
		format := `"parquet"`
		if strings.Contains(want, "need output_format") {
			format = `"json_lines"`
		}
		_, err := parseConfig([]byte(`{"bucket":"b","region":"r","output_format":` + format + `,"columns":` + cols + `}`))
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: %v, want %q", cols, err, want)
		}
	}
}
