package ferrycli

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
)

type consumeFlags struct {
	conn         connFlags
	partition    int64  // -1: every partition
	offset       int64  // -1: not given
	timestamp    string // "": not given
	end          bool
	follow       bool
	count        uint64 // 0: no limit
	format       string
	group        string
	commit       bool
	batch        uint32
	pollInterval time.Duration
}

func newConsumeCmd() *cobra.Command {
	f := consumeFlags{partition: -1, offset: -1}
	cmd := &cobra.Command{
		Use:   "consume STREAM TOPIC",
		Short: "Print a topic's messages: JSON lines with offset, partition and headers, or raw payloads",
		Long: `Consume prints the messages of every partition of the topic (or of --partition), from the
first message, from --offset, from --timestamp (RFC 3339, or µs since the epoch), from the
end (--end), or from where --consumer-group would resume (its stored offset + 1). Without
-f it stops at the end each partition had when it started; with -f it keeps printing new
messages until Ctrl-C (exit 0). --format json (default) prints one JSON object a line:
partition, offset, id, timestamp and origin_timestamp (µs since the epoch), headers, and the
payload as a string (UTF-8) or as payload_base64; --format raw prints each payload followed
by a newline. Consume reads as a standalone consumer that stores nothing: a consumer
group's offsets change only with --commit, which joins the group (taking partitions from
its running members, as any new member does) and stores the offset of each printed batch.
Connection settings are ferry run's: --config's [iggy] section, overridden by the flags.`,
		Example: `  ferry consume demo events --offset 0 --count 10
  ferry consume demo events --end -f --format raw
  ferry consume demo events --consumer-group iggy-connect-sink-audit   # what the sink has not processed`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return consume(cmd.Context(), cmd.OutOrStdout(), args[0], args[1], f)
		},
	}
	fl := cmd.Flags()
	f.conn.register(fl)
	fl.Int64Var(&f.partition, "partition", -1, "read only this partition id (default: every partition)")
	fl.Int64Var(&f.offset, "offset", -1, "start at this offset in each partition read")
	fl.StringVar(&f.timestamp, "timestamp", "", "start at the first message appended at or after this time (RFC 3339, or µs since the epoch)")
	fl.BoolVar(&f.end, "end", false, "start after the last message (with -f: print only new messages)")
	fl.BoolVarP(&f.follow, "follow", "f", false, "keep printing new messages until Ctrl-C")
	fl.Uint64Var(&f.count, "count", 0, "stop after this many messages (0: no limit)")
	fl.StringVar(&f.format, "format", "json", "json (one object a line) or raw (the payloads)")
	fl.StringVar(&f.group, "consumer-group", "", "start where this consumer group resumes (its stored offset + 1); stores nothing without --commit")
	fl.BoolVar(&f.commit, "commit", false, "with --consumer-group: join the group and store the offset of every printed batch")
	fl.Uint32Var(&f.batch, "batch", 1000, "messages per poll")
	fl.DurationVar(&f.pollInterval, "poll-interval", 100*time.Millisecond, "with -f: wait between polls of a partition that is at its end")
	return cmd
}

// consumePart is one partition being read: the next offset and where it ends (without -f).
type consumePart struct {
	id        uint32
	next      uint64
	ts        uint64 // the first poll by timestamp when not 0
	end       uint64 // the offset after the last one at the start
	done      bool
	lastStore int64 // the last offset stored with --commit; -1 none
}

func consume(ctx context.Context, w io.Writer, stream, topic string, f consumeFlags) (err error) {
	starts := 0
	for _, given := range []bool{f.offset >= 0, f.timestamp != "", f.end, f.group != ""} {
		if given {
			starts++
		}
	}
	switch {
	case f.format != "json" && f.format != "raw":
		return fmt.Errorf("--format %q: want json or raw", f.format)
	case starts > 1:
		return errors.New("--offset, --timestamp, --end and --consumer-group: give at most one")
	case f.commit && f.group == "":
		return errors.New("--commit needs --consumer-group")
	case f.batch == 0:
		return errors.New("--batch must be at least 1")
	}
	var ts uint64
	if f.timestamp != "" {
		if ts, err = parseTimestamp(f.timestamp); err != nil {
			return err
		}
	}
	c, err := f.conn.dial(ctx)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, c.Close()) }()
	sid, tid := ident(stream), ident(topic)
	td, err := c.GetTopic(ctx, sid, tid)
	if err != nil {
		return hint(err)
	}
	group := wire.Consumer{Kind: wire.ConsumerGroup, ID: iggy.Name(f.group)}
	if f.group != "" {
		if _, err := c.GetConsumerGroup(ctx, sid, tid, iggy.Name(f.group)); err != nil {
			return hint(fmt.Errorf("consumer group %s on %s/%s: %w", f.group, stream, topic, err))
		}
	}
	if f.commit {
		// The server takes a group's offsets only from a member that owns the partition.
		if err := c.JoinConsumerGroup(ctx, sid, tid, iggy.Name(f.group)); err != nil {
			return hint(err)
		}
		defer func() {
			_ = c.LeaveConsumerGroup(context.WithoutCancel(ctx), sid, tid, iggy.Name(f.group))
		}()
	}
	var parts []*consumePart
	for _, pr := range td.Partitions {
		if f.partition >= 0 && int64(pr.ID) != f.partition {
			continue
		}
		cp := &consumePart{id: pr.ID, lastStore: -1, ts: ts}
		if pr.MessagesCount > 0 {
			cp.end = pr.CurrentOffset + 1
		}
		switch {
		case f.offset >= 0:
			cp.next = uint64(f.offset)
		case f.end:
			cp.next = cp.end
		case f.group != "":
			off, found, err := c.GetOffset(ctx, group, sid, tid, pr.ID)
			if err != nil {
				return hint(err)
			}
			if found {
				cp.next, cp.lastStore = off.StoredOffset+1, int64(off.StoredOffset)
			}
		}
		parts = append(parts, cp)
	}
	if len(parts) == 0 {
		return fmt.Errorf("--partition %d: topic %s/%s has %d partitions (ids 0..%d)", f.partition, stream, topic, len(td.Partitions), len(td.Partitions)-1)
	}
	out := bufio.NewWriterSize(w, 256<<10)
	defer func() { err = errors.Join(err, out.Flush()) }()
	me := wire.Consumer{Kind: wire.ConsumerSingle, ID: iggy.Name("ferry-consume")}
	var printed uint64
	var hdrs []wire.KV
	for {
		idle := true
		for _, cp := range parts {
			if cp.done {
				continue
			}
			if !f.follow && cp.next >= cp.end && cp.ts == 0 {
				cp.done = true
				continue
			}
			strategy := wire.PollOffset(cp.next)
			if cp.ts != 0 {
				strategy = wire.PollTimestamp(cp.ts)
			}
			id := cp.id
			r, err := c.PollMessages(ctx, iggy.PollRequest{Consumer: me, Stream: sid, Topic: tid, Partition: &id, Strategy: strategy, Count: f.batch})
			if err != nil {
				if f.follow && ctx.Err() != nil {
					return nil // Ctrl-C ends a follow
				}
				return hint(err)
			}
			cp.ts = 0
			if len(r.Messages) == 0 {
				if !f.follow {
					cp.done = true
				}
				r.Release()
				continue
			}
			idle = false
			var last uint64
			for _, m := range r.Messages {
				if !f.follow && m.Offset >= cp.end {
					cp.done = true
					break
				}
				if hdrs, err = m.Headers(hdrs[:0]); err != nil {
					r.Release()
					return fmt.Errorf("partition %d offset %d: headers: %w", cp.id, m.Offset, err)
				}
				if err := printMessage(out, f.format, cp.id, m, hdrs); err != nil {
					r.Release()
					return err
				}
				last, cp.next = m.Offset, m.Offset+1
				printed++
				if f.count > 0 && printed >= f.count {
					break
				}
			}
			r.Release()
			if f.commit && cp.next > 0 && int64(last) > cp.lastStore {
				if err := out.Flush(); err != nil {
					return err
				}
				if err := c.StoreOffset(ctx, group, sid, tid, cp.id, last); err != nil {
					return hint(fmt.Errorf("store offset %d of partition %d for group %s: %w", last, cp.id, f.group, err))
				}
				cp.lastStore = int64(last)
			}
			if f.count > 0 && printed >= f.count {
				return nil
			}
		}
		allDone := true
		for _, cp := range parts {
			allDone = allDone && cp.done
		}
		if allDone {
			return nil
		}
		if idle && f.follow {
			if err := out.Flush(); err != nil {
				return err
			}
			select {
			case <-ctx.Done():
				return nil // Ctrl-C ends a follow
			case <-time.After(f.pollInterval):
			}
		}
	}
}

// parseTimestamp reads RFC 3339 or µs since the epoch.
func parseTimestamp(s string) (uint64, error) {
	if n, err := strconv.ParseUint(s, 10, 64); err == nil {
		return n, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || t.UnixMicro() <= 0 {
		return 0, fmt.Errorf("--timestamp %q: want RFC 3339 (2026-01-02T15:04:05Z) or µs since the epoch", s)
	}
	return uint64(t.UnixMicro()), nil
}

// jsonMessage is one line of --format json.
type jsonMessage struct {
	Partition       uint32         `json:"partition"`
	Offset          uint64         `json:"offset"`
	ID              string         `json:"id"`
	Timestamp       uint64         `json:"timestamp"`
	OriginTimestamp uint64         `json:"origin_timestamp"`
	Headers         map[string]any `json:"headers,omitempty"`
	Payload         *string        `json:"payload,omitempty"`
	PayloadBase64   *string        `json:"payload_base64,omitempty"`
}

func printMessage(w *bufio.Writer, format string, partition uint32, m wire.Message, hdrs []wire.KV) error {
	if format == "raw" {
		_, _ = w.Write(m.Payload)
		return w.WriteByte('\n')
	}
	// The id as the 32 hex digits of its 128-bit value.
	jm := jsonMessage{Partition: partition, Offset: m.Offset, ID: fmt.Sprintf("%016x%016x", m.ID.Hi, m.ID.Lo), Timestamp: m.Timestamp, OriginTimestamp: m.OriginTimestamp}
	if len(hdrs) > 0 {
		jm.Headers = make(map[string]any, len(hdrs))
		for _, kv := range hdrs {
			jm.Headers[headerKey(kv.Key)] = headerJSON(kv.Value)
		}
	}
	if utf8.Valid(m.Payload) {
		s := string(m.Payload)
		jm.Payload = &s
	} else {
		s := base64.StdEncoding.EncodeToString(m.Payload)
		jm.PayloadBase64 = &s
	}
	b, err := json.Marshal(jm)
	if err != nil {
		return err
	}
	_, _ = w.Write(b)
	return w.WriteByte('\n')
}

func headerKey(v wire.HeaderValue) string {
	if s, err := v.AsString(); err == nil && utf8.ValidString(s) {
		return s
	}
	return "base64:" + base64.StdEncoding.EncodeToString(v.Raw)
}

// headerJSON is a header value as JSON: strings as strings, booleans and numbers as
// themselves, anything else (raw bytes that are not UTF-8, 128-bit integers) as
// {"kind": N, "base64": …}.
func headerJSON(v wire.HeaderValue) any {
	switch v.Kind {
	case wire.KindString, wire.KindRaw:
		if utf8.Valid(v.Raw) {
			return string(v.Raw)
		}
	case wire.KindBool:
		if b, err := v.AsBool(); err == nil {
			return b
		}
	case wire.KindUint8, wire.KindUint16, wire.KindUint32, wire.KindUint64:
		if n, err := v.AsUint64(); err == nil {
			return n
		}
	case wire.KindInt8, wire.KindInt16, wire.KindInt32, wire.KindInt64:
		if n, err := v.AsInt64(); err == nil {
			return n
		}
	case wire.KindFloat32, wire.KindFloat64:
		if n, err := v.AsFloat64(); err == nil {
			return n
		}
	}
	return map[string]any{"kind": int(v.Kind), "base64": base64.StdEncoding.EncodeToString(v.Raw)}
}
