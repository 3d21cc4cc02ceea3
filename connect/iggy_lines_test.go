package connect

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/internal/testkit"
)

// TestOpenFailureLinesInIggysWords: a sink whose Open fails once logs the failure in the
// words of Iggy's runtime (the init failure and the "Sink: NAME (KEY) - ERR" form, at
// ERROR), then its automatic restart's "Restarting" and "restarted successfully" lines,
// besides Ferry's own "sink not started".
func TestOpenFailureLinesInIggysWords(t *testing.T) {
	env := newIggyEnv(t)
	env.Topic("s", "t", 1)
	cfg := testSinkConfig(config.CommitAfterConsuming, config.FailureStop)
	cfg.Name = "rec sink"
	cfg.Restart = fastRestarts
	rt, logs := env.startLogged(cfg, &flakyOpenSink{recSink: newRecSink(), failures: 1})
	defer stopRuntime(t, rt)
	restarted := `level=INFO msg="Sink connector: rec restarted successfully." sink=rec`
	testkit.WaitFor(t, "the restarted line", func() bool { return strings.Contains(logs.String(), restarted) })
	out := logs.String()
	for _, want := range []string{
		`level=ERROR msg="sink not started"`,
		`level=ERROR msg="Failed to initialize sink container with name: rec sink (rec). target unreachable" sink=rec`,
		`level=ERROR msg="Sink: rec sink (rec) - open: target unreachable" sink=rec`,
		`level=INFO msg="Restarting sink connector: rec" sink=rec`,
		`level=INFO msg="Sink container with name: rec sink (rec) initialized successfully with ID: 2." sink=rec instance=2`,
		`level=INFO msg="Started consuming messages for sink connector with ID: 2" sink=rec instance=2`,
	} {
		if n := strings.Count(out, want); n != 1 {
			t.Fatalf("%d lines %s, want 1:\n%s", n, want, out)
		}
	}
	if strings.Contains(out, "initialized successfully with ID: 1.") {
		t.Fatalf("the instance whose Open failed said it was initialized:\n%s", out)
	}
}

// TestConsumeFailureLineInIggysWords: a sink stopped by a batch that failed for good
// (on_failure = stop, retries spent) logs Iggy's "Failed to consume messages" line with
// its instance ID and the error, then closes its plugin with Iggy's Closing/Closed lines.
func TestConsumeFailureLineInIggysWords(t *testing.T) {
	env := newIggyEnv(t)
	env.Topic("s", "t", 1)
	env.Fill("s", "t", 0, 5, nil)
	sink := newRecSink()
	sink.failBatch, sink.failTimes = 0, -1
	rt, logs := env.startLogged(testSinkConfig(config.CommitAfterConsuming, config.FailureStop), sink)
	defer stopRuntime(t, rt)
	var id uint32
	testkit.WaitFor(t, "the sink closed after its failure", func() bool {
		st, _ := rt.Connector(KindSink, "rec")
		id = st.ID
		return st.State == StateError && strings.Contains(logs.String(), fmt.Sprintf("Closed sink connector with ID: %d for plugin: rec", id))
	})
	out := logs.String()
	failed := fmt.Sprintf(`level=ERROR msg="Failed to consume messages for sink connector with ID: %d: `, id)
	i := strings.Index(out, failed)
	if i < 0 || !strings.Contains(out[i:strings.IndexByte(out[i:], '\n')+i], "target rejected the batch") {
		t.Fatalf("no line %s…target rejected the batch:\n%s", failed, out)
	}
	closing := strings.Index(out, fmt.Sprintf(`level=INFO msg="Closing sink connector with ID: %d for plugin: rec"`, id))
	if closing < i {
		t.Fatalf("no Closing line after the failure:\n%s", out)
	}
}
