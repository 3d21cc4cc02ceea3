package ferrycli

import (
	"bytes"
	"strings"
	"testing"
)

func TestConformanceFlagErrors(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "") // --s3 without credentials must find none
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--report", "out.txt"}, `--report "out.txt": the name must end in .md or .json`},
		{[]string{"--runtime-env", "NOEQUALS"}, `--runtime-env "NOEQUALS": want KEY=VALUE`},
		{[]string{"--runtime", "   "}, `--runtime "   ": not a command`},
		{[]string{"--soak", "-1"}, "--soak: must be 0 or more"},
		{[]string{"--postgres", "postgres://localhost/db"}, "--postgres: postgres-soak needs --soak N"},
		{[]string{"--postgres-plugin", ""}, "--postgres-plugin: must name the PostgreSQL sink plugin"},
		{[]string{"--s3", "http://a:b@127.0.0.1:9000"}, "--s3: s3-soak needs --soak N"},
		{[]string{"--iceberg", "postgres://localhost/db"}, "--iceberg: iceberg-soak needs --soak N"},
		{[]string{"--soak", "1", "--s3", "127.0.0.1:9000"}, "--s3: want http://ACCESS:SECRET@host:port[?region=R]"},
		{[]string{"--soak", "1", "--s3", "http://127.0.0.1:9000"}, "--s3: no credentials"},
		{[]string{"--modes", "at_once", "--runtime", "/bin/true"}, `conformance: unknown mode "at_once"`},
		{[]string{"--scenarios", "nope", "--runtime", "/bin/true"}, `conformance: unknown scenario "nope"`},
	} {
		cmd := newConformanceCmd()
		cmd.SetArgs(tc.args)
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want it to contain %q", tc.args, err, tc.want)
		}
	}
}

func TestConformanceHelpNamesEveryFlagAndScenario(t *testing.T) {
	cmd := newConformanceCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--help"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"--runtime ", "--runtime-env", "--server", "--modes", "--scenarios", "--report", "--soak", "--seed", "--timeout", "--work-dir", "--verbose",
		"--postgres ", "--postgres-plugin", "postgres-soak", "--s3 ", "s3-soak", "--iceberg ", "iceberg-soak", "clean", "failed-batch", "sigkill-mid-batch", "plugin-abort", "commit-codes", "late-commit", "sigterm-in-flight", "poison", "rebalance", "flaky-network", "server-restart", "soak"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("--help does not mention %q", s)
		}
	}
}
