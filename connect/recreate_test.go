package connect

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/internal/testkit"
)

// TestRecreatedTopicDeliveredFromZero is the regression test of "a recreated topic is
// silently skipped": a sink caught up on s/t (5000 messages, all stored); the topic was
// deleted and created again and 8000 messages produced; the sink resumed at its
// remembered position 5000 on what is a new topic, so the new topic's offsets 0..4999
// were never delivered while the stored offset said 7999 and lag 0. Now, in every
// commit mode, the sink is given exactly 0..4999 of the old topic and then exactly
// 0..7999 of the new one, the new group's stored offset is 7999, and the replacement is
// counted once and logged once at INFO with the old and new topic's id and creation time.
func TestRecreatedTopicDeliveredFromZero(t *testing.T) {
	for _, mode := range allModes {
		t.Run(string(mode), func(t *testing.T) {
			env := newIggyEnv(t)
			env.Topic("s", "t", 1)
			env.Fill("s", "t", 0, 5000, nil)
			sink := newRecSink()
			sink.commitEach = true
			cfg := testSinkConfig(mode, config.FailureStop)
			cfg.Streams[0].BatchLength = 100
			rt, logs := env.startLogged(cfg, sink)
			defer stopRuntime(t, rt)
			old, err := env.Admin.GetTopic(bg(t), iggy.Name("s"), iggy.Name("t"))
			if err != nil {
				t.Fatal(err)
			}
			testkit.WaitFor(t, "5000 delivered and stored", func() bool {
				o, ok := env.Stored("g", "s", "t", 0)
				return len(sink.got(0)) == 5000 && ok && o == 4999
			})
			if err := env.Admin.DeleteTopic(bg(t), iggy.Name("s"), iggy.Name("t")); err != nil {
				t.Fatal(err)
			}
			env.Topic("s", "t", 1)
			now, err := env.Admin.GetTopic(bg(t), iggy.Name("s"), iggy.Name("t"))
			if err != nil {
				t.Fatal(err)
			}
			env.Fill("s", "t", 0, 8000, nil)
			testkit.WaitFor(t, "the new topic's 7999 delivered and stored", func() bool {
				o, ok := env.Stored("g", "s", "t", 0)
				g := sink.got(0)
				return ok && o == 7999 && len(g) > 5000 && g[len(g)-1] == 7999
			})
			got := sink.got(0)
			if !equalOffsets(got[:5000], seq(0, 4999)) || !equalOffsets(got[5000:], seq(0, 7999)) {
				t.Fatalf("delivered %d offsets; want 0..4999 of the old topic then 0..7999 of the new one; the new topic's part starts %v",
					len(got), got[5000:min(len(got), 5010)])
			}
			st := rt.Status()[0]
			if st.Stats.TopicsRecreated != 1 || st.State != StateRunning || st.LastError != nil {
				t.Fatalf("status %s, last error %v, topics recreated %d; want running, none, 1", st.State, st.LastError, st.Stats.TopicsRecreated)
			}
			msg := `level=INFO msg="topic was deleted and created again; its partitions start afresh from the new topic's stored offsets (0 when none)" `
			tail := fmt.Sprintf(` stream=s topic=t old_topic_id=%d old_created_at=%d new_topic_id=%d new_created_at=%d revoked=[0] assigned=[0]`,
				old.ID, old.CreatedAt, now.ID, now.CreatedAt)
			n := 0
			for l := range strings.Lines(logs.String()) {
				if strings.Contains(l, msg) && strings.HasSuffix(strings.TrimSuffix(l, "\n"), tail) {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("%d lines %s…%s; want 1; logs:\n%s", n, msg, tail, logs.String())
			}
			// The table records a store once its reply is handled, just after the server has it.
			testkit.WaitFor(t, "the table's partition 0 stored at 7999", func() bool {
				ps := rt.Status()[0].Partitions
				i := slices.IndexFunc(ps, func(p PartitionStatus) bool { return p.Partition == 0 })
				return i >= 0 && ps[i].Stored == 7999
			})
		})
	}
}

// TestDeletedTopicDegradesTheSink is the regression test of "running while it cannot
// poll": after its topic was deleted the sink logged TopicIdNotFound for 20 s while its
// status said running. Now it is degraded, with the poll's error as its last error and
// every failed poll counted (in PollErrors and in Errors); once the topic exists again it
// is running, with no last error, and delivers the new topic from offset 0.
func TestDeletedTopicDegradesTheSink(t *testing.T) {
	env := newIggyEnv(t)
	env.Topic("s", "t", 1)
	env.Fill("s", "t", 0, 10, nil)
	sink := newRecSink()
	rt := env.start(testSinkConfig(config.CommitAfterConsuming, config.FailureStop), sink)
	defer stopRuntime(t, rt)
	testkit.WaitFor(t, "10 delivered and stored", func() bool {
		o, ok := env.Stored("g", "s", "t", 0)
		return len(sink.got(0)) == 10 && ok && o == 9
	})
	if st := rt.Status()[0]; st.State != StateRunning || st.LastError != nil || st.Stats.PollErrors != 0 {
		t.Fatalf("before the delete: %s, %v, %d poll errors", st.State, st.LastError, st.Stats.PollErrors)
	}
	if err := env.Admin.DeleteTopic(bg(t), iggy.Name("s"), iggy.Name("t")); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the sink degraded", func() bool { return rt.Status()[0].State == StateDegraded })
	st := rt.Status()[0]
	if st.LastError == nil || !strings.HasPrefix(st.LastError.Message, "poll s/t: ") || !strings.Contains(st.LastError.Message, "TopicIdNotFound") {
		t.Fatalf("degraded with last error %+v; want the poll's TopicIdNotFound", st.LastError)
	}
	if st.Stats.PollErrors == 0 || st.Stats.Errors() != st.Stats.PollErrors {
		t.Fatalf("poll errors %d, errors %d; want at least one poll error, and errors = poll errors", st.Stats.PollErrors, st.Stats.Errors())
	}
	env.Topic("s", "t", 1)
	env.Fill("s", "t", 0, 3, nil)
	testkit.WaitFor(t, "the new topic delivered", func() bool { return len(sink.got(0)) == 13 })
	st = rt.Status()[0]
	if st.State != StateRunning || st.LastError != nil || st.Stats.TopicsRecreated != 1 {
		t.Fatalf("after the topic is back: %s, %+v, %d recreated; want running, no last error, 1", st.State, st.LastError, st.Stats.TopicsRecreated)
	}
	if got := sink.got(0)[10:]; !equalOffsets(got, seq(0, 2)) {
		t.Fatalf("new topic delivered %v, want 0..2", got)
	}
}
