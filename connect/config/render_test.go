package config

import (
	"errors"
	"strings"
	"testing"
)

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
		`"db":{"password":"hunter4","user":"u","conn":{"dsn":"x","key":"k","primary_key":"id","upsert_key":"order_id","stream_key":"{stream}:{partition}","apiKey":"a"}},"note":"no secret here"}`)}
	want := `{"db":{"conn":{"apiKey":"***","dsn":"***","key":"***","primary_key":"id","stream_key":"{stream}:{partition}","upsert_key":"order_id"},"password":"***","user":"u"},` +
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
