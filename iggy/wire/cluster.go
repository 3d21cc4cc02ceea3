package wire

// GetClusterMetadata (12) reply. The request has an empty body (GetClusterMetadataRequest in
// system.go). The protocol reference leaves the reply undocumented; this is the layout of
// iggy_common's ClusterMetadata (Iggy 0.9), which the released apache-iggy 0.9 SDKs decode:
//
//	[name_len u32][name][nodes_count u32] + nodes × ClusterNode
//	ClusterNode: [name_len u32][name][ip_len u32][ip]
//	             [tcp u16][quic u16][http u16][websocket u16]   (ports; 0 = not served)
//	             [role u8][status u8]
//
// Quirks: the Python SDK sends it before a poll with auto_commit and fails the poll on an
// error status, so a server must answer it (tests/python/SDK_NOTES.md). Upstream decoders
// refuse a role above 1 or a status above 4 (its enum's Unknown, 5, is not decodable), and
// so does this one. Upstream ignores trailing bytes; this decoder rejects them (the
// encoding is canonical).

import (
	"encoding/binary"
	"fmt"
)

// NodeRole is a cluster node's role.
type NodeRole uint8

// Node roles.
const (
	NodeLeader   NodeRole = 0
	NodeFollower NodeRole = 1
)

// NodeStatus is a cluster node's health.
type NodeStatus uint8

// Node statuses.
const (
	NodeHealthy     NodeStatus = 0
	NodeStarting    NodeStatus = 1
	NodeStopping    NodeStatus = 2
	NodeUnreachable NodeStatus = 3
	NodeMaintenance NodeStatus = 4
)

// ClusterMetadata is the GetClusterMetadata reply: the cluster's name and its nodes. A
// single-node server answers one node, leader and healthy.
type ClusterMetadata struct {
	Name  string
	Nodes []ClusterNode
}

// ClusterNode is one node of ClusterMetadata. A port of 0 means the node does not serve
// that transport.
type ClusterNode struct {
	Name          string
	IP            string // host address as text, e.g. "127.0.0.1"
	TCPPort       uint16
	QUICPort      uint16
	HTTPPort      uint16
	WebSocketPort uint16
	Role          NodeRole
	Status        NodeStatus
}

// clusterNodeMinSize is a node with empty name and ip: two lengths, four ports, role, status.
const clusterNodeMinSize = 4 + 4 + 8 + 1 + 1

// Append appends the encoding of the ClusterMetadata to dst. Strings longer than 4 GiB are
// not representable (never the case for names and addresses).
func (m ClusterMetadata) Append(dst []byte) []byte {
	le := binary.LittleEndian
	dst = AppendLongString(dst, m.Name)
	dst = le.AppendUint32(dst, uint32(len(m.Nodes)))
	for _, n := range m.Nodes {
		dst = AppendLongString(dst, n.Name)
		dst = AppendLongString(dst, n.IP)
		dst = le.AppendUint16(dst, n.TCPPort)
		dst = le.AppendUint16(dst, n.QUICPort)
		dst = le.AppendUint16(dst, n.HTTPPort)
		dst = le.AppendUint16(dst, n.WebSocketPort)
		dst = append(dst, byte(n.Role), byte(n.Status))
	}
	return dst
}

// DecodeClusterMetadata decodes a GetClusterMetadata reply payload. It copies the strings.
// Errors wrap ErrTruncated (short input, or a node count the input cannot hold), ErrMalformed
// (a string that is not UTF-8, an unknown role or status) or ErrTrailingBytes.
func DecodeClusterMetadata(p []byte) (ClusterMetadata, error) {
	r := NewReader(p)
	m := ClusterMetadata{Name: r.LongString()}
	if n := r.boundCount(r.U32(), clusterNodeMinSize); n > 0 {
		m.Nodes = make([]ClusterNode, n)
		for i := range m.Nodes {
			m.Nodes[i] = decodeClusterNode(&r)
		}
	}
	return m, finish(&r, "ClusterMetadata")
}

func decodeClusterNode(r *Reader) ClusterNode {
	n := ClusterNode{Name: r.LongString(), IP: r.LongString(),
		TCPPort: r.U16(), QUICPort: r.U16(), HTTPPort: r.U16(), WebSocketPort: r.U16()}
	n.Role = NodeRole(r.U8())
	if r.Err() == nil && n.Role > NodeFollower {
		r.Failf("cluster node role %d (want 0 leader or 1 follower)", n.Role)
	}
	n.Status = NodeStatus(r.U8())
	if r.Err() == nil && n.Status > NodeMaintenance {
		r.Failf("cluster node status %d (want 0..4)", n.Status)
	}
	return n
}

// String formats the role as upstream does: "leader" or "follower".
func (r NodeRole) String() string {
	switch r {
	case NodeLeader:
		return "leader"
	case NodeFollower:
		return "follower"
	}
	return fmt.Sprintf("role(%d)", uint8(r))
}

// String formats the status as upstream does: "healthy", "starting", …
func (s NodeStatus) String() string {
	switch s {
	case NodeHealthy:
		return "healthy"
	case NodeStarting:
		return "starting"
	case NodeStopping:
		return "stopping"
	case NodeUnreachable:
		return "unreachable"
	case NodeMaintenance:
		return "maintenance"
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}
