package http

import (
	"fmt"
	"strings"
	"time"

	"github.com/ferryio/ferry/sdk"
)

// Name is the registry name: path = "builtin:http".
const Name = "http"

// plugin_config fields: upstream http_sink's, with its defaults, then Ferry's.
const (
	FieldURL                    = "url"                      // the endpoint (http or https); required
	FieldMethod                 = "method"                   // GET, HEAD, POST (default), PUT, PATCH, DELETE
	FieldTimeout                = "timeout"                  // one request's bound; default 30s
	FieldMaxPayloadSize         = "max_payload_size_bytes"   // a request body's limit; default 10 MiB, 0: none
	FieldHeaders                = "headers"                  // sent with every request
	FieldBatchMode              = "batch_mode"               // individual (default; alias single), ndjson, json_array, raw
	FieldIncludeMetadata        = "include_metadata"         // the metadata envelope; default true
	FieldIncludeChecksum        = "include_checksum"         // iggy_checksum in the envelope; default false
	FieldIncludeOriginTimestamp = "include_origin_timestamp" // iggy_origin_timestamp in the envelope; default false
	FieldHealthCheckEnabled     = "health_check_enabled"     // a request at open; default false
	FieldHealthCheckMethod      = "health_check_method"      // its method; default HEAD
	FieldMaxRetries             = "max_retries"              // retries of a transient failure; default 3
	FieldRetryDelay             = "retry_delay"              // the first wait; default 1s
	FieldRetryBackoffMultiplier = "retry_backoff_multiplier" // each wait's growth; default 2 (1: constant)
	FieldMaxRetryDelay          = "max_retry_delay"          // the longest wait; default 30s
	FieldSuccessStatusCodes     = "success_status_codes"     // default [200, 201, 202, 204]
	FieldTLSInsecure            = "tls_danger_accept_invalid_certs"
	FieldMaxConnections         = "max_connections" // idle connections kept per host; default 10
	FieldVerboseLogging         = "verbose_logging" // each request logged at debug
	// FieldIdempotencyHeader names the header carrying each request's idempotency key
	// (Ferry's); default Idempotency-Key.
	FieldIdempotencyHeader = "idempotency_header"
)

type batchMode string

const (
	modeIndividual batchMode = "individual"
	modeNDJSON     batchMode = "ndjson"
	modeJSONArray  batchMode = "json_array"
	modeRaw        batchMode = "raw"
)

// contentType is the Content-Type of a mode's requests, as upstream.
func (m batchMode) contentType() string {
	switch m {
	case modeNDJSON:
		return "application/x-ndjson"
	case modeRaw:
		return "application/octet-stream"
	}
	return "application/json"
}

// perMessage reports whether the mode sends one request per message.
func (m batchMode) perMessage() bool { return m == modeIndividual || m == modeRaw }

type method string

var methods = []sdk.EnumChoice[method]{sdk.Choice[method]("GET"), sdk.Choice[method]("HEAD"), sdk.Choice[method]("POST"),
	sdk.Choice[method]("PUT"), sdk.Choice[method]("PATCH"), sdk.Choice[method]("DELETE")}

type config struct {
	URL                    string
	Method                 method
	Timeout                time.Duration
	MaxPayload             uint64
	Headers                map[string]string
	BatchMode              batchMode
	IncludeMetadata        bool
	IncludeChecksum        bool
	IncludeOriginTimestamp bool
	HealthCheck            bool
	HealthCheckMethod      method
	MaxRetries             int
	RetryDelay             time.Duration
	Multiplier             int
	MaxRetryDelay          time.Duration
	SuccessCodes           []int
	TLSInsecure            bool
	MaxConnections         int
	Verbose                bool
	IdempotencyHeader      string
}

// Config declares the sink's plugin_config.
var Config = sdk.NewConfig(func(c *config, f *sdk.Fields) {
	f.Commits(sdk.CommitsEachBatch) // once the endpoint answered a success status
	f.URL(FieldURL, &c.URL, "http", "https").Required().Doc("the endpoint requests go to")
	sdk.Enum(f, FieldMethod, &c.Method, methods...).Default("POST").Doc("GET, HEAD, POST, PUT, PATCH or DELETE")
	f.Duration(FieldTimeout, &c.Timeout).Default(30 * time.Second).Min(time.Millisecond).Doc("one request's bound")
	f.Uint64(FieldMaxPayloadSize, &c.MaxPayload).Default(10 << 20).Doc("a request body's limit in bytes (0: none); a larger one is refused for good")
	f.StringMap(FieldHeaders, &c.Headers).Doc("headers sent with every request (Content-Type is the batch mode's)")
	sdk.Enum(f, FieldBatchMode, &c.BatchMode, sdk.Choice(modeIndividual, "single"), sdk.Choice(modeNDJSON), sdk.Choice(modeJSONArray), sdk.Choice(modeRaw)).
		Default(modeIndividual).Doc("individual (one request per message; alias single), ndjson, json_array, raw (payload bytes, one per message)")
	f.Bool(FieldIncludeMetadata, &c.IncludeMetadata).Default(true).Doc("wrap each payload in {metadata, payload}")
	f.Bool(FieldIncludeChecksum, &c.IncludeChecksum).Default(false).Doc("add iggy_checksum to the metadata")
	f.Bool(FieldIncludeOriginTimestamp, &c.IncludeOriginTimestamp).Default(false).Doc("add iggy_origin_timestamp to the metadata")
	f.Bool(FieldHealthCheckEnabled, &c.HealthCheck).Default(false).Doc("send a request at open; a status outside success_status_codes fails it")
	sdk.Enum(f, FieldHealthCheckMethod, &c.HealthCheckMethod, methods...).Default("HEAD").Doc("the health check's method")
	f.Int(FieldMaxRetries, &c.MaxRetries).Default(3).Min(0).Doc("retries of a transient failure (connection, 408, 429, 5xx) before Consume fails")
	f.Duration(FieldRetryDelay, &c.RetryDelay).Default(time.Second).Min(time.Millisecond).Doc("the first wait between retries")
	f.Int(FieldRetryBackoffMultiplier, &c.Multiplier).Default(2).Min(1).Doc("each wait's growth (1: constant)")
	f.Duration(FieldMaxRetryDelay, &c.MaxRetryDelay).Default(30 * time.Second).Min(time.Millisecond).Doc("the longest wait between retries")
	f.Ints(FieldSuccessStatusCodes, &c.SuccessCodes).Default([]int{200, 201, 202, 204}).Doc("statuses that count as delivered").Check(func(codes []int) error {
		if len(codes) == 0 {
			return fmt.Errorf("must not be empty: no response could count as delivered")
		}
		for _, code := range codes {
			if code < 200 || code > 599 {
				return fmt.Errorf("status %d is not between 200 and 599", code)
			}
		}
		return nil
	})
	f.Bool(FieldTLSInsecure, &c.TLSInsecure).Default(false).Doc("do not verify the server's certificate (development only)")
	f.Int(FieldMaxConnections, &c.MaxConnections).Default(10).Min(1).Doc("idle connections kept per host; also the partitions sent to at once (max_in_flight)")
	f.Bool(FieldVerboseLogging, &c.Verbose).Default(false).Doc("log each request at debug")
	f.String(FieldIdempotencyHeader, &c.IdempotencyHeader).Default("Idempotency-Key").NonEmpty().Doc("the header carrying each request's idempotency key").Check(func(h string) error {
		if strings.ContainsAny(h, " \t\r\n:") {
			return fmt.Errorf("%q is not a header name", h)
		}
		return nil
	})
})

// Spec describes the sink's plugin_config for the registry.
var Spec = Config.Spec()
