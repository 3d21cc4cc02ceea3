package sdk

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

type format string

const (
	formatLines format = "json_lines"
	formatArray format = "json_array"
)

type column struct {
	Name string
	Type string
}

type testConfig struct {
	Bucket     string
	Every      time.Duration
	Size       ByteSize
	Format     format
	Attempts   int
	Password   Secret
	User       string
	Tags       []string
	Headers    map[string]string
	Endpoint   string
	Style      bool
	StyleSet   bool
	Rotation   string
	MaxPerFile uint64
	Ratio      float64
	Columns    []column
}

var testConfigDecl = NewConfig(func(c *testConfig, f *Fields) {
	f.String("bucket", &c.Bucket).Required().NonEmpty().Doc("the bucket")
	f.Duration("flush_interval", &c.Every).Default(10 * time.Second).Min(time.Millisecond).Max(time.Hour).Doc("idle flush")
	f.Size("max_file_size", &c.Size).Default(8 * MiB).Min(1).Max(5 * GiB)
	Enum(f, "output_format", &c.Format, Choice(formatLines, "jsonl", "jsonlines"), Choice(formatArray)).Default(formatLines)
	f.Int("max_attempts", &c.Attempts).Alias("max_retries").Default(3).Min(1).Max(1000)
	f.Secret("password", &c.Password)
	f.String("username", &c.User)
	f.Strings("tags", &c.Tags)
	f.StringMap("headers", &c.Headers)
	f.URL("endpoint", &c.Endpoint, "http", "https")
	f.Bool("path_style", &c.Style).Present(&c.StyleSet)
	f.String("file_rotation", &c.Rotation).Default("size")
	f.Uint64("max_messages_per_file", &c.MaxPerFile)
	f.Float("ratio", &c.Ratio).Min(0).Max(1)
	Tables(f, "columns", &c.Columns, func(col *column, f *Fields) {
		f.String("name", &col.Name).Required()
		f.String("type", &col.Type).Default("string").Check(func(s string) error {
			if s != "string" && s != "int64" {
				return fmt.Errorf("unknown type %q (want string or int64)", s)
			}
			return nil
		})
	})
	f.BothOrNeither("username", "password")
	f.RequiredWhen("max_messages_per_file", "file_rotation", "messages")
	f.Check(func() error {
		if c.Style && c.Endpoint == "" {
			return FieldErr("path_style", "needs an endpoint")
		}
		return nil
	})
})

func TestConfigParseDefaults(t *testing.T) {
	c, err := testConfigDecl.Parse([]byte(`{"bucket":"b"}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Bucket != "b" || c.Every != 10*time.Second || c.Size != 8*MiB || c.Format != formatLines || c.Attempts != 3 ||
		c.Rotation != "size" || c.StyleSet || c.Columns != nil || !c.Password.IsZero() {
		t.Fatalf("defaults: %+v", c)
	}
}

func TestConfigParseValues(t *testing.T) {
	raw := `{"bucket":"b","flush_interval":"1m 30s","max_file_size":"1.5 MiB","output_format":"JSONL","max_retries":7,
		"password":"hunter2","username":"u","tags":["a","b"],"headers":{"X-A":"1"},"endpoint":"https://s3.local:9000",
		"path_style":false,"file_rotation":"messages","max_messages_per_file":0,"ratio":0.5,
		"columns":[{"name":"i","type":"int64"},{"name":"s"}]}`
	c, err := testConfigDecl.Parse([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	want := testConfig{Bucket: "b", Every: 90 * time.Second, Size: 1572864, Format: formatLines, Attempts: 7,
		Password: NewSecret("hunter2"), User: "u", Tags: []string{"a", "b"}, Headers: map[string]string{"X-A": "1"},
		Endpoint: "https://s3.local:9000", Style: false, StyleSet: true, Rotation: "messages", MaxPerFile: 0, Ratio: 0.5,
		Columns: []column{{"i", "int64"}, {"s", "string"}}}
	if fmt.Sprintf("%#v", c) != fmt.Sprintf("%#v", want) || c.Password.Reveal() != "hunter2" {
		t.Fatalf("got  %#v\nwant %#v", c, want)
	}
}

func TestConfigParseErrors(t *testing.T) {
	cases := []struct {
		raw  string
		want []string
	}{
		{`null`, []string{"plugin_config.bucket: required field is missing"}},
		{`{"bucket":" "}`, []string{"plugin_config.bucket: must not be empty"}},
		{`{"bucket":"b","buckte":1}`, []string{"plugin_config.buckte: unknown field (known: bucket, flush_interval, max_file_size, output_format, max_attempts, max_retries, password, username, tags, headers, endpoint, path_style, file_rotation, max_messages_per_file, ratio, columns)"}},
		{`{"bucket":"b","flush_interval":"soon"}`, []string{`plugin_config.flush_interval: want a duration like "1s" or "250ms", got "soon"`}},
		{`{"bucket":"b","flush_interval":5}`, []string{`plugin_config.flush_interval: want a duration like "1s" or "250ms", got number 5`}},
		{`{"bucket":"b","flush_interval":"0s"}`, []string{`plugin_config.flush_interval: 0s is below the minimum 1ms`}},
		{`{"bucket":"b","flush_interval":"2h"}`, []string{`plugin_config.flush_interval: 2h is above the maximum 1h`}},
		{`{"bucket":"b","max_file_size":"6GiB"}`, []string{`plugin_config.max_file_size: "6GiB" is above the maximum "5GiB"`}},
		{`{"bucket":"b","max_file_size":"lots"}`, []string{`plugin_config.max_file_size: "lots" is not a size (want e.g. 8MiB, 10MB or 1048576)`}},
		{`{"bucket":"b","max_file_size":-1}`, []string{`plugin_config.max_file_size: want a size like "8MiB" or a count of bytes, got -1`}},
		{`{"bucket":"b","output_format":"csv"}`, []string{`plugin_config.output_format: unknown value "csv" (want json_lines or json_array)`}},
		{`{"bucket":"b","max_attempts":1,"max_retries":2}`, []string{`plugin_config.max_retries: is an alias of max_attempts: set one of them`}},
		{`{"bucket":"b","max_retries":0}`, []string{`plugin_config.max_attempts: 0 is below the minimum 1`}},
		{`{"bucket":"b","max_attempts":1.5}`, []string{`plugin_config.max_attempts: want an integer, got 1.5`}},
		{`{"bucket":"b","password":"x"}`, []string{`plugin_config.username: username and password go together: set both or neither`}},
		{`{"bucket":"b","tags":["a",2]}`, []string{`plugin_config.tags: element 1: want a string, got number 2`}},
		{`{"bucket":"b","headers":{"a":1}}`, []string{`plugin_config.headers: key "a": want a string, got number 1`}},
		{`{"bucket":"b","endpoint":"ftp://h"}`, []string{`plugin_config.endpoint: scheme "ftp" not supported (want http, https)`}},
		{`{"bucket":"b","endpoint":"localhost"}`, []string{`plugin_config.endpoint: "localhost" is not an absolute URL (want e.g. http://host:port)`}},
		{`{"bucket":"b","endpoint":"http://u:pw@h:1/%zz"}`, []string{`plugin_config.endpoint: not a URL: parse "***": invalid URL escape "%zz"`}},
		{`{"bucket":"b","file_rotation":"messages"}`, []string{`plugin_config.max_messages_per_file: required with file_rotation = "messages"`}},
		{`{"bucket":"b","ratio":2}`, []string{`plugin_config.ratio: 2 is above the maximum 1`}},
		{`{"bucket":"b","path_style":true}`, []string{`plugin_config.path_style: needs an endpoint`}},
		{`{"bucket":"b","columns":[{"type":"int64"},{"name":"x","type":"date"},3,{"name":"y","typo":1}]}`, []string{
			`plugin_config.columns[0].name: required field is missing`,
			`plugin_config.columns[1].type: unknown type "date" (want string or int64)`,
			`plugin_config.columns[2]: want a table`,
			`plugin_config.columns[3].typo: unknown field (known: name, type)`}},
		{`{"bucket":"b","columns":{"name":"x"}}`, []string{`plugin_config.columns: want a table list, got a table`}},
		{`[1]`, []string{`plugin_config: want a table`}},
		// Every problem of the keys at once, in key order, then the missing ones; rules and
		// checks only when the keys are fine.
		{`{"ratio":-1,"output_format":1,"password":"x"}`, []string{
			`plugin_config.output_format: want a string, got number 1`,
			`plugin_config.ratio: -1 is below the minimum 0`,
			`plugin_config.bucket: required field is missing`}},
	}
	spec := testConfigDecl.Spec()
	for _, c := range cases {
		_, err := testConfigDecl.Parse([]byte(c.raw))
		var got []string
		if err != nil {
			got = strings.Split(err.Error(), "\n")
		}
		if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
			t.Errorf("Parse(%s):\n got %q\nwant %q", c.raw, got, c.want)
		}
		// ferry check's Validate says exactly what Parse says.
		var vals []string
		for _, e := range spec.Validate([]byte(c.raw)) {
			vals = append(vals, e.Error())
		}
		if strings.Join(vals, "\n") != strings.Join(c.want, "\n") {
			t.Errorf("Validate(%s):\n got %q\nwant %q", c.raw, vals, c.want)
		}
	}
}

func TestConfigSpecDescribes(t *testing.T) {
	spec := testConfigDecl.Spec()
	f := func(name string) ConfigField {
		t.Helper()
		fd, ok := spec.Field(name)
		if !ok {
			t.Fatalf("no field %s", name)
		}
		return fd
	}
	if d := f("flush_interval"); d.Type != TypeDuration || d.Default != "10s" || d.Min != "1ms" || d.Max != "1h" || d.Doc != "idle flush" {
		t.Errorf("flush_interval: %+v", d)
	}
	if d := f("max_file_size"); d.Type != TypeSize || d.Default != "8MiB" || d.Max != `"5GiB"` {
		t.Errorf("max_file_size: %+v", d)
	}
	// A default is the value a file writes, as a legacy spec's: a string without quotes.
	if d := f("file_rotation"); d.Default != "size" {
		t.Errorf("file_rotation: %#v", d.Default)
	}
	if d := f("output_format"); d.Type != TypeEnum || d.Default != "json_lines" || strings.Join(d.Enum, "|") != "json_lines (also jsonl, jsonlines)|json_array" {
		t.Errorf("output_format: %+v", d)
	}
	if d := f("max_attempts"); d.Default != float64(3) || strings.Join(d.Aliases, ",") != "max_retries" {
		t.Errorf("max_attempts: %#v", d)
	}
	if d := f("password"); !d.Secret || d.Type != TypeSecret {
		t.Errorf("password: %+v", d)
	}
	if d := f("bucket"); !d.Required || d.Default != nil {
		t.Errorf("bucket: %+v", d)
	}
	if d := f("columns"); len(d.Fields) != 2 || d.Fields[0].Name != "name" || !d.Fields[0].Required {
		t.Errorf("columns: %+v", d)
	}
	want := []string{"username and password go together: set both or neither", `max_messages_per_file is required when file_rotation = "messages"`}
	if strings.Join(spec.Rules, "|") != strings.Join(want, "|") {
		t.Errorf("rules: %q", spec.Rules)
	}
	// The spec decodes too, into the declaration's type.
	var c testConfig
	if err := spec.Decode([]byte(`{"bucket":"x","flush_interval":"2s"}`), &c); err != nil || c.Every != 2*time.Second || c.Bucket != "x" {
		t.Errorf("Decode: %v %+v", err, c)
	}
}

func TestSecretNeverShown(t *testing.T) {
	s := NewSecret("hunter2")
	var logged strings.Builder
	slog.New(slog.NewTextHandler(&logged, nil)).Info("x", "password", s)
	b, _ := json.Marshal(struct{ P Secret }{s})
	for _, shown := range []string{fmt.Sprint(s), fmt.Sprintf("%v %+v %#v %s", s, s, s, s), logged.String(), string(b)} {
		if strings.Contains(shown, "hunter2") || !strings.Contains(shown, "***") {
			t.Errorf("shown: %s", shown)
		}
	}
	if s.Reveal() != "hunter2" || NewSecret("").String() != "" {
		t.Error("Reveal or empty")
	}
	if got := RedactURL("postgres://u:pw@h/db"); got != "postgres://u:***@h/db" {
		t.Errorf("RedactURL: %s", got)
	}
}

// TestNonEmpty: NonEmpty refuses an empty or all-space string and secret, naming the key
// and never the secret's value.
func TestNonEmpty(t *testing.T) {
	type nonEmpty struct {
		Name  string
		Token Secret
	}
	decl := NewConfig(func(c *nonEmpty, f *Fields) {
		f.String("name", &c.Name).NonEmpty()
		f.Secret("token", &c.Token).NonEmpty()
	})
	_, err := decl.Parse([]byte(`{"name":" ","token":"  "}`))
	if err == nil || err.Error() != "plugin_config.name: must not be empty\nplugin_config.token: must not be empty" {
		t.Fatalf("Parse = %v", err)
	}
	if c, err := decl.Parse([]byte(`{"name":"n","token":"t"}`)); err != nil || c.Token.Reveal() != "t" {
		t.Fatalf("Parse = %+v, %v", c, err)
	}
}

func TestByteSize(t *testing.T) {
	for in, want := range map[string]ByteSize{"8MiB": 8 << 20, "10MB": 10e6, "1.5 KiB": 1536, "42": 42, "1g": 1e9, "0": 0} {
		if got, err := ParseByteSize(in); err != nil || got != want {
			t.Errorf("ParseByteSize(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "x", "-1MiB", "1e400"} {
		if _, err := ParseByteSize(in); err == nil {
			t.Errorf("ParseByteSize(%q) accepted", in)
		}
	}
	for b, want := range map[ByteSize]string{8 * MiB: "8MiB", 1536: "1536B", 5 * GiB: "5GiB", 1000: "1000B", 2048: "2KiB"} {
		if b.String() != want {
			t.Errorf("%d.String() = %s, want %s", uint64(b), b.String(), want)
		}
	}
}

// TestFieldsInts: an integer list decodes, has its default, and a non-integer element is
// named by its index.
func TestFieldsInts(t *testing.T) {
	type cfg struct{ Codes []int }
	decl := NewConfig(func(c *cfg, f *Fields) {
		f.Ints("codes", &c.Codes).Default([]int{200, 204}).Doc("status codes")
	})
	c, err := decl.Parse([]byte(`null`))
	if err != nil || fmt.Sprint(c.Codes) != "[200 204]" {
		t.Fatalf("default: %v %v", c.Codes, err)
	}
	if c, err = decl.Parse([]byte(`{"codes":[201,-1]}`)); err != nil || fmt.Sprint(c.Codes) != "[201 -1]" {
		t.Fatalf("values: %v %v", c.Codes, err)
	}
	for raw, want := range map[string]string{
		`{"codes":[200,"x"]}`: `plugin_config.codes: element 1: want an integer, got string "x"`,
		`{"codes":[1.5]}`:     `plugin_config.codes: element 0: want an integer, got 1.5`,
		`{"codes":200}`:       `plugin_config.codes: want an integer list, got number 200`,
	} {
		if _, err := decl.Parse([]byte(raw)); err == nil || err.Error() != want {
			t.Errorf("%s: error %v, want %q", raw, err, want)
		}
	}
	if spec := decl.Spec(); spec.Fields[0].Type != TypeInts || func() string { b, _ := json.Marshal(spec.Fields[0].Default); return string(b) }() != "[200,204]" {
		t.Errorf("spec %+v", spec.Fields[0])
	}
}
