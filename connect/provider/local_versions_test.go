package provider

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferryio/ferry/connect/config"
)

// versionsDir holds sink a versions 0, 1 (disabled), 3, sink b 2 and source a 7.
func versionsDir(t *testing.T) (string, *Local) {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, dir, "a3.toml", sinkFile("a", 3, "A3"))
	writeFile(t, dir, "a0.toml", sinkFile("a", 0, "A0"))
	writeFile(t, dir, "a1.toml", strings.Replace(sinkFile("a", 1, "A1"), "enabled = true", "enabled = false", 1))
	writeFile(t, dir, "b.toml", sinkFile("b", 2, "B2"))
	writeFile(t, dir, "src.toml", "type = \"source\"\nkey = \"a\"\nenabled = true\nversion = 7\nname = \"SA\"\npath = \"builtin:seq\"\n")
	return dir, &Local{Dir: dir}
}

func sinkNames(ss []*config.Sink) string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Name)
	}
	return strings.Join(out, ",")
}

func TestProviderConfigs(t *testing.T) {
	_, p := versionsDir(t)
	ss, err := p.SinkConfigs("a")
	if err != nil || sinkNames(ss) != "A0,A1,A3" {
		t.Fatalf("SinkConfigs(a) = %s, %v", sinkNames(ss), err)
	}
	if ss, err := p.SinkConfigs("nope"); err != nil || len(ss) != 0 {
		t.Fatalf("SinkConfigs(nope) = %v, %v", ss, err)
	}
	so, err := p.SourceConfigs("a")
	if err != nil || len(so) != 1 || so[0].Name != "SA" {
		t.Fatalf("SourceConfigs(a) = %v, %v", so, err)
	}
	s, err := p.SinkConfig("a", 1)
	if err != nil || s.Name != "A1" || s.Enabled {
		t.Fatalf("SinkConfig(a, 1) = %+v, %v", s, err)
	}
	_, err = p.SinkConfig("a", 2)
	if !errors.Is(err, ErrConfigNotFound) || err.Error() != `connector config not found: sink "a" version 2 in `+p.Dir {
		t.Fatalf("SinkConfig(a, 2) err = %v", err)
	}
	if _, err := p.SourceConfig("a", 0); !errors.Is(err, ErrConfigNotFound) {
		t.Fatalf("SourceConfig(a, 0) err = %v", err)
	}
	if s, err := p.SourceConfig("a", 7); err != nil || s.Name != "SA" {
		t.Fatalf("SourceConfig(a, 7) = %+v, %v", s, err)
	}
}

func TestProviderActiveMatchesLoadConnectors(t *testing.T) {
	dir, p := versionsDir(t)
	check := func(wantA string) {
		t.Helper()
		s, err := p.ActiveSink("a")
		if err != nil || s.Name != wantA {
			t.Fatalf("ActiveSink(a) = %+v, %v; want %s", s, err, wantA)
		}
		c, err := config.LoadConnectors(dir, nil)
		if err != nil || c.Sink("a").Name != wantA {
			t.Fatalf("LoadConnectors chose %+v, %v; want %s", c.Sink("a"), err, wantA)
		}
	}
	check("A3") // no pins: the highest
	if err := p.SetActiveSink("a", 1); err != nil {
		t.Fatal(err)
	}
	check("A1") // pinned, disabled or not
	writeFile(t, dir, config.ActiveVersionsFile, "[sinks\n")
	check("A3") // an unreadable file is ignored

	writeFile(t, dir, config.ActiveVersionsFile, "[sinks]\na = 9\n")
	_, err := p.ActiveSink("a")
	if !errors.Is(err, ErrConfigNotFound) ||
		err.Error() != `connector config not found: sink "a": active version 9 (.active_versions.toml) has no config file in `+dir {
		t.Fatalf("pinned missing: %v", err)
	}
	if _, err := p.ActiveSink("zzz"); !errors.Is(err, ErrConfigNotFound) || err.Error() != `connector config not found: sink "zzz" in `+dir {
		t.Fatalf("unknown key: %v", err)
	}
	if s, err := p.ActiveSource("a"); err != nil || s.Version != 7 {
		t.Fatalf("ActiveSource(a) = %+v, %v", s, err)
	}
	if _, err := p.ActiveSource("b"); !errors.Is(err, ErrConfigNotFound) {
		t.Fatalf("ActiveSource(b) = %v", err)
	}
}

func TestSetActiveKeepsOtherPins(t *testing.T) {
	dir, p := versionsDir(t)
	writeFile(t, dir, config.ActiveVersionsFile, "[sinks]\nb = 2\n[sources]\na = 7\n")
	if err := p.SetActiveSink("a", 0); err != nil {
		t.Fatal(err)
	}
	if got := readText(t, filepath.Join(dir, config.ActiveVersionsFile)); got != "[sinks]\na = 0\nb = 2\n\n[sources]\na = 7\n" {
		t.Fatalf("active versions:\n%s", got)
	}
	err := p.SetActiveSink("a", 2)
	if !errors.Is(err, ErrConfigNotFound) {
		t.Fatalf("missing version: %v", err)
	}
	if err := p.SetActiveSource("a", 3); !errors.Is(err, ErrConfigNotFound) {
		t.Fatalf("missing source version: %v", err)
	}
	if err := p.SetActiveSource("a", 7); err != nil {
		t.Fatal(err)
	}
	if got := readText(t, filepath.Join(dir, config.ActiveVersionsFile)); got != "[sinks]\na = 0\nb = 2\n\n[sources]\na = 7\n" {
		t.Fatalf("active versions:\n%s", got)
	}
	// An unparsable file is not overwritten.
	writeFile(t, dir, config.ActiveVersionsFile, "[sinks\n")
	if err := p.SetActiveSink("a", 0); err == nil || readText(t, filepath.Join(dir, config.ActiveVersionsFile)) != "[sinks\n" {
		t.Fatalf("broken file: err %v", err)
	}
	if got, want := strings.Join(dirNames(t, dir), " "), ".active_versions.toml a0.toml a1.toml a3.toml b.toml src.toml"; got != want {
		t.Fatalf("dir = %s, want %s", got, want)
	}
}

func TestDeleteConfig(t *testing.T) {
	dir, p := versionsDir(t)
	u := func(v uint64) *uint64 { return &v }
	active := filepath.Join(dir, config.ActiveVersionsFile)

	// Without a pin, deleting "the active version" is an error.
	err := p.DeleteSinkConfig("a", nil)
	if !errors.Is(err, ErrConfigNotFound) || err.Error() != `connector config not found: sink "a" has no active version in `+active {
		t.Fatalf("no pin: %v", err)
	}
	if err := p.DeleteSinkConfig("a", u(2)); !errors.Is(err, ErrConfigNotFound) {
		t.Fatalf("missing version: %v", err)
	}
	// A version that is not pinned: the pin on another version stays.
	if err := p.SetActiveSink("a", 1); err != nil {
		t.Fatal(err)
	}
	if err := p.DeleteSinkConfig("a", u(0)); err != nil {
		t.Fatal(err)
	}
	if got := readText(t, active); got != "[sinks]\na = 1\n\n[sources]\n" {
		t.Fatalf("active versions:\n%s", got)
	}
	// The pinned version: the pin goes with it.
	if err := p.SetActiveSink("b", 2); err != nil {
		t.Fatal(err)
	}
	if err := p.DeleteSinkConfig("a", nil); err != nil {
		t.Fatal(err)
	}
	if got := readText(t, active); got != "[sinks]\nb = 2\n\n[sources]\n" {
		t.Fatalf("active versions:\n%s", got)
	}
	if got, want := strings.Join(dirNames(t, dir), " "), ".active_versions.toml a3.toml b.toml src.toml"; got != want {
		t.Fatalf("dir = %s, want %s", got, want)
	}
	// An explicit version that is pinned also drops the pin.
	if err := p.DeleteSinkConfig("b", u(2)); err != nil {
		t.Fatal(err)
	}
	if got := readText(t, active); got != "[sinks]\n[sources]\n" {
		t.Fatalf("active versions:\n%s", got)
	}
	// A source of the same key is its own config.
	if err := p.DeleteSourceConfig("a", u(3)); !errors.Is(err, ErrConfigNotFound) {
		t.Fatalf("source a 3: %v", err)
	}
	if err := p.DeleteSourceConfig("a", u(7)); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(dirNames(t, dir), " "), ".active_versions.toml a3.toml"; got != want {
		t.Fatalf("dir = %s, want %s", got, want)
	}
}

// Two files for one (key, version) are refused by the provider as by the loader; a symlink
// to a config is the same config, and deleting it removes both names.
func TestProviderDuplicatesAndSymlinks(t *testing.T) {
	dir := t.TempDir()
	first := writeFile(t, dir, "x1.toml", sinkFile("x", 1, "first"))
	second := writeFile(t, dir, "x2.toml", sinkFile("x", 1, "second"))
	writeFile(t, dir, "x0.toml", sinkFile("x", 0, "zero"))
	p := &Local{Dir: dir}
	v := uint64(1)
	err := p.DeleteSinkConfig("x", &v)
	if err == nil || !strings.Contains(err.Error(), second+": key: sink \"x\" version 1 is also defined in "+first) {
		t.Fatalf("delete with duplicates: %v", err)
	}
	if err := os.Remove(second); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(first, filepath.Join(dir, "x1_link.toml")); err != nil {
		t.Fatal(err)
	}
	if err := p.DeleteSinkConfig("x", &v); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(dirNames(t, dir), " "), "x0.toml"; got != want {
		t.Fatalf("dir = %s, want %s", got, want)
	}
	s, err := p.ActiveSink("x")
	if err != nil || s.Name != "zero" {
		t.Fatalf("after delete: %+v %v", s, err)
	}
}

func TestProviderEnvAndParseErrors(t *testing.T) {
	dir, p := versionsDir(t)
	p.Env = []string{"IGGY_CONNECTORS_SINK_A_NAME=env"}
	s, err := p.ActiveSink("a")
	if err != nil || s.Name != "env" {
		t.Fatalf("env not applied: %+v %v", s, err)
	}
	bad := writeFile(t, dir, "zz.toml", "type = \"sink\"\nkey = \"c\"\n")
	// Reads of another key go on; reads of c and every write fail with its error.
	if _, err := p.ActiveSink("a"); err != nil {
		t.Fatalf("ActiveSink(a) beside an invalid c: %v", err)
	}
	_, err = p.SinkConfigs("c")
	wantErr(t, err, bad, 1, "enabled", "")
	_, err = p.ActiveSink("c")
	wantErr(t, err, bad, 1, "enabled", "")
	_, err = p.CreateSink("a", []byte(minimalBody))
	wantErr(t, err, bad, 1, "enabled", "")
}
