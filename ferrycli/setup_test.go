package ferrycli

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/internal/syncbuf"
	"github.com/ferryio/ferry/server/servertest"
)

// ensureTopics (--create-topics, --embedded) creates what every enabled connector names:
// sinks' topics and dead-letter topics, sources' target and dead-letter topics; nothing for
// a disabled one. Each creation is one INFO line with the partition count used (the
// connectors themselves create nothing); a second run, with everything there, logs none.
func TestEnsureTopicsCoversSinksAndSources(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// servertest's cheap password hashing: with the default 600,000 PBKDF2 iterations the
	// login alone took 9-14 s under -race on a loaded machine, past the server's 10 s
	// login timeout, which then closed the connection.
	srv := servertest.Start(t)
	c, err := iggy.Dial(ctx, srv.Addr(), iggy.WithCredentials(servertest.Username, servertest.Password))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	sink := &config.Sink{Common: config.Common{Key: "k", Enabled: true}, OnFailure: config.FailureDeadLetter,
		DeadLetter: config.DeadLetter{Stream: "dlq", Topic: "sink_dead"},
		Streams:    []config.SinkStream{{Stream: "in", Topics: []string{"a", "b"}}}}
	src := &config.Source{Common: config.Common{Key: "s", Enabled: true}, OnFailure: config.FailureDeadLetter,
		DeadLetter: config.DeadLetter{Stream: "dlq", Topic: "source_dead"},
		Streams:    []config.SourceStream{{Stream: "ignored", Topic: "x"}, {Stream: "out", Topic: "c"}}}
	off := &config.Source{Common: config.Common{Key: "off"}, Streams: []config.SourceStream{{Stream: "off", Topic: "z"}}}
	conns := &config.Connectors{Sinks: []*config.Sink{sink}, Sources: []*config.Source{src, off}}
	var logs syncbuf.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	if err := ensureTopics(ctx, c, conns, 3, log); err != nil {
		t.Fatal(err)
	}
	want := `{"level":"INFO","msg":"created stream and topic (--create-topics)","stream":"out","topic":"c","partitions":3}
{"level":"INFO","msg":"created stream and topic (--create-topics)","stream":"dlq","topic":"source_dead","partitions":3}
{"level":"INFO","msg":"created stream and topic (--create-topics)","stream":"in","topic":"a","partitions":3}
{"level":"INFO","msg":"created topic (--create-topics)","stream":"in","topic":"b","partitions":3}
{"level":"INFO","msg":"created topic (--create-topics)","stream":"dlq","topic":"sink_dead","partitions":3}
`
	if logs.String() != want {
		t.Fatalf("logged:\n%s\nwant:\n%s", logs.String(), want)
	}
	if err := ensureTopics(ctx, c, conns, 3, log); err != nil {
		t.Fatal(err)
	}
	if logs.String() != want {
		t.Fatalf("a second run, with everything there, logged:\n%s", strings.TrimPrefix(logs.String(), want))
	}
	for _, st := range [][2]string{{"in", "a"}, {"in", "b"}, {"dlq", "sink_dead"}, {"dlq", "source_dead"}, {"out", "c"}} {
		td, err := c.GetTopic(ctx, iggy.Name(st[0]), iggy.Name(st[1]))
		if err != nil {
			t.Fatalf("%s/%s: %v", st[0], st[1], err)
		}
		if td.PartitionsCount != 3 {
			t.Fatalf("%s/%s has %d partitions, want 3", st[0], st[1], td.PartitionsCount)
		}
	}
	for _, s := range []string{"ignored", "off"} {
		if _, err := c.GetStream(ctx, iggy.Name(s)); err == nil {
			t.Fatalf("stream %s was created", s)
		}
	}
}

func TestDisplayConfig(t *testing.T) {
	for v, want := range map[string]bool{"1": true, "TRUE": true, "true": true, "0": false, "false": false, "no": false} {
		t.Setenv("IGGY_DISPLAY_CONFIG", v)
		if got := displayConfig(); got != want {
			t.Errorf("IGGY_DISPLAY_CONFIG=%s: displayConfig() = %v, want %v", v, got, want)
		}
	}
	os.Unsetenv("IGGY_DISPLAY_CONFIG") // t.Setenv restores it after the test
	if !displayConfig() {
		t.Error("unset IGGY_DISPLAY_CONFIG: displayConfig() = false, want true")
	}
}

// The effective config was one INFO value of TOML with literal "\n"s (1.7 KB for the
// quickstart): now one field per key, on one line.
func TestConfigAttrs(t *testing.T) {
	doc := "key = 'out'\npath = 'builtin:file'\n[[streams]]\nstream = 's'\ntopics = ['a', 'b']\nbatch_length = 10\n[plugin_config]\npassword = '***'\n"
	var b strings.Builder
	slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}})).Info("effective sink config", configAttrs(doc)...)
	want := `level=INFO msg="effective sink config" key=out path=builtin:file plugin_config.password=*** streams[0].batch_length=10 streams[0].stream=s streams[0].topics=[a,b]` + "\n"
	if b.String() != want {
		t.Errorf("got  %s\nwant %s", b.String(), want)
	}
}
