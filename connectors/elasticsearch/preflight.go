package elasticsearch

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// Preflight is `ferry check --connect`: the cluster answers at url and takes the
// credentials (GET /), and the index (when it is not a template) exists, or may be
// created: with create_index_if_not_exists on, Elasticsearch's _has_privileges is asked
// for create_index (a cluster whose security feature does not answer it, as an OpenSearch
// node without the security plugin, cannot say: the check passes). Nothing is created.
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
	switch {
	case err != nil:
		return []error{err}
	case exists:
		return nil
	case !cfg.CreateIndex:
		return []error{missingIndex(index, c.where)}
	}
	body, _ := json.Marshal(map[string]any{"index": []any{map[string]any{"names": []string{index}, "privileges": []string{"create_index"}}}})
	status, data, err := c.do(ctx, http.MethodPost, "/_security/user/_has_privileges", "application/json", body)
	if err != nil || status != http.StatusOK {
		return nil //nolint:nilerr // no security feature answering: the cluster cannot say, creation is tried at open
	}
	var r struct {
		HasAll bool `json:"has_all_requested"`
	}
	if json.Unmarshal(data, &r) == nil && !r.HasAll {
		return []error{fmt.Errorf("elasticsearch sink: index %q does not exist at %s and the user%s may not create it (create_index privilege)", index, c.where, c.user())}
	}
	return nil
}
