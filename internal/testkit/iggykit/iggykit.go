// Package iggykit gives a test one real embedded Iggy server on loopback TCP and an admin
// client, and the few things every test does with them: open more clients, create a topic,
// produce messages, read a consumer group's stored offset.
//
// It imports the client and the server, never the runtime (connect), so connect's own
// tests can use it too.
package iggykit

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/server"
	"github.com/ferryio/ferry/server/servertest"
)

// Heartbeat is the heartbeat (and assignment re-sync) interval of every client Dial opens:
// short, so a test sees a rebalance within milliseconds.
const Heartbeat = 50 * time.Millisecond

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// Env is one embedded server and an admin client. Every client it opens, and the server,
// are closed when the test ends (clients first).
type Env struct {
	T      testing.TB
	Server *server.Server
	Addr   string       // the server's TCP address on loopback
	Admin  *iggy.Client // logged in as the root user
}

// Start starts a server with opts (servertest's) and dials its admin client.
func Start(t testing.TB, opts ...servertest.Option) *Env {
	t.Helper()
	s := servertest.Start(t, opts...)
	e := &Env{T: t, Server: s, Addr: s.Addr()}
	e.Admin = e.Dial()
	return e
}

// Ctx is a context for one call of a test: it ends after 30 s or with the test.
func (e *Env) Ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	e.T.Cleanup(cancel)
	return ctx
}

// Dial opens a new client logged in as the root user, heartbeating every Heartbeat, with
// its logs discarded unless opts say otherwise. Each runtime a test starts gets its own
// client, as separate processes would.
func (e *Env) Dial(opts ...iggy.Opt) *iggy.Client {
	e.T.Helper()
	all := append([]iggy.Opt{iggy.WithCredentials(servertest.Username, servertest.Password),
		iggy.WithHeartbeat(Heartbeat), iggy.WithLogger(quietLog)}, opts...)
	c, err := iggy.Dial(e.Ctx(), e.Addr, all...)
	if err != nil {
		e.T.Fatalf("dial %s: %v", e.Addr, err)
	}
	e.T.Cleanup(func() { _ = c.Close() })
	return c
}

// Topic creates stream (if missing) and topic with partitions partitions (an existing
// topic is left as it is); past the 1,000 one request may create, the rest are added a
// thousand at a time.
func (e *Env) Topic(stream, topic string, partitions uint32) {
	e.T.Helper()
	if _, err := e.Admin.GetTopic(e.Ctx(), iggy.Name(stream), iggy.Name(topic)); err == nil {
		return
	}
	first := min(partitions, wire.MaxPartitionsPerRequest)
	if err := e.Admin.EnsureTopic(e.Ctx(), stream, topic, first); err != nil {
		e.T.Fatalf("create %s/%s: %v", stream, topic, err)
	}
	for n := first; n < partitions; {
		more := min(partitions-n, wire.MaxPartitionsPerRequest)
		if err := e.Admin.CreatePartitions(e.Ctx(), iggy.Name(stream), iggy.Name(topic), more); err != nil {
			e.T.Fatalf("add %d partitions to %s/%s: %v", more, stream, topic, err)
		}
		n += more
	}
}

// Fill appends n messages to one partition, in batches of a thousand. Message i's payload
// is payload(i) when payload is not nil, else "p<partition>-m<i>" (i counts from 0 in each
// call); hdrs go on every message.
func (e *Env) Fill(stream, topic string, partition uint32, n int, payload func(i int) []byte, hdrs ...wire.KV) {
	e.T.Helper()
	const chunk = 1000
	msgs := make([]iggy.Message, 0, chunk)
	for i := 0; i < n; {
		msgs = msgs[:0]
		for ; i < n && len(msgs) < chunk; i++ {
			var p []byte
			if payload != nil {
				p = payload(i)
			} else {
				p = fmt.Appendf(nil, "p%d-m%d", partition, i)
			}
			msgs = append(msgs, iggy.Message{Headers: hdrs, Payload: p})
		}
		if _, err := e.Admin.SendMessages(e.Ctx(), iggy.Name(stream), iggy.Name(topic), wire.ToPartition(partition), msgs); err != nil {
			e.T.Fatalf("fill %s/%s/%d: %v", stream, topic, partition, err)
		}
	}
}

// Produce appends one message a payload to one partition, in one batch.
func (e *Env) Produce(stream, topic string, partition uint32, payloads ...string) {
	e.T.Helper()
	e.Fill(stream, topic, partition, len(payloads), func(i int) []byte { return []byte(payloads[i]) })
}

// Stored reads a consumer group's stored offset of a partition back from the server; found
// is false while the group has stored none.
func (e *Env) Stored(group, stream, topic string, partition uint32) (offset uint64, found bool) {
	e.T.Helper()
	o, found, err := e.Admin.GetOffset(e.Ctx(), wire.Consumer{Kind: wire.ConsumerGroup, ID: iggy.Name(group)},
		iggy.Name(stream), iggy.Name(topic), partition)
	if err != nil {
		e.T.Fatalf("get offset %s %s/%s/%d: %v", group, stream, topic, partition, err)
	}
	return o.StoredOffset, found
}

// WantStored fails the test unless the group's stored offset of partition is exactly want.
func (e *Env) WantStored(group, stream, topic string, partition uint32, want uint64) {
	e.T.Helper()
	if got, ok := e.Stored(group, stream, topic, partition); !ok || got != want {
		e.T.Fatalf("stored offset of %s/%s/%d = %d (found %t), want %d", stream, topic, partition, got, ok, want)
	}
}
