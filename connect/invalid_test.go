package connect

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/connect/provider"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/sdk"
)

// TestInvalidConfigSlot: a source whose file does not load is in error with the file's
// error (its name and path as the file gives them), given up at once while its sibling
// runs; an operator's restart while the file is still wrong answers that error; once the
// file is fixed, a restart re-reads it and the source runs.
func TestInvalidConfigSlot(t *testing.T) {
	fastSourceBackoff(t)
	dir := t.TempDir()
	const good = "type = \"source\"\nkey = \"gen\"\nenabled = true\nversion = 0\nname = \"gen source\"\npath = \"builtin:seq\"\n\n" +
		"[[streams]]\nstream = \"s\"\ntopic = \"t\"\nschema = \"text\"\n"
	file := filepath.Join(dir, "gen.toml")
	write := func(body string) {
		if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(strings.Replace(good, "schema = \"text\"\n", "schema = \"text\"\nlinger_time = \"soon\"\n", 1))
	conns, err := config.LoadConnectors(dir, nil)
	if err != nil || len(conns.Invalid) != 1 {
		t.Fatalf("LoadConnectors: %+v, %v", conns, err)
	}
	conns.Sources = []*config.Source{sourceCfg("other")}
	// Instances in the order they are made: the sibling's, then gen's once its file loads.
	srcs := []*seqSource{{t: t, batchSize: 5, total: 10, schema: sdk.SchemaText}, {t: t, batchSize: 5, total: 10, schema: sdk.SchemaText}}
	var made atomic.Int32
	reg := sdk.NewRegistry().AddSource("seq", func() sdk.Source { return srcs[made.Add(1)-1] })
	be := &memSource{}
	rt := newRuntime(Options{Connectors: conns, Builtins: reg, Configs: &provider.Local{Dir: dir}, Logger: quietLog}, be, t.TempDir())
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := rt.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	wantErr := file + `:12: streams[0].linger_time: Invalid linger time: invalid duration "soon": expected a number at "soon"`
	testkit.WaitFor(t, "gen given up", func() bool { st, _ := rt.Connector(KindSource, "gen"); return st.Restart.GaveUp })
	st, _ := rt.Connector(KindSource, "gen")
	if st.State != StateError || st.LastError == nil || st.LastError.Message != wantErr || st.Name != "gen source" ||
		st.Path != "builtin:seq" || st.Source != nil {
		t.Fatalf("gen = %+v (last_error %v), want error %q", st, st.LastError, wantErr)
	}
	testkit.WaitFor(t, "the sibling at the end of its input", func() bool {
		st, _ := rt.Connector(KindSource, "other")
		return st.State == StateStopped
	})
	wantSeq(t, be.snapshot(), 0, 10)

	if err := rt.Restart(context.Background(), KindSource, "gen"); err == nil || !strings.HasSuffix(err.Error(), wantErr) {
		t.Fatalf("restart of a file still wrong: %v, want its error", err)
	}
	write(good)
	if err := rt.Restart(context.Background(), KindSource, "gen"); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "gen at the end of its input", func() bool {
		st, _ := rt.Connector(KindSource, "gen")
		return st.State == StateStopped && st.LastError == nil && st.Source != nil
	})
	wantSeq(t, be.snapshot()[10:], 0, 10)
}
