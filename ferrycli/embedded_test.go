package ferrycli

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/server"
)

// TestEmbeddedDefaultCredentialsOffLoopback is issue 14's first bypass: a config with
// [iggy] address on every interface and no credentials used to start the embedded
// server there with iggy/iggy, because the config layer's defaults looked explicit.
func TestEmbeddedDefaultCredentialsOffLoopback(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	log := slog.New(slog.DiscardHandler)
	cases := []struct {
		name, toml string
		env        []string
		want       string // "" = starts
	}{
		{"defaults on every interface", "[iggy]\naddress = \"0.0.0.0:0\"\n", nil, "not a loopback address"},
		{"username only on every interface", "[iggy]\naddress = \"0.0.0.0:0\"\nusername = \"admin\"\n", nil, "not a loopback address"},
		{"explicit default password on every interface", "[iggy]\naddress = \"0.0.0.0:0\"\npassword = \"iggy\"\n", nil, "must not be the default"},
		{"explicit password on every interface", "[iggy]\naddress = \"0.0.0.0:0\"\nusername = \"admin\"\npassword = \"s3cret-pw\"\n", nil, ""},
		{"password from the environment", "[iggy]\naddress = \"0.0.0.0:0\"\nusername = \"admin\"\n", []string{"IGGY_CONNECTORS_IGGY_PASSWORD=s3cret-pw"}, ""},
		{"defaults on loopback", "[iggy]\naddress = \"127.0.0.1:0\"\n", nil, ""},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rc, err := config.ParseRuntimeEnv(write("c.toml", "[connectors]\nconfig_dir = \"connectors\"\n"+tc.toml), tc.env)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := embeddedConfig(rc, filepath.Join(dir, "data", strings.Repeat("x", i+1)), false, log)
			if err != nil {
				t.Fatal(err)
			}
			srv, err := server.Start(context.Background(), cfg)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("start: %v", err)
				}
				if err := srv.Close(context.Background()); err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				_ = srv.Close(context.Background())
				t.Fatalf("started on %s with default credentials", srv.Addr())
			}
			if !errors.Is(err, server.ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want ErrConfig with %q", err, tc.want)
			}
		})
	}
}

func TestApplyEmbeddedLimits(t *testing.T) {
	var cfg server.Config
	err := applyEmbeddedLimits(config.Embedded{MaxConnections: 5, MaxConnectionsPerIP: 2, LoginTimeout: "3s", FrameReadTimeout: "4s"}, &cfg)
	if err != nil || cfg.MaxConnections != 5 || cfg.MaxConnectionsPerIP != 2 || cfg.LoginTimeout.String() != "3s" || cfg.FrameReadTimeout.String() != "4s" {
		t.Fatalf("%+v %v", cfg, err)
	}
	if err := applyEmbeddedLimits(config.Embedded{LoginTimeout: "soon"}, &cfg); err == nil || !strings.Contains(err.Error(), "embedded.login_timeout") {
		t.Fatalf("bad duration: %v", err)
	}
}
