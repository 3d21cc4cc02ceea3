package mongodb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferryio/ferry/sdk"
)

// Sink writes messages to one MongoDB collection, exactly once by _id (see the package
// comment). Consume is safe for concurrent use: one caller per topic, and several
// partitions of a topic at once (max_in_flight).
type Sink struct {
	cfg     config
	key     string
	stop    bool // on_failure = stop: nothing at or past a rejected message is committed
	log     *slog.Logger
	client  *mongo.Client
	coll    *mongo.Collection
	build   builder
	pos     *sdk.Positions
	hosts   string // the servers of connection_uri, for errors (never the credentials)
	retry   sdk.Retry
	written atomic.Uint64 // documents inserted
	dups    atomic.Uint64 // documents found written already (a replay)
	refused atomic.Uint64 // messages handed to on_failure
}

var (
	_ sdk.Sink           = (*Sink)(nil)
	_ sdk.ConcurrentSink = (*Sink)(nil)
	_ sdk.Preflighter    = (*Sink)(nil)
)

// New returns an unopened MongoDB sink.
func New() *Sink { return &Sink{} }

// Open reads plugin_config, connects, checks the server answers with the configured
// credentials and that the collection exists (created when it is missing and
// auto_create_collection is on; refused when it is off).
// A configuration or a credential the server refuses is sdk.Permanent; an unreachable
// server is not (the runtime opens the sink again with backoff).
func (s *Sink) Open(ctx context.Context, env sdk.SinkEnv) error {
	cfg, err := Config.Parse(env.Config)
	if err != nil {
		return sdk.Permanent(fmt.Errorf("mongodb sink: %w", err))
	}
	if env.Committer == nil {
		return sdk.Permanent(errors.New(`mongodb sink: offset_commit = "sink_controlled" is required (the sink commits a partition's offsets once MongoDB acknowledged its documents)`))
	}
	s.cfg, s.key, s.log = cfg, env.Key, env.Logger
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.stop = !env.OnFailure.MayPassRejected()
	s.build = newBuilder(cfg)
	s.pos = sdk.NewPositions(env, nil)
	s.retry = sdk.Retry{Initial: cfg.RetryDelay, Max: cfg.RetryDelayMax, Attempts: max(cfg.MaxRetries, 1), Jitter: 0.2,
		What: "mongodb insertMany", Log: s.log, Transient: transient}
	if err := s.connect(ctx); err != nil {
		return err
	}
	if err := s.checkCollection(ctx, true); err != nil {
		_ = s.client.Disconnect(context.WithoutCancel(ctx))
		return err
	}
	s.log.Info("mongodb sink open", "hosts", s.hosts, "database", cfg.Database, "collection", cfg.Collection,
		"payload_format", cfg.Format, "batch_size", cfg.BatchSize)
	return nil
}

// connect builds the client from connection_uri and pings the database.
func (s *Sink) connect(ctx context.Context) error {
	opts, hosts, err := clientOptions(s.cfg)
	if err != nil {
		return sdk.Permanent(fmt.Errorf("mongodb sink: %w", err))
	}
	s.hosts = hosts
	s.client, err = mongo.Connect(opts)
	if err != nil {
		return sdk.Permanent(fmt.Errorf("mongodb sink: plugin_config.connection_uri: %s", redact(err, s.cfg.URI.Reveal())))
	}
	s.coll = s.client.Database(s.cfg.Database).Collection(s.cfg.Collection)
	if err := s.ping(ctx); err != nil {
		_ = s.client.Disconnect(context.WithoutCancel(ctx))
		return err
	}
	return nil
}

// clientOptions reads connection_uri: the driver's options, the servers it names (for
// errors) and the refusal of an unacknowledged write concern.
func clientOptions(cfg config) (*options.ClientOptions, string, error) {
	uri := cfg.URI.Reveal()
	opts := options.Client().ApplyURI(uri).SetAppName("ferry").SetTimeout(cfg.WriteTimeout)
	if err := opts.Validate(); err != nil {
		return nil, "", fmt.Errorf("plugin_config.connection_uri: %s", redact(err, uri))
	}
	if opts.ServerSelectionTimeout == nil {
		opts.SetServerSelectionTimeout(cfg.ConnectTimeout)
	}
	if opts.ConnectTimeout == nil {
		opts.SetConnectTimeout(cfg.ConnectTimeout)
	}
	if cfg.MaxPoolSize > 0 {
		opts.SetMaxPoolSize(cfg.MaxPoolSize)
	}
	if wc := opts.WriteConcern; wc != nil && !wc.Acknowledged() {
		return nil, "", errors.New("plugin_config.connection_uri: w=0 asks for unacknowledged writes: the sink commits offsets only after MongoDB acknowledged the documents, so it needs w=1 (the default), a number or majority")
	}
	return opts, strings.Join(opts.Hosts, ","), nil
}

// ping checks that the server answers and accepts the credentials.
func (s *Sink) ping(ctx context.Context) error {
	err := s.client.Database(s.cfg.Database).RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Err()
	switch {
	case err == nil:
		return nil
	case isAuthError(err):
		return sdk.Permanent(fmt.Errorf("mongodb sink: MongoDB at %s refused the credentials of plugin_config.connection_uri%s: %s",
			s.hosts, userOf(s.cfg.URI.Reveal()), redact(err, s.cfg.URI.Reveal())))
	default:
		return fmt.Errorf("mongodb sink: cannot reach MongoDB at %s (plugin_config.connection_uri): %s", s.hosts, redact(err, s.cfg.URI.Reveal()))
	}
}

// checkCollection makes sure the collection is there: listed by the database, or created
// when auto_create_collection is on (create = false only reports it: the preflight
// creates nothing). A missing collection with auto_create_collection off is refused, so
// a misspelt name never fills a new collection. A user who may insert but not list the
// collections is let through with a warning (the first insert would say more).
func (s *Sink) checkCollection(ctx context.Context, create bool) error {
	db := s.client.Database(s.cfg.Database)
	where := fmt.Sprintf("%s.%s at %s", s.cfg.Database, s.cfg.Collection, s.hosts)
	names, err := db.ListCollectionNames(ctx, bson.D{{Key: "name", Value: s.cfg.Collection}})
	var ce mongo.CommandError
	switch {
	case errors.As(err, &ce) && ce.Code == codeUnauthorized:
		s.log.Warn("mongodb sink: the user may not list the collections: cannot check that the collection exists",
			"database", s.cfg.Database, "collection", s.cfg.Collection)
		return nil
	case err != nil:
		return fmt.Errorf("mongodb sink: list the collections of %s at %s: %s", s.cfg.Database, s.hosts, redact(err, s.cfg.URI.Reveal()))
	case slices.Contains(names, s.cfg.Collection):
		return nil
	case !s.cfg.AutoCreate:
		return sdk.Permanent(fmt.Errorf("mongodb sink: collection %s does not exist and plugin_config.auto_create_collection = false: create it, or set auto_create_collection = true", where))
	case !create:
		return nil
	}
	err = db.CreateCollection(ctx, s.cfg.Collection)
	if errors.As(err, &ce) && ce.Code == codeNamespaceExists { // created meanwhile by another instance
		err = nil
	}
	if err != nil {
		return fmt.Errorf("mongodb sink: create collection %s: %s", where, redact(err, s.cfg.URI.Reveal()))
	}
	s.log.Info("mongodb sink: collection created", "database", s.cfg.Database, "collection", s.cfg.Collection)
	return nil
}

// MaxInFlight implements sdk.ConcurrentSink: partitions are written independently (the
// driver's pool serves them).
func (s *Sink) MaxInFlight() int { return sdk.MaxConcurrentUnlimited }

// Consume inserts the batch's documents, batch_size at a time, unordered, and commits the
// batch's last offset once MongoDB acknowledged every document (a duplicate of a document
// already written counts). Messages MongoDB refuses one by one are returned as
// sdk.RejectedMessages, and only the offsets below the first of them are committed: the
// runtime marks the rest of the batch done itself once on_failure handled the rejected
// messages (sent them to the dead-letter topic), so no commit passes a message that is
// neither in the collection nor handled. A transient failure is retried max_retries
// times, then returned (a lost connection wrapping sdk.ErrNotConnected: waited out, never
// counted).
func (s *Sink) Consume(ctx context.Context, topic sdk.TopicMetadata, meta sdk.MessagesMetadata, msgs []sdk.ConsumedMessage) error {
	p := meta.Partition
	fresh := s.pos.Fresh(p, msgs)
	if len(fresh) == 0 {
		return nil
	}
	rej, err := s.write(ctx, topic, p.PartitionID, fresh)
	if err != nil {
		s.pos.Rewind(p, fresh[0].Offset) // the runtime's retry of the batch writes it again
		return err
	}
	first, last := fresh[0].Offset, fresh[len(fresh)-1].Offset
	s.log.Log(ctx, s.batchLevel(), "mongodb sink: batch written", "partition", p.PartitionID, "first_offset", first,
		"last_offset", last, "rejected", len(rej.offsets))
	switch {
	case len(rej.offsets) == 0:
		s.commit(p, last)
		return nil
	case rej.offsets[0] > first:
		s.commit(p, rej.offsets[0]-1)
	}
	s.refused.Add(uint64(len(rej.offsets)))
	return &sdk.RejectedMessages{Offsets: rej.offsets, Err: rej.err}
}

// commit commits last of p (written and acknowledged).
func (s *Sink) commit(p sdk.Partition, last uint64) {
	if err := s.pos.Durable(p, last); err != nil {
		// Written: whoever owns the partition now finds the documents there.
		s.log.Debug("mongodb sink: commit refused after the write", "partition", p.PartitionID, "offset", last, "error", err)
	}
}

func (s *Sink) batchLevel() slog.Level {
	if s.cfg.Verbose {
		return slog.LevelInfo
	}
	return slog.LevelDebug
}

// rejection is what MongoDB refused of a batch: ascending offsets and the first reason.
type rejection struct {
	offsets []uint64
	err     error
}

func (r *rejection) add(offset uint64, err error) {
	r.offsets = append(r.offsets, offset)
	if r.err == nil {
		r.err = err
	}
}

// write inserts msgs in chunks of batch_size. Under on_failure = stop it ends at the
// chunk holding the first rejected message.
func (s *Sink) write(ctx context.Context, topic sdk.TopicMetadata, partition uint32, msgs []sdk.ConsumedMessage) (rejection, error) {
	var rej rejection
	for start := 0; start < len(msgs); start += s.cfg.BatchSize {
		chunk := msgs[start:min(start+s.cfg.BatchSize, len(msgs))]
		docs := make([]any, 0, len(chunk))
		at := make([]int, 0, len(chunk)) // docs[i] is chunk[at[i]]
		for i := range chunk {
			d, err := s.build.document(topic, partition, &chunk[i])
			if err != nil {
				rej.add(chunk[i].Offset, fmt.Errorf("mongodb sink: partition %d offset %d: %w", partition, chunk[i].Offset, err))
				continue
			}
			docs = append(docs, d)
			at = append(at, i)
		}
		if len(docs) > 0 {
			refused, err := s.insert(ctx, docs)
			if err != nil {
				return rejection{}, err
			}
			for _, r := range refused {
				m := &chunk[at[r.index]]
				rej.add(m.Offset, fmt.Errorf("mongodb sink: partition %d offset %d: MongoDB refused the document %v: %w",
					partition, m.Offset, docs[r.index].(bson.D)[0].Value, r.err))
			}
			slices.Sort(rej.offsets)
		}
		if s.stop && len(rej.offsets) > 0 {
			return rej, nil
		}
	}
	return rej, nil
}

// refusal is one document MongoDB refused for good.
type refusal struct {
	index int
	err   error
}

// insert inserts docs unordered, retrying transient failures, and returns the documents
// refused for good. A document refused as a duplicate whose _id is in the collection was
// written by an earlier attempt: it counts.
func (s *Sink) insert(ctx context.Context, docs []any) ([]refusal, error) {
	var refused []refusal
	opts := options.InsertMany().SetOrdered(false)
	err := s.retry.Do(ctx, func(ctx context.Context, _ int) error {
		refused = refused[:0]
		res, err := s.coll.InsertMany(ctx, docs, opts)
		if res != nil {
			s.written.Add(uint64(len(res.InsertedIDs)))
		}
		var bwe mongo.BulkWriteException
		if err == nil || !errors.As(err, &bwe) || bwe.WriteConcernError != nil {
			return err // a write concern error: retried (what landed is found written again)
		}
		var check []int   // duplicates and refusals whose _id may be there from an earlier attempt
		var unnamed []int // duplicates of an index the server does not name (FerretDB)
		for _, we := range bwe.WriteErrors {
			switch {
			case transientCode(we.Code):
				return err // retried whole: what landed comes back as duplicates
			case we.Code == codeDuplicateKey && duplicateOfID(we.Raw, we.Message):
				s.dups.Add(1)
			case we.Code == codeDuplicateKey && !namesIndex(we.Raw, we.Message):
				unnamed = append(unnamed, we.Index)
			default:
				check = append(check, we.Index)
			}
		}
		if len(unnamed) > 0 {
			// With no unique index but _id's, a duplicate can only be of the _id: no
			// lookups (which a server without an _id lookup, FerretDB, answers by a scan).
			other, lerr := s.otherUniqueIndex(ctx)
			if lerr != nil {
				return lerr
			}
			if other {
				check = append(check, unnamed...)
			} else {
				s.dups.Add(uint64(len(unnamed)))
			}
		}
		if len(check) == 0 {
			return nil
		}
		there, qerr := s.present(ctx, docs, check)
		if qerr != nil {
			return qerr
		}
		for _, we := range bwe.WriteErrors {
			if !slices.Contains(check, we.Index) {
				continue
			}
			if there[we.Index] {
				s.dups.Add(1)
				continue
			}
			refused = append(refused, refusal{we.Index, fmt.Errorf("code %d: %s", we.Code, we.Message)})
		}
		return nil
	})
	if err != nil {
		err = fmt.Errorf("mongodb sink: insert into %s.%s at %s: %s", s.cfg.Database, s.cfg.Collection, s.hosts, redact(err, s.cfg.URI.Reveal()))
		if lostConnection(err) {
			return nil, fmt.Errorf("%w: %w", sdk.ErrNotConnected, err)
		}
		return nil, err
	}
	slices.SortFunc(refused, func(a, b refusal) int { return a.index - b.index })
	return refused, nil
}

// otherUniqueIndex says whether the collection has a unique index besides _id's.
func (s *Sink) otherUniqueIndex(ctx context.Context) (bool, error) {
	cur, err := s.coll.Indexes().List(ctx)
	if err != nil {
		return false, err
	}
	defer func() { _ = cur.Close(context.WithoutCancel(ctx)) }()
	for cur.Next(ctx) {
		unique, _ := cur.Current.Lookup("unique").BooleanOK()
		name, _ := cur.Current.Lookup("name").StringValueOK()
		if unique && name != "_id_" {
			return true, nil
		}
	}
	return false, cur.Err()
}

// present reports which of docs[idx] have their _id in the collection: one lookup by _id
// each (MongoDB answers each from the _id index; FerretDB on SQLite scans, and a scan for
// an $in or $or of them costs as much as all of them).
func (s *Sink) present(ctx context.Context, docs []any, idx []int) (map[int]bool, error) {
	out := map[int]bool{}
	opts := options.FindOne().SetProjection(bson.D{{Key: "_id", Value: 1}})
	for _, j := range idx {
		id := docs[j].(bson.D)[0].Value
		err := s.coll.FindOne(ctx, bson.D{{Key: "_id", Value: id}}, opts).Err()
		switch {
		case err == nil:
			out[j] = true
		case !errors.Is(err, mongo.ErrNoDocuments):
			return nil, err
		}
	}
	return out, nil
}

// Preflight implements sdk.Preflighter (`ferry check --connect`): the server answers, the
// credentials are accepted, and the collection exists or auto_create_collection is on.
// Nothing is created.
func (s *Sink) Preflight(ctx context.Context, raw []byte) []error {
	cfg, err := Config.Parse(raw)
	if err != nil {
		return []error{err}
	}
	probe := &Sink{cfg: cfg, log: slog.New(slog.DiscardHandler)}
	if err := probe.connect(ctx); err != nil {
		return []error{err}
	}
	defer func() { _ = probe.client.Disconnect(context.WithoutCancel(ctx)) }()
	if err := probe.checkCollection(ctx, false); err != nil {
		return []error{err}
	}
	return nil
}

// Close logs the sink's counts and disconnects; ctx bounds the goodbye. Every commit was
// made by Consume.
func (s *Sink) Close(ctx context.Context) error {
	if s.client == nil {
		return nil
	}
	s.log.Info("mongodb sink closed", "inserted", s.written.Load(), "already_written", s.dups.Load(), "rejected", s.refused.Load())
	err := s.client.Disconnect(ctx)
	s.client = nil
	return err
}

// redact returns err's text with the URI's password, and the URI itself, hidden.
func redact(err error, uri string) string {
	msg := err.Error()
	if uri == "" {
		return msg
	}
	msg = strings.ReplaceAll(msg, uri, sdk.RedactURL(uri))
	if u, perr := url.Parse(uri); perr == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			msg = strings.ReplaceAll(msg, pw, sdk.RedactedText)
			msg = strings.ReplaceAll(msg, url.QueryEscape(pw), sdk.RedactedText)
		}
	}
	return msg
}

// userOf names the URI's user for an error, or nothing.
func userOf(uri string) string {
	if u, err := url.Parse(uri); err == nil && u.User != nil && u.User.Username() != "" {
		return fmt.Sprintf(" (user %q)", u.User.Username())
	}
	return ""
}
