package config

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

const fullSinkFile = `type = "sink"
key = "audit"
enabled = true
version = 2
name = "Audit"
path = "builtin:stdout"
plugin_config_format = "yaml"
offset_commit = "sink_controlled"
on_failure = "dead_letter"
shutdown_timeout = "2 s"
verbose = true

[[streams]]
stream = "s1"
topics = ["a", "b"]
schema = "avro"
avro_schema_path = "schemas/a.avsc"
batch_length = 50
poll_interval = "1m 30s"

[[streams]]
stream = "s2"
topics = ["c"]
schema = "json"
avro_schema_json = "{}"
consumer_group = "g"

[retry]
max_retries = 0
initial_backoff = "10ms"
max_backoff = "1s"

[dead_letter]
stream = "dlq"
topic = "failed"

[commit]
interval = "250ms"
delay = "20ms"
max_uncommitted = 7

[restart]
max_restarts = 2
initial_backoff = "500us"
max_backoff = "1m"

[plugin_config]
zeta = 1
alpha = { nested = [1, 2.5, "x<y"], b = true }

[transforms.delete_fields]
enabled = true
fields = ["password"]
[transforms.add_fields]
enabled = false
`

const fullSourceFile = `type = "source"
key = "rnd"
enabled = false
version = 4
name = "Random"
path = "builtin:random"
on_failure = "skip"
benchmark = true

[[streams]]
stream = "s"
topic = "t"
schema = "raw"
linger_time = "20ms"

[[streams]]
stream = "s2"
topic = "t2"
schema = "avro"
avro_schema_json = "{\"type\":\"string\"}"
batch_length = 9

[retry]
max_retries = 5

[restart]
max_restarts = 0

[plugin_config]
count = 10
`

func TestSinkJSONExact(t *testing.T) {
	s, err := ParseSinkFile(writeFile(t, t.TempDir(), "a.toml", fullSinkFile), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(SinkJSON(s)) // json.Marshal escapes HTML in a RawMessage: "x\u003cy"
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"key":"audit","enabled":true,"version":2,"name":"Audit","path":"builtin:stdout",` +
		`"transforms":{"add_fields":{"enabled":false},"delete_fields":{"enabled":true,"fields":["password"]}},` +
		`"streams":[{"stream":"s1","topics":["a","b"],"schema":"avro","avro_schema_json":null,"avro_schema_path":"schemas/a.avsc","batch_length":50,"poll_interval":"1m 30s","consumer_group":"iggy-connect-sink-audit"},` +
		`{"stream":"s2","topics":["c"],"schema":"json","avro_schema_json":"{}","avro_schema_path":null,"batch_length":1000,"poll_interval":"5ms","consumer_group":"g"}],` +
		`"plugin_config_format":"yaml","plugin_config":{"alpha":{"b":true,"nested":[1,2.5,"x\u003cy"]},"zeta":1},"verbose":true,"benchmark":false,` +
		`"offset_commit":"sink_controlled","on_failure":"dead_letter","retry":{"max_retries":0,"initial_backoff":"10ms","max_backoff":"1s"},` +
		`"dead_letter":{"stream":"dlq","topic":"failed"},"commit":{"interval":"250ms","delay":"20ms","max_uncommitted":7},` +
		`"shutdown_timeout":"2s","max_in_flight":1,"restart":{"max_restarts":2,"initial_backoff":"500us","max_backoff":"1m"}}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
}

func TestSourceJSONExact(t *testing.T) {
	s, err := ParseSourceFile(writeFile(t, t.TempDir(), "s.toml", fullSourceFile), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(SourceJSON(s))
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"key":"rnd","enabled":false,"version":4,"name":"Random","path":"builtin:random","transforms":null,` +
		`"streams":[{"stream":"s","topic":"t","schema":"raw","avro_schema_json":null,"avro_schema_path":null,"batch_length":1000,"linger_time":"20ms"},` +
		`{"stream":"s2","topic":"t2","schema":"avro","avro_schema_json":"{\"type\":\"string\"}","avro_schema_path":null,"batch_length":9,"linger_time":"5ms"}],` +
		`"plugin_config_format":null,"plugin_config":{"count":10},"verbose":false,"benchmark":true,"on_failure":"skip",` +
		`"retry":{"max_retries":5,"initial_backoff":"100ms","max_backoff":"5s"},"dead_letter":null,` +
		`"restart":{"max_restarts":0,"initial_backoff":"1s","max_backoff":"5s"}}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
}

func TestJSONFormsNullsAndPartialDeadLetter(t *testing.T) {
	s := &Sink{Common: Common{Key: "k", PluginConfig: []byte("null")}, DeadLetter: DeadLetter{Stream: "d"},
		Streams: []SinkStream{{Stream: "s"}}}
	b, err := json.Marshal(SinkJSON(s))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		"plugin_config": "null", "plugin_config_format": "null", "transforms": "null",
		"dead_letter": `{"stream":"d","topic":null}`,
		"streams":     `[{"stream":"s","topics":[],"schema":"","avro_schema_json":null,"avro_schema_path":null,"batch_length":0,"poll_interval":"0s","consumer_group":""}]`,
	} {
		if string(m[k]) != want {
			t.Errorf("%s = %s, want %s", k, m[k], want)
		}
	}
	so, _ := json.Marshal(SourceJSON(&Source{Common: Common{PluginConfig: []byte("{bad")}}))
	var sm map[string]json.RawMessage
	if err := json.Unmarshal(so, &sm); err != nil {
		t.Fatal(err)
	}
	if string(sm["plugin_config"]) != "null" || string(sm["streams"]) != "[]" {
		t.Fatalf("source: plugin_config %s streams %s", sm["plugin_config"], sm["streams"])
	}
}

const secretPluginConfig = `{"host":"h","Password":"p1","db":{"DSN":"postgres://u:p@h","pool":{"max":5,"passwd":"p2"},` +
	`"replicas":[{"addr":"r1","auth_header":"Bearer x"},{"addr":"r2","privateKeyPem":"k","private_key":"k2"}]},` +
	`"API_KEY":123,"apikeys":["a","b"],"client_secret":{"nested":"whole value goes"},"access_token":null,` +
	`"credentials_file":"/c","connection_string":"cs","list":[[{"token":"t"}]],"big":12345678901234567890}`

const redactedPluginConfig = `{"API_KEY":"***","Password":"***","access_token":"***","apikeys":"***","big":12345678901234567890,` +
	`"client_secret":"***","connection_string":"***","credentials_file":"***",` +
	`"db":{"DSN":"***","pool":{"max":5,"passwd":"***"},"replicas":[{"addr":"r1","auth_header":"***"},{"addr":"r2","privateKeyPem":"***","private_key":"***"}]},` +
	`"host":"h","list":[[{"token":"***"}]]}`

func TestRedactionAtEveryDepth(t *testing.T) {
	c := &Common{Key: "k", PluginConfig: []byte(secretPluginConfig)}
	if got := c.RedactedPluginConfig(); got != redactedPluginConfig {
		t.Fatalf("RedactedPluginConfig:\n got %s\nwant %s", got, redactedPluginConfig)
	}
	j := SinkJSON(&Sink{Common: *c})
	if string(j.PluginConfig) != redactedPluginConfig {
		t.Fatalf("SinkJSON plugin_config = %s", j.PluginConfig)
	}
	if sj := SourceJSON(&Source{Common: *c}); string(sj.PluginConfig) != redactedPluginConfig {
		t.Fatalf("SourceJSON plugin_config = %s", sj.PluginConfig)
	}
	if string(c.PluginConfig) != secretPluginConfig {
		t.Fatal("redaction changed the config")
	}
	if got := (&Common{PluginConfig: []byte(`"secret"`)}).RedactedPluginConfig(); got != `"secret"` {
		t.Fatalf("a bare string has no key to redact: %s", got)
	}
	if got := (&Common{PluginConfig: []byte(`{"password":`)}).RedactedPluginConfig(); got != "(invalid JSON)" {
		t.Fatalf("invalid JSON: %s", got)
	}
	// RedactSecrets leaves its argument alone.
	in := map[string]any{"a": []any{map[string]any{"token": "t"}}}
	out := RedactSecrets(in).(map[string]any)
	if in["a"].([]any)[0].(map[string]any)["token"] != "t" || out["a"].([]any)[0].(map[string]any)["token"] != Redacted {
		t.Fatalf("in %v out %v", in, out)
	}
}

func TestRenderPluginConfig(t *testing.T) {
	const pc = `{"b":{"list":[1,"y",{"q":1.5}],"password":"pw"},"a":"x<y","n":10}`
	c := &Common{Key: "k", PluginConfig: []byte(pc)}
	for _, tc := range []struct {
		format, pcFormat, body, ct string
	}{
		{"json", "", `{"a":"x<y","b":{"list":[1,"y",{"q":1.5}],"password":"***"},"n":10}`, "application/json"},
		{"text", "", `{"a":"x<y","b":{"list":[1,"y",{"q":1.5}],"password":"***"},"n":10}`, "text/plain"},
		// "n" and "y" are quoted: YAML 1.1 reads them as booleans.
		{"yaml", "", "a: x<y\nb:\n  list:\n  - 1\n  - \"y\"\n  - q: 1.5\n  password: \"***\"\n\"n\": 10\n", "application/yaml"},
		{"toml", "", "a = 'x<y'\nn = 10\n\n[b]\nlist = [1, 'y', {q = 1.5}]\npassword = '***'\n", "application/toml"},
		{"", "", "a = 'x<y'\nn = 10\n\n[b]\nlist = [1, 'y', {q = 1.5}]\npassword = '***'\n", "application/toml"},
		{"", "json", `{"a":"x<y","b":{"list":[1,"y",{"q":1.5}],"password":"***"},"n":10}`, "application/json"},
		{"text", "json", `{"a":"x<y","b":{"list":[1,"y",{"q":1.5}],"password":"***"},"n":10}`, "text/plain"},
	} {
		c.PluginConfigFormat = tc.pcFormat
		body, ct, err := RenderPluginConfig(c, tc.format)
		if err != nil || string(body) != tc.body || ct != tc.ct {
			t.Errorf("format %q (file %q): %q %q %v; want %q %q", tc.format, tc.pcFormat, body, ct, err, tc.body, tc.ct)
		}
	}
	str := &Common{Key: "k", PluginConfig: []byte(`"plain text"`)}
	if body, ct, err := RenderPluginConfig(str, "text"); err != nil || string(body) != `"plain text"` || ct != ContentTypeText {
		t.Errorf("text of a string: %q %q %v", body, ct, err)
	}
	if body, _, err := RenderPluginConfig(str, "yaml"); err != nil || string(body) != "plain text\n" {
		t.Errorf("yaml of a string: %q %v", body, err)
	}
	_, _, err := RenderPluginConfig(str, "toml")
	if !errors.Is(err, ErrInvalidConfig) || err.Error() != "invalid connector config: plugin_config of k cannot be rendered as toml: it is not a table" {
		t.Errorf("toml of a string: %v", err)
	}
	_, _, err = RenderPluginConfig(c, "xml")
	if !errors.Is(err, ErrInvalidConfig) || err.Error() != `invalid connector config: unknown plugin config format "xml" (want json, yaml, toml or text)` {
		t.Errorf("xml: %v", err)
	}
	for _, none := range []string{"", "null", " null\n"} {
		if _, _, err := RenderPluginConfig(&Common{PluginConfig: []byte(none)}, "json"); !errors.Is(err, ErrNoPluginConfig) {
			t.Errorf("plugin_config %q: %v, want ErrNoPluginConfig", none, err)
		}
	}
}

// TestRedactionOfURLAndNestedPasswords is issue 14's redaction defect: dsn,
// connection_string and nested db.password were shown in full, and a password inside
// a URL under an innocent key would be too.
func TestRedactionOfURLAndNestedPasswords(t *testing.T) {
	c := &Common{PluginConfig: []byte(`{"target":"postgres://app:hunter2@db:5432/x?sslmode=disable",` +
		`"mirrors":["https://bob:pa%3Ass@m1/p","https://m2/p"],"opts":"host=h user=u password=hunter3 dbname=d",` +
		`"db":{"password":"hunter4","user":"u","conn":{"dsn":"x","key":"k","primary_key":"id","upsert_key":"order_id","apiKey":"a"}},"note":"no secret here"}`)}
	want := `{"db":{"conn":{"apiKey":"***","dsn":"***","key":"***","primary_key":"id","upsert_key":"order_id"},"password":"***","user":"u"},` +
		`"mirrors":["https://bob:***@m1/p","https://m2/p"],"note":"no secret here",` +
		`"opts":"host=h user=u password=*** dbname=d","target":"postgres://app:***@db:5432/x?sslmode=disable"}`
	got := c.RedactedPluginConfig()
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	s := (&Sink{Common: *c}).String()
	for _, secret := range []string{"hunter", "pa%3Ass", `"k"`} {
		if strings.Contains(s, secret) {
			t.Fatalf("Sink.String shows %s: %s", secret, s)
		}
	}
	if got := RedactString("dial postgres://u:p@h/db failed"); got != "dial postgres://u:***@h/db failed" {
		t.Fatalf("RedactString: %s", got)
	}
}
