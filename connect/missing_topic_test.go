package connect

import (
	"errors"
	"testing"
	"time"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/sdk"
)

// missingTopicFix ends every missing-stream or missing-topic error.
const missingTopicFix = "; create it, or start ferry run with --create-topics (on with --embedded): it creates every stream and topic the enabled connectors name"

// patientRestarts restarts a failed start every 20–50 ms for as long as a test waits.
var patientRestarts = config.RestartPolicy{MaxRestarts: 100000, InitialBackoff: 20 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}

// TestSourceMissingTopicFailsTheStart: a source used to create its missing stream and topic
// itself, silently, with one partition (as no document says: only --create-topics creates).
// Now its start fails with an error naming the stream, the topic and the flag, and creates
// nothing; the start is retried, so once an operator creates the stream the error names
// the missing topic, and once the topic exists (with the operator's 3 partitions) the
// source runs and sends its 10 messages.
func TestSourceMissingTopicFailsTheStart(t *testing.T) {
	env := newIggyEnv(t)
	cfg := sourceCfg("seq", config.SourceStream{Stream: "s", Topic: "t", Schema: sdk.SchemaText, BatchLength: 100})
	cfg.PluginConfig, cfg.Restart, cfg.OnFailure = []byte("null"), patientRestarts, config.FailureStop
	cfg.Retry = config.Retry{MaxRetries: 1, InitialBackoff: 1, MaxBackoff: 1}
	rt := startSource(t, env, cfg, &seqSource{t: t, batchSize: 5, total: 10, schema: sdk.SchemaText})
	defer stopRuntime(t, rt)
	lastError := func(want string) func() bool {
		return func() bool {
			st, _ := rt.Connector(KindSource, "seq")
			return st.State == StateError && st.LastError != nil && st.LastError.Message == want
		}
	}
	testkit.WaitFor(t, "the start failed on the missing stream",
		lastError(`producer s/t: stream "s" does not exist (nor its topic "t")`+missingTopicFix))
	if _, err := env.Admin.GetStream(env.Ctx(), iggy.Name("s")); !errors.Is(err, wire.ErrNotFound) {
		t.Fatalf("stream s after the failed start: %v; want it still missing", err)
	}
	if _, err := env.Admin.CreateStream(env.Ctx(), "s"); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the start failed on the missing topic",
		lastError(`producer s/t: topic "t" of stream "s" does not exist`+missingTopicFix))
	if _, err := env.Admin.GetTopic(env.Ctx(), iggy.Name("s"), iggy.Name("t")); !errors.Is(err, wire.ErrNotFound) {
		t.Fatalf("topic s/t after the failed start: %v; want it still missing", err)
	}
	if _, err := env.Admin.CreateTopic(env.Ctx(), iggy.Name("s"), "t", 3); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "10 messages sent", func() bool { st, _ := rt.Connector(KindSource, "seq"); return st.Stats.Sent == 10 })
	if st, _ := rt.Connector(KindSource, "seq"); st.State == StateError {
		t.Fatalf("source %s: %+v", st.State, st.LastError)
	}
	td, err := env.Admin.GetTopic(env.Ctx(), iggy.Name("s"), iggy.Name("t"))
	if err != nil || td.PartitionsCount != 3 {
		t.Fatalf("topic s/t: %+v, %v; want the operator's 3 partitions", td, err)
	}
}

// TestMissingTopicErrors: a sink whose topic is missing, or whose dead-letter stream is,
// fails its start with the same words as a source: the stream, the topic and the flag;
// the dead-letter stream is not created.
func TestMissingTopicErrors(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		topics     [][2]string
		policy     config.FailurePolicy
	}{
		{"topic", `stream s topic t: topic "t" of stream "s" does not exist` + missingTopicFix, [][2]string{{"s", "other"}}, config.FailureStop},
		{"dead-letter stream", `dead-letter producer dlq/dead: stream "dlq" does not exist (nor its topic "dead")` + missingTopicFix,
			[][2]string{{"s", "t"}}, config.FailureDeadLetter},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newIggyEnv(t)
			for _, st := range tc.topics {
				env.Topic(st[0], st[1], 1)
			}
			rt := env.start(testSinkConfig(config.CommitAfterConsuming, tc.policy), newRecSink())
			defer stopRuntime(t, rt)
			st := rt.Status()[0]
			if st.State != StateError || st.LastError == nil || st.LastError.Message != tc.want {
				t.Fatalf("status %s, last error %+v; want error %q", st.State, st.LastError, tc.want)
			}
			if _, err := env.Admin.GetStream(env.Ctx(), iggy.Name("dlq")); !errors.Is(err, wire.ErrNotFound) {
				t.Fatalf("stream dlq: %v; want it missing", err)
			}
		})
	}
}
