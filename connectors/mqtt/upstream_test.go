package mqtt

import (
	"strings"
	"testing"

	"github.com/ferryio/ferry/sdk/sdktest"
)

// TestSourceSubscriptionQoS: upstream's subscription_qos subscribes a filter at its own QoS,
// the others at qos: a QoS 2 publish comes at 0 on the filter subscribed at 0, at 2 on the
// one at 2, at 1 on the rest (mosquitto delivers at the lower of the two).
func TestSourceSubscriptionQoS(t *testing.T) {
	url := broker(t)
	root := "ferry/" + uniq(t)
	cfg := srcCfg(url, uniq(t), root+"/zero", root+"/two", root+"/one")
	cfg["subscription_qos"] = map[string]int{root + "/zero": 0, root + "/two": 2}
	s := openSource(t, cfg)
	for _, tp := range []string{"zero", "two", "one"} {
		publish(t, url, root+"/"+tp, 2, false, tp)
	}
	msgs, _ := readN(t, s, 3)
	for i, want := range []byte{0, 2, 1} {
		if q := header(t, msgs[i], HeaderQoS); q.Value[0] != want {
			t.Fatalf("message %q delivered at QoS %d, want %d", msgs[i].Payload, q.Value[0], want)
		}
	}
}

// TestUpstreamKeysErrors: subscription_qos and the tls table take what upstream's do, and
// a bad entry is an error naming the key and the filter or table key.
func TestUpstreamKeysErrors(t *testing.T) {
	base := func(extra map[string]any) map[string]any {
		m := map[string]any{"broker_url": "mqtts://broker:8883", "subscriptions": []string{"a/#", "b"}}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	cfg, err := SourceConfig.Parse(sdktest.Config(t, base(map[string]any{
		"subscription_qos": map[string]int{"b": 2},
		"tls":              map[string]string{"ca_file": "/ca.pem", "client_cert_file": "/c.pem", "client_key_file": "/k.pem", "server_name": "broker"}})))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.qosOf("b") != 2 || cfg.qosOf("a/#") != 1 || cfg.TLSCAFile != "/ca.pem" || cfg.TLSCertFile != "/c.pem" || cfg.TLSKeyFile != "/k.pem" || cfg.TLSServerName != "broker" {
		t.Fatalf("parsed %+v", cfg)
	}
	for _, c := range []struct {
		extra map[string]any
		want  string
	}{
		{map[string]any{"subscription_qos": map[string]int{"c/+": 1}}, `plugin_config.subscription_qos: filter "c/+" is not one of plugin_config.topics ["a/#" "b"]`},
		{map[string]any{"subscription_qos": map[string]int{"b": 3}}, `plugin_config.subscription_qos: filter "b": QoS 3 is not 0, 1 or 2`},
		{map[string]any{"subscription_qos": []int{1}}, `plugin_config.subscription_qos: want a table of topic filter = QoS`},
		{map[string]any{"tls": map[string]string{"ca_path": "/x"}}, `plugin_config.tls.ca_path: unknown key`},
		{map[string]any{"tls": map[string]string{"ca_file": "/x"}, "tls_ca_file": "/y"}, `plugin_config.tls.ca_file: set only one of tls.ca_file and tls_ca_file`},
		{map[string]any{"tls": map[string]string{"client_cert_file": "/c.pem"}}, `plugin_config.tls: client_cert_file and client_key_file (or tls_cert_file and tls_key_file) go together`},
	} {
		_, err := SourceConfig.Parse(sdktest.Config(t, base(c.extra)))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want it to hold %q", c.extra, err, c.want)
		}
	}
}
