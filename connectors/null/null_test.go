package null

import (
	"context"
	"testing"

	"github.com/ferryio/ferry/sdk"
)

func TestCounts(t *testing.T) {
	s := New()
	ctx := context.Background()
	if err := s.Open(ctx, sdk.SinkEnv{Config: []byte("null")}); err != nil {
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
