package server_test

import (
	"net"
	"reflect"
	"strconv"
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
