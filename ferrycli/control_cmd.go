package ferrycli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// controlFlags are the flags of pause, resume, restart and stop: where the runtime's API
// is, as for ferry status, and which kind of connector KEY is.
type controlFlags struct {
	api  statusFlags
	kind string
}

// newControlCmds builds ferry pause, resume, restart and stop: each POSTs the connector's
// route of the HTTP API of a running ferry run.
func newControlCmds() []*cobra.Command {
	type action struct {
		name, short, long string
		sinksOnly         bool
		timeout           time.Duration
	}
	actions := []action{
		{"pause", "Pause a running sink: polling stops, its group membership and commits are kept",
			"POST /sinks/KEY/pause: the sink stops polling, keeps its partitions and stores what it consumed; it shows paused until a resume or a restart.", true, 10 * time.Second},
		{"resume", "Resume a paused sink", "POST /sinks/KEY/resume: a paused sink polls again.", true, 10 * time.Second},
		{"restart", "Restart a sink or source with its active config (a stopped one is started)",
			"POST /{sinks|sources}/KEY/restart: the connector is stopped, its active config re-read and started again; the answer waits for its shutdown_timeout.", false, 2 * time.Minute},
		{"stop", "Stop a sink or source until a restart",
			"POST /{sinks|sources}/KEY/stop: the connector stops gracefully (within its shutdown_timeout) and is not restarted automatically; ferry restart KEY starts it again.", false, 2 * time.Minute},
	}
	var cmds []*cobra.Command
	for _, a := range actions {
		var f controlFlags
		cmd := &cobra.Command{
			Use:   a.name + " KEY",
			Short: a.short,
			Long: a.long + `

The API is found as ferry status finds it: --url, else the URL a running ferry run wrote to
<state.path>/http.url, else [http] address of --config (or the config ferry run finds), else
` + defaultAPIURL + `; the api key is --api-key, else that config's [http] api_key. Without
--kind, KEY is looked up among the sinks, then the sources.`,
			Example: "  ferry " + a.name + " audit\n  ferry " + a.name + " audit --url http://10.0.0.5:8081 --api-key \"$KEY\"",
			Args:    cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return control(cmd.Context(), cmd.OutOrStdout(), a.name, a.sinksOnly, args[0], f)
			},
		}
		fl := cmd.Flags()
		fl.StringVar(&f.api.url, "url", envString(envAPIURL, ""), "the runtime's HTTP API (default: as ferry status finds it) [FERRY_API_URL]")
		fl.StringVar(&f.api.config, "config", envString(envConfig, ""), "the runtime config.toml whose state.path and [http] address find the API [FERRY_CONFIG]")
		fl.StringVar(&f.api.apiKey, "api-key", envString(envAPIKey, ""), "the API key (default: the config's [http] api_key when the URL comes from it or --config is given) [FERRY_API_KEY]")
		fl.DurationVar(&f.api.timeout, "timeout", a.timeout, "bound on the whole command")
		if !a.sinksOnly {
			fl.StringVar(&f.kind, "kind", "", "sink or source (default: whichever has the key, sinks first)")
		}
		cmds = append(cmds, cmd)
	}
	return cmds
}

// control finds the API and the connector's kind, then POSTs /{kind}s/KEY/action.
func control(ctx context.Context, w io.Writer, action string, sinksOnly bool, key string, f controlFlags) error {
	if f.kind != "" && f.kind != "sink" && f.kind != "source" {
		return fmt.Errorf("--kind %q: want sink or source", f.kind)
	}
	c, done, err := dialAPI(f.api)
	if err != nil {
		return err
	}
	defer done()
	ctx, cancel := context.WithTimeout(ctx, f.api.timeout)
	defer cancel()
	kind := f.kind
	if sinksOnly {
		kind = "sink"
	}
	if kind == "" {
		for _, k := range []string{"sink", "source"} {
			_, err := c.get(ctx, "/"+k+"s/"+url.PathEscape(key))
			var he *httpError
			if errors.As(err, &he) && he.status == http.StatusNotFound {
				continue
			}
			if err != nil {
				return err
			}
			kind = k
			break
		}
		if kind == "" {
			return fmt.Errorf("no sink or source %q runs there (ferry status lists them)", key)
		}
	}
	if err := c.post(ctx, "/"+kind+"s/"+url.PathEscape(key)+"/"+action); err != nil {
		var he *httpError
		if errors.As(err, &he) && he.status == http.StatusNotFound {
			return fmt.Errorf("%w (no %s %q runs there: ferry status lists them)", err, kind, key)
		}
		return err
	}
	past := map[string]string{"pause": "paused", "resume": "resumed", "restart": "restarted", "stop": "stopped"}[action]
	_, err = fmt.Fprintf(w, "%s %s %s\n", kind, key, past)
	return err
}

// dialAPI is the client of the API f names, found as ferry status finds it.
func dialAPI(f statusFlags) (*apiClient, func(), error) {
	if f.url == "" || (f.apiKey == "" && f.config != "") {
		rc, err := loadStatusConfig(f.config)
		if err != nil {
			return nil, nil, fmt.Errorf("find the API (or give --url): %w", err)
		}
		if f.url == "" {
			f.url = apiURLOf(rc)
		}
		if f.apiKey == "" {
			f.apiKey = rc.HTTP.APIKey.Reveal()
		}
	}
	base := strings.TrimRight(f.url, "/")
	if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, nil, fmt.Errorf("--url %q: want http://HOST:PORT or https://HOST:PORT", f.url)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	return &apiClient{base: base, key: f.apiKey, hc: &http.Client{Transport: tr}}, tr.CloseIdleConnections, nil
}

// post sends an empty POST to base/path and wants its 204.
func (c *apiClient) post(ctx context.Context, path string) error {
	return c.send(ctx, http.MethodPost, path, nil)
}

// send sends method to base/path, with body as JSON when it is not nil, and wants a 204
// (or 200).
func (c *apiClient) send(ctx context.Context, method, path string, body []byte) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.key != "" {
		req.Header.Set("api-key", c.key)
	}
	res, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach the Ferry API at %s: %w", c.base, err)
	}
	defer res.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	switch {
	case res.StatusCode == http.StatusNoContent || res.StatusCode == http.StatusOK:
		return nil
	case res.StatusCode == http.StatusUnauthorized && c.key == "":
		return fmt.Errorf("the API needs --api-key (or %s): %s %s answered 401", envAPIKey, method, path)
	case res.StatusCode == http.StatusUnauthorized:
		return fmt.Errorf("the API refused the API key: %s %s answered 401", method, path)
	}
	msg := method + " " + path + ": " + res.Status
	var ae apiError
	if json.Unmarshal(answer, &ae) == nil && ae.Code != "" {
		msg += ": " + ae.Code + ": " + ae.Reason
	} else if text := strings.TrimSpace(string(answer)); text != "" {
		msg += ": " + text
	}
	return &httpError{status: res.StatusCode, msg: msg}
}

// newHealthCmd builds ferry health: GET /health of a running runtime, exit 0 on 200. It is
// the container image's HEALTHCHECK (the image has no curl).
func newHealthCmd() *cobra.Command {
	var f statusFlags
	cmd := &cobra.Command{
		Use:   "health",
		Short: "Exit 0 when a running runtime's GET /health answers 200, 1 otherwise",
		Long: `Health asks the runtime's HTTP API, found as ferry status finds it, for GET /health and
prints the answer. The exit status is 0 for 200 (every connector's first start has ended and,
with --embedded, the server's storage is fine), 1 otherwise: the container image's
HEALTHCHECK.`,
		Example: "  ferry health --config /etc/ferry/config.toml",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, done, err := dialAPI(f)
			if err != nil {
				return err
			}
			defer done()
			ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
			defer cancel()
			body, err := c.get(ctx, "/health")
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n", strings.TrimSpace(string(body)))
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.url, "url", envString(envAPIURL, ""), "the runtime's HTTP API (default: as ferry status finds it) [FERRY_API_URL]")
	fl.StringVar(&f.config, "config", envString(envConfig, ""), "the runtime config.toml whose state.path and [http] address find the API [FERRY_CONFIG]")
	fl.DurationVar(&f.timeout, "timeout", 5*time.Second, "bound on the whole command")
	return cmd
}
