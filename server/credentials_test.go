package server_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/server"
	"github.com/ferryio/ferry/server/servertest"
)

// TestCredentialsReplaceRootOnExistingDir is issue 14's second bypass: a data dir first
// started on loopback with iggy/iggy, restarted on every interface with other root
// credentials, used to keep accepting iggy/iggy and reject the configured ones.
func TestCredentialsReplaceRootOnExistingDir(t *testing.T) {
	dir := t.TempDir()
	first := servertest.Start(t, servertest.WithDataDir(dir), servertest.WithConfig(func(c *server.Config) {
		c.RootUsername, c.RootPassword = "", "" // the loopback default: iggy/iggy
	}))
	if _, err := dial(t, first).login("iggy", "iggy"); err != nil {
		t.Fatalf("first boot with the default: %v", err)
	}
	closeServer(t, first)

	// Restart off loopback without credentials: refused, the old root is not enough.
	_, err := server.Start(context.Background(), server.Config{Addr: "0.0.0.0:0", DataDir: dir, PasswordIterations: 1000})
	if !errors.Is(err, server.ErrConfig) || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("restart off loopback without credentials: %v", err)
	}

	second := servertest.Start(t, servertest.WithDataDir(dir), servertest.WithConfig(func(c *server.Config) {
		c.Addr, c.RootUsername, c.RootPassword = "0.0.0.0:0", "admin", "n3w-s3cret"
	}))
	if _, err := dial(t, second).login("iggy", "iggy"); evictionReason(err) != wire.EvictionInvalidCredentials {
		t.Fatalf("old default credentials after the restart: %v, want InvalidCredentials", err)
	}
	lr, err := dial(t, second).login("admin", "n3w-s3cret")
	if err != nil || lr.UserID != 0 {
		t.Fatalf("configured credentials: %+v %v, want root (user 0)", lr, err)
	}
	closeServer(t, second)

	// A loopback restart without credentials keeps the root user as it is now.
	third := servertest.Start(t, servertest.WithDataDir(dir), servertest.WithConfig(func(c *server.Config) {
		c.RootUsername, c.RootPassword = "", ""
	}))
	if _, err := dial(t, third).login("admin", "n3w-s3cret"); err != nil {
		t.Fatalf("root after a restart without credentials: %v", err)
	}
	if _, err := dial(t, third).login("iggy", "iggy"); evictionReason(err) != wire.EvictionInvalidCredentials {
		t.Fatalf("iggy/iggy came back: %v", err)
	}
}
