package mqtt

import (
	"os"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"

	"github.com/ferryio/ferry/sdk/sdktest"
)

// TestSourceTopicMapping: each message goes to the Iggy stream and topic of the first
// topic_mapping table its MQTT topic matches (a fixed name, a template over its levels), its
// payload and headers as without a mapping; a message no table matches, and one whose
// template renders an empty name, keep the [[streams]] entry (counted in their gauges).
func TestSourceTopicMapping(t *testing.T) {
	url := broker(t)
	root := "ferry/" + uniq(t)
	cfg := srcCfg(url, uniq(t), root+"/#")
	cfg["topic_mapping"] = []map[string]any{
		{"filter": root + "/fixed/+", "topic": "fixed"},
		{"filter": root + "/dev/+/temp", "stream": "iot", "topic": "temp-{4}"},
		{"filter": root + "/dev/#", "stream": "iot-{3}", "topic": "all"}, // after the one above: only what it leaves
		{"filter": root + "/e/+", "topic": "{4}"},
	}
	s := openSource(t, cfg)
	publish(t, url, root+"/fixed/a", 1, false, "f1")
	publish(t, url, root+"/dev/d7/temp", 1, false, "t1")
	publish(t, url, root+"/dev/d7/hum", 1, false, "h1")
	publish(t, url, root+"/dev", 1, false, "d1") // # matches its parent level
	publish(t, url, root+"/other", 1, false, "o1")
	publish(t, url, root+"/e/", 1, false, "e1") // level 4 is empty
	msgs, _ := readN(t, s, 6)
	want := []struct{ payload, mqttTopic, stream, topic string }{
		{"f1", root + "/fixed/a", "", "fixed"},
		{"t1", root + "/dev/d7/temp", "iot", "temp-d7"},
		{"h1", root + "/dev/d7/hum", "iot-dev", "all"},
		{"d1", root + "/dev", "iot-dev", "all"},
		{"o1", root + "/other", "", ""},
		{"e1", root + "/e/", "", ""},
	}
	for i, w := range want {
		m := msgs[i]
		got, _ := header(t, m, HeaderTopic).AsString()
		if string(m.Payload) != w.payload || got != w.mqttTopic || m.Stream != w.stream || m.Topic != w.topic || string(m.PartitionKey) != w.mqttTopic {
			t.Fatalf("message %d: payload %q mqtt_topic %q → %q/%q key %q; want %q %q → %q/%q key the MQTT topic",
				i, m.Payload, got, m.Stream, m.Topic, m.PartitionKey, w.payload, w.mqttTopic, w.stream, w.topic)
		}
		if len(m.Headers) != 5 {
			t.Fatalf("message %d: %d headers, want the 5 of every message", i, len(m.Headers))
		}
	}
	gauges := map[string]uint64{}
	for _, g := range s.Gauges() {
		gauges[g.Name] = g.Value
	}
	if gauges["mqtt_unmapped"] != 1 || gauges["mqtt_mapping_empty"] != 1 {
		t.Fatalf("gauges %v, want mqtt_unmapped 1 (o1), mqtt_mapping_empty 1 (e1)", gauges)
	}

	// Without topic_mapping no message names a target.
	plain := openSource(t, srcCfg(url, uniq(t), root+"/#"))
	publish(t, url, root+"/fixed/b", 1, false, "f2")
	got, _ := readN(t, plain, 1)
	if got[0].Stream != "" || got[0].Topic != "" {
		t.Fatalf("without a mapping the message goes to %q/%q, want the entry's", got[0].Stream, got[0].Topic)
	}
}

// TestTopicMappingConfigErrors: a bad topic_mapping table fails the config with the key of
// the table and the filter at fault.
func TestTopicMappingConfigErrors(t *testing.T) {
	cases := []struct {
		name  string
		table map[string]any
		want  string
	}{
		{"bad filter", map[string]any{"filter": "a/#/b", "topic": "t"},
			`plugin_config.topic_mapping[0].filter: topic filter "a/#/b": # must be the last level`},
		{"shared", map[string]any{"filter": "$share/g/a/b", "topic": "t"},
			`plugin_config.topic_mapping[0].filter: "$share/g/a/b": a mapping matches the topics of messages, not a shared subscription`},
		{"matches nothing subscribed", map[string]any{"filter": "b/+", "topic": "t"},
			`plugin_config.topic_mapping[0].filter: "b/+" matches none of the subscribed filters (plugin_config.topics = ["a/#" "$share/g/c/+"])`},
		{"level past the filter", map[string]any{"filter": "a/+", "topic": "t-{3}"},
			`plugin_config.topic_mapping[0].topic: "t-{3}": level 3 is past the last of filter "a/+" (2 levels)`},
		{"level after #", map[string]any{"filter": "a/#", "stream": "s-{2}", "topic": "t"},
			`plugin_config.topic_mapping[0].stream: "s-{2}": level 2 is not one every topic of filter "a/#" has (at most {1}: the levels before #)`},
		{"unknown field", map[string]any{"filter": "a/+", "topic": "t-{topic}"},
			`plugin_config.topic_mapping[0].topic: "t-{topic}": unknown field {topic} (want {N}`},
		{"unclosed", map[string]any{"filter": "a/+", "topic": "t-{2"},
			`plugin_config.topic_mapping[0].topic: "t-{2": a { without its }`},
		{"no topic", map[string]any{"filter": "a/+"},
			`plugin_config.topic_mapping[0].topic`},
		{"unknown key", map[string]any{"filter": "a/+", "topic": "t", "qos": 1},
			`plugin_config.topic_mapping[0].qos`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := map[string]any{"broker": "tcp://127.0.0.1:1883", "topics": []string{"a/#", "$share/g/c/+"},
				"topic_mapping": []map[string]any{{"filter": "a/ok", "topic": "fine"}, c.table}}
			_, err := SourceConfig.Parse(sdktest.Config(t, cfg))
			want := strings.Replace(c.want, "topic_mapping[0]", "topic_mapping[1]", 1)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("error %v, want it to hold %q", err, want)
			}
			if strings.Contains(err.Error(), "topic_mapping[0]") {
				t.Fatalf("error %v names the good table too", err)
			}
		})
	}
	// A mapping filter inside a shared subscription's filter is fine.
	cfg := map[string]any{"broker": "tcp://127.0.0.1:1883", "topics": []string{"$share/g/c/+"},
		"topic_mapping": []map[string]any{{"filter": "c/x", "topic": "x"}}}
	if _, err := SourceConfig.Parse(sdktest.Config(t, cfg)); err != nil {
		t.Fatal(err)
	}
}

// TestTopicFilterMatch: the mapping's matching and overlap follow the broker's rules.
func TestTopicFilterMatch(t *testing.T) {
	for _, c := range []struct {
		filter, topic string
		want          bool
	}{
		{"a/b", "a/b", true}, {"a/b", "a/c", false}, {"a/+", "a/b", true}, {"a/+", "a/b/c", false},
		{"a/+", "a", false}, {"a/#", "a", true}, {"a/#", "a/b/c", true}, {"#", "a/b", true},
		{"+/+", "a/", true}, {"#", "$SYS/x", false}, {"+/x", "$SYS/x", false}, {"$SYS/#", "$SYS/x", true},
		{"a/+/c", "a//c", true},
	} {
		if got := matches(strings.Split(c.filter, "/"), strings.Split(c.topic, "/")); got != c.want {
			t.Errorf("matches(%q, %q) = %v, want %v", c.filter, c.topic, got, c.want)
		}
	}
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"a/+", "a/#", true}, {"a/b", "+/b", true}, {"a/b", "a/c", false}, {"a", "a/#", true},
		{"a/b/c", "a/+", false}, {"#", "x/y", true}, {"a/+/c", "a/b/+", true},
	} {
		if got := overlap(strings.Split(c.a, "/"), strings.Split(c.b, "/")); got != c.want {
			t.Errorf("overlap(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

// TestSourceReadsUpstreamKeys: the keys Iggy's mqtt_source settled (broker_url,
// subscriptions, clean_start) are read as broker, topics and clean_session.
func TestSourceReadsUpstreamKeys(t *testing.T) {
	cfg, err := SourceConfig.Parse(sdktest.Config(t, map[string]any{"broker_url": "mqtt://127.0.0.1:1883",
		"subscriptions": []string{"devices/+/telemetry"}, "clean_start": true}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Broker != "mqtt://127.0.0.1:1883" || len(cfg.Topics) != 1 || cfg.Topics[0] != "devices/+/telemetry" || !cfg.CleanSession {
		t.Fatalf("parsed %+v", cfg)
	}
	_, err = SourceConfig.Parse(sdktest.Config(t, map[string]any{"broker_url": "mqtt://a:1883", "broker": "mqtt://b:1883", "topics": []string{"a"}}))
	if err == nil || !strings.Contains(err.Error(), "broker") {
		t.Fatalf("broker and broker_url both set: %v, want an error", err)
	}
	// An upstream key Ferry does not implement is refused, not ignored (MQTT 5 is not spoken).
	_, err = SourceConfig.Parse(sdktest.Config(t, map[string]any{"broker_url": "mqtt://a:1883", "subscriptions": []string{"a"}, "protocol": "mqtt5"}))
	if err == nil || !strings.Contains(err.Error(), "plugin_config.protocol") {
		t.Fatalf("protocol = mqtt5: %v, want an error naming plugin_config.protocol", err)
	}
}

// TestDocsMappingExampleParses: docs/mqtt.md's topic_mapping example is a valid source
// config, and routes as its comments say.
func TestDocsMappingExampleParses(t *testing.T) {
	doc, err := os.ReadFile("../../docs/mqtt.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	i := strings.Index(s, "### Topic mapping")
	j := strings.Index(s[i:], "```toml\n")
	k := strings.Index(s[i+j+8:], "```")
	if i < 0 || j < 0 || k < 0 {
		t.Fatal("docs/mqtt.md has no toml block under ### Topic mapping")
	}
	var file struct {
		PluginConfig map[string]any `toml:"plugin_config"`
	}
	if err := toml.Unmarshal([]byte(s[i+j+8:i+j+8+k]), &file); err != nil {
		t.Fatal(err)
	}
	cfg, err := SourceConfig.Parse(sdktest.Config(t, file.PluginConfig))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ mqttTopic, stream, topic string }{
		{"alerts/fire/3", "", "alerts"}, {"devices/d7/temp", "sensors", "temp-d7"}, {"devices/d7/hum", "", ""},
	} {
		stream, topic, _, _ := route(cfg.TopicMapping, c.mqttTopic)
		if stream != c.stream || topic != c.topic {
			t.Errorf("%s → %q/%q, want %q/%q", c.mqttTopic, stream, topic, c.stream, c.topic)
		}
	}
}
