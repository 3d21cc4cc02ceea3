package ferrycli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
)

type produceFlags struct {
	conn      connFlags
	file      string
	key       string
	partition int64 // -1: not given
	headers   []string
	format    string
	batch     int
}

func newProduceCmd() *cobra.Command {
	f := produceFlags{partition: -1}
	cmd := &cobra.Command{
		Use:   "produce STREAM TOPIC",
		Short: "Send lines from stdin (or --file) to a topic, one message per line",
		Long: `Produce reads lines from stdin, or from --file, and sends each as one message to the
topic, in batches of --batch messages (several batches in flight, each confirmed by the
server). Empty lines are skipped. --format raw (default) sends each line's bytes as they
are; --format json refuses a line that is not one JSON value, naming the line and byte.
Messages go round robin over the partitions, to the partition --key hashes to (as the SDKs
and ferry's own producer do), or to --partition. Every message carries the --header
name=value pairs as string headers. Connection settings are ferry run's: --config's [iggy]
section, overridden by the flags. On success it prints how many messages it sent to
stderr; on an error nothing after the first failed batch is sent.`,
		Example: `  seq 1 1000000 | ferry produce demo events
  ferry produce demo events --file orders.jsonl --format json --key customer-42 --header source=import`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			in := cmd.InOrStdin()
			name := "stdin"
			if f.file != "" && f.file != "-" {
				fh, err := os.Open(f.file)
				if err != nil {
					return err
				}
				defer func() { _ = fh.Close() }() // read only: nothing to lose on close
				in, name = fh, f.file
			}
			return produce(cmd.Context(), in, name, cmd.ErrOrStderr(), args[0], args[1], f)
		},
	}
	fl := cmd.Flags()
	f.conn.register(fl)
	fl.StringVar(&f.file, "file", "", `read the lines from this file instead of stdin ("-": stdin)`)
	fl.StringVar(&f.key, "key", "", "partition every message by this key (XXH32 of it, modulo the partitions)")
	fl.Int64Var(&f.partition, "partition", -1, "send every message to this partition id")
	fl.StringArrayVar(&f.headers, "header", nil, "add the string header NAME=VALUE to every message (repeatable)")
	fl.StringVar(&f.format, "format", "raw", "raw (each line's bytes) or json (each line must be one JSON value)")
	fl.IntVar(&f.batch, "batch", 1000, "messages per batch")
	return cmd
}

func produce(ctx context.Context, in io.Reader, inName string, status io.Writer, stream, topic string, f produceFlags) (err error) {
	if f.format != "raw" && f.format != "json" {
		return fmt.Errorf("--format %q: want raw or json", f.format)
	}
	if f.batch < 1 {
		return fmt.Errorf("--batch %d: want at least 1", f.batch)
	}
	if f.key != "" && f.partition >= 0 {
		return errors.New("--key and --partition: give one of them")
	}
	var hdrs []wire.KV
	for _, h := range f.headers {
		k, v, ok := strings.Cut(h, "=")
		if !ok || k == "" || v == "" || len(k) > 255 || len(v) > 255 {
			return fmt.Errorf("--header %q: want NAME=VALUE, each 1..255 bytes", h)
		}
		hdrs = append(hdrs, wire.StringKV(k, wire.StringValue(v)))
	}
	c, err := f.conn.dial(ctx)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, c.Close()) }()
	cfg := iggy.ProducerConfig{Stream: ident(stream), Topic: ident(topic), BatchCount: f.batch}
	switch {
	case f.key != "":
		cfg.Partitioning = wire.ByKey([]byte(f.key))
	case f.partition >= 0:
		cfg.Partitioning = wire.ToPartition(uint32(f.partition))
	}
	p, err := c.NewProducer(ctx, cfg)
	if err != nil {
		return hint(err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = p.Close(cctx)
	}()
	if f.partition >= 0 && f.partition >= int64(len(p.Partitions())) {
		return fmt.Errorf("--partition %d: topic %s/%s has %d partitions (ids 0..%d)", f.partition, stream, topic, len(p.Partitions()), len(p.Partitions())-1)
	}
	start := time.Now()
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), wire.MaxPayloadSize+1)
	var n, skipped, line int
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if len(b) > 0 && b[len(b)-1] == '\r' {
			b = b[:len(b)-1]
		}
		if len(b) == 0 {
			skipped++
			continue
		}
		if f.format == "json" {
			var v json.RawMessage
			if err := json.Unmarshal(b, &v); err != nil {
				var se *json.SyntaxError
				if errors.As(err, &se) {
					return fmt.Errorf("%s line %d byte %d: not JSON: %w (nothing from this line on was sent)", inName, line, se.Offset, err)
				}
				return fmt.Errorf("%s line %d: not JSON: %w (nothing from this line on was sent)", inName, line, err)
			}
		}
		// The scanner reuses its buffer; the producer keeps the payload until it is sent.
		m := iggy.Message{Payload: append([]byte(nil), b...), Headers: hdrs}
		if err := p.Produce(ctx, m); err != nil {
			return hint(fmt.Errorf("%s line %d: %w", inName, line, err))
		}
		n++
		if n%(f.batch*64) == 0 {
			// A failed batch stops the command soon after, not at the end of the input.
			if err := p.Flush(ctx); err != nil {
				return hint(fmt.Errorf("after %d messages: %w", n, err))
			}
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("%s line %d: longer than the largest payload (%d bytes)", inName, line+1, wire.MaxPayloadSize)
		}
		return fmt.Errorf("read %s: %w", inName, err)
	}
	if err := p.Flush(ctx); err != nil {
		return hint(fmt.Errorf("sending %d messages: %w", n, err))
	}
	el := time.Since(start)
	msg := fmt.Sprintf("ferry: sent %d messages to %s/%s in %s", n, stream, topic, el.Round(time.Millisecond))
	if el > 0 && n > 0 {
		msg += fmt.Sprintf(" (%.0f/s)", float64(n)/el.Seconds())
	}
	if skipped > 0 {
		msg += fmt.Sprintf("; %d empty lines skipped", skipped)
	}
	fmt.Fprintln(status, msg)
	return nil
}
