package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheck: `ferry check` accepts the quickstart (one line per connector with its mode)
// and refuses a bad connector file with file:line: key: message and a non-zero exit.
func TestCheck(t *testing.T) {
	cmd := exec.Command(ferryBin, "check", "--config", filepath.Join("examples", "quickstart", "config.toml"))
	cmd.Dir = repoRoot
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("check quickstart: %v\n%s", err, out)
	}
	for _, want := range []string{"source quickstart_random", "sink   quickstart_file", "offset_commit=sink_controlled"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("check output lacks %q:\n%s", want, out)
		}
	}

	dir := t.TempDir()
	conns := filepath.Join(dir, "connectors")
	bad := strings.Replace(fileSink("s", "t", "after_consuming", filepath.Join(dir, "o"), 10, 10), "after_consuming", "sometimes", 1)
	writeFile(t, filepath.Join(conns, "sink.toml"), bad)
	cmd = exec.Command(ferryBin, "check", "--config", runtimeConfig(t, dir, conns))
	out, err = cmd.CombinedOutput()
	if exitErr := (*exec.ExitError)(nil); !errors.As(err, &exitErr) {
		t.Fatalf("check of a bad file: err = %v, want a non-zero exit\n%s", err, out)
	}
	if want := filepath.Join(conns, "sink.toml") + ":7: offset_commit: unknown value \"sometimes\""; !strings.Contains(string(out), want) {
		t.Fatalf("check output = %s, want it to contain %q", out, want)
	}
}

// TestCheckPluginConfig: check refuses what the built-in connector's Open would refuse —
// unknown and wrongly typed plugin_config fields, an output file it cannot create —
// naming the file and every field, and never creates anything.
func TestCheckPluginConfig(t *testing.T) {
	dir := t.TempDir()
	conns := filepath.Join(dir, "connectors")
	blocker := filepath.Join(dir, "blocker")
	writeFile(t, blocker, "a regular file where a directory should be")
	out := filepath.Join(blocker, "out.jsonl")
	sink := fileSink("s", "t", "after_consuming", out, 10, 10) + "fsync_each_batch = \"yes\"\nflush_intervall = \"1s\"\n"
	sinkFile := filepath.Join(conns, "sink.toml")
	writeFile(t, sinkFile, sink)
	cmd := exec.Command(ferryBin, "check", "--config", runtimeConfig(t, dir, conns))
	got, err := cmd.CombinedOutput()
	if exitErr := (*exec.ExitError)(nil); !errors.As(err, &exitErr) {
		t.Fatalf("check: err = %v, want a non-zero exit\n%s", err, got)
	}
	// Each problem names the file and the key's line.
	want := sinkFile + ":24: plugin_config.flush_intervall: unknown field (known: path, flush_interval, fsync_each_batch); " +
		sinkFile + `:23: plugin_config.fsync_each_batch: want a bool, got string "yes"; ` +
		sinkFile + ":21: plugin_config.path: " + blocker + " is not a directory (in the path of " + out + ")"
	if !strings.Contains(string(got), want) {
		t.Fatalf("check output:\n%s\nwant it to contain:\n%s", got, want)
	}
	if st, err := os.Stat(blocker); err != nil || !st.Mode().IsRegular() {
		t.Fatalf("check changed %s: %v", blocker, err)
	}
}

// TestCheckMissingConfigDir: check says config_dir is missing and does not create it.
func TestCheckMissingConfigDir(t *testing.T) {
	dir := t.TempDir()
	conns := filepath.Join(dir, "nowhere")
	got, err := exec.Command(ferryBin, "check", "--config", runtimeConfig(t, dir, conns)).CombinedOutput()
	if exitErr := (*exec.ExitError)(nil); !errors.As(err, &exitErr) {
		t.Fatalf("check: err = %v, want a non-zero exit\n%s", err, got)
	}
	if want := "connectors.config_dir " + conns + ": does not exist"; !strings.Contains(string(got), want) {
		t.Fatalf("check output = %s, want %q", got, want)
	}
	if _, err := os.Stat(conns); !os.IsNotExist(err) {
		t.Fatalf("check created config_dir: %v", err)
	}
}

// TestCheckEnvFile: IGGY_CONNECTORS_ENV_PATH's file is loaded before the config (its
// variables override the file's values), and a missing one is an error naming it; a
// missing IGGY_CONNECTORS_CONFIG_PATH file is an error too.
func TestCheckEnvFile(t *testing.T) {
	dir := t.TempDir()
	conns := filepath.Join(dir, "connectors")
	other := filepath.Join(dir, "other")
	writeFile(t, filepath.Join(other, "src.toml"), randomSource("s", "t", 0, 0, 10))
	cfg := runtimeConfig(t, dir, conns)
	envFile := filepath.Join(dir, "ferry.env")
	writeFile(t, envFile, "IGGY_CONNECTORS_CONNECTORS_CONFIG_DIR="+other+"\n")

	run := func(env ...string) (string, error) {
		cmd := exec.Command(ferryBin, "check")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("IGGY_CONNECTORS_CONFIG_PATH="+cfg, "IGGY_CONNECTORS_ENV_PATH="+envFile)
	if err != nil || !strings.Contains(out, "config_dir "+other+",") || !strings.Contains(out, "loaded 1 variable(s) from "+envFile) {
		t.Fatalf("check with env file: %v\n%s", err, out)
	}
	out, err = run("IGGY_CONNECTORS_CONFIG_PATH="+cfg, "IGGY_CONNECTORS_ENV_PATH="+filepath.Join(dir, "none.env"))
	if err == nil || !strings.Contains(out, filepath.Join(dir, "none.env")+" (from IGGY_CONNECTORS_ENV_PATH): env file not found") {
		t.Fatalf("missing env file: %v\n%s", err, out)
	}
	out, err = run("IGGY_CONNECTORS_CONFIG_PATH=" + filepath.Join(dir, "none.toml"))
	if err == nil || !strings.Contains(out, filepath.Join(dir, "none.toml")+" (from IGGY_CONNECTORS_CONFIG_PATH): runtime config not found") {
		t.Fatalf("missing config path: %v\n%s", err, out)
	}
}

// TestConnectorsListing: `ferry connectors` lists every built-in with its fields.
func TestConnectorsListing(t *testing.T) {
	out, err := exec.Command(ferryBin, "connectors").CombinedOutput()
	if err != nil {
		t.Fatalf("connectors: %v\n%s", err, out)
	}
	for _, want := range []string{"sink builtin:file\n", "  path              output path  required", `flush_interval    duration     "1s"`, "source builtin:random\n", "payload_size         unsigned  64"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("connectors output lacks %q:\n%s", want, out)
		}
	}
}

// TestCheckNotALibrary: a native plugin path naming a file that is no shared library (an
// executable named .so) gets the whole of check's output exactly: the connector's line
// ends with dlopen's words and a newline, and the summary stands on a line of its own, in
// the order they are written, stdout and stderr read as one stream.
func TestCheckNotALibrary(t *testing.T) {
	dir := t.TempDir()
	conns := filepath.Join(dir, "connectors")
	lib := filepath.Join(dir, "libs", "notalib.so")
	exe, err := os.ReadFile("/bin/true") // a position-independent executable on Debian
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, lib, string(exe))
	writeFile(t, filepath.Join(conns, "n.toml"), "type = \"sink\"\nkey = \"n\"\nenabled = true\nversion = 0\nname = \"n\"\npath = \""+lib+
		"\"\n\n[[streams]]\nstream = \"s\"\ntopics = [\"t\"]\nschema = \"raw\"\n")
	cfg := filepath.Join(dir, "config.toml")
	state := filepath.Join(dir, "state")
	writeFile(t, cfg, "[iggy]\naddress = \"127.0.0.1:8090\"\n[state]\npath = \""+state+"\"\n[connectors]\nconfig_type = \"local\"\nconfig_dir = \""+conns+
		"\"\n[plugins]\ndirectories = [\""+filepath.Dir(lib)+"\"]\n[http]\nenabled = false\n")
	got, err := exec.Command(ferryBin, "check", "--config", cfg).CombinedOutput()
	if exitErr := (*exec.ExitError)(nil); !errors.As(err, &exitErr) || exitErr.ExitCode() != 1 {
		t.Fatalf("check: err = %v, want exit status 1\n%s", err, got)
	}
	want := "config " + cfg + ": ok (iggy 127.0.0.1:8090, config_dir " + conns + ", state " + state + ")\n" +
		fmt.Sprintf("%-6s %-24s %-30s %s  %s\n", "sink", "n", lib, "offset_commit=after_polling on_failure=stop ← s/[t]",
			"ERROR: Failed to load sink container from "+lib+": plugin "+lib+": not a loadable shared library: "+lib+": cannot dynamically load position-independent executable") +
		"ferry: check: 1 connector(s) with problems\n"
	if string(got) != want {
		t.Fatalf("check output:\n%q\nwant:\n%q", got, want)
	}
}
