package elasticsearch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
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

// Config declares the sink's plugin_config (upstream's keys first).
var Config = sdk.NewConfig(func(c *config, f *sdk.Fields) {
	f.Commits(sdk.CommitsEachBatch) // once every _bulk item of the batch landed
	f.URL("url", &c.URL, "http", "https").Required().Doc("the cluster's address (Elasticsearch 8 or OpenSearch 2), e.g. http://localhost:9200")
	f.String("index", &c.Index).Required().NonEmpty().Doc("the index, a template: {stream} {topic} {partition} {date:yyyy.MM.dd} (the message's timestamp, UTC)").Check(func(s string) error {
		_, err := parseIndexTemplate(s)
		return err
	})
	f.String("username", &c.Username).Doc("HTTP basic authentication user")
	f.Secret("password", &c.Password).Doc("HTTP basic authentication password")
	f.Secret("api_key", &c.APIKey).Doc("an Elasticsearch API key (the base64 id:key), sent as Authorization: ApiKey")
	f.Int("batch_size", &c.BatchSize).Default(100).Min(1).Max(100000).Doc("most documents in one _bulk request")
	f.Size("max_bulk_bytes", &c.MaxBulkBytes).Default(5 * sdk.MiB).Min(1024).Max(512 * sdk.MiB).Doc("most bytes of one _bulk request body (a larger document goes alone)")
	f.Int("timeout_seconds", &c.TimeoutSeconds).Default(30).Min(1).Doc("how long one request may take")
	f.Bool("create_index_if_not_exists", &c.CreateIndex).Default(true).Doc("create a missing index (with index_mapping); false: a missing index is an error")
	f.JSON("index_mapping", &c.IndexMapping).Doc("the body of the index creation request (settings, mappings)")
	sdk.Enum(f, "document_id", &c.DocumentID, sdk.Choice(idOffset), sdk.Choice(idNone)).Default(idOffset).Doc(`"offset": _id = stream:topic:partition:offset (exactly once); "none": ids by the cluster (at least once)`)
	f.Int("max_attempts", &c.MaxAttempts).Default(5).Min(1).Doc("tries of a request or of items refused with 429 or 5xx before the batch fails")
	f.Duration("retry_backoff", &c.RetryBackoff).Default(200 * time.Millisecond).Min(time.Millisecond).Doc("the first wait between tries (doubling, at most 10s)")
	f.BothOrNeither("username", "password")
	f.AtMostOne("username", "api_key")
})

// Spec describes the sink's plugin_config for the registry.
var Spec = Config.Spec()

// Sink indexes each message as one document with the _bulk API.
type Sink struct {
	cfg   config
	tmpl  indexTemplate
	cl    *client
	env   sdk.SinkEnv
	pos   *sdk.Positions
	retry sdk.Retry

	mu    sync.Mutex
	ready map[string]bool // indexes known to exist (or created)
}

// New returns an unopened sink.
func New() *Sink { return &Sink{} }

// Open parses the config, checks that the cluster answers and takes the credentials,
// and, for an index that is not a template, that it exists or creates it.
func (s *Sink) Open(ctx context.Context, env sdk.SinkEnv) error {
	cfg, err := Config.Parse(env.Config)
	if err != nil {
		return sdk.Permanent(err)
	}
	s.cfg, s.env = cfg, env
	if s.tmpl, err = parseIndexTemplate(cfg.Index); err != nil {
		return sdk.Permanent(fmt.Errorf("plugin_config.index: %w", err))
	}
	s.cl = newClient(cfg)
	s.ready = map[string]bool{}
	s.pos = sdk.NewPositions(env, nil)
	s.retry = sdk.Retry{Initial: cfg.RetryBackoff, Max: 10 * time.Second, Attempts: cfg.MaxAttempts, Jitter: 0.2,
		What: "elasticsearch request", Log: env.Logger, LogAttrs: []any{"url", cfg.URL}}
	if cfg.DocumentID == idNone {
		env.Logger.Warn("elasticsearch sink with document_id = \"none\": the cluster picks the ids, so a batch indexed again after a crash is indexed twice (at least once)")
	}
	if env.Committer == nil {
		env.Logger.Info("elasticsearch sink not run as sink_controlled: each batch is done once the cluster took it (after_consuming)")
	}
	var info nodeInfo
	if err := s.retry.Do(ctx, func(ctx context.Context, _ int) error {
		var err error
		info, err = s.cl.info(ctx)
		return err
	}); err != nil {
		return err
	}
	if name, ok := s.tmpl.static(); ok {
		if err := s.ensureIndex(ctx, name); err != nil {
			return err
		}
	}
	env.Logger.Info("elasticsearch sink connected", "url", cfg.URL, "distribution", info.distribution(), "version", info.Version.Number,
		"index", cfg.Index, "document_id", string(cfg.DocumentID))
	return nil
}

// ensureIndex makes sure index exists: created when missing and create_index_if_not_exists
// is on, an error naming it otherwise.
func (s *Sink) ensureIndex(ctx context.Context, index string) error {
	s.mu.Lock()
	ok := s.ready[index]
	s.mu.Unlock()
	if ok {
		return nil
	}
	err := s.retry.Do(ctx, func(ctx context.Context, _ int) error {
		exists, err := s.cl.indexExists(ctx, index)
		if err != nil || exists {
			return err
		}
		if !s.cfg.CreateIndex {
			return sdk.Permanent(fmt.Errorf("elasticsearch sink: index %q does not exist at %s and plugin_config.create_index_if_not_exists is false", index, s.cfg.URL))
		}
		return s.cl.createIndex(ctx, index, s.cfg.IndexMapping)
	})
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.ready[index] = true
	s.mu.Unlock()
	return nil
}

// Consume indexes the batch's fresh messages in _bulk requests of at most batch_size
// documents and max_bulk_bytes, retries the items the cluster refused for a while, and
// commits the batch's last offset once every item landed. Items refused for good are
// returned as sdk.RejectedMessages; under on_failure = stop nothing at or past the first
// is committed.
func (s *Sink) Consume(ctx context.Context, t sdk.TopicMetadata, m sdk.MessagesMetadata, msgs []sdk.ConsumedMessage) error {
	fresh := s.pos.Fresh(m.Partition, msgs)
	if len(fresh) == 0 {
		return nil
	}
	items := make([]item, 0, len(fresh))
	for i := range fresh {
		msg := &fresh[i]
		index := s.tmpl.render(t, m.Partition.PartitionID, msg)
		if err := s.ensureIndex(ctx, index); err != nil {
			s.pos.Rewind(m.Partition, fresh[0].Offset)
			return err
		}
		it := item{offset: msg.Offset, action: actionLine(index, s.docID(t, m.Partition.PartitionID, msg.Offset))}
		it.doc = document(t, m.Partition.PartitionID, msg)
		items = append(items, it)
	}
	rejected, err := s.index(ctx, items)
	if err != nil {
		s.pos.Rewind(m.Partition, fresh[0].Offset)
		return err
	}
	done := fresh[len(fresh)-1].Offset
	var rejErr error
	var offsets []uint64
	for _, r := range rejected {
		offsets = append(offsets, r.offset)
		if rejErr == nil {
			rejErr = r.err
		}
	}
	if len(offsets) > 0 && !s.env.OnFailure.MayPassRejected() {
		// stop: the offset stays before the first refused message (what was indexed past
		// it is indexed again, by the same ids, when the runtime goes on).
		if offsets[0] == fresh[0].Offset {
			s.pos.Rewind(m.Partition, fresh[0].Offset)
			return &sdk.RejectedMessages{Offsets: offsets, Err: rejErr}
		}
		done = offsets[0] - 1
		s.pos.Rewind(m.Partition, offsets[0])
	}
	if err := s.pos.Durable(m.Partition, done); err != nil && !errors.Is(err, sdk.ErrCommitUnknownPartition) {
		return err
	}
	if len(offsets) > 0 {
		return &sdk.RejectedMessages{Offsets: offsets, Err: rejErr}
	}
	return nil
}

func (s *Sink) docID(t sdk.TopicMetadata, part uint32, offset uint64) string {
	if s.cfg.DocumentID == idNone {
		return ""
	}
	return fmt.Sprintf("%s:%s:%d:%d", t.Stream, t.Topic, part, offset)
}

// index sends items in chunks and sends again, alone, those refused with 429 or 5xx,
// until they land or max_attempts is spent. It returns the items refused for good.
func (s *Sink) index(ctx context.Context, items []item) ([]refusal, error) {
	var refused []refusal
	for len(items) > 0 {
		n, size := 0, 0
		for n < len(items) && n < s.cfg.BatchSize {
			l := len(items[n].action) + len(items[n].doc) + 2
			if n > 0 && size+l > int(s.cfg.MaxBulkBytes) {
				break
			}
			size += l
			n++
		}
		chunk := items[:n]
		items = items[n:]
		pending := chunk
		err := s.retry.Do(ctx, func(ctx context.Context, _ int) error {
			res, err := s.cl.bulk(ctx, pending)
			if err != nil {
				return err
			}
			var again []item
			for i, r := range res {
				switch {
				case r.status >= 200 && r.status < 300:
				case r.status == http.StatusTooManyRequests || r.status >= 500:
					again = append(again, pending[i])
				default:
					refused = append(refused, refusal{offset: pending[i].offset,
						err: fmt.Errorf("offset %d: index %s: %d %s", pending[i].offset, r.index, r.status, r.reason)})
				}
			}
			if len(again) == 0 {
				return nil
			}
			first := res[indexOf(pending, again[0])]
			pending = again
			// counted: a cluster that stays overloaded fails the batch, which the runtime retries
			return fmt.Errorf("elasticsearch sink: %d of the _bulk items refused for now, first: offset %d: %d %s", len(again), again[0].offset, first.status, first.reason)
		})
		if err != nil {
			return nil, err
		}
	}
	sortRefusals(refused)
	return refused, nil
}

func indexOf(items []item, it item) int {
	for i := range items {
		if items[i].offset == it.offset {
			return i
		}
	}
	return 0
}

// Close releases the idle connections.
func (s *Sink) Close(context.Context) error {
	if s.cl != nil {
		s.cl.http.CloseIdleConnections()
	}
	return nil
}

// sanitize keeps a reason short enough for a log line.
func sanitize(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
