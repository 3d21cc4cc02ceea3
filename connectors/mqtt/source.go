package mqtt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/ferryio/ferry/sdk"
)

// Source plugin_config fields besides the client's.
const (
	// FieldTopics: the topic filters subscribed to (+ and # wildcards, $share/… shared
	// subscriptions). Required.
	FieldTopics = "topics"
	// FieldQoS: the subscriptions' QoS, 0, 1 or 2; default 1. 0 is at most once (the broker
	// never sends a QoS 0 message again).
	FieldQoS = "qos"
	// FieldCleanSession: start a new session at every connect; default false (a persistent
	// session, which at least once needs: the broker keeps what was not acknowledged).
	FieldCleanSession = "clean_session"
	// FieldRetained: deliver retained messages (sent by the broker at subscribe); default true.
	FieldRetained = "retained"
	// FieldBatchSize: most messages per batch sent to Iggy; default 1000.
	FieldBatchSize = "batch_size"
	// FieldPartitionBy: topic (default: a message's partition key is its MQTT topic, so one
	// topic's messages keep their order in one partition) or none (the runtime's round robin).
	FieldPartitionBy = "partition_by"
)

// Headers of every message the source produces.
const (
	HeaderTopic     = "mqtt_topic"      // string: the MQTT topic
	HeaderQoS       = "mqtt_qos"        // uint8: the QoS the message was delivered with
	HeaderRetained  = "mqtt_retained"   // bool: the broker sent it as a retained message
	HeaderDuplicate = "mqtt_duplicate"  // bool: the broker marked it as sent again (DUP)
	HeaderMessageID = "mqtt_message_id" // uint16: the packet id (QoS 1 and 2; reused by the broker)
)

type partitionBy string

const (
	partitionByTopic partitionBy = "topic"
	partitionByNone  partitionBy = "none"
)

type sourceConfig struct {
	clientConfig
	Topics       []string
	QoS          int
	CleanSession bool
	Retained     bool
	BatchSize    int
	PartitionBy  partitionBy
	TopicMapping []mapping

	SubscriptionQoSRaw json.RawMessage // upstream's subscription_qos, as written
	TLSRaw             json.RawMessage // upstream's [tls] table, as written
	subscriptionQoS    map[string]int
}

// SourceConfig declares the source's plugin_config.
var SourceConfig = sdk.NewConfig(func(c *sourceConfig, f *sdk.Fields) {
	declareClient(&c.clientConfig, f).Alias(UpstreamBrokerURL)
	f.Strings(FieldTopics, &c.Topics).Alias(UpstreamSubscriptions).Required().NonEmpty().Doc("topic filters subscribed to (+ and # wildcards)").Check(func(ts []string) error {
		for _, t := range ts {
			if err := checkFilter(t); err != nil {
				return err
			}
		}
		return nil
	})
	f.Int(FieldQoS, &c.QoS).Default(1).Min(0).Max(2).Doc("the subscriptions' QoS: 1 or 2 for at least once; 0 is at most once")
	f.Bool(FieldCleanSession, &c.CleanSession).Alias(UpstreamCleanStart).Default(false).Doc("a new session at every connect (at most once across a restart); default a persistent session")
	f.Bool(FieldRetained, &c.Retained).Default(true).Doc("deliver retained messages (the broker sends them at every subscribe)")
	f.Int(FieldBatchSize, &c.BatchSize).Default(1000).Min(1).Max(65535).Doc("most messages per batch sent to Iggy")
	sdk.Enum(f, FieldPartitionBy, &c.PartitionBy, sdk.Choice(partitionByTopic), sdk.Choice(partitionByNone)).Default(partitionByTopic).
		Doc("partition key: topic (one MQTT topic keeps its order in one partition) or none")
	sdk.Tables(f, FieldTopicMapping, &c.TopicMapping, declareMapping).
		Doc("[[plugin_config.topic_mapping]]: filter, stream, topic: the messages of matching MQTT topics go to that Iggy stream and topic (templates: {N} the N-th level); the first match wins, no match: the [[streams]] entry")
	f.Check(func() error { return checkMappings(c.TopicMapping, c.Topics) })
	f.JSON(UpstreamSubscriptionQoS, &c.SubscriptionQoSRaw).Doc("a QoS per filter of topics, over qos ({ \"a/#\" = 2 }; Iggy's mqtt_source key)")
	f.Check(func() (err error) {
		c.subscriptionQoS, err = parseSubscriptionQoS(c.SubscriptionQoSRaw, c.Topics)
		return err
	})
	f.JSON(UpstreamTLS, &c.TLSRaw).Doc("Iggy's mqtt_source [tls] table: ca_file, client_cert_file, client_key_file, server_name (= the tls_* keys)")
	f.Check(func() error { return applyUpstreamTLS(c.TLSRaw, &c.clientConfig) })
})

// SourceSpec describes the source's plugin_config for the registry.
var SourceSpec = SourceConfig.Spec()

// checkFilter refuses what no broker accepts as a topic filter.
func checkFilter(f string) error {
	if f == "" {
		return errors.New("an empty topic filter")
	}
	levels := strings.Split(f, "/")
	for i, l := range levels {
		switch {
		case l == "#" && i != len(levels)-1:
			return fmt.Errorf("topic filter %q: # must be the last level", f)
		case l != "#" && l != "+" && strings.ContainsAny(l, "#+"):
			return fmt.Errorf("topic filter %q: a wildcard must fill a whole level", f)
		}
	}
	return nil
}

// inboxSize bounds the messages received and not yet read. A broker sends at most 65,535
// unacknowledged QoS 1/2 messages per session (the packet ids), so the receive handler,
// which must not block Paho's ordered delivery, never waits on it in practice.
const inboxSize = 1 << 16

// Source is the MQTT source. Paho delivers messages in order to one handler, which queues
// them; Read takes a batch, and its AckFunc acknowledges the batch's messages to the broker,
// in order, once Iggy has them. A batch not delivered is read again first.
type Source struct {
	cfg    sourceConfig
	log    sdkLogger
	key    string
	client paho.Client
	inbox  chan paho.Message
	closed chan struct{}
	once   sync.Once

	mu   sync.Mutex
	held []paho.Message // nacked, produced again before anything new

	subscribed chan error // the outcome of each connect's subscribe, first one read by Open
	received   atomic.Uint64
	acked      atomic.Uint64
	duplicates atomic.Uint64
	dropped    atomic.Uint64 // retained messages not delivered (retained = false)
	unmapped   atomic.Uint64 // messages no topic_mapping table matched (sent to the [[streams]] entry)
	emptyName  atomic.Uint64 // messages whose mapping rendered an empty name (sent to the [[streams]] entry)
	connected  atomic.Bool
}

// NewSource returns an unopened MQTT source.
func NewSource() *Source { return &Source{} }

// Open parses the config, connects (retried, connect_attempts in all) and subscribes.
// A refused login, a rejected client id or a refused subscription is sdk.Permanent.
func (s *Source) Open(ctx context.Context, env sdk.SourceEnv) error {
	cfg, err := SourceConfig.Parse(env.Config)
	if err != nil {
		return sdk.Permanent(err)
	}
	s.cfg, s.key, s.log = cfg, env.Key, loggerOf(env.Logger)
	if cfg.ClientID == "" {
		cfg.ClientID = "ferry-source-" + env.Key
		s.cfg.ClientID = cfg.ClientID
	}
	if cfg.lowestQoS() == 0 {
		s.log.Warn("mqtt source subscribes at QoS 0: at most once (the broker never sends a QoS 0 message again)")
	}
	if cfg.CleanSession {
		s.log.Warn("mqtt source uses a clean session: what the broker holds for it is dropped at every connect (at most once across a restart)")
	}
	s.inbox = make(chan paho.Message, inboxSize)
	s.closed = make(chan struct{})
	s.subscribed = make(chan error, 1)
	o, err := cfg.options(cfg.ClientID, s.log)
	if err != nil {
		return err
	}
	o.SetCleanSession(cfg.CleanSession)
	o.SetOrderMatters(true)    // one handler call at a time, in the order the broker sent
	o.SetAutoAckDisabled(true) // PUBACK/PUBREC only from the AckFunc, after Iggy has the batch
	o.SetDefaultPublishHandler(s.receive)
	o.SetOnConnectHandler(func(c paho.Client) { s.connected.Store(true); s.subscribe(c) })
	o.SetConnectionLostHandler(func(_ paho.Client, err error) {
		s.connected.Store(false)
		s.log.Warn("mqtt connection lost; reconnecting (messages not acknowledged are sent again)", "error", err)
	})
	s.client = paho.NewClient(o)
	what := fmt.Sprintf("mqtt source %q", env.Key)
	if _, err := cfg.connect(ctx, s.client, what, s.log); err != nil {
		return err
	}
	select {
	case err = <-s.subscribed:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		s.client.Disconnect(0)
		return fmt.Errorf("%s: subscribe on %s: %w", what, strings.Join(cfg.brokers(), ", "), err)
	}
	s.log.Info("mqtt source subscribed", "brokers", strings.Join(cfg.brokers(), ", "), "client_id", cfg.ClientID,
		"topics", strings.Join(cfg.Topics, ", "), "qos", cfg.qosText(), "clean_session", cfg.CleanSession)
	return nil
}

// subscribe subscribes to every filter (at each connect: a broker that lost the session
// gets the subscriptions again) and reports the outcome to Open without blocking.
func (s *Source) subscribe(c paho.Client) {
	filters := make(map[string]byte, len(s.cfg.Topics))
	for _, t := range s.cfg.Topics {
		filters[t] = byte(s.cfg.qosOf(t))
	}
	tok := c.SubscribeMultiple(filters, nil)
	err := waitToken(context.Background(), tok, s.cfg.ConnectTimeout+time.Second)
	if err == nil {
		if st, ok := tok.(*paho.SubscribeToken); ok {
			for f, code := range st.Result() {
				if code == 0x80 {
					err = errors.Join(err, sdk.Permanent(fmt.Errorf("the broker refused the subscription to %q (plugin_config.%s)", f, FieldTopics)))
				} else if int(code) < s.cfg.qosOf(f) {
					s.log.Warn("the broker granted a lower QoS than asked", "filter", f, "qos", s.cfg.qosOf(f), "granted", code)
				}
			}
		}
	}
	if err != nil {
		s.log.Error("mqtt subscribe failed", "error", err)
	}
	select {
	case s.subscribed <- err:
	default:
	}
}

// receive is Paho's handler: it queues the message (never blocking for long: see inboxSize).
func (s *Source) receive(_ paho.Client, m paho.Message) {
	s.received.Add(1)
	if m.Duplicate() {
		s.duplicates.Add(1)
	}
	select {
	case s.inbox <- m:
	case <-s.closed:
	}
}

// Read returns the messages received so far, at least one, at most batch_size: first
// those of a batch that was not delivered. It blocks until one arrives or ctx ends.
func (s *Source) Read(ctx context.Context) (sdk.SourceBatch, sdk.AckFunc, error) {
	s.mu.Lock()
	n := min(len(s.held), s.cfg.BatchSize)
	msgs := make([]paho.Message, n, max(n, min(s.cfg.BatchSize, 256)))
	copy(msgs, s.held)
	s.held = s.held[n:]
	s.mu.Unlock()
	if len(msgs) == 0 {
		select {
		case m := <-s.inbox:
			msgs = append(msgs, m)
		case <-ctx.Done():
			return sdk.SourceBatch{}, sdk.NoAck, ctx.Err()
		}
	}
fill:
	for len(msgs) < s.cfg.BatchSize {
		select {
		case m := <-s.inbox:
			msgs = append(msgs, m)
		default:
			break fill
		}
	}
	out := make([]sdk.ProducedMessage, 0, len(msgs))
	for _, m := range msgs {
		if m.Retained() && !s.cfg.Retained {
			s.dropped.Add(1)
			continue // acknowledged with the batch, in order, never sent
		}
		out = append(out, s.produced(m))
	}
	return sdk.SourceBatch{Schema: sdk.SchemaRaw, Messages: out}, s.ackFunc(msgs), nil
}

// produced is one message as the source hands it to Iggy.
func (s *Source) produced(m paho.Message) sdk.ProducedMessage {
	topic := m.Topic()
	pm := sdk.ProducedMessage{Payload: m.Payload(), Headers: []sdk.Header{
		{Key: sdk.String(HeaderTopic), Value: sdk.String(topic)},
		{Key: sdk.String(HeaderQoS), Value: sdk.HeaderField{Kind: sdk.HeaderUint8, Value: []byte{m.Qos()}}},
		{Key: sdk.String(HeaderRetained), Value: boolField(m.Retained())},
		{Key: sdk.String(HeaderDuplicate), Value: boolField(m.Duplicate())},
		{Key: sdk.String(HeaderMessageID), Value: sdk.HeaderField{Kind: sdk.HeaderUint16, Value: []byte{byte(m.MessageID()), byte(m.MessageID() >> 8)}}},
	}}
	if s.cfg.PartitionBy == partitionByTopic {
		pm.PartitionKey = []byte(topic)
	}
	if len(s.cfg.TopicMapping) > 0 {
		stream, iggyTopic, mapped, empty := route(s.cfg.TopicMapping, topic)
		switch {
		case !mapped:
			s.unmapped.Add(1)
		case empty:
			// An Iggy name cannot be empty: the message is kept, in the entry's topic.
			if s.emptyName.Add(1) == 1 {
				s.log.Warn("a topic_mapping rendered an empty Iggy name (an empty MQTT topic level); such messages go to the [[streams]] entry (gauge mqtt_mapping_empty)", "mqtt_topic", topic)
			}
		default:
			pm.Stream, pm.Topic = stream, iggyTopic
		}
	}
	return pm
}

func boolField(b bool) sdk.HeaderField {
	v := byte(0)
	if b {
		v = 1
	}
	return sdk.HeaderField{Kind: sdk.HeaderBool, Value: []byte{v}}
}

// ackFunc acknowledges msgs to the broker, in order, once Iggy has them; a batch that was
// not delivered goes back in front of what was not read yet.
func (s *Source) ackFunc(msgs []paho.Message) sdk.AckFunc {
	return func(_ context.Context, err error) error {
		if err != nil {
			s.mu.Lock()
			s.held = append(msgs, s.held...)
			s.mu.Unlock()
			return nil //nolint:nilerr // a batch not delivered is read again: nothing failed here
		}
		for _, m := range msgs {
			m.Ack()
		}
		s.acked.Add(uint64(len(msgs)))
		return nil
	}
}

// Gauges reports what the source received and acknowledged.
func (s *Source) Gauges() []sdk.Gauge {
	connected := uint64(0)
	if s.connected.Load() {
		connected = 1
	}
	return []sdk.Gauge{
		{Name: "mqtt_received", Help: "messages received from the broker", Value: s.received.Load()},
		{Name: "mqtt_acknowledged", Help: "messages acknowledged to the broker after Iggy had them", Value: s.acked.Load()},
		{Name: "mqtt_duplicates_received", Help: "messages the broker marked as sent again (DUP)", Value: s.duplicates.Load()},
		{Name: "mqtt_retained_dropped", Help: "retained messages not delivered (retained = false)", Value: s.dropped.Load()},
		{Name: "mqtt_connected", Help: "1 while connected to the broker", Value: connected},
		{Name: "mqtt_unmapped", Help: "messages no topic_mapping table matched, sent to the [[streams]] entry", Value: s.unmapped.Load()},
		{Name: "mqtt_mapping_empty", Help: "messages whose topic_mapping rendered an empty Iggy name, sent to the [[streams]] entry", Value: s.emptyName.Load()},
	}
}

// Close disconnects. What is received and not acknowledged stays in the broker's session
// and comes again at the next connect.
func (s *Source) Close(context.Context) error {
	s.once.Do(func() {
		if s.closed != nil {
			close(s.closed)
		}
		if s.client != nil {
			s.client.Disconnect(100)
		}
	})
	return nil
}
