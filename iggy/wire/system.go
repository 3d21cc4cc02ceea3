package wire

// System commands, all sent with OpNonReplicated:
//   - Ping (1): empty body, empty reply; the only command allowed before login.
//   - GetMe (20): empty body, reply ClientDetails.
//   - GetStats (10): empty body, reply Stats (108 fixed bytes, then variable).
//   - GetClusterMetadata (12): empty body, reply ClusterMetadata (cluster.go). The
//     reference suggested S:5, but the official Python SDK fails an auto-commit poll on
//     that status, so servers answer with a one-node roster.
//   - FlushUnsavedBuffer (102): upstream 0.9 answers S:5.
// Requests with an empty body ignore any body they are given.

import (
	"encoding/binary"
	"math"
)

// PingRequest is code 1.
type PingRequest struct{}

// Code returns CodePing.
func (PingRequest) Code() Code { return CodePing }

// Append appends the encoding of the PingRequest to dst.
func (PingRequest) Append(dst []byte) []byte { return dst }

// DecodePingRequest ignores body.
func DecodePingRequest([]byte) (PingRequest, error) { return PingRequest{}, nil }

// GetMeRequest is code 20; the reply payload is ClientDetails.
type GetMeRequest struct{}

// Code returns CodeGetMe.
func (GetMeRequest) Code() Code { return CodeGetMe }

// Append appends the encoding of the GetMeRequest to dst.
func (GetMeRequest) Append(dst []byte) []byte { return dst }

// DecodeGetMeRequest ignores body.
func DecodeGetMeRequest([]byte) (GetMeRequest, error) { return GetMeRequest{}, nil }

// GetStatsRequest is code 10; the reply payload is Stats.
type GetStatsRequest struct{}

// Code returns CodeGetStats.
func (GetStatsRequest) Code() Code { return CodeGetStats }

// Append appends the encoding of the GetStatsRequest to dst.
func (GetStatsRequest) Append(dst []byte) []byte { return dst }

// DecodeGetStatsRequest ignores body.
func DecodeGetStatsRequest([]byte) (GetStatsRequest, error) { return GetStatsRequest{}, nil }

// GetClusterMetadataRequest is code 12; its reply is a ClusterMetadata (cluster.go).
type GetClusterMetadataRequest struct{}

// Code returns CodeGetClusterMetadata.
func (GetClusterMetadataRequest) Code() Code { return CodeGetClusterMetadata }

// Append appends the encoding of the GetClusterMetadataRequest to dst.
func (GetClusterMetadataRequest) Append(dst []byte) []byte { return dst }

// DecodeGetClusterMetadataRequest ignores body.
func DecodeGetClusterMetadataRequest([]byte) (GetClusterMetadataRequest, error) {
	return GetClusterMetadataRequest{}, nil
}

// FlushUnsavedBufferRequest is code 102: [stream Id][topic Id][partition_id u32][fsync u8].
type FlushUnsavedBufferRequest struct {
	Stream, Topic Identifier
	PartitionID   uint32
	Fsync         bool
}

// Code returns CodeFlushUnsavedBuffer.
func (FlushUnsavedBufferRequest) Code() Code { return CodeFlushUnsavedBuffer }

// Append appends the encoding of the FlushUnsavedBufferRequest to dst.
func (q FlushUnsavedBufferRequest) Append(dst []byte) []byte {
	dst = AppendIdentifier(dst, q.Stream)
	dst = AppendIdentifier(dst, q.Topic)
	dst = binary.LittleEndian.AppendUint32(dst, q.PartitionID)
	return append(dst, b2u(q.Fsync))
}

// DecodeFlushUnsavedBufferRequest decodes code 102 (fsync: any non-zero byte is true).
func DecodeFlushUnsavedBufferRequest(body []byte) (FlushUnsavedBufferRequest, error) {
	r := NewReader(body)
	q := FlushUnsavedBufferRequest{Stream: r.Identifier(), Topic: r.Identifier(), PartitionID: r.U32(), Fsync: r.U8() != 0}
	return q, finish(&r, "FlushUnsavedBuffer")
}

func b2u(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// Transport values of ClientDetails.
const (
	TransportTCP       uint8 = 1
	TransportQUIC      uint8 = 2
	TransportWebSocket uint8 = 4
)

// NoUser is ClientDetails.UserID when the connection has no user.
const NoUser uint32 = 0xFFFFFFFF

// ClientDetails is the GetMe reply: [client_id u32][user_id u32][transport u8]
// [address u32-string][groups_count u32] + groups × [stream u32][topic u32][group u32].
type ClientDetails struct {
	ClientID       uint32 // server-chosen id of the connection
	UserID         uint32 // NoUser if none
	Transport      uint8
	Address        string
	ConsumerGroups []ClientGroup
}

// ClientGroup is one consumer-group membership of a client.
type ClientGroup struct {
	StreamID, TopicID, GroupID uint32
}

// Append appends the encoding of the ClientDetails to dst.
func (c ClientDetails) Append(dst []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, c.ClientID)
	dst = binary.LittleEndian.AppendUint32(dst, c.UserID)
	dst = append(dst, c.Transport)
	dst = AppendLongString(dst, c.Address)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(c.ConsumerGroups)))
	for _, g := range c.ConsumerGroups {
		dst = binary.LittleEndian.AppendUint32(dst, g.StreamID)
		dst = binary.LittleEndian.AppendUint32(dst, g.TopicID)
		dst = binary.LittleEndian.AppendUint32(dst, g.GroupID)
	}
	return dst
}

// DecodeClientDetails decodes a GetMe reply payload.
func DecodeClientDetails(p []byte) (ClientDetails, error) {
	r := NewReader(p)
	c := ClientDetails{ClientID: r.U32(), UserID: r.U32(), Transport: r.U8(), Address: r.LongString()}
	if n := r.boundCount(r.U32(), 12); n > 0 {
		c.ConsumerGroups = make([]ClientGroup, n)
		for i := range c.ConsumerGroups {
			c.ConsumerGroups[i] = ClientGroup{r.U32(), r.U32(), r.U32()}
		}
	}
	return c, finish(&r, "ClientDetails")
}

// Stats is the GetStats reply. CPU values are percentages, memory and disk values
// bytes, RunTime and StartTime µs, ServerSemver major·1e6+minor·1e3+patch (0 = absent).
type Stats struct {
	ProcessID           uint32
	CPUUsage            float32
	TotalCPUUsage       float32
	MemoryUsage         uint64
	TotalMemory         uint64
	AvailableMemory     uint64
	RunTime             uint64
	StartTime           uint64
	ReadBytes           uint64
	WrittenBytes        uint64
	MessagesSizeBytes   uint64
	StreamsCount        uint32
	TopicsCount         uint32
	PartitionsCount     uint32
	SegmentsCount       uint32
	MessagesCount       uint64
	ClientsCount        uint32
	ConsumerGroupsCount uint32
	Hostname            string
	OSName              string
	OSVersion           string
	KernelVersion       string
	ServerVersion       string
	ServerSemver        uint32
	CacheMetrics        []CacheMetric
	ThreadsCount        uint32
	FreeDiskSpace       uint64
	TotalDiskSpace      uint64
}

// CacheMetric is one per-partition cache entry of Stats (upstream sends none).
type CacheMetric struct {
	StreamID, TopicID, PartitionID uint32
	Hits, Misses                   uint64
	HitRatio                       float32
}

// Append appends the encoding of the Stats to dst.
func (s Stats) Append(dst []byte) []byte {
	le := binary.LittleEndian
	dst = le.AppendUint32(dst, s.ProcessID)
	dst = le.AppendUint32(dst, math.Float32bits(s.CPUUsage))
	dst = le.AppendUint32(dst, math.Float32bits(s.TotalCPUUsage))
	for _, v := range [...]uint64{s.MemoryUsage, s.TotalMemory, s.AvailableMemory, s.RunTime,
		s.StartTime, s.ReadBytes, s.WrittenBytes, s.MessagesSizeBytes} {
		dst = le.AppendUint64(dst, v)
	}
	for _, v := range [...]uint32{s.StreamsCount, s.TopicsCount, s.PartitionsCount, s.SegmentsCount} {
		dst = le.AppendUint32(dst, v)
	}
	dst = le.AppendUint64(dst, s.MessagesCount)
	dst = le.AppendUint32(dst, s.ClientsCount)
	dst = le.AppendUint32(dst, s.ConsumerGroupsCount)
	for _, v := range [...]string{s.Hostname, s.OSName, s.OSVersion, s.KernelVersion, s.ServerVersion} {
		dst = AppendLongString(dst, v)
	}
	dst = le.AppendUint32(dst, s.ServerSemver)
	dst = le.AppendUint32(dst, uint32(len(s.CacheMetrics)))
	for _, m := range s.CacheMetrics {
		dst = le.AppendUint32(dst, m.StreamID)
		dst = le.AppendUint32(dst, m.TopicID)
		dst = le.AppendUint32(dst, m.PartitionID)
		dst = le.AppendUint64(dst, m.Hits)
		dst = le.AppendUint64(dst, m.Misses)
		dst = le.AppendUint32(dst, math.Float32bits(m.HitRatio))
	}
	dst = le.AppendUint32(dst, s.ThreadsCount)
	dst = le.AppendUint64(dst, s.FreeDiskSpace)
	return le.AppendUint64(dst, s.TotalDiskSpace)
}

// DecodeStats decodes a GetStats reply payload.
func DecodeStats(p []byte) (Stats, error) {
	r := NewReader(p)
	f32 := func() float32 { return math.Float32frombits(r.U32()) }
	s := Stats{ProcessID: r.U32(), CPUUsage: f32(), TotalCPUUsage: f32(),
		MemoryUsage: r.U64(), TotalMemory: r.U64(), AvailableMemory: r.U64(), RunTime: r.U64(),
		StartTime: r.U64(), ReadBytes: r.U64(), WrittenBytes: r.U64(), MessagesSizeBytes: r.U64(),
		StreamsCount: r.U32(), TopicsCount: r.U32(), PartitionsCount: r.U32(), SegmentsCount: r.U32(),
		MessagesCount: r.U64(), ClientsCount: r.U32(), ConsumerGroupsCount: r.U32(),
		Hostname: r.LongString(), OSName: r.LongString(), OSVersion: r.LongString(),
		KernelVersion: r.LongString(), ServerVersion: r.LongString(), ServerSemver: r.U32()}
	if n := r.boundCount(r.U32(), 32); n > 0 {
		s.CacheMetrics = make([]CacheMetric, n)
		for i := range s.CacheMetrics {
			s.CacheMetrics[i] = CacheMetric{StreamID: r.U32(), TopicID: r.U32(), PartitionID: r.U32(),
				Hits: r.U64(), Misses: r.U64(), HitRatio: f32()}
		}
	}
	s.ThreadsCount, s.FreeDiskSpace, s.TotalDiskSpace = r.U32(), r.U64(), r.U64()
	return s, finish(&r, "Stats")
}
