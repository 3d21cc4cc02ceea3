package http

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	nethttp "net/http"

	"github.com/ferryio/ferry/sdk"
)

var _ sdk.Preflighter = (*Sink)(nil)

// Preflight implements sdk.Preflighter (`ferry check --connect`): the URL's host resolves,
// the server answers, its certificate is valid (unless tls_danger_accept_invalid_certs),
// and it does not refuse the configured headers' credentials. The request is a HEAD with
// the configured headers and no body: HEAD is a safe method (RFC 9110), so the check
// cannot deliver or change anything. Any answer but 401, 403 and 407 (the credentials)
// and 502, 503 and 504 (a proxy whose backend is down) passes, because an endpoint that
// takes only POST may answer a HEAD with 404 or 405. With health_check_enabled the check
// is instead Open's health check, with health_check_method, whose status must be one of
// success_status_codes.
func (s *Sink) Preflight(ctx context.Context, raw []byte) []error {
	cfg, err := Config.Parse(raw)
	if err != nil {
		return []error{err}
	}
	p := &Sink{cfg: cfg, log: slog.New(slog.DiscardHandler), logURL: sdk.RedactURL(cfg.URL)}
	if err := p.setup(); err != nil {
		return []error{err}
	}
	defer p.client.CloseIdleConnections()
	method := nethttp.MethodHead
	if cfg.HealthCheck {
		method = string(cfg.HealthCheckMethod)
	}
	status, err := p.ask(ctx, method)
	switch {
	case errors.Is(err, sdk.ErrPermanent):
		return []error{err}
	case err != nil:
		return []error{explain(err)}
	case cfg.HealthCheck && !p.success[status]:
		return []error{fmt.Errorf("plugin_config.%s: the health check %s %s answered %d, not one of success_status_codes %v: fix the endpoint, or health_check_method or success_status_codes",
			FieldHealthCheckEnabled, method, p.logURL, status, cfg.SuccessCodes)}
	case cfg.HealthCheck:
		return nil
	}
	switch status {
	case nethttp.StatusUnauthorized, nethttp.StatusForbidden, nethttp.StatusProxyAuthRequired:
		return []error{fmt.Errorf("plugin_config.%s: HEAD %s answered %d %s: the server refuses the credentials sent; set the right ones in plugin_config.%s (an Authorization header, a key)",
			FieldURL, p.logURL, status, nethttp.StatusText(status), FieldHeaders)}
	case nethttp.StatusBadGateway, nethttp.StatusServiceUnavailable, nethttp.StatusGatewayTimeout:
		return []error{fmt.Errorf("plugin_config.%s: HEAD %s answered %d %s: the server (or a proxy before it) is up, but what serves the URL is not",
			FieldURL, p.logURL, status, nethttp.StatusText(status))}
	}
	return nil
}

// explain adds the fix to a failed request's error: the certificate key for a TLS
// failure, the host for a name that does not resolve, the URL otherwise.
func explain(err error) error {
	var ua x509.UnknownAuthorityError
	var he x509.HostnameError
	var ci x509.CertificateInvalidError
	var ve *tls.CertificateVerificationError
	var rh tls.RecordHeaderError
	var dns *net.DNSError
	switch {
	case errors.As(err, &ua), errors.As(err, &he), errors.As(err, &ci), errors.As(err, &ve):
		return fmt.Errorf("plugin_config.%s: %w: the server's certificate is not valid here: give the server one the system trusts for that host name, or set %s = true (development only)",
			FieldURL, err, FieldTLSInsecure)
	case errors.As(err, &rh), errors.Is(err, nethttp.ErrSchemeMismatch):
		return fmt.Errorf("plugin_config.%s: %w: the server does not speak TLS on that port: use http://, or the server's TLS port", FieldURL, err)
	case errors.As(err, &dns):
		return fmt.Errorf("plugin_config.%s: %w: check the URL's host name", FieldURL, err)
	}
	return fmt.Errorf("plugin_config.%s: %w: check the URL's host and port, and that the server runs", FieldURL, err)
}
