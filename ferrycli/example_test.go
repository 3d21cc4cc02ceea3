package ferrycli_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/ferryio/ferry/ferrycli"
	"github.com/ferryio/ferry/sdk"
)

// linesSpec is the plugin_config of the lines sink: `ferry check` validates connector
// files with it and `ferry connectors` prints it.
var linesSpec = sdk.ConfigSpec{CommitModes: []string{"sink_controlled"}, Commits: sdk.CommitsEachBatch, Fields: []sdk.ConfigField{
	{Name: "path", Type: sdk.TypeOutputPath, Required: true, Doc: "the file payloads are appended to"},
}}

// linesSink appends each payload as a line to a file and, when the file is fsynced,
// commits the batch (offset_commit = "sink_controlled").
type linesSink struct {
	f      *os.File
	commit sdk.Committer
}

func (s *linesSink) Open(_ context.Context, env sdk.SinkEnv) error {
	var cfg struct {
		Path string `json:"path"`
	}
	if err := linesSpec.Decode(env.Config, &cfg); err != nil {
		return sdk.Permanent(err)
	}
	if env.Committer == nil {
		return sdk.Permanent(errors.New(`lines: needs offset_commit = "sink_controlled"`))
	}
	f, err := os.OpenFile(cfg.Path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	s.f, s.commit = f, env.Committer
	return nil
}

func (s *linesSink) Consume(_ context.Context, _ sdk.TopicMetadata, meta sdk.MessagesMetadata, msgs []sdk.ConsumedMessage) error {
	var b []byte
	for _, m := range msgs {
		b = append(strconv.AppendQuote(b, string(m.Payload)), '\n')
	}
	if _, err := s.f.Write(b); err != nil {
		return err
	}
	if err := s.f.Sync(); err != nil {
		return sdk.Permanent(err) // what the kernel dropped cannot be committed
	}
	return s.commit.Commit(meta.Partition, msgs[len(msgs)-1].Offset)
}

func (s *linesSink) Close(context.Context) error { return s.f.Close() }

// A program of your own: Ferry's whole command line, with the built-in connectors and the
// lines sink (path = "builtin:lines" in a connector file). Its main would end with
// cli.Main(); here it runs `ferry connectors lines`.
func Example() {
	cli := ferrycli.New()
	if err := cli.AddSink("lines", func() sdk.Sink { return &linesSink{} }, linesSpec); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	code := cli.Run([]string{"connectors", "lines"})
	fmt.Println("exit code", code)
	// Output:
	// sink builtin:lines
	//   offset_commit: sink_controlled; when not set: sink_controlled (its only mode); under sink_controlled: commits each batch once written, inside Consume
	//   path  output path  required  the file payloads are appended to
	// exit code 0
}

// A name is registered once per kind: a built-in's name, or one added before, is refused.
func ExampleCLI_AddSink() {
	cli := ferrycli.New()
	err := cli.AddSink("file", func() sdk.Sink { return &linesSink{} }, linesSpec)
	fmt.Println(err)
	fmt.Println(errors.Is(err, ferrycli.ErrDuplicate))
	// Output:
	// ferrycli: sink "file" (path = "builtin:file"): connector name already registered
	// true
}

// countSource produces the numbers 1..count as text, then ends; its state is the last
// number sent, so a restart goes on after it.
type countSource struct {
	next, count uint64
}

var countSpec = sdk.ConfigSpec{Fields: []sdk.ConfigField{
	{Name: "count", Type: sdk.TypeUnsigned, Default: 10, Doc: "how many numbers to send"},
}}

func (s *countSource) Open(_ context.Context, env sdk.SourceEnv) error {
	var cfg struct {
		Count uint64 `json:"count"`
	}
	if err := countSpec.Decode(env.Config, &cfg); err != nil {
		return sdk.Permanent(err)
	}
	s.count, s.next = cfg.Count, 1
	if env.State != nil {
		last, err := strconv.ParseUint(string(env.State), 10, 64)
		if err != nil {
			return sdk.Permanent(fmt.Errorf("count: state %q: %w", env.State, err))
		}
		s.next = last + 1
	}
	return nil
}

func (s *countSource) Read(context.Context) (sdk.SourceBatch, sdk.AckFunc, error) {
	if s.next > s.count {
		return sdk.SourceBatch{}, nil, sdk.ErrEndOfInput
	}
	n := s.next
	s.next++
	msg := sdk.ProducedMessage{Payload: strconv.AppendUint(nil, n, 10)}
	return sdk.SourceBatch{Schema: sdk.SchemaText, Messages: []sdk.ProducedMessage{msg},
		State: strconv.AppendUint(nil, n, 10)}, sdk.NoAck, nil
}

func (s *countSource) Close(context.Context) error { return nil }

// A source is added the same way, under path = "builtin:count" for type = "source".
func ExampleCLI_AddSource() {
	cli := ferrycli.New()
	if err := cli.AddSource("count", func() sdk.Source { return &countSource{} }, countSpec); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println("exit code", cli.Run([]string{"connectors", "count"}))
	// Output:
	// source builtin:count
	//   count  unsigned  10  how many numbers to send
	// exit code 0
}
