package server_test

import (
	"errors"
	"testing"

	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/server/servertest"
)

func TestStreamsTopicsPartitions(t *testing.T) {
	s := servertest.Start(t)
	c := login(t, s)
	for i, name := range []string{"a", "b", "c"} {
		sr, err := wire.DecodeStreamResponse(c.must(wire.CreateStreamRequest{Name: name}))
		if err != nil || sr.ID != uint32(i) || sr.Name != name {
			t.Fatalf("create %s: %+v %v", name, sr, err)
		}
	}
	c.wantErr(wire.CreateStreamRequest{Name: "a"}, wire.ErrStreamNameAlreadyExists)
	c.wantErr(wire.CreateStreamRequest{Name: "o", Options: []wire.KV{wire.StringKV("k", wire.StringValue("v"))}}, wire.ErrUnsupportedOptionKey)
	c.must(wire.DeleteStreamRequest{Stream: wire.NumericID(1)})
	c.wantErr(wire.DeleteStreamRequest{Stream: wire.NumericID(1)}, wire.ErrStreamIDNotFound)
	if sr, _ := wire.DecodeStreamResponse(c.must(wire.CreateStreamRequest{Name: "d"})); sr.ID != 1 {
		t.Fatalf("lowest free id: got %d, want 1", sr.ID)
	}
	if _, found, err := wire.DecodeStreamDetails(c.must(wire.GetStreamRequest{Stream: wire.NamedID("zz")})); found || err != nil {
		t.Fatalf("missing stream: found=%v err=%v", found, err)
	}
	c.must(wire.UpdateStreamRequest{Stream: wire.NamedID("d"), Name: "d2"})
	c.must(wire.UpdateStreamRequest{Stream: wire.NamedID("d2"), Name: "d2"}) // own name
	c.wantErr(wire.UpdateStreamRequest{Stream: wire.NamedID("d2"), Name: "a"}, wire.ErrStreamNameAlreadyExists)
	c.wantErr(wire.UpdateStreamRequest{Stream: wire.NamedID("nope"), Name: "q"}, wire.ErrStreamIDNotFound)

	// Topics.
	td, found, err := wire.DecodeTopicDetails(c.must(wire.CreateTopicRequest{Stream: wire.NamedID("a"), PartitionsCount: 3, Name: "t"}))
	if err != nil || !found || td.ID != 0 || len(td.Partitions) != 3 || td.Partitions[2].ID != 2 ||
		td.MessageExpiry != wire.ExpiryNever || td.MaxTopicSize != wire.SizeUnlimited || td.Compression != wire.CompressionNone ||
		len(td.ExplicitOptions) != 0 || len(td.DerivedOptions) != 8 {
		t.Fatalf("create topic %+v %v", td, err)
	}
	c.wantErr(wire.CreateTopicRequest{Stream: wire.NamedID("a"), PartitionsCount: 1, Name: "t"}, wire.ErrTopicNameAlreadyExists)
	c.wantErr(wire.CreateTopicRequest{Stream: wire.NamedID("x"), PartitionsCount: 1, Name: "t"}, wire.ErrStreamIDNotFound)
	c.wantErr(wire.CreateTopicRequest{Stream: wire.NamedID("a"), PartitionsCount: 1001, Name: "u"}, wire.ErrTooManyPartitions)
	c.wantErr(wire.CreateTopicRequest{Stream: wire.NamedID("a"), PartitionsCount: 1, Name: "u", Options: []wire.KV{wire.StringKV("bogus", wire.BoolValue(true))}}, wire.ErrUnsupportedOptionKey)
	c.wantErr(wire.CreateTopicRequest{Stream: wire.NamedID("a"), PartitionsCount: 1, Name: "u", Options: []wire.KV{wire.StringKV(wire.OptSegmentSize, wire.Uint64Value(7))}}, wire.ErrInvalidOptionValue)
	c.wantErr(wire.CreateTopicRequest{Stream: wire.NamedID("a"), PartitionsCount: 1, Name: "u", Options: []wire.KV{wire.StringKV(wire.OptMaxTopicSize, wire.StringValue("1 MiB"))}}, wire.ErrInvalidTopicSize)
	td, _, err = wire.DecodeTopicDetails(c.must(wire.CreateTopicRequest{Stream: wire.NamedID("a"), PartitionsCount: 0, Name: "opts", Options: []wire.KV{
		wire.StringKV(wire.OptCompressionAlgorithm, wire.StringValue("gzip")),
		wire.StringKV(wire.OptMessageExpiry, wire.StringValue("7 days")),
	}}))
	if err != nil || td.ID != 1 || td.Compression != wire.CompressionGzip || td.MessageExpiry != 7*86400*1_000_000 ||
		len(td.ExplicitOptions) != 2 || len(td.DerivedOptions) != 6 {
		t.Fatalf("topic with options %+v %v", td, err)
	}
	c.must(wire.UpdateTopicRequest{Stream: wire.NamedID("a"), Topic: wire.NumericID(1), Name: "opts2", Options: []wire.KV{wire.StringKV(wire.OptMessageExpiry, wire.Uint64Value(0))}})
	td, found, _ = wire.DecodeTopicDetails(c.must(wire.GetTopicRequest{Stream: wire.NamedID("a"), Topic: wire.NamedID("opts2")}))
	if !found || td.MessageExpiry != 0 || td.Compression != wire.CompressionGzip {
		t.Fatalf("updated topic %+v", td)
	}
	c.wantErr(wire.UpdateTopicRequest{Stream: wire.NamedID("a"), Topic: wire.NumericID(1), Name: "opts2", Options: []wire.KV{wire.StringKV(wire.OptSegmentSize, wire.Uint64Value(1<<20))}}, wire.ErrUnsupportedOptionKey)
	c.wantErr(wire.UpdateTopicRequest{Stream: wire.NamedID("a"), Topic: wire.NumericID(1), Name: "t"}, wire.ErrTopicNameAlreadyExists)
	topics, err := wire.DecodeTopics(c.must(wire.GetTopicsRequest{Stream: wire.NamedID("a")}))
	if err != nil || len(topics) != 2 {
		t.Fatalf("topics %v %v", topics, err)
	}
	if topics, _ := wire.DecodeTopics(c.must(wire.GetTopicsRequest{Stream: wire.NamedID("none")})); len(topics) != 0 {
		t.Fatalf("topics of missing stream: %v", topics)
	}
	if _, found, _ := wire.DecodeTopicDetails(c.must(wire.GetTopicRequest{Stream: wire.NamedID("a"), Topic: wire.NamedID("none")})); found {
		t.Fatal("missing topic found")
	}

	// Partitions.
	c.must(wire.CreatePartitionsRequest{Stream: wire.NamedID("a"), Topic: wire.NamedID("t"), PartitionsCount: 2})
	c.wantErr(wire.CreatePartitionsRequest{Stream: wire.NamedID("a"), Topic: wire.NamedID("t"), PartitionsCount: 0}, wire.ErrTooManyPartitions)
	c.wantErr(wire.DeletePartitionsRequest{Stream: wire.NamedID("a"), Topic: wire.NamedID("t"), PartitionsCount: 6}, wire.ErrInvalidPartitionsCount)
	c.wantErr(wire.CreatePartitionsRequest{Stream: wire.NamedID("a"), Topic: wire.NamedID("zz"), PartitionsCount: 1}, wire.ErrTopicIDNotFound)
	c.must(wire.DeletePartitionsRequest{Stream: wire.NamedID("a"), Topic: wire.NamedID("t"), PartitionsCount: 1})
	td, _, _ = wire.DecodeTopicDetails(c.must(wire.GetTopicRequest{Stream: wire.NamedID("a"), Topic: wire.NamedID("t")}))
	if len(td.Partitions) != 4 || td.Partitions[3].ID != 3 {
		t.Fatalf("partitions after create 2 / delete 1: %+v", td.Partitions)
	}

	// Stream details count topics; delete and purge.
	sd, found, err := wire.DecodeStreamDetails(c.must(wire.GetStreamRequest{Stream: wire.NamedID("a")}))
	if err != nil || !found || sd.TopicsCount != 2 || len(sd.Topics) != 2 {
		t.Fatalf("stream details %+v %v", sd, err)
	}
	c.send(wire.NamedID("a"), wire.NamedID("t"), wire.ToPartition(0), "x", "y")
	c.must(wire.PurgeTopicRequest{Stream: wire.NamedID("a"), Topic: wire.NamedID("t")})
	if off := c.send(wire.NamedID("a"), wire.NamedID("t"), wire.ToPartition(0), "z"); off != 0 {
		t.Fatalf("offset after purge %d, want 0", off)
	}
	c.must(wire.PurgeStreamRequest{Stream: wire.NamedID("a")})
	c.wantErr(wire.PurgeStreamRequest{Stream: wire.NamedID("nope")}, wire.ErrStreamIDNotFound)
	c.must(wire.DeleteTopicRequest{Stream: wire.NamedID("a"), Topic: wire.NamedID("t")})
	c.wantErr(wire.DeleteTopicRequest{Stream: wire.NamedID("a"), Topic: wire.NamedID("t")}, wire.ErrTopicIDNotFound)

	// Undecodable bodies of metadata ops answer S:3.
	h := c.header(wire.CodeDeleteStream)
	if _, _, err := c.roundTrip(h, []byte{9, 9}); !errors.Is(err, wire.ErrInvalidCommand) {
		t.Fatalf("bad body: %v", err)
	}
	h = c.header(wire.CodePing)
	h.Code = wire.CodeGetStream
	if _, _, err := c.roundTrip(h, []byte{9}); !errors.Is(err, wire.ErrInvalidCommand) {
		t.Fatalf("bad read body: %v", err)
	}
}
