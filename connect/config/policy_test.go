package config

import (
	"reflect"
	"testing"
	"time"
)

const srcHdr = "type = \"source\"\nkey = \"k\"\nenabled = true\nversion = 1\nname = \"n\"\npath = \"builtin:seq\"\n"
const srcStream = "[[streams]]\nstream = \"s\"\ntopic = \"t\"\nschema = \"json\"\n" // lines 7-10 after srcHdr

func TestRestartAndFailureDefaultConstants(t *testing.T) {
	if DefaultMaxRestarts != 60 || DefaultRestartInitialBackoff != time.Second || DefaultRestartMaxBackoff != 5*time.Second {
		t.Fatalf("restart defaults %d %v %v", DefaultMaxRestarts, DefaultRestartInitialBackoff, DefaultRestartMaxBackoff)
	}
}

func TestSourceFailureAndRestartKeys(t *testing.T) {
	p := writeFile(t, t.TempDir(), "src.toml", srcHdr+`on_failure = "dead_letter"
`+srcStream+`
[retry]
max_retries = 7
initial_backoff = "5ms"
max_backoff = "1 s"

[dead_letter]
stream = "dlq"
topic = "bad"

[restart]
max_restarts = 0
initial_backoff = "0"
max_backoff = "0"
`)
	s, err := ParseSourceFile(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.OnFailure != FailureDeadLetter || s.Retry != (Retry{7, 5 * time.Millisecond, time.Second}) ||
		s.DeadLetter != (DeadLetter{"dlq", "bad"}) || s.Restart != (RestartPolicy{}) {
		t.Fatalf("unexpected %+v", s)
	}
	if got := s.String(); got != "source k v1 ("+p+") path=builtin:seq enabled=true on_failure=dead_letter streams=1 plugin_config=null" {
		t.Fatalf("String() = %s", got)
	}
}

func TestSinkRestartKeys(t *testing.T) {
	p := writeFile(t, t.TempDir(), "audit.toml", minimalSink+"[restart]\nmax_restarts = 3\ninitial_backoff = \"250ms\"\nmax_backoff = \"1m\"\n")
	s, err := ParseSinkFile(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Restart != (RestartPolicy{3, 250 * time.Millisecond, time.Minute}) {
		t.Fatalf("restart = %+v", s.Restart)
	}
}

func TestRestartAndFailureEnvOverrides(t *testing.T) {
	dir := t.TempDir()
	sink := writeFile(t, dir, "audit.toml", minimalSink)
	s, err := ParseSinkFile(sink, []string{
		"IGGY_CONNECTORS_SINK_AUDIT_RESTART_MAX_RESTARTS=0",
		"IGGY_CONNECTORS_SINK_AUDIT_RESTART_INITIAL_BACKOFF=2s",
		"IGGY_CONNECTORS_SINK_AUDIT_RESTART_MAX_BACKOFF=1m",
	})
	if err != nil {
		t.Fatal(err)
	}
	if s.Restart != (RestartPolicy{0, 2 * time.Second, time.Minute}) || len(s.Warnings) != 0 {
		t.Fatalf("restart = %+v warnings %q", s.Restart, s.Warnings)
	}
	src := writeFile(t, dir, "src.toml", srcHdr+srcStream)
	so, err := ParseSourceFile(src, []string{
		"IGGY_CONNECTORS_SOURCE_K_ON_FAILURE=dead_letter",
		"IGGY_CONNECTORS_SOURCE_K_DEAD_LETTER_STREAM=d",
		"IGGY_CONNECTORS_SOURCE_K_DEAD_LETTER_TOPIC=t",
		"IGGY_CONNECTORS_SOURCE_K_RETRY_MAX_RETRIES=0",
		"IGGY_CONNECTORS_SOURCE_K_RETRY_INITIAL_BACKOFF=1ms",
		"IGGY_CONNECTORS_SOURCE_K_RESTART_MAX_RESTARTS=4",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := struct {
		p  FailurePolicy
		r  Retry
		dl DeadLetter
		rs RestartPolicy
	}{FailureDeadLetter, Retry{0, time.Millisecond, 5 * time.Second}, DeadLetter{"d", "t"}, RestartPolicy{4, time.Second, 5 * time.Second}}
	got := struct {
		p  FailurePolicy
		r  Retry
		dl DeadLetter
		rs RestartPolicy
	}{so.OnFailure, so.Retry, so.DeadLetter, so.Restart}
	if !reflect.DeepEqual(got, want) || len(so.Warnings) != 0 {
		t.Fatalf("got %+v want %+v warnings %q", got, want, so.Warnings)
	}
}

func TestRestartAndFailureErrors(t *testing.T) {
	const sinkHdr = "type = \"sink\"\nkey = \"k\"\nenabled = true\nversion = 1\nname = \"n\"\npath = \"builtin:null\"\n"
	const sinkStream = "[[streams]]\nstream = \"s\"\ntopics = [\"t\"]\nschema = \"json\"\n"
	for _, tc := range []struct {
		name, body string
		source     bool
		env        []string
		line       int
		key, envv  string
		msg        string
	}{
		{name: "sink restart initial zero", body: sinkHdr + sinkStream + "[restart]\ninitial_backoff = \"0\"\n", line: 12, key: "restart.initial_backoff",
			msg: "must be positive when restart.max_restarts > 0"},
		{name: "sink restart max zero", body: sinkHdr + sinkStream + "[restart]\nmax_restarts = 1\nmax_backoff = \"0s\"\n", line: 13, key: "restart.max_backoff",
			msg: "must be positive when restart.max_restarts > 0"},
		{name: "sink restart order", body: sinkHdr + sinkStream + "[restart]\ninitial_backoff = \"30s\"\n", line: 11, key: "restart.max_backoff",
			msg: "must be at least restart.initial_backoff (30s)"},
		{name: "restart order even when never restarting", body: sinkHdr + sinkStream + "[restart]\nmax_restarts = 0\ninitial_backoff = \"2s\"\nmax_backoff = \"1s\"\n", line: 14, key: "restart.max_backoff",
			msg: "must be at least restart.initial_backoff (2s)"},
		{name: "restart bad duration", body: sinkHdr + sinkStream + "[restart]\nmax_backoff = \"soon\"\n", line: 12, key: "restart.max_backoff"},
		{name: "restart unknown key", body: sinkHdr + sinkStream + "[restart]\nmax_restart = 1\n", line: 12, key: "restart.max_restart", msg: "unknown key"},
		{name: "restart wrong type", body: sinkHdr + sinkStream + "[restart]\nmax_restarts = -1\n", line: 12, key: "restart.max_restarts"},
		{name: "source restart initial zero", source: true, body: srcHdr + srcStream + "[restart]\nmax_restarts = 2\ninitial_backoff = \"0\"\n", line: 13, key: "restart.initial_backoff",
			msg: "must be positive when restart.max_restarts > 0"},
		{name: "source restart env", source: true, body: srcHdr + srcStream, env: []string{"IGGY_CONNECTORS_SOURCE_K_RESTART_MAX_BACKOFF=100ms"},
			key: "restart.max_backoff", envv: "IGGY_CONNECTORS_SOURCE_K_RESTART_MAX_BACKOFF", msg: "must be at least restart.initial_backoff (1s)"},
		{name: "source env restart type", source: true, body: srcHdr + srcStream, env: []string{"IGGY_CONNECTORS_SOURCE_K_RESTART_MAX_RESTARTS=many"},
			key: "restart.max_restarts", envv: "IGGY_CONNECTORS_SOURCE_K_RESTART_MAX_RESTARTS", msg: `want an unsigned integer of 32 bits, got "many"`},
		{name: "source bad on_failure", source: true, body: srcHdr + "on_failure = \"retry\"\n" + srcStream, line: 7, key: "on_failure",
			msg: `unknown value "retry" (want stop, dead_letter or skip)`},
		{name: "source dead_letter without table", source: true, body: srcHdr + "on_failure = \"dead_letter\"\n" + srcStream, line: 7, key: "dead_letter.stream",
			msg: `required when on_failure = "dead_letter"`},
		{name: "source dead_letter without topic", source: true, body: srcHdr + "on_failure = \"dead_letter\"\n" + srcStream + "[dead_letter]\nstream = \"d\"\n", line: 12, key: "dead_letter.topic",
			msg: `required when on_failure = "dead_letter"`},
		{name: "source retry initial zero", source: true, body: srcHdr + srcStream + "[retry]\ninitial_backoff = \"0\"\n", line: 12, key: "retry.initial_backoff", msg: "must be positive"},
		{name: "source retry order", source: true, body: srcHdr + srcStream + "[retry]\nmax_backoff = \"1ms\"\n", line: 12, key: "retry.max_backoff",
			msg: "must be at least retry.initial_backoff (100ms)"},
		{name: "source retry unknown key", source: true, body: srcHdr + srcStream + "[retry]\nretries = 1\n", line: 12, key: "retry.retries", msg: "unknown key"},
		{name: "source env on_failure", source: true, body: srcHdr + srcStream, env: []string{"IGGY_CONNECTORS_SOURCE_K_ON_FAILURE=dead_letter"},
			key: "dead_letter.stream", envv: "IGGY_CONNECTORS_SOURCE_K_ON_FAILURE", msg: `required when on_failure = "dead_letter"`},
		{name: "source env bad on_failure", source: true, body: srcHdr + srcStream, env: []string{"IGGY_CONNECTORS_SOURCE_K_ON_FAILURE=explode"},
			key: "on_failure", envv: "IGGY_CONNECTORS_SOURCE_K_ON_FAILURE", msg: `unknown value "explode" (want stop, dead_letter or skip)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeFile(t, t.TempDir(), "c.toml", tc.body)
			var err error
			if tc.source {
				_, err = ParseSourceFile(p, tc.env)
			} else {
				_, err = ParseSinkFile(p, tc.env)
			}
			ce := wantErr(t, err, p, tc.line, tc.key, tc.envv)
			if tc.msg != "" && ce.Msg != tc.msg {
				t.Errorf("msg = %q, want %q", ce.Msg, tc.msg)
			}
		})
	}
}

func TestValidateHandBuiltSource(t *testing.T) {
	s := &Source{Common: Common{File: "api", Key: "k", Name: "n", Path: "builtin:seq", PluginConfig: []byte("null")},
		OnFailure: FailureSkip, Retry: Retry{1, time.Millisecond, time.Millisecond}}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	s.Restart = RestartPolicy{MaxRestarts: 1, InitialBackoff: time.Second}
	ce := wantErr(t, s.Validate(), "api", 0, "restart.max_backoff", "")
	if ce.Msg != "must be positive when restart.max_restarts > 0" {
		t.Fatalf("msg %q", ce.Msg)
	}
	s.Restart = RestartPolicy{}
	s.OnFailure = ""
	wantErr(t, s.Validate(), "api", 0, "on_failure", "")
}
