package ferrycli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
)

// apiOffset is one entry of GET /sinks/{key}/offsets.
type apiOffset struct {
	Stream        string          `json:"stream"`
	Topic         string          `json:"topic"`
	PartitionID   uint32          `json:"partition_id"`
	CurrentOffset *int64          `json:"current_offset"`
	StoredOffset  *int64          `json:"stored_offset"`
	Lag           uint64          `json:"lag"`
	Owned         bool            `json:"owned"`
	TargetOffset  json.RawMessage `json:"target_offset"` // absent: the sink keeps no positions
	ResumesFrom   string          `json:"resumes_from"`
	TargetError   string          `json:"target_error"`
}

// offsetsOfSink is ferry offsets --sink: the sink's offsets through the runtime's API, or
// (--set) a change of the stopped sink's offsets.
func offsetsOfSink(ctx context.Context, w io.Writer, f offsetsFlags) error {
	if len(f.del) > 0 {
		return fmt.Errorf("--delete with --sink: the API sets offsets only; use --set P=O (or --delete with --stream, --topic and --group)")
	}
	c, done, err := dialAPI(f.api)
	if err != nil {
		return err
	}
	defer done()
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	path := "/sinks/" + url.PathEscape(f.sink) + "/offsets"
	var offs []apiOffset
	if _, err := c.getJSON(ctx, path, &offs); err != nil {
		return err
	}
	if len(f.set) > 0 {
		body, err := offsetsBody(f, offs)
		if err != nil {
			return err
		}
		if err := c.send(ctx, "PUT", path, body); err != nil {
			return err
		}
		fmt.Fprintf(w, "sink %s: offsets set (%s); it resumes after them once restarted (ferry restart %s)\n", f.sink, strings.Join(f.set, ", "), f.sink)
		offs = nil
		if _, err := c.getJSON(ctx, path, &offs); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "sink %s:\n", f.sink)
	return printSinkOffsets(w, offs)
}

// offsetsBody is the PUT body of --set: each P=O on --stream/--topic, or on the sink's one
// topic when it reads only one.
func offsetsBody(f offsetsFlags, offs []apiOffset) ([]byte, error) {
	stream, topic := f.stream, f.topic
	if stream == "" || topic == "" {
		topics := map[[2]string]bool{}
		for _, o := range offs {
			topics[[2]string{o.Stream, o.Topic}] = true
		}
		if len(topics) != 1 {
			return nil, fmt.Errorf("sink %s reads %d topics: name one with --stream and --topic", f.sink, len(topics))
		}
		for k := range topics {
			stream, topic = k[0], k[1]
		}
	}
	type entry struct {
		Stream    string `json:"stream"`
		Topic     string `json:"topic"`
		Partition uint32 `json:"partition_id"`
		Offset    uint64 `json:"offset"`
	}
	var b struct {
		Offsets []entry `json:"offsets"`
	}
	for _, s := range f.set {
		p, o, ok := strings.Cut(s, "=")
		pn, err1 := strconv.ParseUint(p, 10, 32)
		on, err2 := strconv.ParseUint(o, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("--set %q: want PARTITION=OFFSET", s)
		}
		b.Offsets = append(b.Offsets, entry{stream, topic, uint32(pn), on})
	}
	return json.Marshal(b)
}

// printSinkOffsets prints one line per partition; the TARGET and RESUMES columns only for
// a sink that keeps its positions in its target.
func printSinkOffsets(w io.Writer, offs []apiOffset) error {
	sort.SliceStable(offs, func(i, j int) bool {
		a, b := offs[i], offs[j]
		if a.Stream != b.Stream {
			return a.Stream < b.Stream
		}
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.PartitionID < b.PartitionID
	})
	keeps := false
	for _, o := range offs {
		keeps = keeps || o.TargetOffset != nil || o.TargetError != ""
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	if keeps {
		fmt.Fprintln(tw, "STREAM\tTOPIC\tPARTITION\tCURRENT\tSTORED\tTARGET\tRESUMES\tLAG\tOWNED")
	} else {
		fmt.Fprintln(tw, "STREAM\tTOPIC\tPARTITION\tCURRENT\tSTORED\tLAG\tOWNED")
	}
	var errs []string
	for _, o := range offs {
		owned := "no"
		if o.Owned {
			owned = "yes"
		}
		cols := []string{o.Stream, o.Topic, strconv.FormatUint(uint64(o.PartitionID), 10), optOffset(o.CurrentOffset), optOffset(o.StoredOffset)}
		if keeps {
			target, resumes := "?", "?"
			if o.TargetOffset != nil {
				target, resumes = "-", o.ResumesFrom
				if t := string(o.TargetOffset); t != "null" {
					target = t
				}
			}
			if o.TargetError != "" {
				errs = append(errs, fmt.Sprintf("%s/%s partition %d: %s", o.Stream, o.Topic, o.PartitionID, o.TargetError))
			}
			cols = append(cols, target, resumes)
		}
		cols = append(cols, strconv.FormatUint(o.Lag, 10), owned)
		fmt.Fprintln(tw, strings.Join(cols, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, e := range errs {
		fmt.Fprintf(w, "target: %s\n", e)
	}
	return nil
}

func optOffset(o *int64) string {
	if o == nil {
		return "-"
	}
	return strconv.FormatInt(*o, 10)
}
