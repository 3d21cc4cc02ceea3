package connect

import (
	"context"
	"testing"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/sdk"
)

// TestStartRefusesCommitModeOfSpec: a built-in sink whose spec runs only sink_controlled
// is refused at start with after_consuming, before its Open, permanently (no restart),
// with the error CheckSink gives (naming the file and offset_commit); with sink_controlled
// it opens and runs.
func TestStartRefusesCommitModeOfSpec(t *testing.T) {
	env := newIggyEnv(t)
	env.Topic("s", "t", 1)
	spec := sdk.ConfigSpec{AnyFields: true, CommitModes: []string{"sink_controlled"}}
	for _, tc := range []struct {
		mode  config.CommitMode
		state State
		err   string
	}{
		{config.CommitAfterConsuming, StateError, `connectors/rec.toml: offset_commit = "after_consuming": the sink runs only with offset_commit = "sink_controlled"`},
		{config.CommitSinkControlled, StateRunning, ""},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			cfg := testSinkConfig(tc.mode, config.FailureStop)
			cfg.File = "connectors/rec.toml"
			cfg.Restart = fastRestarts
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			sink := &flakyOpenSink{recSink: newRecSink()}
			reg := sdk.NewRegistry().AddSink("rec", func() sdk.Sink { return sink }, spec)
			opts := Options{Connectors: &config.Connectors{Sinks: []*config.Sink{cfg}}, Client: env.Dial(), Builtins: reg, Logger: quietLog}
			checkErr := CheckSink(opts, cfg)
			if got := errText(checkErr); got != tc.err {
				t.Fatalf("CheckSink: %q, want %q", got, tc.err)
			}
			rt, err := New(opts)
			if err != nil {
				t.Fatal(err)
			}
			if err := rt.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			defer stopRuntime(t, rt)
			st := rt.Status()[0]
			msg := ""
			if st.LastError != nil {
				msg = st.LastError.Message
			}
			if st.State != tc.state || msg != tc.err {
				t.Fatalf("status %s, last error %v; want %s, %q", st.State, st.LastError, tc.state, tc.err)
			}
			sink.mu.Lock()
			opens := sink.opens
			sink.mu.Unlock()
			if want := map[bool]int{true: 0, false: 1}[tc.err != ""]; opens != want {
				t.Fatalf("%d opens, want %d", opens, want)
			}
			if tc.err != "" && (st.Restart.Restarts != 0 || !st.Restart.NextRetry.IsZero()) {
				t.Fatalf("a refused commit mode is retried: %+v", st.Restart)
			}
		})
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
