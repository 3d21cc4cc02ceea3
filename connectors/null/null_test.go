package null

import (
	"context"
	"fmt"
	"testing"

	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/sdk/sdktest"
)

func TestCounts(t *testing.T) {
	s := New()
	ctx := context.Background()
	if err := s.Open(ctx, sdktest.SinkEnv(t, nil, nil)); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{3, 0, 5} {
		if err := s.Consume(ctx, sdk.TopicMetadata{}, sdk.MessagesMetadata{}, make([]sdk.ConsumedMessage, n)); err != nil {
			t.Fatal(err)
		}
	}
	if s.Messages() != 8 || s.Batches() != 3 {
		t.Fatalf("messages %d batches %d", s.Messages(), s.Batches())
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// Under sink_controlled each batch is committed at once; a commit the runtime refuses (the
// partition moved away) does not fail the batch, and a redelivery commits nothing again.
func TestSinkControlledCommitsEachBatch(t *testing.T) {
	c := sdktest.NewCommitter()
	s := New()
	ctx := context.Background()
	if err := s.Open(ctx, sdktest.SinkEnv(t, `{"anything":1}`, c)); err != nil {
		t.Fatal(err)
	}
	p0, p1 := sdktest.Part(0), sdktest.Part(1)
	for _, b := range []struct {
		p     sdk.Partition
		first uint64
	}{{p0, 0}, {p1, 0}, {p0, 5}, {p0, 5}} {
		if err := sdktest.Consume(ctx, s, c, sdktest.Topic, b.p, sdktest.Messages(b.p.PartitionID, b.first, 5, nil)); err != nil {
			t.Fatal(err)
		}
	}
	c.Revoke(p1)
	if err := sdktest.Consume(ctx, s, nil, sdktest.Topic, p1, sdktest.Messages(1, 5, 5, nil)); err != nil {
		t.Fatalf("a batch whose commit is refused: %v", err)
	}
	got := fmt.Sprint(c.Commits(), " refused ", len(c.Refused()))
	if want := "[{{1 1 0} 4 <nil>} {{1 1 1} 4 <nil>} {{1 1 0} 9 <nil>}] refused 1"; got != want {
		t.Fatalf("commits %s, want %s", got, want)
	}
	if s.Messages() != 25 {
		t.Fatalf("messages %d", s.Messages())
	}
}
