package provider_test

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/ferryio/ferry/connect/configjson"
	"github.com/ferryio/ferry/connect/provider"
)

func ExampleLocal() {
	dir, err := os.MkdirTemp("", "ferry-configs")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	p := &provider.Local{Dir: dir}
	body := `{"enabled":true,"name":"Audit","path":"builtin:stdout",
		"streams":[{"stream":"audit","topics":["events"],"schema":"json"}],
		"plugin_config":{"api_key":"k-123","verbose":true}}`
	for range 2 {
		if _, err := p.CreateSink("audit", []byte(body)); err != nil {
			panic(err)
		}
	}
	if err := p.SetActiveSink("audit", 0); err != nil {
		panic(err)
	}
	s, err := p.ActiveSink("audit")
	if err != nil {
		panic(err)
	}
	j, _ := json.Marshal(configjson.SinkJSON(s))
	var shown struct {
		Version      uint64          `json:"version"`
		PluginConfig json.RawMessage `json:"plugin_config"`
	}
	_ = json.Unmarshal(j, &shown)
	fmt.Println(shown.Version, string(shown.PluginConfig))
	// Output:
	// 0 {"api_key":"***","verbose":true}
}
