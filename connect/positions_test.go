package connect

import (
	"context"
	"errors"
	"testing"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/internal/testkit"
)

// TestSetOffsetsOfAKeeperThatCannotRewind: a sink that keeps its positions in its target
// but can neither report nor set them (no sdk.PositionReader, no sdk.PositionRewinder, no
// reason of its own) has its offsets shown with a target_error, and a change of them on
// the stopped sink refused with ErrRewindRefused and the runtime's reason, Iggy's stored
// offset unchanged: before, the change was stored in Iggy, which the sink does not resume
// from. The same sink configured not to keep positions takes the change in Iggy.
func TestSetOffsetsOfAKeeperThatCannotRewind(t *testing.T) {
	env := newIggyEnv(t)
	env.Topic("s", "t", 1)
	env.Fill("s", "t", 0, 10, nil)
	sink := &keeperSink{seekSink: &seekSink{recSink: newRecSink(), start: map[uint32]uint64{}}, keeps: true}
	rt := env.start(testSinkConfig(config.CommitAfterConsuming, config.FailureStop), sink)
	defer stopRuntime(t, rt)
	testkit.WaitFor(t, "offset 9 stored", func() bool { o, ok := env.Stored("g", "s", "t", 0); return ok && o == 9 })
	ctx := context.Background()
	if err := rt.StopConnector(ctx, KindSink, "rec"); err != nil {
		t.Fatal(err)
	}
	offs, err := rt.Offsets(ctx, "rec")
	if err != nil || len(offs) != 1 {
		t.Fatalf("offsets %+v, %v", offs, err)
	}
	if o := offs[0]; !o.KeepsPositions || o.TargetError != "the sink keeps its positions in its target and does not report them" || o.Stored != 9 || o.Lag != 0 {
		t.Fatalf("offsets of the stopped keeper: %+v", o)
	}

	err = rt.SetOffsets(ctx, "rec", []OffsetChange{{Stream: "s", Topic: "t", Partition: 0, Offset: 3}})
	var refused *RewindRefusedError
	const reason = "the sink keeps its positions in its target, which cannot set them: it would resume where its target says, whatever Iggy's stored offset"
	if !errors.Is(err, ErrRewindRefused) || !errors.As(err, &refused) || refused.Sink != "rec" || refused.Reason != reason {
		t.Fatalf("SetOffsets of a keeper: %v", err)
	}
	env.WantStored("g", "s", "t", 0, 9)

	sink.keeps = false // as if configured not to keep them (the instance opened for the change asks)
	if err := rt.SetOffsets(ctx, "rec", []OffsetChange{{Stream: "s", Topic: "t", Partition: 0, Offset: 3}}); err != nil {
		t.Fatalf("SetOffsets of a sink that keeps no positions: %v", err)
	}
	env.WantStored("g", "s", "t", 0, 3)
}
