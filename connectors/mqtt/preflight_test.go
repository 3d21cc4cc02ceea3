package mqtt

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runPreflight runs the source's (source) or the sink's Preflight on cfg and returns its errors,
// one per line ("" for none).
func runPreflight(t *testing.T, source bool, cfg map[string]any) string {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var errs []error
	if source {
		errs = NewSource().Preflight(ctxT(t), raw)
	} else {
		errs = NewSink().Preflight(ctxT(t), raw)
	}
	if len(errs) == 0 {
		return ""
	}
	return errors.Join(errs...).Error()
}

// aclBroker returns the listener of scripts/mosquitto.sh with access rules and its limited
// user (who may subscribe only under limited/); skipped like broker.
func aclBroker(t *testing.T) (url, user, password string) {
	t.Helper()
	broker(t)
	url, user, password = getenv("FERRY_MQTT_ACL_URL"), getenv("FERRY_MQTT_LIMITED_USER"), getenv("FERRY_MQTT_LIMITED_PASSWORD")
	if url == "" || user == "" || password == "" {
		t.Fatal("FERRY_MQTT_URL is set but FERRY_MQTT_ACL_URL, FERRY_MQTT_LIMITED_USER or FERRY_MQTT_LIMITED_PASSWORD is not: start the broker with the current scripts/mosquitto.sh")
	}
	return url, user, password
}

// TestSourcePreflight: a subscription the broker grants passes; one it refuses to the
// limited user fails naming topics, the filter and the fix; a shared subscription is
// checked on its filter; a wrong password names the login keys and never the password.
func TestSourcePreflight(t *testing.T) {
	acl, user, password := aclBroker(t)
	ok := map[string]any{"broker": acl, "username": user, "password": password,
		"topics": []string{"limited/#", "$share/g/limited/a"}, "qos": 2}
	if got := runPreflight(t, true, ok); got != "" {
		t.Fatalf("granted subscriptions: %s", got)
	}
	refused := map[string]any{"broker": acl, "username": user, "password": password,
		"topics": []string{"limited/a", "other/#", "$share/g/other/b"}}
	want := `plugin_config.topics: the broker refused user "ferry-limited" a subscription to "other/#": allow the user to subscribe to it in the broker's access rules, or change topics` + "\n" +
		`plugin_config.topics: the broker refused user "ferry-limited" a subscription to "$share/g/other/b": allow the user to subscribe to it in the broker's access rules, or change topics`
	if got := runPreflight(t, true, refused); got != want {
		t.Errorf("refused subscriptions:\n got %s\nwant %s", got, want)
	}
	wrong := map[string]any{"broker": acl, "username": user, "password": "not-" + password, "topics": []string{"limited/#"}}
	got := runPreflight(t, true, wrong)
	want = fmt.Sprintf(`mqtt: connect to %s: the broker refused the login of user "ferry-limited" (plugin_config.username, password): not Authorized`, acl)
	if got != want {
		t.Errorf("wrong password:\n got %s\nwant %s", got, want)
	}
	if strings.Contains(got, password) {
		t.Errorf("the error shows the password: %s", got)
	}
}

// TestSinkPreflight: the sink's login is checked; an address nothing answers on names the
// broker key; a TLS CA file that does not exist names tls_ca_file.
func TestSinkPreflight(t *testing.T) {
	acl, user, password := aclBroker(t)
	if got := runPreflight(t, false, map[string]any{"broker": acl, "username": user, "password": password, "topic": "x/{topic}"}); got != "" {
		t.Fatalf("a login the broker takes: %s", got)
	}
	got := runPreflight(t, false, map[string]any{"broker": acl, "topic": "x"})
	want := fmt.Sprintf(`mqtt: connect to %s: the broker refused the login of user "(anonymous)" (plugin_config.username, password): not Authorized`, acl)
	if got != want {
		t.Errorf("anonymous on a listener that wants a login:\n got %s\nwant %s", got, want)
	}
	dead := "tcp://" + freeAddr(t)
	got = runPreflight(t, false, map[string]any{"brokers": []string{dead}, "topic": "x", "connect_timeout": "2s"})
	wantPrefix := fmt.Sprintf("mqtt: connect to %s: ", dead)
	wantSuffix := ": check plugin_config.brokers (and the TLS keys for ssl://, mqtts://, wss://)"
	if !strings.HasPrefix(got, wantPrefix) || !strings.HasSuffix(got, wantSuffix) || !strings.Contains(got, "connection refused") {
		t.Errorf("nothing listening:\n got %s\nwant %s…connection refused…%s", got, wantPrefix, wantSuffix)
	}
	missing := filepath.Join(t.TempDir(), "ca.pem")
	got = runPreflight(t, false, map[string]any{"broker": "ssl://" + strings.TrimPrefix(acl, "tcp://"), "topic": "x", "tls_ca_file": missing})
	if want := fmt.Sprintf("plugin_config.tls_ca_file: open %s: no such file or directory", missing); got != want {
		t.Errorf("missing CA file:\n got %s\nwant %s", got, want)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Fatal("the check made the CA file")
	}
}

// TestPreflightTLS: a TLS listener whose certificate the client does not trust names
// tls_ca_file.
func TestPreflightTLS(t *testing.T) {
	srv := httptest.NewUnstartedServer(nil) // a TLS listener: the handshake fails before MQTT
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "https://")
	got := runPreflight(t, false, map[string]any{"broker": "ssl://" + addr, "topic": "x"})
	want := fmt.Sprintf("plugin_config.tls_ca_file: mqtt: connect to ssl://%s: network Error : tls: failed to verify certificate: x509: certificate signed by unknown authority: name the CA that signed the broker's certificate (and tls_server_name when the certificate carries another name than the URL's host)", addr)
	if got != want {
		t.Errorf("an untrusted certificate:\n got %s\nwant %s", got, want)
	}
}
