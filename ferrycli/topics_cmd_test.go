package ferrycli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ferryio/ferry/internal/testkit/iggykit"
)

// lockedBuffer is a bytes.Buffer a command writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// ferryCmd runs one ferry command line against kit's server (its address and the root
// user prepended as flags) with stdin, and returns its stdout, stderr and error.
func ferryCmd(ctx context.Context, kit *iggykit.Env, stdin string, args ...string) (string, string, error) {
	var out, errOut lockedBuffer
	err := ferryCmdTo(ctx, kit, stdin, &out, &errOut, args...)
	return out.String(), errOut.String(), err
}

func ferryCmdTo(ctx context.Context, kit *iggykit.Env, stdin string, out, errOut *lockedBuffer, args ...string) error {
	root := New().command()
	root.SetArgs(append(args, "--addr", kit.Addr, "--username", "iggy", "--password", "iggy"))
	root.SetIn(strings.NewReader(stdin))
	root.SetOut(out)
	root.SetErr(errOut)
	return root.ExecuteContext(ctx)
}

// mustFerry runs a command that must succeed and returns its stdout.
func mustFerry(t *testing.T, kit *iggykit.Env, stdin string, args ...string) string {
	t.Helper()
	out, errOut, err := ferryCmd(kit.Ctx(), kit, stdin, args...)
	if err != nil {
		t.Fatalf("ferry %s: %v\nstderr: %s", strings.Join(args, " "), err, errOut)
	}
	return out
}

// wantErr runs a command that must fail with exactly want.
func wantErr(t *testing.T, kit *iggykit.Env, want string, args ...string) {
	t.Helper()
	_, _, err := ferryCmd(kit.Ctx(), kit, "", args...)
	if err == nil || err.Error() != want {
		t.Errorf("ferry %s: err %v\nwant %s", strings.Join(args, " "), err, want)
	}
}

// TestStreamAndTopicCommands: ferry stream and ferry topic create, list and delete on the
// embedded server over TCP, with the topic's partitions, expiry and size cap as created;
// the server's refusals keep its words and say what to do.
func TestStreamAndTopicCommands(t *testing.T) {
	kit := iggykit.Start(t)
	if got, want := mustFerry(t, kit, "", "stream", "create", "shop"), "stream shop created (id 0)\n"; got != want {
		t.Errorf("stream create: %q, want %q", got, want)
	}
	got := mustFerry(t, kit, "", "topic", "create", "shop", "orders", "--partitions", "3", "--message-expiry", "7d", "--max-size", "1GiB")
	if want := "topic shop/orders created (id 0, 3 partitions, message expiry 168h0m0s, max size 1073741824 bytes)\n"; got != want {
		t.Errorf("topic create: %q, want %q", got, want)
	}
	mustFerry(t, kit, "", "topic", "create", "shop", "audit", "--message-expiry", "never", "--max-size", "unlimited")
	kit.Produce("shop", "orders", 2, "abc", "de")
	if got, want := mustFerry(t, kit, "", "stream", "list"), "ID  NAME  TOPICS  MESSAGES  BYTES\n0   shop  2       2         "; !strings.HasPrefix(got, want) {
		t.Errorf("stream list:\n%s\nwant it to start with\n%s", got, want)
	}
	got = mustFerry(t, kit, "", "topic", "list", "shop")
	lines := strings.Split(got, "\n")
	want := []string{
		"ID  NAME    PARTITIONS  MESSAGES  BYTES  MESSAGE EXPIRY  MAX SIZE",
		"0   orders  3           2",
		"1   audit   1           0         0      never           unlimited",
	}
	if len(lines) != 4 || lines[0] != want[0] || !strings.HasPrefix(lines[1], want[1]) || !strings.HasSuffix(lines[1], "168h0m0s        1073741824 bytes") || lines[2] != want[2] {
		t.Errorf("topic list:\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}
	got = mustFerry(t, kit, "", "topic", "list", "shop", "--json")
	if !strings.Contains(got, `"name": "orders",`) || !strings.Contains(got, `"message_expiry_us": 604800000000,`) || !strings.Contains(got, `"max_size_bytes": null`) {
		t.Errorf("topic list --json:\n%s", got)
	}

	wantErr(t, kit, `iggy: create stream stream "shop": StreamNameAlreadyExists (1012); a stream of that name exists already: ferry stream list shows them`,
		"stream", "create", "shop")
	wantErr(t, kit, `iggy: create topic stream "shop" topic "orders": TopicNameAlreadyExists (2013); a topic of that name exists already in the stream: ferry topic list STREAM shows them`,
		"topic", "create", "shop", "orders")
	wantErr(t, kit, `iggy: get stream stream "nope": StreamIdNotFound (1009); no such stream: ferry stream list shows them, ferry stream create makes one`,
		"topic", "list", "nope")
	wantErr(t, kit, `--message-expiry "soon": want a duration such as "1h" or "7d", or "never"`,
		"topic", "create", "shop", "x", "--message-expiry", "soon")
	wantErr(t, kit, `--max-size "big": want a size such as "10GiB" or "500MB", or "unlimited"`,
		"topic", "create", "shop", "x", "--max-size", "big")
	wantErr(t, kit, `--partitions 0: want 1..1000`, "topic", "create", "shop", "x", "--partitions", "0")

	if got, want := mustFerry(t, kit, "", "topic", "delete", "shop", "audit"), "topic shop/audit deleted\n"; got != want {
		t.Errorf("topic delete: %q, want %q", got, want)
	}
	wantErr(t, kit, `iggy: delete topic stream "shop" topic "audit": TopicIdNotFound (2010); no such topic: ferry topic list STREAM shows them, ferry topic create makes one`,
		"topic", "delete", "shop", "audit")
	if got, want := mustFerry(t, kit, "", "stream", "delete", "0"), "stream 0 deleted\n"; got != want {
		t.Errorf("stream delete by id: %q, want %q", got, want)
	}
	if got, want := mustFerry(t, kit, "", "stream", "list"), "ID  NAME  TOPICS  MESSAGES  BYTES\n"; got != want {
		t.Errorf("stream list after the delete: %q, want %q", got, want)
	}
}

// TestIggyCommandsReadTheConfig: without flags the commands connect as ferry run does, with
// the config's [iggy] section.
func TestIggyCommandsReadTheConfig(t *testing.T) {
	kit := iggykit.Start(t)
	kit.Topic("s", "t", 1)
	cfg := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(cfg, []byte("[iggy]\naddress = \""+kit.Addr+"\"\nusername = \"iggy\"\npassword = \"iggy\"\n[connectors]\nconfig_dir = \"connectors\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	root := New().command()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"stream", "list", "--config", cfg})
	if err := root.ExecuteContext(kit.Ctx()); err != nil {
		t.Fatal(err)
	}
	if want := "ID  NAME  TOPICS  MESSAGES  BYTES\n0   s     1       0         0\n"; out.String() != want {
		t.Errorf("stream list --config:\n%q\nwant\n%q", out.String(), want)
	}
}

// TestIggyCommandsConnectionErrors: a wrong password and an address nobody listens on are
// refused with the client's words and what to change.
func TestIggyCommandsConnectionErrors(t *testing.T) {
	kit := iggykit.Start(t)
	root := New().command()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs([]string{"stream", "list", "--addr", kit.Addr, "--username", "iggy", "--password", "wrong"})
	err := root.ExecuteContext(kit.Ctx())
	want := `connect to Iggy at ` + kit.Addr + `: iggy: connect ` + kit.Addr + `: login as "iggy": iggy: evicted (InvalidCredentials): iggy: InvalidCredentials (42); check --username and --password, or --token, or [iggy] username, password and token of --config`
	if err == nil || err.Error() != want {
		t.Errorf("wrong password: %v\nwant %s", err, want)
	}
}
