package ferrycli

import (
	"testing"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/connectors"
	"github.com/ferryio/ferry/sdk"
)

// TestSecretFieldsAreRedacted: every plugin_config field a built-in connector declares
// secret is one the one redaction rule hides (status, the config API, logs), so a new
// connector cannot declare a secret under a name the rule would show.
func TestSecretFieldsAreRedacted(t *testing.T) {
	n := 0
	var walk func(c connectors.Connector, prefix string, fields []sdk.ConfigField)
	walk = func(c connectors.Connector, prefix string, fields []sdk.ConfigField) {
		for _, f := range fields {
			if f.Secret {
				n++
				for _, name := range append([]string{f.Name}, f.Aliases...) {
					if !config.IsSecretKey(name) {
						t.Errorf("%s builtin:%s: plugin_config.%s%s is secret but config.IsSecretKey(%q) is false", c.Kind, c.Name, prefix, name, name)
					}
				}
			}
			walk(c, prefix+f.Name+"[].", f.Fields)
		}
	}
	for _, c := range connectors.List(connectors.Registry()) {
		walk(c, "", c.Spec.Fields)
	}
	t.Logf("%d secret fields checked", n)
}
