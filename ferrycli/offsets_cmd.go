package ferrycli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
)

type offsetsFlags struct {
	config, addr, user, password, token string
	stream, topic, group                string
	set                                 []string
	del                                 []uint
	timeout                             time.Duration
	sink                                string      // --sink: through the runtime's HTTP API
	api                                 statusFlags // where that API is (url, api key)
}

func newOffsetsCmd() *cobra.Command {
	var f offsetsFlags
	cmd := &cobra.Command{
		Use:   "offsets",
		Short: "Print (or set, or delete) a consumer group's stored offsets per partition",
		Long: `Offsets connects to Iggy and prints, for each partition of the topic, the partition's
current (highest) offset, the group's stored offset (the last processed message) and the
lag. --set P=O stores offset O for partition P (the group then resumes at O+1); --delete P
removes the stored offset (the group then starts at 0). Connection settings come from
--config's [iggy] section, overridden by the flags.

--sink KEY asks a running runtime's HTTP API instead (found as ferry status finds it):
every partition of the sink's topics with Iggy's current and stored offsets and, for a
sink that keeps its positions in its target (the PostgreSQL sink's offsets table, the S3
sink's objects), the target's position, where the sink resumes and the lag from there.
With --set P=O (and --stream/--topic when the sink reads more than one topic) it sets
the offsets of the stopped sink (ferry stop KEY first), in its target too, or says why
its target refuses.`,
		Example: `  ferry offsets --addr 127.0.0.1:8090 --stream quickstart --topic events --group iggy-connect-sink-quickstart_file
  ferry offsets --stream s --topic t --group g --set 0=41 --delete 1
  ferry offsets --sink audit --config config.toml
  ferry offsets --sink audit --set 0=99`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.sink != "" {
				f.api.config, f.api.timeout = f.config, f.timeout
				return offsetsOfSink(cmd.Context(), cmd.OutOrStdout(), f)
			}
			for _, n := range []string{"stream", "topic", "group"} {
				if !cmd.Flags().Changed(n) {
					return fmt.Errorf("--%s is required (or --sink KEY)", n)
				}
			}
			return offsets(cmd.Context(), cmd.OutOrStdout(), f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.config, "config", "", "take [iggy] address and credentials from this config.toml")
	fl.StringVar(&f.addr, "addr", envString(envAddr, ""), "Iggy address (default iggy.address, else 127.0.0.1:8090) [FERRY_ADDR]")
	fl.StringVar(&f.user, "username", envString(envUser, ""), "username (default iggy) [FERRY_USERNAME]")
	fl.StringVar(&f.password, "password", envString(envPassword, ""), "password (default iggy) [FERRY_PASSWORD]")
	fl.StringVar(&f.token, "token", envString(envToken, ""), "personal access token, or file:<path> [FERRY_TOKEN]")
	fl.StringVar(&f.stream, "stream", "", "stream name (required without --sink)")
	fl.StringVar(&f.topic, "topic", "", "topic name (required without --sink)")
	fl.StringVar(&f.group, "group", "", "consumer group name (required without --sink)")
	fl.StringVar(&f.sink, "sink", "", "show (or --set) the offsets of this sink of a running runtime, through its HTTP API")
	fl.StringVar(&f.api.url, "url", envString(envAPIURL, ""), "with --sink: the runtime's HTTP API (default: as ferry status finds it) [FERRY_API_URL]")
	fl.StringVar(&f.api.apiKey, "api-key", envString(envAPIKey, ""), "with --sink: the API key (default: the config's [http] api_key) [FERRY_API_KEY]")
	fl.StringArrayVar(&f.set, "set", nil, "store PARTITION=OFFSET (repeatable)")
	fl.UintSliceVar(&f.del, "delete", nil, "delete the stored offset of PARTITION (repeatable)")
	fl.DurationVar(&f.timeout, "timeout", 30*time.Second, "bound on the whole command")
	return cmd
}

func offsets(ctx context.Context, w io.Writer, f offsetsFlags) (err error) {
	ic := config.DefaultRuntime().Iggy
	ic.Address = "127.0.0.1:8090"
	if f.config != "" {
		rc, err := config.ParseRuntime(f.config)
		if err != nil {
			return err
		}
		ic = rc.Iggy
	}
	if f.addr != "" {
		ic.Address = f.addr
	}
	if f.user != "" {
		ic.Username = f.user
	}
	if f.password != "" {
		ic.Password = config.Secret(f.password)
	}
	if f.token != "" {
		ic.Token = config.Secret(f.token)
	}
	sets := map[uint32]uint64{}
	for _, s := range f.set {
		p, o, ok := strings.Cut(s, "=")
		pn, err1 := strconv.ParseUint(p, 10, 32)
		on, err2 := strconv.ParseUint(o, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return fmt.Errorf("--set %q: want PARTITION=OFFSET", s)
		}
		sets[uint32(pn)] = on
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	opts, err := clientOptions(ic, discardLogger())
	if err != nil {
		return err
	}
	c, err := iggy.Dial(ctx, ic.Address, opts...)
	if err != nil {
		return fmt.Errorf("connect to Iggy at %s: %w", ic.Address, err)
	}
	defer func() { err = errors.Join(err, c.Close()) }()
	stream, topic := iggy.Name(f.stream), iggy.Name(f.topic)
	td, err := c.GetTopic(ctx, stream, topic)
	if err != nil {
		return fmt.Errorf("topic %s/%s: %w", f.stream, f.topic, err)
	}
	group := wire.Consumer{Kind: wire.ConsumerGroup, ID: iggy.Name(f.group)}
	if _, err := c.GetConsumerGroup(ctx, stream, topic, iggy.Name(f.group)); err != nil {
		if errors.Is(err, wire.ErrNotFound) {
			return fmt.Errorf("consumer group %s on %s/%s: %w", f.group, f.stream, f.topic, err)
		}
		return fmt.Errorf("consumer group %s: %w", f.group, err)
	}
	if len(sets) > 0 || len(f.del) > 0 {
		// The server takes a group's offsets only from a member owning the partition: join
		// for the changes, and leave again. Members already running keep their partitions.
		if err := c.JoinConsumerGroup(ctx, stream, topic, iggy.Name(f.group)); err != nil {
			return err
		}
		defer func() { _ = c.LeaveConsumerGroup(context.WithoutCancel(ctx), stream, topic, iggy.Name(f.group)) }()
	}
	for p, o := range sets {
		if err := c.StoreOffset(ctx, group, stream, topic, p, o); err != nil {
			return fmt.Errorf("store offset %d on partition %d (stop the group's running consumers first): %w", o, p, err)
		}
		fmt.Fprintf(w, "partition %d: stored offset set to %d\n", p, o)
	}
	for _, pu := range f.del {
		p := uint32(pu)
		if err := c.DeleteOffset(ctx, group, stream, topic, p); err != nil {
			return fmt.Errorf("delete offset of partition %d (stop the group's running consumers first): %w", p, err)
		}
		fmt.Fprintf(w, "partition %d: stored offset deleted\n", p)
	}
	fmt.Fprintf(w, "%-9s %14s %14s %10s   (%s/%s, group %s)\n", "partition", "current", "stored", "lag", f.stream, f.topic, f.group)
	for _, part := range td.Partitions {
		cur := "-"
		if part.MessagesCount > 0 {
			cur = strconv.FormatUint(part.CurrentOffset, 10)
		}
		off, found, err := c.GetOffset(ctx, group, stream, topic, part.ID)
		if err != nil {
			return fmt.Errorf("offset of partition %d: %w", part.ID, err)
		}
		stored, lag := "-", part.MessagesCount
		if found {
			stored = strconv.FormatUint(off.StoredOffset, 10)
			lag = 0
			if part.MessagesCount > 0 && part.CurrentOffset > off.StoredOffset {
				lag = part.CurrentOffset - off.StoredOffset
			}
		}
		fmt.Fprintf(w, "%-9d %14s %14s %10d\n", part.ID, cur, stored, lag)
	}
	return nil
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
