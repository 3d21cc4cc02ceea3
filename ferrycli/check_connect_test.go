package ferrycli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/testkit/iggykit"
)

// connectFixture writes a runtime config pointing at addr and the connector files given
// (name → content) into a fresh config_dir; it returns the config's path and the dir.
func connectFixture(t *testing.T, addr string, files map[string]string) (cfg, conns string) {
	t.Helper()
	dir := t.TempDir()
	conns = filepath.Join(dir, "connectors")
	if err := os.Mkdir(conns, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(conns, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg = filepath.Join(dir, "config.toml")
	body := "[iggy]\naddress = \"" + addr + "\"\n[state]\npath = \"" + filepath.Join(dir, "state") +
		"\"\n[connectors]\nconfig_type = \"local\"\nconfig_dir = \"" + conns + "\"\n"
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg, conns
}

// nullSink is a builtin:null sink file on stream/topics, with extra lines at the end.
func nullSink(key, stream, topics, extra string) string {
	return "type = \"sink\"\nkey = \"" + key + "\"\nenabled = true\nversion = 0\nname = \"" + key + "\"\npath = \"builtin:null\"\n" + extra +
		"\n[[streams]]\nstream = \"" + stream + "\"\ntopics = [" + topics + "]\nschema = \"raw\"\n"
}

// TestCheckConnectIggyTopics: check --connect reads every stream and topic the enabled
// connectors name from the Iggy server (the embedded one over TCP): one that exists is
// noted with its partition count; a missing stream, a missing topic, a missing dead-letter
// stream and a topic without partitions are each refused naming the connector's file, the
// key and the command that fixes it; a disabled connector is not looked at. With
// --create-topics the missing ones are what run would create, and still nothing is
// created. Plain check connects to nothing.
func TestCheckConnectIggyTopics(t *testing.T) {
	kit := iggykit.Start(t)
	kit.Topic("s", "t", 3)
	kit.Topic("s", "u", 1)
	if _, err := kit.Admin.CreateTopic(kit.Ctx(), iggy.Name("s"), "empty", 0); err != nil {
		t.Fatal(err)
	}
	src := "type = \"source\"\nkey = \"gen\"\nenabled = true\nversion = 0\nname = \"gen\"\npath = \"builtin:random\"\n" +
		"\n[[streams]]\nstream = \"s\"\ntopic = \"nosuch\"\nschema = \"json\"\n"
	cfg, conns := connectFixture(t, kit.Addr, map[string]string{
		"a_ok.toml":     nullSink("ok", "s", `"t", "u"`, ""),
		"b_dl.toml":     nullSink("dl", "s", `"t"`, "on_failure = \"dead_letter\"\n[dead_letter]\nstream = \"dlq\"\ntopic = \"rejected\"\n"),
		"c_gone.toml":   nullSink("gone", "gone", `"t"`, ""),
		"d_empty.toml":  nullSink("empty", "s", `"t", "empty"`, ""),
		"e_off.toml":    strings.Replace(nullSink("off", "nowhere", `"t"`, ""), "enabled = true", "enabled = false", 1),
		"f_source.toml": src,
	})
	file := func(name string) string { return filepath.Join(conns, name) }
	var out bytes.Buffer
	if err := check(&out, startOptions{config: cfg}); err != nil {
		t.Fatalf("check without --connect: %v\n%s", err, out.String())
	}

	out.Reset()
	err := checkWith(&out, startOptions{config: cfg}, &connectCheck{partitions: 2})
	if err == nil || err.Error() != "check: 4 connector(s) with problems" {
		t.Fatalf("check --connect: %v, want 4 connectors with problems\n%s", err, out.String())
	}
	at := " on the Iggy server at " + kit.Addr
	for _, want := range []string{
		"iggy   " + kit.Addr + "  ok\n",
		"source gen                      builtin:random                 → s/nosuch schema=json  ERROR: " + file("f_source.toml") +
			`: streams[0].topic: topic "nosuch" does not exist in stream "s"` + at +
			"; fix: ferry topic create s nosuch --partitions 2, or ferry run --create-topics (it creates every missing stream and topic), or correct streams[0].topic\n",
		"sink   ok                       builtin:null                   offset_commit=after_polling on_failure=stop ← s/[t u] [iggy: s/t: 3 partition(s); s/u: 1 partition(s)]  ok\n",
		"sink   dl                       builtin:null                   offset_commit=after_polling on_failure=dead_letter ← s/[t] [iggy: s/t: 3 partition(s)]  ERROR: " + file("b_dl.toml") +
			`: dead_letter.stream: stream "dlq" does not exist` + at +
			"; fix: ferry stream create dlq && ferry topic create dlq rejected --partitions 2, or ferry run --create-topics (it creates every missing stream and topic), or correct dead_letter.stream\n",
		"sink   gone                     builtin:null                   offset_commit=after_polling on_failure=stop ← gone/[t]  ERROR: " + file("c_gone.toml") +
			`: streams[0].stream: stream "gone" does not exist` + at +
			"; fix: ferry stream create gone && ferry topic create gone t --partitions 2, or ferry run --create-topics (it creates every missing stream and topic), or correct streams[0].stream\n",
		"sink   empty                    builtin:null                   offset_commit=after_polling on_failure=stop ← s/[t empty] [iggy: s/t: 3 partition(s)]  ERROR: " + file("d_empty.toml") +
			`: streams[0].topics[1]: topic "empty" of stream "s" has no partitions: nothing can be sent to it or polled from it; fix: ferry topic delete s empty && ferry topic create s empty --partitions 2` + "\n",
		"sink   off                      builtin:null                   offset_commit=after_polling on_failure=stop ← nowhere/[t]  disabled\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("check --connect output:\n%s\nwant it to contain:\n%s", out.String(), want)
		}
	}

	out.Reset()
	err = checkWith(&out, startOptions{config: cfg}, &connectCheck{createTopics: true, partitions: 2})
	if err == nil || err.Error() != "check: 1 connector(s) with problems" || !strings.Contains(out.String(), `streams[0].topics[1]: topic "empty" of stream "s" has no partitions`) {
		t.Fatalf("check --connect --create-topics: %v, want only the topic without partitions refused\n%s", err, out.String())
	}
	for _, want := range []string{
		"→ s/nosuch schema=json [iggy: s/nosuch: missing, --create-topics creates it with 2 partition(s)]  ok\n",
		"← s/[t] [iggy: s/t: 3 partition(s); dlq/rejected: missing, --create-topics creates it with 2 partition(s)]  ok\n",
		"← gone/[t] [iggy: gone/t: missing, --create-topics creates it with 2 partition(s)]  ok\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("check --connect --create-topics output:\n%s\nwant it to contain:\n%s", out.String(), want)
		}
	}
	for _, s := range []string{"dlq", "gone"} {
		if _, err := kit.Admin.GetStream(kit.Ctx(), iggy.Name(s)); !errors.Is(err, wire.ErrNotFound) {
			t.Fatalf("stream %s after check: %v, want it still missing", s, err)
		}
	}
	if _, err := kit.Admin.GetTopic(kit.Ctx(), iggy.Name("s"), iggy.Name("nosuch")); !errors.Is(err, wire.ErrNotFound) {
		t.Fatalf("topic s/nosuch after check: %v, want it still missing", err)
	}
}

// TestCheckConnectIggyUnreachable: check --connect with no Iggy server at [iggy] address
// says so on its own line, naming the config file, the key and the fix, and fails; the
// connectors are still checked (their built-ins' own checks run). With --embedded the
// Iggy side is skipped, saying so.
func TestCheckConnectIggyUnreachable(t *testing.T) {
	cfg, _ := connectFixture(t, "127.0.0.1:1", map[string]string{"a.toml": nullSink("ok", "s", `"t"`, "")})
	var out bytes.Buffer
	err := checkWith(&out, startOptions{config: cfg, ctx: context.Background()}, &connectCheck{partitions: 1})
	if err == nil || err.Error() != "check: the Iggy server unreachable" {
		t.Fatalf("check --connect: %v\n%s", err, out.String())
	}
	want := "iggy   127.0.0.1:1  ERROR: " + cfg + ": iggy.address: cannot reach or log in to the Iggy server at 127.0.0.1:1: "
	fix := "; fix: start the server, or correct [iggy] address and the credentials (username/password or token)\n"
	lines := strings.Split(out.String(), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[1]+"\n", want) || !strings.HasSuffix(lines[1]+"\n", fix) {
		t.Fatalf("check --connect output:\n%s\nwant its second line to be %q…%q", out.String(), want, fix)
	}
	if !strings.Contains(out.String(), "sink   ok                       builtin:null                   offset_commit=after_polling on_failure=stop ← s/[t]  ok\n") {
		t.Fatalf("check --connect output:\n%s\nwant the sink checked and ok", out.String())
	}

	// With --embedded no server runs during the check: the Iggy side is skipped, saying why.
	out.Reset()
	if err := checkWith(&out, startOptions{config: cfg, embedded: true, data: t.TempDir()}, &connectCheck{partitions: 2}); err != nil {
		t.Fatalf("check --connect --embedded: %v\n%s", err, out.String())
	}
	if want := "iggy   embedded: not running during check; ferry run --embedded creates every missing stream and topic (--partitions: 2)\n"; !strings.Contains(out.String(), want) {
		t.Fatalf("check --connect --embedded output:\n%s\nwant it to contain %q", out.String(), want)
	}
}
