package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/ferryio/ferry/sdk"
)

var (
	_ sdk.Preflighter = (*Sink)(nil)
	_ sdk.Preflighter = (*Source)(nil)
)

// Preflight implements sdk.Preflighter (`ferry check --connect`): Redis answers at url and
// takes its login; when stream_key names one key (no placeholder), that key is a stream or
// absent, and the user may XADD to it. A key built from placeholders depends on each
// message and is not checked. Nothing is written.
func (s *Sink) Preflight(ctx context.Context, raw []byte) []error {
	cfg, err := Config.Parse(raw)
	if err != nil {
		return []error{err}
	}
	c, p, err := preflightConnect(ctx, cfg.URL)
	if err != nil {
		return []error{err}
	}
	defer func() { _ = c.Close() }()
	tmpl, _ := parseTemplate(cfg.StreamKey)
	if len(tmpl) != 1 || tmpl[0].field != "" {
		return nil
	}
	key := tmpl[0].lit
	if err := p.streamType(ctx, "stream_key", key); err != nil {
		return []error{err}
	}
	if err := p.rights(ctx, key, []string{"XADD", key, badID, "f", "v"}); err != nil {
		return []error{err}
	}
	return nil
}

// Preflight implements sdk.Preflighter (`ferry check --connect`): Redis answers at url and
// takes its login, each of stream_keys is a stream or absent (Open creates it with the
// group), and the user may run what the source runs on it: XGROUP CREATE, XREADGROUP, XACK
// and, with claim_idle, XAUTOCLAIM. Nothing is created, read from a group or acknowledged.
func (s *Source) Preflight(ctx context.Context, raw []byte) []error {
	cfg, err := SourceConfig.Parse(raw)
	if err != nil {
		return []error{err}
	}
	c, p, err := preflightConnect(ctx, cfg.URL)
	if err != nil {
		return []error{err}
	}
	defer func() { _ = c.Close() }()
	group := cfg.Group
	if group == "" {
		group = "ferry-check"
	}
	consumer := cfg.Consumer
	if consumer == "" {
		consumer = "ferry-check"
	}
	var errs []error
	for _, k := range cfg.StreamKeys {
		if err := p.streamType(ctx, "stream_keys", k); err != nil {
			errs = append(errs, err)
			continue
		}
		cmds := [][]string{
			{"XGROUP", "CREATE", k, group, badID},
			{"XREADGROUP", "GROUP", group, consumer, "COUNT", "1", "STREAMS", k, badID},
			{"XACK", k, group, badID},
		}
		if cfg.ClaimIdle > 0 {
			cmds = append(cmds, []string{"XAUTOCLAIM", k, group, consumer, "0", badID})
		}
		if err := p.rights(ctx, k, cmds...); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// badID is an entry id no Redis command accepts. Redis checks a user's rights before it
// reads a command's arguments, so a command carrying it answers NOPERM when the user may
// not run it on the key and an argument error when it may, and changes nothing either way
// (XGROUP CREATE without MKSTREAM does not create a missing key).
const badID = "ferry-check-not-an-id"

// prober is a connection for the checks, with the words its errors use.
type prober struct {
	c     *goredis.Client
	where string // the server's address, without the login
	user  string
}

// preflightConnect connects once and PINGs; a refused login names url's user and never
// its password.
func preflightConnect(ctx context.Context, url string) (*goredis.Client, *prober, error) {
	opts, err := goredis.ParseURL(url)
	if err != nil {
		return nil, nil, fmt.Errorf("plugin_config.url: %s", sdk.RedactURLError(err))
	}
	opts.MaxRetries = -1
	p := &prober{c: goredis.NewClient(opts), where: opts.Addr, user: opts.Username}
	if p.user == "" {
		p.user = "default"
	}
	if err := p.c.Ping(ctx).Err(); err != nil {
		_ = p.c.Close()
		if isAuth(err) {
			return nil, nil, fmt.Errorf("plugin_config.url: Redis at %s refused the login of user %q: %w: fix the user and password in url", p.where, p.user, err)
		}
		return nil, nil, fmt.Errorf("connect to Redis at %s (plugin_config.url): %w: check the host and port in url (rediss:// for a server that speaks TLS)", p.where, err)
	}
	return p.c, p, nil
}

// streamType fails unless key is a stream or absent.
func (p *prober) streamType(ctx context.Context, field, key string) error {
	typ, err := p.c.Type(ctx, key).Result()
	switch {
	case err != nil && strings.HasPrefix(err.Error(), "NOPERM"):
		return p.denied(key, []string{"TYPE"}, err)
	case err != nil:
		return fmt.Errorf("TYPE %q at %s: %w", key, p.where, err)
	case typ == "none" || typ == "stream":
		return nil
	}
	return fmt.Errorf("plugin_config.%s: key %q at %s holds a %s, not a stream: rename or delete that key, or name another in %s",
		field, key, p.where, typ, field)
}

// rights runs each probe command (see badID) and names, in one error, those the user may
// not run on key.
func (p *prober) rights(ctx context.Context, key string, cmds ...[]string) error {
	var refused []string
	var first error
	for _, cmd := range cmds {
		args := make([]any, len(cmd))
		for i, a := range cmd {
			args[i] = a
		}
		err := p.c.Do(ctx, args...).Err()
		switch {
		case err == nil || errors.Is(err, goredis.Nil):
		case strings.HasPrefix(err.Error(), "NOPERM"):
			refused = append(refused, cmd[0])
			if first == nil {
				first = err
			}
		case isRedisReply(err):
		default:
			return fmt.Errorf("%s %q at %s: %w", cmd[0], key, p.where, err)
		}
	}
	if len(refused) == 0 {
		return nil
	}
	return p.denied(key, refused, first)
}

func (p *prober) denied(key string, cmds []string, err error) error {
	grant := make([]string, len(cmds))
	for i, c := range cmds {
		grant[i] = "+" + strings.ToLower(c)
	}
	return fmt.Errorf("plugin_config.url: Redis at %s does not let user %q run %s on key %q (%w): grant it, e.g. ACL SETUSER %s %s ~%s, or use another user",
		p.where, p.user, strings.Join(cmds, ", "), key, err, p.user, strings.Join(grant, " "), key)
}

// isRedisReply reports an error Redis answered (as opposed to a failed connection).
func isRedisReply(err error) bool {
	var re goredis.Error
	return errors.As(err, &re)
}
