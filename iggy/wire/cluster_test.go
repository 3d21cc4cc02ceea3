package wire

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// singleNode is what Ferry's server answers on 127.0.0.1:8090.
var singleNode = ClusterMetadata{Name: "ferry", Nodes: []ClusterNode{{
	Name: "ferry", IP: "127.0.0.1", TCPPort: 8090, Role: NodeLeader, Status: NodeHealthy,
}}}

// singleNodeHex is singleNode's encoding written out by hand from the layout in cluster.go.
const singleNodeHex = "05000000" + "6665727279" + // name "ferry"
	"01000000" + // one node
	"05000000" + "6665727279" + // node name "ferry"
	"09000000" + "3132372e302e302e31" + // ip "127.0.0.1"
	"9a1f" + "0000" + "0000" + "0000" + // tcp 8090, no quic, http, websocket
	"00" + "00" // leader, healthy

func TestClusterMetadataRoundTrip(t *testing.T) {
	golden, err := hex.DecodeString(singleNodeHex)
	if err != nil {
		t.Fatal(err)
	}
	if got := singleNode.Append([]byte{0xee}); !bytes.Equal(got[1:], golden) || got[0] != 0xee {
		t.Fatalf("Append = %x, want ee%x", got, golden)
	}
	for _, tc := range []struct {
		name string
		m    ClusterMetadata
		size int
	}{
		{"single node", singleNode, len(golden)},
		{"no nodes", ClusterMetadata{Name: "c"}, 4 + 1 + 4},
		{"empty strings", ClusterMetadata{Nodes: []ClusterNode{{}}}, 4 + 4 + clusterNodeMinSize},
		{"three nodes", ClusterMetadata{Name: "iggy-cluster", Nodes: []ClusterNode{
			{Name: "n1", IP: "10.0.0.1", TCPPort: 8090, QUICPort: 8080, HTTPPort: 3000, WebSocketPort: 8092, Role: NodeLeader, Status: NodeHealthy},
			{Name: "n2", IP: "::1", TCPPort: 1, QUICPort: 2, HTTPPort: 3, WebSocketPort: 65535, Role: NodeFollower, Status: NodeMaintenance},
			{Name: "nœud-3", IP: "10.0.0.3", Role: NodeFollower, Status: NodeUnreachable},
		}}, 4 + 12 + 4 + 3*clusterNodeMinSize + 2 + 8 + 2 + 3 + len("nœud-3") + 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			enc := tc.m.Append(nil)
			if len(enc) != tc.size {
				t.Fatalf("encoding has %d bytes, want %d: %x", len(enc), tc.size, enc)
			}
			got, err := DecodeClusterMetadata(enc)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !reflect.DeepEqual(got, tc.m) {
				t.Fatalf("decode = %+v, want %+v", got, tc.m)
			}
		})
	}
}

func TestClusterMetadataDecodeErrors(t *testing.T) {
	golden, _ := hex.DecodeString(singleNodeHex)
	with := func(i int, b byte) []byte {
		c := bytes.Clone(golden)
		c[i] = b
		return c
	}
	last := len(golden) - 1
	for _, tc := range []struct {
		name string
		in   []byte
		want error
		text string
	}{
		{"empty", nil, ErrTruncated, "need 4 bytes at byte 0"},
		{"truncated node", golden[:last], ErrTruncated, "need 1 bytes at byte 44, have 0"},
		{"count beyond input", with(9, 2), ErrTruncated, "count 2 × 18 bytes at byte 13 exceeds the 32 remaining"},
		{"huge count", []byte{0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}, ErrTruncated, "count 4294967295 × 18"},
		{"bad role", with(last-1, 2), ErrMalformed, "cluster node role 2"},
		{"bad status", with(last, 5), ErrMalformed, "cluster node status 5"},
		{"name not UTF-8", with(4, 0xff), ErrMalformed, "string is not UTF-8"},
		{"trailing byte", append(bytes.Clone(golden), 0), ErrTrailingBytes, "1 bytes after byte 45"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeClusterMetadata(tc.in)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) || !strings.HasPrefix(err.Error(), "wire: ClusterMetadata: ") {
				t.Fatalf("err = %v, want %v containing %q", err, tc.want, tc.text)
			}
		})
	}
}

func TestNodeRoleStatusString(t *testing.T) {
	got := []string{NodeLeader.String(), NodeFollower.String(), NodeRole(7).String(),
		NodeHealthy.String(), NodeStarting.String(), NodeStopping.String(), NodeUnreachable.String(),
		NodeMaintenance.String(), NodeStatus(5).String()}
	want := []string{"leader", "follower", "role(7)", "healthy", "starting", "stopping", "unreachable", "maintenance", "status(5)"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("String() = %q, want %q", got, want)
	}
}

// FuzzClusterMetadata: DecodeClusterMetadata is strict (no trailing bytes, every byte a
// field), so an accepted input re-encodes to itself byte for byte; plus fuzzCodec's common
// invariants (no panic, no read past the input).
func FuzzClusterMetadata(f *testing.F) {
	golden, _ := hex.DecodeString(singleNodeHex)
	three := ClusterMetadata{Name: "c", Nodes: []ClusterNode{{Name: "a", Role: NodeFollower}, {IP: "x", Status: NodeMaintenance}, {}}}
	fuzzCodec(f, [][]byte{golden, three.Append(nil), ClusterMetadata{}.Append(nil), nil}, true,
		func(b []byte) ([]byte, error) {
			m, err := DecodeClusterMetadata(b)
			if err != nil {
				return nil, err
			}
			return m.Append(nil), nil
		})
}
