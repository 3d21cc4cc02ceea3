package elasticsearch

import (
	"encoding/json"
	"time"

	"github.com/ferryio/ferry/sdk"
)

// Name is the connector's name: path = "builtin:elasticsearch".
const Name = "elasticsearch"

// Document ids.
const (
	// idOffset: "stream:topic:partition:offset", the same document for the same message
	// however often it is indexed (exactly once).
	idOffset docID = "offset"
	// idNone: the cluster picks each id, as upstream's sink (at least once).
	idNone docID = "none"
)

type docID string

// Defaults, upstream's where upstream has the key.
const (
	DefaultBatchSize      = 100
	DefaultTimeoutSeconds = 30
)

type config struct {
	URL            string
	Index          string
	Username       string
	Password       sdk.Secret
	APIKey         sdk.Secret
	BatchSize      int
	MaxBulkBytes   sdk.ByteSize
	TimeoutSeconds int
	CreateIndex    bool
	IndexMapping   json.RawMessage
	DocumentID     docID
	MaxAttempts    int
	RetryBackoff   time.Duration
}

// Config declares the sink's plugin_config: upstream's keys first (url, index, username,
// password, batch_size, timeout_seconds, create_index_if_not_exists, index_mapping), then
// Ferry's.
var Config = sdk.NewConfig(func(c *config, f *sdk.Fields) {
	f.CommitModes("sink_controlled")
	f.Commits(sdk.CommitsEachBatch) // once every _bulk item of the batch landed
	f.URL("url", &c.URL, "http", "https").Required().Doc("the cluster's address (Elasticsearch 8 or OpenSearch 2), e.g. http://localhost:9200")
	f.String("index", &c.Index).Required().NonEmpty().Doc("the index: a name, or a template of {stream} {topic} {partition} {date:yyyy.MM.dd} (the message's timestamp, UTC)").Check(func(s string) error {
		_, err := parseIndexTemplate(s)
		return err
	})
	f.String("username", &c.Username).Doc("HTTP basic authentication user")
	f.Secret("password", &c.Password).Doc("HTTP basic authentication password")
	f.Int("batch_size", &c.BatchSize).Default(DefaultBatchSize).Min(1).Max(100000).Doc("most documents in one _bulk request")
	f.Int("timeout_seconds", &c.TimeoutSeconds).Default(DefaultTimeoutSeconds).Min(1).Doc("how long one request may take")
	f.Bool("create_index_if_not_exists", &c.CreateIndex).Default(true).Doc("create a missing index (with index_mapping); false: a missing index is an error at open and at the first message for it")
	f.JSON("index_mapping", &c.IndexMapping).Doc("the body of the index creation request (settings, mappings)")
	f.Secret("api_key", &c.APIKey).Doc("an Elasticsearch API key (the base64 of id:key), sent as Authorization: ApiKey; instead of username and password")
	f.Size("max_bulk_bytes", &c.MaxBulkBytes).Default(5 * sdk.MiB).Min(1024).Max(512 * sdk.MiB).Doc("most bytes of one _bulk request body (a larger document goes alone)")
	sdk.Enum(f, "document_id", &c.DocumentID, sdk.Choice(idOffset), sdk.Choice(idNone)).Default(idOffset).Doc(`"offset": _id = stream:topic:partition:offset (exactly once); "none": ids by the cluster, as upstream (at least once)`)
	f.Int("max_attempts", &c.MaxAttempts).Default(5).Min(1).Max(1000).Doc("tries of a request, or of the items refused with 429 or 5xx, before the batch fails (the runtime's [retry] then applies)")
	f.Duration("retry_backoff", &c.RetryBackoff).Default(200 * time.Millisecond).Min(time.Millisecond).Doc("the first wait between tries (doubling, at most 10s)")
	f.BothOrNeither("username", "password")
	f.AtMostOne("username", "api_key")
})

// Spec describes the sink's plugin_config for the registry.
var Spec = Config.Spec()
