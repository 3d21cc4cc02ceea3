package kafka

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ferryio/ferry/connectors/kafka/internal/kclient"
	"github.com/ferryio/ferry/sdk"
)

var _ sdk.Preflighter = (*Sink)(nil)

// Preflight implements sdk.Preflighter (`ferry check --connect`), writing no record: a
// broker answers, SASL and TLS are accepted; when topic names one topic (no placeholder),
// it exists (the sink never creates topics, nor asks the brokers to); the offsets topic
// exists, or the brokers would create it (CreateTopics with validate_only: rights and
// settings checked, nothing made); and the brokers give a transactional producer id
// (InitProducerID under a transactional id of the check's own, ferry-check-…, with
// transaction_timeout): transactions are enabled, the user has the rights on transactional
// ids and the timeout is within the brokers' maximum. The transactional id the check used
// holds no transaction and expires on the brokers (transactional.id.expiration.ms).
func (s *Sink) Preflight(ctx context.Context, raw []byte) []error {
	cfg, err := Config.Parse(raw)
	if err != nil {
		return []error{err}
	}
	cl, err := kclient.Reach(ctx, &cfg.Conn)
	if err != nil {
		return []error{err}
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var errs []error
	if tpl, _ := parseTemplate(cfg.Topic); len(tpl) == 1 && tpl[0].kind == 0 {
		missing, err := cfg.Topics(ctx, adm, "topic", cfg.Topic)
		switch {
		case err != nil:
			errs = append(errs, err)
		case len(missing) > 0:
			errs = append(errs, fmt.Errorf("plugin_config.topic: the cluster at %s has no topic %q: create it (kafka-topics.sh --create --topic %s), the sink does not create topics",
				cfg.Where(), cfg.Topic, cfg.Topic))
		}
	}
	if err := checkOffsetsTopic(ctx, adm, &cfg); err != nil {
		errs = append(errs, err)
	}
	if err := checkTransactions(ctx, &cfg); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// checkOffsetsTopic: offsets_topic exists, or CreateTopics with validate_only says Open's
// creation would succeed.
func checkOffsetsTopic(ctx context.Context, adm *kadm.Client, cfg *config) error {
	missing, err := cfg.Topics(ctx, adm, "offsets_topic", cfg.OffsetsTopic)
	if err != nil {
		return err
	}
	if len(missing) == 0 {
		return checkCompacted(ctx, adm, cfg)
	}
	res, err := adm.ValidateCreateTopics(ctx, 1, -1, map[string]*string{"cleanup.policy": new("compact")}, cfg.OffsetsTopic)
	if err == nil {
		err = res.Error()
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, kerr.TopicAlreadyExists): // made since the metadata was read
		return checkCompacted(ctx, adm, cfg)
	case errors.Is(err, kerr.TopicAuthorizationFailed), errors.Is(err, kerr.ClusterAuthorizationFailed):
		return fmt.Errorf("plugin_config.offsets_topic: %q does not exist on %s and %s may not create it (%w): create it by hand (compacted, one partition), or grant the user CREATE on it",
			cfg.OffsetsTopic, cfg.Where(), cfg.Who(), err)
	}
	return fmt.Errorf("plugin_config.offsets_topic: %q does not exist on %s and the brokers would refuse to create it: %w: create it by hand (compacted, one partition)",
		cfg.OffsetsTopic, cfg.Where(), err)
}

// checkCompacted: an offsets topic made by hand must keep the newest record of each key
// for ever (cleanup.policy compact): under delete, a partition not written for retention.ms
// loses its position. A user who may not read the topic's configs is not refused for it.
func checkCompacted(ctx context.Context, adm *kadm.Client, cfg *config) error {
	var configs []kadm.Config
	if rcs, err := adm.DescribeTopicConfigs(ctx, cfg.OffsetsTopic); err == nil && len(rcs) == 1 && rcs[0].Err == nil {
		configs = rcs[0].Configs
	}
	for _, c := range configs {
		if c.Key == "cleanup.policy" && !strings.Contains(c.MaybeValue(), "compact") {
			return fmt.Errorf("plugin_config.offsets_topic: %q on %s has cleanup.policy=%s: its records, the sink's positions, expire after retention.ms; set cleanup.policy=compact on it (kafka-configs.sh --alter --entity-type topics --entity-name %s --add-config cleanup.policy=compact)",
				cfg.OffsetsTopic, cfg.Where(), c.MaybeValue(), cfg.OffsetsTopic)
		}
	}
	return nil
}

// checkTransactions asks for a transactional producer id, as each partition's producer
// does at its first batch, under an id of the check's own (the sink's ids would fence a
// running sink's producers).
func checkTransactions(ctx context.Context, cfg *config) error {
	var b [6]byte
	_, _ = rand.Read(b[:])
	id := "ferry-check-" + hex.EncodeToString(b[:])
	cl, err := kclient.Reach(ctx, &cfg.Conn, kgo.TransactionalID(id), kgo.TransactionTimeout(cfg.TxnTimeout))
	if err != nil {
		return err
	}
	defer cl.Close()
	pctx, cancel := context.WithTimeout(ctx, cfg.DialTimout+5*time.Second)
	defer cancel()
	_, _, err = cl.ProducerID(pctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, kerr.TransactionalIDAuthorizationFailed), errors.Is(err, kerr.ClusterAuthorizationFailed):
		return fmt.Errorf("%s may not start a transactional producer on %s (%w): grant the user WRITE and DESCRIBE on the transactional ids ferry-* (kafka-acls.sh --transactional-id ferry- --resource-pattern-type prefixed), or use another user",
			cfg.Who(), cfg.Where(), err)
	case errors.Is(err, kerr.InvalidTransactionTimeout):
		return fmt.Errorf("plugin_config.transaction_timeout: %v is above the brokers' transaction.max.timeout.ms (%w): lower it", cfg.TxnTimeout, err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, kerr.CoordinatorNotAvailable):
		return fmt.Errorf("the brokers at %s gave no transactional producer id in %v (%w): the transaction coordinator is not available; check that the cluster has transaction.state.log.replication.factor brokers or more",
			cfg.Where(), cfg.DialTimout+5*time.Second, err)
	}
	return fmt.Errorf("start a transactional producer on %s: %w", cfg.Where(), err)
}
