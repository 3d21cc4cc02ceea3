package ferrycli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/sdk"
)

// withClient dials with f, runs do and closes the client.
func withClient(ctx context.Context, f *connFlags, do func(*iggy.Client) error) (err error) {
	c, err := f.dial(ctx)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, c.Close()) }()
	return hint(do(c))
}

func newStreamCmd() *cobra.Command {
	var f connFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "stream",
		Short: "Create, list or delete Iggy streams",
		Long: `Stream talks to an Iggy server (Ferry's embedded one or any other) with the connection
settings of ferry run: --config's [iggy] section, overridden by the flags.`,
		Example: `  ferry stream create shop
  ferry stream list --addr 10.0.0.5:8090
  ferry stream delete shop`,
	}
	f.register(cmd.PersistentFlags())
	create := &cobra.Command{
		Use: "create NAME", Short: "Create a stream", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withClient(cmd.Context(), &f, func(c *iggy.Client) error {
				s, err := c.CreateStream(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "stream %s created (id %d)\n", s.Name, s.ID)
				return nil
			})
		},
	}
	list := &cobra.Command{
		Use: "list", Short: "List the streams", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withClient(cmd.Context(), &f, func(c *iggy.Client) error {
				ss, err := c.GetStreams(cmd.Context())
				if err != nil {
					return err
				}
				return printStreams(cmd.OutOrStdout(), ss, asJSON)
			})
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	del := &cobra.Command{
		Use: "delete NAME", Short: "Delete a stream with its topics and messages", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withClient(cmd.Context(), &f, func(c *iggy.Client) error {
				if err := c.DeleteStream(cmd.Context(), ident(args[0])); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "stream %s deleted\n", args[0])
				return nil
			})
		},
	}
	cmd.AddCommand(create, list, del)
	return cmd
}

func printStreams(w io.Writer, ss []wire.StreamResponse, asJSON bool) error {
	if asJSON {
		type js struct {
			ID       uint32 `json:"id"`
			Name     string `json:"name"`
			Topics   uint32 `json:"topics"`
			Messages uint64 `json:"messages"`
			Bytes    uint64 `json:"size_bytes"`
		}
		out := []js{}
		for _, s := range ss {
			out = append(out, js{s.ID, s.Name, s.TopicsCount, s.MessagesCount, s.SizeBytes})
		}
		return writeJSON(w, out)
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tTOPICS\tMESSAGES\tBYTES")
	for _, s := range ss {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\n", s.ID, s.Name, s.TopicsCount, s.MessagesCount, s.SizeBytes)
	}
	return tw.Flush()
}

func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

type topicCreateFlags struct {
	partitions uint32
	expiry     string
	maxSize    string
	fsync      bool
}

func newTopicCmd() *cobra.Command {
	var f connFlags
	var tf topicCreateFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "topic",
		Short: "Create, list or delete Iggy topics",
		Long: `Topic talks to an Iggy server with the connection settings of ferry run: --config's
[iggy] section, overridden by the flags. A stream or topic given as digits is its numeric id.`,
		Example: `  ferry topic create shop orders --partitions 3 --message-expiry 7d --max-size 10GiB
  ferry topic list shop
  ferry topic delete shop orders`,
	}
	f.register(cmd.PersistentFlags())
	create := &cobra.Command{
		Use: "create STREAM TOPIC", Short: "Create a topic", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts, err := tf.options()
			if err != nil {
				return err
			}
			return withClient(cmd.Context(), &f, func(c *iggy.Client) error {
				t, err := c.CreateTopic(cmd.Context(), ident(args[0]), args[1], tf.partitions, opts...)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "topic %s/%s created (id %d, %d partitions, message expiry %s, max size %s)\n",
					args[0], t.Name, t.ID, len(t.Partitions), fmtExpiry(t.MessageExpiry), fmtMaxSize(t.MaxTopicSize))
				return nil
			})
		},
	}
	cf := create.Flags()
	cf.Uint32Var(&tf.partitions, "partitions", 1, "partitions of the topic (ids 0..N-1)")
	cf.StringVar(&tf.expiry, "message-expiry", "", `delete messages older than this ("1h", "7d"; "never"); default: the server's`)
	cf.StringVar(&tf.maxSize, "max-size", "", `cap the topic's size ("10GiB", "500MB"; "unlimited"); default: the server's`)
	cf.BoolVar(&tf.fsync, "enforce-fsync", false, "make the server fsync every append to the topic")
	list := &cobra.Command{
		Use: "list STREAM", Short: "List a stream's topics", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withClient(cmd.Context(), &f, func(c *iggy.Client) error {
				// GetStream, not GetTopics: a missing stream is an error, not an empty list.
				s, err := c.GetStream(cmd.Context(), ident(args[0]))
				if err != nil {
					return err
				}
				return printTopics(cmd.OutOrStdout(), s.Topics, asJSON)
			})
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	del := &cobra.Command{
		Use: "delete STREAM TOPIC", Short: "Delete a topic with its messages, offsets and groups", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withClient(cmd.Context(), &f, func(c *iggy.Client) error {
				if err := c.DeleteTopic(cmd.Context(), ident(args[0]), ident(args[1])); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "topic %s/%s deleted\n", args[0], args[1])
				return nil
			})
		},
	}
	cmd.AddCommand(create, list, del)
	return cmd
}

// options turns the create flags into topic options; "" leaves the server's default.
func (tf topicCreateFlags) options() ([]iggy.TopicOpt, error) {
	if tf.partitions == 0 || tf.partitions > wire.MaxPartitionsPerRequest {
		return nil, fmt.Errorf("--partitions %d: want 1..%d", tf.partitions, wire.MaxPartitionsPerRequest)
	}
	var opts []iggy.TopicOpt
	switch tf.expiry {
	case "":
	case "never":
		opts = append(opts, iggy.WithTopicOption(wire.OptMessageExpiry, wire.Uint64Value(wire.ExpiryNever)))
	default:
		d, err := sdk.ParseDuration(tf.expiry)
		if err != nil || d < time.Microsecond {
			return nil, fmt.Errorf("--message-expiry %q: want a duration such as \"1h\" or \"7d\", or \"never\"", tf.expiry)
		}
		opts = append(opts, iggy.WithMessageExpiry(d))
	}
	switch tf.maxSize {
	case "":
	case "unlimited":
		opts = append(opts, iggy.WithMaxTopicSize(wire.SizeUnlimited))
	default:
		n, err := parseDiskReserve(tf.maxSize)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("--max-size %q: want a size such as \"10GiB\" or \"500MB\", or \"unlimited\"", tf.maxSize)
		}
		opts = append(opts, iggy.WithMaxTopicSize(uint64(n)))
	}
	if tf.fsync {
		opts = append(opts, iggy.WithEnforceFsync(true))
	}
	return opts, nil
}

func fmtExpiry(us uint64) string {
	switch us {
	case wire.ExpiryServerDefault:
		return "server default"
	case wire.ExpiryNever:
		return "never"
	}
	return (time.Duration(us) * time.Microsecond).String()
}

func fmtMaxSize(b uint64) string {
	switch b {
	case wire.SizeServerDefault:
		return "server default"
	case wire.SizeUnlimited:
		return "unlimited"
	}
	return strconv.FormatUint(b, 10) + " bytes"
}

func printTopics(w io.Writer, ts []wire.TopicHeader, asJSON bool) error {
	if asJSON {
		type jt struct {
			ID            uint32  `json:"id"`
			Name          string  `json:"name"`
			Partitions    uint32  `json:"partitions"`
			Messages      uint64  `json:"messages"`
			Bytes         uint64  `json:"size_bytes"`
			MessageExpiry *uint64 `json:"message_expiry_us"` // null: never (or the server's default)
			MaxSize       *uint64 `json:"max_size_bytes"`    // null: unlimited (or the server's default)
		}
		out := []jt{}
		for _, t := range ts {
			j := jt{ID: t.ID, Name: t.Name, Partitions: t.PartitionsCount, Messages: t.MessagesCount, Bytes: t.SizeBytes}
			if e := t.MessageExpiry; e != wire.ExpiryNever && e != wire.ExpiryServerDefault {
				j.MessageExpiry = &e
			}
			if m := t.MaxTopicSize; m != wire.SizeUnlimited && m != wire.SizeServerDefault {
				j.MaxSize = &m
			}
			out = append(out, j)
		}
		return writeJSON(w, out)
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tPARTITIONS\tMESSAGES\tBYTES\tMESSAGE EXPIRY\tMAX SIZE")
	for _, t := range ts {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t%s\t%s\n", t.ID, t.Name, t.PartitionsCount, t.MessagesCount, t.SizeBytes,
			fmtExpiry(t.MessageExpiry), fmtMaxSize(t.MaxTopicSize))
	}
	return tw.Flush()
}
