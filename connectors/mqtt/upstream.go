package mqtt

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ferryio/ferry/sdk"
)

// Keys of Iggy's mqtt_source that Ferry reads with the same meaning. broker_url, subscriptions
// and clean_start are aliases of broker, topics and clean_session; subscription_qos and the
// tls table have no Ferry name of their own.
const (
	UpstreamBrokerURL       = "broker_url"
	UpstreamSubscriptions   = "subscriptions"
	UpstreamCleanStart      = "clean_start"
	UpstreamSubscriptionQoS = "subscription_qos" // { "filter" = 0|1|2 }: a filter's own QoS, over qos
	UpstreamTLS             = "tls"              // [tls]: ca_file, client_cert_file, client_key_file, server_name
)

// upstreamTLSKeys maps the keys of upstream's [tls] table to Ferry's flat ones.
var upstreamTLSKeys = []struct{ key, flat string }{
	{"ca_file", FieldTLSCAFile}, {"client_cert_file", FieldTLSCertFile}, {"client_key_file", FieldTLSKeyFile}, {"server_name", FieldTLSServerName},
}

// parseSubscriptionQoS reads subscription_qos: every key one of topics, every value 0, 1 or
// 2. Errors name the filter.
func parseSubscriptionQoS(raw json.RawMessage, topics []string) (map[string]int, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var m map[string]json.Number
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		return nil, sdk.FieldErr(UpstreamSubscriptionQoS, "want a table of topic filter = QoS (0, 1 or 2): %v", err)
	}
	out := make(map[string]int, len(m))
	var errs []error
	for f, n := range m {
		q, err := n.Int64()
		if err != nil || q < 0 || q > 2 {
			errs = append(errs, sdk.FieldErr(UpstreamSubscriptionQoS, "filter %q: QoS %s is not 0, 1 or 2", f, n))
			continue
		}
		if !slices.Contains(topics, f) {
			errs = append(errs, sdk.FieldErr(UpstreamSubscriptionQoS, "filter %q is not one of plugin_config.%s %q", f, FieldTopics, topics))
			continue
		}
		out[f] = int(q)
	}
	return out, errors.Join(errs...)
}

// applyUpstreamTLS fills the flat tls_* fields from upstream's [tls] table; a key set both
// ways is an error naming both.
func applyUpstreamTLS(raw json.RawMessage, c *clientConfig) error {
	if len(raw) == 0 {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return sdk.FieldErr(UpstreamTLS, "want a table (ca_file, client_cert_file, client_key_file, server_name): %v", err)
	}
	dst := map[string]*string{FieldTLSCAFile: &c.TLSCAFile, FieldTLSCertFile: &c.TLSCertFile, FieldTLSKeyFile: &c.TLSKeyFile, FieldTLSServerName: &c.TLSServerName}
	var errs []error
	for k, v := range m {
		i := slices.IndexFunc(upstreamTLSKeys, func(u struct{ key, flat string }) bool { return u.key == k })
		if i < 0 {
			errs = append(errs, sdk.FieldErr(UpstreamTLS+"."+k, "unknown key (want ca_file, client_cert_file, client_key_file or server_name)"))
			continue
		}
		s, ok := v.(string)
		if !ok || s == "" {
			errs = append(errs, sdk.FieldErr(UpstreamTLS+"."+k, "want a non-empty string"))
			continue
		}
		flat := upstreamTLSKeys[i].flat
		if *dst[flat] != "" {
			errs = append(errs, sdk.FieldErr(UpstreamTLS+"."+k, "set only one of %s.%s and %s", UpstreamTLS, k, flat))
			continue
		}
		*dst[flat] = s
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return sdk.FieldErr(UpstreamTLS, "client_cert_file and client_key_file (or %s and %s) go together: set both or neither", FieldTLSCertFile, FieldTLSKeyFile)
	}
	return nil
}

// qosOf returns filter's subscription QoS: its subscription_qos entry, else qos.
func (c *sourceConfig) qosOf(filter string) int {
	if q, ok := c.subscriptionQoS[filter]; ok {
		return q
	}
	return c.QoS
}

// lowestQoS is the lowest QoS any filter is subscribed at.
func (c *sourceConfig) lowestQoS() int {
	low := c.QoS
	for _, f := range c.Topics {
		low = min(low, c.qosOf(f))
	}
	return low
}

// qosText describes the subscriptions' QoS for the start line.
func (c *sourceConfig) qosText() string {
	if len(c.subscriptionQoS) == 0 {
		return fmt.Sprint(c.QoS)
	}
	var parts []string
	for _, f := range c.Topics {
		parts = append(parts, fmt.Sprintf("%s=%d", f, c.qosOf(f)))
	}
	return strings.Join(parts, " ")
}
