package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// preflight runs the source's (source) or the sink's Preflight on cfg: its errors one per
// line, "" for none.
func preflight(t *testing.T, source bool, cfg map[string]any) string {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	if source {
		errs = NewSource().Preflight(ctx, raw)
	} else {
		errs = New().Preflight(ctx, raw)
	}
	if len(errs) == 0 {
		return ""
	}
	return errors.Join(errs...).Error()
}

// limitedUser creates a Redis user with rules and returns the server's URL logging in as
// it; the user is deleted at the end of the test.
func limitedUser(t *testing.T, c *goredis.Client, base, name, password string, rules ...string) string {
	t.Helper()
	args := []any{"ACL", "SETUSER", name, "reset", "on", ">" + password}
	for _, r := range rules {
		args = append(args, r)
	}
	if err := c.Do(context.Background(), args...).Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Do(context.Background(), "ACL", "DELUSER", name).Err() })
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(name, password)
	return u.String()
}

// TestRedisSinkPreflight: a stream key that is absent or a stream passes; one of another
// type names stream_key and the fix; a user without XADD on the key names url, the command
// and the ACL rule; a wrong password never shows it; nothing is written.
func TestRedisSinkPreflight(t *testing.T) {
	base, c := redisURL(t)
	ctx := context.Background()
	key := fmt.Sprintf("pf-%d", time.Now().UnixNano())
	addr := c.Options().Addr
	if got := preflight(t, false, map[string]any{"url": base, "stream_key": key + ":s"}); got != "" {
		t.Fatalf("an absent key: %s", got)
	}
	if err := c.Set(ctx, key+":str", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	got := preflight(t, false, map[string]any{"url": base, "stream_key": key + ":str"})
	want := fmt.Sprintf(`plugin_config.stream_key: key "%s:str" at %s holds a string, not a stream: rename or delete that key, or name another in stream_key`, key, addr)
	if got != want {
		t.Errorf("a string key:\n got %s\nwant %s", got, want)
	}
	user := "pf-sink-" + key
	lim := limitedUser(t, c, base, user, "pw-secret", "~"+key+":*", "+@all", "-xadd")
	got = preflight(t, false, map[string]any{"url": lim, "stream_key": key + ":s"})
	want = fmt.Sprintf(`plugin_config.url: Redis at %s does not let user %q run XADD on key "%s:s" (NOPERM this user has no permissions to run the 'xadd' command): grant it, e.g. ACL SETUSER %s +xadd ~%s:s, or use another user`,
		addr, user, key, user, key)
	if got != want {
		t.Errorf("no XADD:\n got %s\nwant %s", got, want)
	}
	wrong := strings.Replace(lim, "pw-secret", "not-the-pw", 1)
	got = preflight(t, false, map[string]any{"url": wrong, "stream_key": key + ":s"})
	want = fmt.Sprintf(`plugin_config.url: Redis at %s refused the login of user %q: WRONGPASS invalid username-password pair or user is disabled.: fix the user and password in url`, addr, user)
	if got != want {
		t.Errorf("a wrong password:\n got %s\nwant %s", got, want)
	}
	if n, err := c.Exists(ctx, key+":s").Result(); err != nil || n != 0 {
		t.Errorf("the check created the stream (exists %d, %v)", n, err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	_ = l.Close()
	got = preflight(t, false, map[string]any{"url": "redis://" + dead + "/0"})
	if want := fmt.Sprintf("connect to Redis at %s (plugin_config.url): dial tcp %s: connect: connection refused: check the host and port in url (rediss:// for a server that speaks TLS)", dead, dead); got != want {
		t.Errorf("nothing listening:\n got %s\nwant %s", got, want)
	}
}

// TestRedisSourcePreflight: streams that exist or not pass without a group being made; a
// key of another type and a user who may not create groups or read each fail naming the
// key and the commands.
func TestRedisSourcePreflight(t *testing.T) {
	base, c := redisURL(t)
	ctx := context.Background()
	key := fmt.Sprintf("pfs-%d", time.Now().UnixNano())
	addr := c.Options().Addr
	if err := c.XAdd(ctx, &goredis.XAddArgs{Stream: key + ":a", Values: []any{"payload", "x"}}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.HSet(ctx, key+":h", "f", "v").Err(); err != nil {
		t.Fatal(err)
	}
	if got := preflight(t, true, map[string]any{"url": base, "stream_keys": []string{key + ":a", key + ":new"}, "group": "g"}); got != "" {
		t.Fatalf("a stream and an absent key: %s", got)
	}
	if groups, err := c.XInfoGroups(ctx, key+":a").Result(); err != nil || len(groups) != 0 {
		t.Errorf("the check made groups %v (%v)", groups, err)
	}
	if n, _ := c.Exists(ctx, key+":new").Result(); n != 0 {
		t.Error("the check created the absent stream")
	}
	got := preflight(t, true, map[string]any{"url": base, "stream_keys": []string{key + ":h"}})
	want := fmt.Sprintf(`plugin_config.stream_keys: key "%s:h" at %s holds a hash, not a stream: rename or delete that key, or name another in stream_keys`, key, addr)
	if got != want {
		t.Errorf("a hash key:\n got %s\nwant %s", got, want)
	}
	user := "pf-src-" + key
	lim := limitedUser(t, c, base, user, "pw-secret", "~"+key+":*", "+@all", "-xgroup", "-xautoclaim")
	got = preflight(t, true, map[string]any{"url": lim, "stream_keys": []string{key + ":a"}})
	want = fmt.Sprintf(`plugin_config.url: Redis at %s does not let user %q run XGROUP, XAUTOCLAIM on key "%s:a" (NOPERM this user has no permissions to run the 'xgroup|create' command): grant it, e.g. ACL SETUSER %s +xgroup +xautoclaim ~%s:a, or use another user`,
		addr, user, key, user, key)
	if got != want {
		t.Errorf("no XGROUP:\n got %s\nwant %s", got, want)
	}
	if got := preflight(t, true, map[string]any{"url": lim, "stream_keys": []string{key + ":a"}, "claim_idle": "0s"}); !strings.Contains(got, "run XGROUP on key") {
		t.Errorf("claim_idle = 0 still checks XAUTOCLAIM: %s", got)
	}
	other := limitedUser(t, c, base, user+"-k", "pw-secret", "~nothing:*", "+@all")
	got = preflight(t, true, map[string]any{"url": other, "stream_keys": []string{key + ":a"}})
	want = fmt.Sprintf(`plugin_config.url: Redis at %s does not let user %q run TYPE on key "%s:a" (NOPERM this user has no permissions to access one of the keys used as arguments): grant it, e.g. ACL SETUSER %s +type ~%s:a, or use another user`,
		addr, user+"-k", key, user+"-k", key)
	if got != want {
		t.Errorf("no rights on the key:\n got %s\nwant %s", got, want)
	}
}
