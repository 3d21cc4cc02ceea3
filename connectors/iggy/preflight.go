package iggy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	iggyclient "github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/sdk"
)

var _ sdk.Preflighter = (*Source)(nil)

// Preflight implements sdk.Preflighter (`ferry check --connect`): the remote Iggy server
// answers at address (or addresses), over TLS when tls_enabled, takes the login (token, or
// username and password), and holds the stream and the topic. Nothing is created: the
// consumer group, which Open joins (and the remote creates when missing), is not touched.
func (s *Source) Preflight(ctx context.Context, raw []byte) []error {
	cfg, err := Config.Parse(raw)
	if err != nil {
		return []error{err}
	}
	log := slog.New(slog.DiscardHandler)
	opts, who, err := cfg.dialOptions(log)
	if err != nil {
		return []error{err}
	}
	addrKey := "address"
	if cfg.Address == "" {
		addrKey = "addresses"
	}
	c, err := iggyclient.Dial(ctx, cfg.address(), opts...)
	if err != nil {
		if isAuth(err) {
			keys := "username, password"
			if who != "user "+cfg.Username {
				keys = "token"
			}
			fix := "fix them, or give that user access on the remote"
			if keys == "token" {
				fix = "make a new token on the remote and set token to it (the value, or file:<path>)"
			}
			return []error{fmt.Errorf("plugin_config.%s: the remote Iggy server at %s refused the login as %s: %w: %s", keys, cfg.address(), who, err, fix)}
		}
		return []error{fmt.Errorf("plugin_config.%s: cannot reach the remote Iggy server at %s: %w: check the address and that the server runs (with tls_enabled when it serves TLS)", addrKey, cfg.address(), err)}
	}
	defer func() { _ = c.Close() }()
	if _, err := c.GetStream(ctx, iggyclient.Name(cfg.Stream)); err != nil {
		return []error{objectError(cfg, "stream", cfg.Stream, who, err)}
	}
	if _, err := c.GetTopic(ctx, iggyclient.Name(cfg.Stream), iggyclient.Name(cfg.Topic)); err != nil {
		return []error{objectError(cfg, "topic", cfg.Topic, who, err)}
	}
	return nil
}

// objectError words a failed look-up of the remote stream or topic: missing, or not
// readable by the user.
func objectError(cfg config, field, name, who string, err error) error {
	where := fmt.Sprintf("the remote Iggy server at %s", cfg.address())
	if field == "topic" {
		where += fmt.Sprintf(" (stream %q)", cfg.Stream)
	}
	switch {
	case errors.Is(err, wire.ErrNotFound):
		return fmt.Errorf("plugin_config.%s: %s has no %s %q: create it there, or name an existing one", field, where, field, name)
	case isAuth(err):
		return fmt.Errorf("plugin_config.%s: %s does not let %s read %s %q: %w: grant the user read access to it on the remote", field, where, who, field, name, err)
	}
	return fmt.Errorf("plugin_config.%s: look up %s %q on %s: %w", field, field, name, where, err)
}
