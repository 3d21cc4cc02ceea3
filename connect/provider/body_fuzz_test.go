package provider

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/connect/configjson"
)

// FuzzCreateSinkBody checks, for any request body: CreateSink never panics; a refused body
// wraps config.ErrInvalidConfig and writes nothing; an accepted one comes back equal from its own
// JSON form (GET then POST), plugin_config aside when redaction changed it.
func FuzzCreateSinkBody(f *testing.F) {
	f.Add([]byte(minimalBody))
	f.Add([]byte(`{"enabled":false,"name":"n","path":"p","streams":[{"stream":"s","topics":["a","b"],"schema":"avro","avro_schema_json":"{}",` +
		`"batch_length":7,"poll_interval":"1 s","consumer_group":"g"}],"plugin_config":{"a":[1,2.5,{"b":"c"}],"password":"x"},` +
		`"plugin_config_format":"text","verbose":true,"offset_commit":"after_consuming","on_failure":"dead_letter",` +
		`"dead_letter":{"stream":"d","topic":"t"},"retry":{"max_retries":0},"commit":{"delay":"1ms"},"shutdown_timeout":"3s",` +
		`"restart":{"max_restarts":0,"initial_backoff":"0","max_backoff":"0"},"transforms":{"delete_fields":{"enabled":true,"fields":["x"]}}}`))
	f.Add([]byte(`{"enabled":true,"name":"n","path":"p","streams":[null]}`))
	f.Add([]byte(`{"enabled":true,"name":"n","path":"p","streams":[],"plugin_config":"text"}`))
	f.Add([]byte(`{"enabled":true,"name":"n","path":"p","streams":[],"plugin_config":[1e400]}`))
	f.Add([]byte(`{"enabled":true,"name":"n'\"\n","path":"p","streams":[],"plugin_config":{"":1,"a.b":{"c d":"'\"\n\u00e9\t"},"x":[[1],[]],"y":{},"big":1e20,"neg":-3}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		dir := t.TempDir()
		p := &Local{Dir: dir}
		s, err := p.CreateSink("k", body)
		if err != nil {
			if errors.Is(err, config.ErrInvalidConfig) {
				if names := dirNames(t, dir); len(names) != 0 {
					t.Fatalf("refused body wrote %v", names)
				}
			}
			return
		}
		again, err := json.Marshal(configjson.SinkJSON(s))
		if err != nil {
			t.Fatal(err)
		}
		back, err := p.CreateSink("k", again)
		if err != nil {
			t.Fatalf("own JSON form refused: %v\n%s", err, again)
		}
		want := *s
		want.File, want.Version, want.PluginKeys = back.File, back.Version, back.PluginKeys
		want.OffsetCommitUnset = false // the JSON form always names offset_commit
		if redacted, _ := config.RedactJSON(s.PluginConfig); string(redacted) != string(s.PluginConfig) {
			want.PluginConfig = back.PluginConfig
		}
		if !reflect.DeepEqual(back, &want) {
			t.Fatalf("round trip changed the config:\n got  %#v\n want %#v", back, &want)
		}
	})
}
