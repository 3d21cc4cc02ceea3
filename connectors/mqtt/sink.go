package mqtt

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/ferryio/ferry/sdk"
)

// Sink plugin_config fields besides the client's (and qos and clean_session, shared with
// the source's meaning).
const (
	// FieldTopic: the topic each message is published on, a template: {stream}, {topic},
	// {partition}, {offset}, {header:NAME} (a header's value), {json:a.b} (a field of a JSON
	// payload). Required. A message whose topic cannot be rendered is rejected alone
	// (on_failure).
	FieldTopic = "topic"
	// FieldRetain: publish with the retain flag; default false.
	FieldRetain = "retain"
	// FieldPublishTimeout: how long a batch waits for the broker's acknowledgements
	// before Consume fails (and the runtime retries the batch); default 30s.
	FieldPublishTimeout = "publish_timeout"
)

type sinkConfig struct {
	clientConfig
	Topic          string
	QoS            int
	Retain         bool
	CleanSession   bool
	PublishTimeout time.Duration
}

// SinkConfig declares the sink's plugin_config.
var SinkConfig = sdk.NewConfig(func(c *sinkConfig, f *sdk.Fields) {
	f.Commits(sdk.CommitsEachBatch) // once the broker acknowledged every message of the batch
	declareClient(&c.clientConfig, f)
	f.String(FieldTopic, &c.Topic).Required().NonEmpty().Doc("topic template: {stream} {topic} {partition} {offset} {header:NAME} {json:a.b}").Check(func(s string) error {
		_, err := parseTemplate(s)
		return err
	})
	f.Int(FieldQoS, &c.QoS).Default(1).Min(0).Max(2).Doc("publish QoS: 1 (PUBACK) or 2 (PUBCOMP) before the commit; 0 is at most once")
	f.Bool(FieldRetain, &c.Retain).Default(false).Doc("publish with the retain flag")
	f.Bool(FieldCleanSession, &c.CleanSession).Default(true).Doc("the sink's MQTT session is clean (nothing to resume: Iggy redelivers what was not acknowledged)")
	f.Duration(FieldPublishTimeout, &c.PublishTimeout).Default(30 * time.Second).Min(time.Millisecond).Doc("how long a batch waits for the broker's acknowledgements")
})

// SinkSpec describes the sink's plugin_config for the registry.
var SinkSpec = SinkConfig.Spec()

// Sink is the MQTT sink. Each Consume publishes its batch and waits for the broker's
// acknowledgement of every message; then (sink_controlled) it commits the batch's last
// offset. A failed batch is published again whole by the runtime's retry.
type Sink struct {
	cfg    sinkConfig
	log    sdkLogger
	tmpl   template
	client paho.Client
	pos    *sdk.Positions
	fail   sdk.OnFailure
	once   sync.Once
}

// NewSink returns an unopened MQTT sink.
func NewSink() *Sink { return &Sink{} }

// Open parses the config and connects (retried, connect_attempts in all); a refused login
// is sdk.Permanent.
func (s *Sink) Open(ctx context.Context, env sdk.SinkEnv) error {
	cfg, err := SinkConfig.Parse(env.Config)
	if err != nil {
		return sdk.Permanent(err)
	}
	if cfg.ClientID == "" {
		cfg.ClientID = "ferry-sink-" + env.Key
	}
	s.cfg, s.log, s.fail = cfg, loggerOf(env.Logger), env.OnFailure
	if s.tmpl, err = parseTemplate(cfg.Topic); err != nil {
		return sdk.Permanent(fmt.Errorf("plugin_config.%s: %w", FieldTopic, err))
	}
	if cfg.QoS == 0 {
		s.log.Warn("mqtt sink publishes at QoS 0: the broker acknowledges nothing, so a message lost on the way is not sent again")
	}
	if env.Committer == nil {
		s.log.Info("mqtt sink not run as sink_controlled: each batch is done once the broker acknowledged it (after_consuming)")
	}
	s.pos = sdk.NewPositions(env, nil)
	o, err := cfg.options(cfg.ClientID, s.log)
	if err != nil {
		return err
	}
	o.SetCleanSession(cfg.CleanSession)
	s.client = paho.NewClient(o)
	what := fmt.Sprintf("mqtt sink %q", env.Key)
	if _, err := cfg.connect(ctx, s.client, what, s.log); err != nil {
		return err
	}
	s.log.Info("mqtt sink connected", "brokers", strings.Join(cfg.brokers(), ", "), "client_id", cfg.ClientID,
		"topic", cfg.Topic, "qos", cfg.QoS, "retain", cfg.Retain)
	return nil
}

// Consume publishes the batch, waits for the broker's acknowledgements, then commits.
// A message whose topic cannot be rendered is rejected alone (sdk.RejectedMessages);
// under on_failure = stop nothing at or past it is published or committed.
func (s *Sink) Consume(ctx context.Context, t sdk.TopicMetadata, m sdk.MessagesMetadata, msgs []sdk.ConsumedMessage) error {
	fresh := s.pos.Fresh(m.Partition, msgs)
	if len(fresh) == 0 {
		return nil
	}
	if !s.client.IsConnectionOpen() {
		s.pos.Rewind(m.Partition, fresh[0].Offset)
		return fmt.Errorf("mqtt sink: publish to %s: %w", strings.Join(s.cfg.brokers(), ", "), sdk.ErrNotConnected)
	}
	type sent struct {
		tok    paho.Token
		offset uint64
	}
	toks := make([]sent, 0, len(fresh))
	var rejected []uint64
	var rejectErr error
	done := fresh[len(fresh)-1].Offset // the offset committed once every publish is acknowledged
	for i := range fresh {
		msg := &fresh[i]
		topic, err := s.tmpl.render(t, m, msg)
		if err != nil {
			rejected = append(rejected, msg.Offset)
			if rejectErr == nil {
				rejectErr = fmt.Errorf("offset %d: plugin_config.%s: %w", msg.Offset, FieldTopic, err)
			}
			if !s.fail.MayPassRejected() {
				// stop: nothing at or past it is done; the runtime stops before it.
				fresh = fresh[:i]
				break
			}
			continue
		}
		payload := append([]byte(nil), msg.Payload...) // Paho keeps it until the broker acknowledged
		toks = append(toks, sent{s.client.Publish(topic, byte(s.cfg.QoS), s.cfg.Retain, payload), msg.Offset})
	}
	wait, cancel := context.WithTimeout(ctx, s.cfg.PublishTimeout)
	defer cancel()
	for _, st := range toks {
		if err := waitToken(wait, st.tok, 0); err != nil {
			s.pos.Rewind(m.Partition, msgs[0].Offset)
			if errors.Is(err, context.DeadlineExceeded) {
				err = fmt.Errorf("%w (publish_timeout %v)", errTimeout, s.cfg.PublishTimeout)
			}
			return fmt.Errorf("mqtt sink: publish offset %d to %s: %w", st.offset, strings.Join(s.cfg.brokers(), ", "), err)
		}
	}
	if !s.fail.MayPassRejected() && len(rejected) > 0 {
		if len(fresh) > 0 {
			done = fresh[len(fresh)-1].Offset
		} else {
			return &sdk.RejectedMessages{Offsets: rejected, Err: rejectErr}
		}
	}
	if err := s.pos.Durable(m.Partition, done); err != nil && !errors.Is(err, sdk.ErrCommitUnknownPartition) {
		return err
	}
	if len(rejected) > 0 {
		return &sdk.RejectedMessages{Offsets: rejected, Err: rejectErr}
	}
	return nil
}

// Close disconnects once what is being published is sent (at most 250 ms).
func (s *Sink) Close(context.Context) error {
	s.once.Do(func() {
		if s.client != nil {
			s.client.Disconnect(250)
		}
	})
	return nil
}
