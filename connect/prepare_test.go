package connect

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/internal/syncbuf"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/sdk"
)

// TestStartRefusesCommitModeOfSpec: a built-in sink whose spec refuses a commit mode is
// refused at start with it, before its Open, permanently (no restart), with the error
// CheckSink gives (naming the file and offset_commit); with a mode it takes it opens and
// runs. A spec that runs only sink_controlled refuses after_consuming and an explicit
// after_polling; a sink that declares it never commits (sdk.CommitsNever) refuses
// sink_controlled, whose offsets it would never store (every start would deliver
// everything again), and names the mode to set.
func TestStartRefusesCommitModeOfSpec(t *testing.T) {
	env := newIggyEnv(t)
	env.Topic("s", "t", 1)
	only := sdk.ConfigSpec{AnyFields: true, CommitModes: []string{"sink_controlled"}}
	never := sdk.ConfigSpec{AnyFields: true, Commits: sdk.CommitsNever}
	for _, tc := range []struct {
		name  string
		spec  sdk.ConfigSpec
		mode  config.CommitMode
		state State
		err   string
	}{
		{"only/after_consuming", only, config.CommitAfterConsuming, StateError, `connectors/rec.toml: offset_commit = "after_consuming": the sink runs only with offset_commit = "sink_controlled"`},
		{"only/after_polling", only, config.CommitAfterPolling, StateError, `connectors/rec.toml: offset_commit = "after_polling": the sink runs only with offset_commit = "sink_controlled"`},
		{"only/sink_controlled", only, config.CommitSinkControlled, StateRunning, ""},
		{"never/sink_controlled", never, config.CommitSinkControlled, StateError, `connectors/rec.toml: offset_commit = "sink_controlled": the sink never commits its offsets, so none would be stored and every start would deliver everything again; ` +
			`set offset_commit = "after_consuming" (each batch's offset is stored once the sink wrote it) or remove the key (after_polling)`},
		{"never/after_consuming", never, config.CommitAfterConsuming, StateRunning, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testSinkConfig(tc.mode, config.FailureStop)
			cfg.File = "connectors/rec.toml"
			cfg.Restart = fastRestarts
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			sink := &flakyOpenSink{recSink: newRecSink()}
			reg := sdk.NewRegistry().AddSink("rec", func() sdk.Sink { return sink }, tc.spec)
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

// TestUnsetCommitModeRunsTheOnlyMode: a file that sets no offset_commit, of a built-in whose
// spec runs only sink_controlled (as builtin:s3, and a file copied from upstream's
// s3_sink, which has no such key), is not refused: CheckSink passes, SinkCommitMode says
// sink_controlled and that it is the built-in's, and the start gives the sink a Committer,
// says so in exactly one INFO line, and stores what the sink commits (0..19 → 19).
func TestUnsetCommitModeRunsTheOnlyMode(t *testing.T) {
	env := newIggyEnv(t)
	env.Topic("s", "t", 1)
	env.Fill("s", "t", 0, 20, nil)
	cfg := testSinkConfig(config.CommitAfterPolling, config.FailureStop) // what parsing leaves when the key is absent
	cfg.OffsetCommitUnset = true
	cfg.File = "connectors/rec.toml"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	sink := newRecSink()
	sink.commitEach = true
	reg := sdk.NewRegistry().AddSink("rec", func() sdk.Sink { return sink },
		sdk.ConfigSpec{AnyFields: true, CommitModes: []string{"sink_controlled"}, Commits: sdk.CommitsEachBatch})
	var logs syncbuf.Buffer
	opts := Options{Connectors: &config.Connectors{Sinks: []*config.Sink{cfg}}, Client: env.Dial(), Builtins: reg,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))}
	if err := CheckSink(opts, cfg); err != nil {
		t.Fatalf("CheckSink: %v", err)
	}
	if mode, builtin := SinkCommitMode(opts, cfg); mode != config.CommitSinkControlled || !builtin {
		t.Fatalf("SinkCommitMode = %s, %v; want sink_controlled, true", mode, builtin)
	}
	rt, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer stopRuntime(t, rt)
	testkit.WaitFor(t, "offset 19 stored", func() bool { o, ok := env.Stored("g", "s", "t", 0); return ok && o == 19 })
	if st := rt.Status()[0]; st.State != StateRunning || st.Stats.CommitsAccepted != 2 {
		t.Fatalf("status %s, %d commits accepted; want running, 2 (batches of 10)", st.State, st.Stats.CommitsAccepted)
	}
	sink.mu.Lock()
	committer := sink.env.Committer
	sink.mu.Unlock()
	if committer == nil {
		t.Fatal("the sink was opened without a Committer")
	}
	if cfg.OffsetCommit != config.CommitAfterPolling {
		t.Fatalf("the start changed the config it was given: offset_commit %s", cfg.OffsetCommit)
	}
	const line = `sink runs with offset_commit = "sink_controlled": its file sets no offset_commit, and builtin:rec runs only with that mode`
	n := 0
	for l := range strings.Lines(logs.String()) {
		var rec struct{ Level, Msg, Sink, File string }
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if rec.Msg == line {
			n++
			if rec.Level != "INFO" || rec.Sink != "rec" || rec.File != "connectors/rec.toml" {
				t.Fatalf("the line is %+v; want INFO, sink rec, file connectors/rec.toml", rec)
			}
		}
	}
	if n != 1 {
		t.Fatalf("%d lines %q, want 1; logs:\n%s", n, line, logs.String())
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
