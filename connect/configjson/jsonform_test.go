package configjson

import (
	"encoding/json"
	"testing"

	"github.com/ferryio/ferry/connect/config"
)

func TestSinkJSONExact(t *testing.T) {
	s, err := config.ParseSinkFile("testdata/full_sink.toml", nil)
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
		`"shutdown_timeout":"2s","max_in_flight":null,"restart":{"max_restarts":2,"initial_backoff":"500us","max_backoff":"1m"}}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
}

func TestSourceJSONExact(t *testing.T) {
	s, err := config.ParseSourceFile("testdata/full_source.toml", nil)
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
		`"retry":{"max_retries":5,"initial_backoff":"100ms","max_backoff":"5s"},"dead_letter":null,"max_in_flight":null,` +
		`"restart":{"max_restarts":0,"initial_backoff":"1s","max_backoff":"5s"}}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
}

func TestJSONFormsNullsAndPartialDeadLetter(t *testing.T) {
	s := &config.Sink{Common: config.Common{Key: "k", PluginConfig: []byte("null")}, DeadLetter: config.DeadLetter{Stream: "d"},
		Streams: []config.SinkStream{{Stream: "s"}}}
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
	so, _ := json.Marshal(SourceJSON(&config.Source{Common: config.Common{PluginConfig: []byte("{bad")}}))
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
	c := &config.Common{Key: "k", PluginConfig: []byte(secretPluginConfig)}
	if got := c.RedactedPluginConfig(); got != redactedPluginConfig {
		t.Fatalf("RedactedPluginConfig:\n got %s\nwant %s", got, redactedPluginConfig)
	}
	j := SinkJSON(&config.Sink{Common: *c})
	if string(j.PluginConfig) != redactedPluginConfig {
		t.Fatalf("SinkJSON plugin_config = %s", j.PluginConfig)
	}
	if sj := SourceJSON(&config.Source{Common: *c}); string(sj.PluginConfig) != redactedPluginConfig {
		t.Fatalf("SourceJSON plugin_config = %s", sj.PluginConfig)
	}
	if string(c.PluginConfig) != secretPluginConfig {
		t.Fatal("redaction changed the config")
	}
	if got := (&config.Common{PluginConfig: []byte(`"secret"`)}).RedactedPluginConfig(); got != `"secret"` {
		t.Fatalf("a bare string has no key to redact: %s", got)
	}
	if got := (&config.Common{PluginConfig: []byte(`{"password":`)}).RedactedPluginConfig(); got != "(invalid JSON)" {
		t.Fatalf("invalid JSON: %s", got)
	}
	// config.RedactSecrets leaves its argument alone.
	in := map[string]any{"a": []any{map[string]any{"token": "t"}}}
	out := config.RedactSecrets(in).(map[string]any)
	if in["a"].([]any)[0].(map[string]any)["token"] != "t" || out["a"].([]any)[0].(map[string]any)["token"] != config.Redacted {
		t.Fatalf("in %v out %v", in, out)
	}
}
