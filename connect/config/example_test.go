package config_test

import (
	"fmt"

	"github.com/ferryio/ferry/connect/config"
)

func ExampleRenderPluginConfig() {
	c := &config.Common{Key: "pg", PluginConfigFormat: "yaml",
		PluginConfig: []byte(`{"host":"db","pool":{"size":4,"password":"hunter2"}}`)}
	body, contentType, err := config.RenderPluginConfig(c, "") // "": the connector's format
	if err != nil {
		panic(err)
	}
	fmt.Println(contentType)
	fmt.Print(string(body))
	// Output:
	// application/yaml
	// host: db
	// pool:
	//   password: "***"
	//   size: 4
}
