package server_test

import (
	"errors"
	"net"
	"reflect"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/server/servertest"
)

// TestClusterMetadata: GetClusterMetadata (12) answers a one-node roster decoding to this
// server as the healthy leader at its listen address, TCP only.
func TestClusterMetadata(t *testing.T) {
	s := servertest.Start(t)
	host, port, err := net.SplitHostPort(s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.ParseUint(port, 10, 16)
	got, err := wire.DecodeClusterMetadata(login(t, s).must(wire.GetClusterMetadataRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	want := wire.ClusterMetadata{Name: "ferry", Nodes: []wire.ClusterNode{{
		Name: "ferry", IP: host, TCPPort: uint16(p), Role: wire.NodeLeader, Status: wire.NodeHealthy,
	}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("cluster metadata = %+v, want %+v", got, want)
	}
}

// TestClusterRosterFollower: with Config.ClusterRoster (a test hook) naming this server a
// follower, GetClusterMetadata answers that roster exactly, logins and reads are served,
// and replicated requests are refused with 58 TransientNotAccepted — result-framed for a
// metadata operation, in the header status for a partition operation — without being
// executed; switched to leader, the same requests are executed.
func TestClusterRosterFollower(t *testing.T) {
	var leads atomic.Bool
	var self atomic.Pointer[wire.ClusterNode]
	roster := func() wire.ClusterMetadata {
		me := *self.Load()
		other := wire.ClusterNode{Name: "other", IP: "127.0.0.1", TCPPort: 1, Role: wire.NodeLeader, Status: wire.NodeHealthy}
		if leads.Load() {
			me.Role, other.Role = wire.NodeLeader, wire.NodeFollower
		}
		return wire.ClusterMetadata{Name: "c", Nodes: []wire.ClusterNode{other, me}}
	}
	s := servertest.Start(t, servertest.WithClusterRoster(roster))
	host, port, _ := net.SplitHostPort(s.Addr())
	p, _ := strconv.ParseUint(port, 10, 16)
	self.Store(&wire.ClusterNode{Name: "me", IP: host, TCPPort: uint16(p), Role: wire.NodeFollower, Status: wire.NodeHealthy})

	c := login(t, s)
	got, err := wire.DecodeClusterMetadata(c.must(wire.GetClusterMetadataRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if want := roster(); !reflect.DeepEqual(got, want) {
		t.Fatalf("cluster metadata = %+v, want %+v", got, want)
	}
	create := wire.CreateStreamRequest{Name: "s"}
	h := c.header(create.Code())
	rh, _, err := c.roundTrip(h, create.Append(nil))
	if !errors.Is(err, wire.ErrTransientNotAccepted) || rh.Status != 0 {
		t.Fatalf("create stream on a follower: status %d, err %v; want a result-framed 58", rh.Status, err)
	}
	send := wire.SendMessagesRequest{Stream: wire.NamedID("s"), Topic: wire.NumericID(0), Partitioning: wire.Balanced()}
	rh, _, err = c.roundTrip(c.header(send.Code()), send.Append(nil))
	if !errors.Is(err, wire.ErrTransientNotAccepted) || rh.Status != wire.ErrTransientNotAccepted.Code {
		t.Fatalf("send on a follower: status %d, err %v; want status 58", rh.Status, err)
	}
	if streams := c.must(wire.GetStreamsRequest{}); len(streams) != 0 {
		t.Fatalf("a follower executed a create: streams %x", streams)
	}

	leads.Store(true)
	c.must(wire.CreateStreamRequest{Name: "s"})
	c.must(wire.GetStreamRequest{Stream: wire.NamedID("s")})
}
