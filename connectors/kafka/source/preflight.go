package source

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/ferryio/ferry/connectors/kafka/internal/kclient"
	"github.com/ferryio/ferry/sdk"
)

var _ sdk.Preflighter = (*Source)(nil)

// Preflight implements sdk.Preflighter (`ferry check --connect`), joining no group and
// committing nothing: a broker answers, SASL and TLS are accepted; each of topics exists
// and the user may describe it, or topic_pattern matches at least one topic (Open lets a
// pattern match none and waits; the check calls it out, since such a source reads nothing
// until a topic appears); and, when consumer_group is set, the user may describe the group
// and the group coordinator answers (the offsets the source commits live there). The
// default group, ferry-<connector key>, is not checked: the check does not know the key.
func (s *Source) Preflight(ctx context.Context, raw []byte) []error {
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
	if cfg.Pattern != "" {
		matched, err := cfg.Matching(ctx, adm, cfg.Pattern)
		switch {
		case err != nil:
			errs = append(errs, err)
		case len(matched) == 0:
			errs = append(errs, fmt.Errorf("plugin_config.topic_pattern: no topic %s may read matches %q on %s: create one, or fix the pattern (the source would wait, reading nothing)",
				cfg.Who(), cfg.Pattern, cfg.Where()))
		}
	} else {
		missing, err := cfg.Conn.Topics(ctx, adm, "topics", cfg.Topics...)
		switch {
		case err != nil:
			errs = append(errs, err)
		case len(missing) > 0:
			errs = append(errs, fmt.Errorf("plugin_config.topics: the cluster at %s has no topic %s: create it, or fix topics",
				cfg.Where(), quoted(missing)))
		}
	}
	if cfg.Group != "" {
		if err := checkGroup(ctx, adm, &cfg); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// checkGroup fetches the group's committed offsets: it needs the group's coordinator and
// the right to describe the group, and changes nothing. A coordinator not available yet is
// asked again until dial_timeout + 5s: the first group of a new cluster makes the brokers
// create their offsets topic, which takes a moment.
func checkGroup(ctx context.Context, adm *kadm.Client, cfg *config) error {
	wait := cfg.DialTimout + 5*time.Second
	rctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	retry := sdk.Retry{Initial: 100 * time.Millisecond, Max: time.Second, What: "fetch the group's offsets",
		Transient: func(err error) bool {
			return errors.Is(err, kerr.CoordinatorNotAvailable) || errors.Is(err, kerr.CoordinatorLoadInProgress) || errors.Is(err, kerr.NotCoordinator)
		}}
	var err error
	_ = retry.Do(rctx, func(ctx context.Context, _ int) error {
		_, err = adm.FetchOffsets(ctx, cfg.Group)
		return err
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, kerr.GroupAuthorizationFailed):
		return fmt.Errorf("plugin_config.consumer_group: %s may not use group %q on %s (%w): grant the user READ and DESCRIBE on it (kafka-acls.sh --group %s), or use another group or user",
			cfg.Who(), cfg.Group, cfg.Where(), err, cfg.Group)
	case errors.Is(err, kerr.CoordinatorNotAvailable), errors.Is(err, kerr.CoordinatorLoadInProgress), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("plugin_config.consumer_group: the coordinator of group %q on %s did not answer in %v (%w): check that the cluster has offsets.topic.replication.factor brokers or more",
			cfg.Group, cfg.Where(), wait, err)
	}
	return fmt.Errorf("plugin_config.consumer_group: fetch the offsets of group %q from %s: %w", cfg.Group, cfg.Where(), err)
}

func quoted(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}
