package elasticsearch

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/ferryio/ferry/sdk"
)

// Preflight is `ferry check --connect`: the cluster answers at url, takes the credentials,
// and the index (when it is not a template) exists, or may be created: with
// create_index_if_not_exists on, Elasticsearch's _has_privileges is asked for create_index
// (a cluster without its security feature, as an OpenSearch node without the security
// plugin, lets anyone create). Nothing is created.
func (s *Sink) Preflight(ctx context.Context, raw []byte) []error {
	cfg, err := Config.Parse(raw)
	if err != nil {
		return []error{err}
	}
	tmpl, err := parseIndexTemplate(cfg.Index)
	if err != nil {
		return []error{fmt.Errorf("plugin_config.index: %w", err)}
	}
	c := newClient(cfg)
	defer c.http.CloseIdleConnections()
	if _, err := c.info(ctx); err != nil {
		return []error{err}
	}
	index, static := tmpl.static()
	if !static {
		return nil
	}
	exists, err := c.indexExists(ctx, index)
	if err != nil {
		return []error{err}
	}
	if exists {
		return nil
	}
	if !cfg.CreateIndex {
		return []error{fmt.Errorf("elasticsearch sink: index %q does not exist at %s and plugin_config.create_index_if_not_exists is false", index, cfg.URL)}
	}
	body := fmt.Sprintf(`{"index":[{"names":[%q],"privileges":["create_index"]}]}`, index)
	status, data, err := c.do(ctx, http.MethodPost, "/_security/user/_has_privileges", "application/json", []byte(body))
	if err != nil {
		return []error{err}
	}
	switch {
	case status == http.StatusOK && strings.Contains(string(data), `"has_all_requested":true`):
		return nil
	case status == http.StatusOK:
		return []error{fmt.Errorf("elasticsearch sink: index %q does not exist at %s and the user may not create it (create_index)", index, cfg.URL)}
	}
	return nil // no security feature answering: anyone may create
}

var _ sdk.Preflighter = (*Sink)(nil)
