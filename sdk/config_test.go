package sdk

import (
	"errors"
	"strings"
	"testing"
)

var testSpec = ConfigSpec{Fields: []ConfigField{
	{Name: "name", Type: TypeString, Required: true},
	{Name: "on", Type: TypeBool, Default: true},
	{Name: "n", Type: TypeUnsigned, Default: 7},
	{Name: "delta", Type: TypeInteger},
	{Name: "rate", Type: TypeNumber},
	{Name: "every", Type: TypeDuration, Default: "1s"},
	{Name: "tags", Type: TypeStrings},
	{Name: "columns", Type: TypeTables},
}}

func TestConfigSpecValidate(t *testing.T) {
	cases := []struct {
		raw  string
		want []string
	}{
		{`{"name":"x"}`, nil},
		{`{"name":"x","on":false,"n":3,"delta":-2,"rate":0.5,"every":"250ms","tags":["a"],"columns":[{"name":"c"}]}`, nil},
		{`null`, []string{"plugin_config.name: required field is missing"}},
		{`{"name":"x","nmae":1}`, []string{"plugin_config.nmae: unknown field (known: name, on, n, delta, rate, every, tags, columns)"}},
		{`{"name":1}`, []string{"plugin_config.name: want a string, got number 1"}},
		{`{"name":"x","on":"yes"}`, []string{`plugin_config.on: want a bool, got string "yes"`}},
		{`{"name":"x","n":-1}`, []string{"plugin_config.n: want an unsigned, got -1"}},
		{`{"name":"x","delta":1.5}`, []string{"plugin_config.delta: want an integer, got 1.5"}},
		{`{"name":"x","every":"soon"}`, []string{`plugin_config.every: want a duration like "1s" or "250ms", got "soon"`}},
		{`{"name":"x","tags":["a",2]}`, []string{"plugin_config.tags: element 1: want a string, got number 2"}},
		{`{"name":"x","columns":[1]}`, []string{"plugin_config.columns: element 0: want a table, got number 1"}},
		{`[1]`, []string{"plugin_config: want a table"}},
		// Every problem at once, unknown and wrong-typed keys in key order, then missing ones.
		{`{"zz":1,"on":3}`, []string{"plugin_config.on: want a bool, got number 3",
			"plugin_config.zz: unknown field (known: name, on, n, delta, rate, every, tags, columns)",
			"plugin_config.name: required field is missing"}},
	}
	for _, c := range cases {
		var got []string
		for _, e := range testSpec.Validate([]byte(c.raw)) {
			got = append(got, e.Error())
		}
		if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
			t.Errorf("Validate(%s):\n got %q\nwant %q", c.raw, got, c.want)
		}
	}
}

func TestConfigSpecDecodeAppliesDefaults(t *testing.T) {
	type cfg struct {
		Name  string `json:"name"`
		On    bool   `json:"on"`
		N     uint64 `json:"n"`
		Every string `json:"every"`
	}
	var c cfg
	if err := testSpec.Decode([]byte(`{"name":"x","n":2}`), &c); err != nil {
		t.Fatal(err)
	}
	if c != (cfg{Name: "x", On: true, N: 2, Every: "1s"}) {
		t.Fatalf("decoded %+v", c)
	}
	err := testSpec.Decode([]byte(`{"n":"2"}`), &c)
	var fe *FieldError
	if !errors.As(err, &fe) || err.Error() != "plugin_config.n: want an unsigned, got string \"2\"\nplugin_config.name: required field is missing" {
		t.Fatalf("err = %v", err)
	}
}

func TestConfigSpecAnyFields(t *testing.T) {
	if errs := (ConfigSpec{AnyFields: true}).Validate([]byte(`{"whatever":[1,2]}`)); errs != nil {
		t.Fatalf("errs = %v", errs)
	}
}

// FuzzConfigSpec: any plugin_config is either refused by Validate or decoded by Decode,
// never both and never a panic.
func FuzzConfigSpec(f *testing.F) {
	for _, s := range []string{`{"name":"x"}`, `null`, `{"name":1,"n":-1}`, `{"name":"x","every":"1m 30s","tags":["a"]}`, `[`, `{"columns":[{}]}`} {
		f.Add([]byte(s))
	}
	type cfg struct {
		Name    string           `json:"name"`
		On      bool             `json:"on"`
		N       uint64           `json:"n"`
		Delta   int64            `json:"delta"`
		Rate    float64          `json:"rate"`
		Every   string           `json:"every"`
		Tags    []string         `json:"tags"`
		Columns []map[string]any `json:"columns"`
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		errs := testSpec.Validate(raw)
		var c cfg
		err := testSpec.Decode(raw, &c)
		if (len(errs) == 0) != (err == nil) {
			t.Fatalf("Validate = %v but Decode = %v for %q", errs, err, raw)
		}
	})
}

func TestConfigSpecCheckCommitMode(t *testing.T) {
	anyMode := ConfigSpec{}
	for _, m := range []string{"after_polling", "after_consuming", "sink_controlled"} {
		if err := anyMode.CheckCommitMode(m); err != nil {
			t.Errorf("no CommitModes, %s: %v", m, err)
		}
	}
	sc := ConfigSpec{CommitModes: []string{"sink_controlled"}}
	if err := sc.CheckCommitMode("sink_controlled"); err != nil {
		t.Fatal(err)
	}
	err := sc.CheckCommitMode("after_polling")
	want := `offset_commit = "after_polling": the sink runs only with offset_commit = "sink_controlled"`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
	two := ConfigSpec{CommitModes: []string{"after_consuming", "sink_controlled"}}
	err = two.CheckCommitMode("after_polling")
	want = `offset_commit = "after_polling": the sink runs only with offset_commit = "after_consuming" or "sink_controlled"`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
}

// A sink that declares it never commits is refused sink_controlled, the error naming the
// key and the fix; its other modes are not.
func TestConfigSpecCheckCommitModeNeverCommits(t *testing.T) {
	never := ConfigSpec{Commits: CommitsNever}
	for _, m := range []string{"after_polling", "after_consuming"} {
		if err := never.CheckCommitMode(m); err != nil {
			t.Errorf("%s: %v", m, err)
		}
	}
	err := never.CheckCommitMode("sink_controlled")
	want := `offset_commit = "sink_controlled": the sink never commits its offsets, so none would be stored and every start would deliver everything again; ` +
		`set offset_commit = "after_consuming" (each batch's offset is stored once the sink wrote it) or remove the key (after_polling)`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
	for _, c := range []SinkCommits{CommitsUndeclared, CommitsEachBatch, CommitsWhenDurable} {
		if err := (ConfigSpec{Commits: c}).CheckCommitMode("sink_controlled"); err != nil {
			t.Errorf("Commits %q: %v", c, err)
		}
	}
}

func TestConfigSpecDefaultCommitMode(t *testing.T) {
	for _, tc := range []struct {
		modes []string
		want  string
		ok    bool
	}{
		{nil, "", false},
		{[]string{"sink_controlled"}, "sink_controlled", true},
		{[]string{"after_consuming", "sink_controlled"}, "", false},
	} {
		got, ok := ConfigSpec{CommitModes: tc.modes}.DefaultCommitMode()
		if got != tc.want || ok != tc.ok {
			t.Errorf("%v: (%q, %v), want (%q, %v)", tc.modes, got, ok, tc.want, tc.ok)
		}
	}
}

// A spec that contradicts itself cannot be registered: AddSink panics, naming the sink.
func TestAddSinkRefusesContradictoryCommits(t *testing.T) {
	for _, tc := range []struct {
		spec ConfigSpec
		want string
	}{
		{ConfigSpec{CommitModes: []string{"sink_controlled"}, Commits: CommitsNever},
			`sdk: sink "x": CommitModes lists "sink_controlled" but Commits is CommitsNever`},
		{ConfigSpec{Commits: "sometimes"}, `sdk: sink "x": unknown Commits "sometimes" (want one of the sdk.Commits… constants)`},
	} {
		func() {
			defer func() {
				if r := recover(); r != tc.want {
					t.Errorf("panic %v, want %q", r, tc.want)
				}
			}()
			NewRegistry().AddSink("x", nil, tc.spec)
		}()
	}
	NewRegistry().AddSink("ok", nil, ConfigSpec{CommitModes: []string{"after_consuming"}, Commits: CommitsNever})
}
