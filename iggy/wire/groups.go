package wire

// Consumer groups. Every body is [stream Id][topic Id] plus:
//   - GetConsumerGroup (600, op 2): [group Id] → GroupDetails; empty = not found.
//   - GetConsumerGroups (601, op 2): nothing → GroupHeader repeated to the end.
//   - CreateConsumerGroup (602, op 139): [name Name] → GroupDetails (no members).
//   - DeleteConsumerGroup (603, op 140), JoinConsumerGroup (604, op 148),
//     LeaveConsumerGroup (605, op 149): [group Id] → ∅. Joining twice is a no-op.
//   - SyncConsumerGroup (606, op 2): [group Id] → SyncAssignment; empty = not a member.
// Join/Leave use the connection's client id; Sync and group polls read the header's
// client field, so a client must keep sending the id it registered with.

import "encoding/binary"

// GetConsumerGroupRequest is code 600.
type GetConsumerGroupRequest struct{ Stream, Topic, Group Identifier }

// Code returns CodeGetConsumerGroup.
func (GetConsumerGroupRequest) Code() Code { return CodeGetConsumerGroup }

// Append appends the encoding of the GetConsumerGroupRequest to dst.
func (q GetConsumerGroupRequest) Append(dst []byte) []byte {
	return appendGroupTarget(dst, q.Stream, q.Topic, q.Group)
}

// DecodeGetConsumerGroupRequest decodes code 600.
func DecodeGetConsumerGroupRequest(body []byte) (GetConsumerGroupRequest, error) {
	s, t, g, err := decodeGroupTarget(body, "GetConsumerGroup")
	return GetConsumerGroupRequest{s, t, g}, err
}

// GetConsumerGroupsRequest is code 601.
type GetConsumerGroupsRequest struct{ Stream, Topic Identifier }

// Code returns CodeGetConsumerGroups.
func (GetConsumerGroupsRequest) Code() Code { return CodeGetConsumerGroups }

// Append appends the encoding of the GetConsumerGroupsRequest to dst.
func (q GetConsumerGroupsRequest) Append(dst []byte) []byte {
	return AppendIdentifier(AppendIdentifier(dst, q.Stream), q.Topic)
}

// DecodeGetConsumerGroupsRequest decodes code 601.
func DecodeGetConsumerGroupsRequest(body []byte) (GetConsumerGroupsRequest, error) {
	r := NewReader(body)
	q := GetConsumerGroupsRequest{r.Identifier(), r.Identifier()}
	return q, finish(&r, "GetConsumerGroups")
}

// CreateConsumerGroupRequest is code 602.
type CreateConsumerGroupRequest struct {
	Stream, Topic Identifier
	Name          string
}

// Code returns CodeCreateConsumerGroup.
func (CreateConsumerGroupRequest) Code() Code { return CodeCreateConsumerGroup }

// Append appends the encoding of the CreateConsumerGroupRequest to dst.
func (q CreateConsumerGroupRequest) Append(dst []byte) []byte {
	return AppendName(AppendIdentifier(AppendIdentifier(dst, q.Stream), q.Topic), q.Name)
}

// DecodeCreateConsumerGroupRequest decodes code 602.
func DecodeCreateConsumerGroupRequest(body []byte) (CreateConsumerGroupRequest, error) {
	r := NewReader(body)
	q := CreateConsumerGroupRequest{r.Identifier(), r.Identifier(), r.Name()}
	return q, finish(&r, "CreateConsumerGroup")
}

// DeleteConsumerGroupRequest is code 603.
type DeleteConsumerGroupRequest struct{ Stream, Topic, Group Identifier }

// Code returns CodeDeleteConsumerGroup.
func (DeleteConsumerGroupRequest) Code() Code { return CodeDeleteConsumerGroup }

// Append appends the encoding of the DeleteConsumerGroupRequest to dst.
func (q DeleteConsumerGroupRequest) Append(dst []byte) []byte {
	return appendGroupTarget(dst, q.Stream, q.Topic, q.Group)
}

// DecodeDeleteConsumerGroupRequest decodes code 603.
func DecodeDeleteConsumerGroupRequest(body []byte) (DeleteConsumerGroupRequest, error) {
	s, t, g, err := decodeGroupTarget(body, "DeleteConsumerGroup")
	return DeleteConsumerGroupRequest{s, t, g}, err
}

// JoinConsumerGroupRequest is code 604.
type JoinConsumerGroupRequest struct{ Stream, Topic, Group Identifier }

// Code returns CodeJoinConsumerGroup.
func (JoinConsumerGroupRequest) Code() Code { return CodeJoinConsumerGroup }

// Append appends the encoding of the JoinConsumerGroupRequest to dst.
func (q JoinConsumerGroupRequest) Append(dst []byte) []byte {
	return appendGroupTarget(dst, q.Stream, q.Topic, q.Group)
}

// DecodeJoinConsumerGroupRequest decodes code 604.
func DecodeJoinConsumerGroupRequest(body []byte) (JoinConsumerGroupRequest, error) {
	s, t, g, err := decodeGroupTarget(body, "JoinConsumerGroup")
	return JoinConsumerGroupRequest{s, t, g}, err
}

// LeaveConsumerGroupRequest is code 605.
type LeaveConsumerGroupRequest struct{ Stream, Topic, Group Identifier }

// Code returns CodeLeaveConsumerGroup.
func (LeaveConsumerGroupRequest) Code() Code { return CodeLeaveConsumerGroup }

// Append appends the encoding of the LeaveConsumerGroupRequest to dst.
func (q LeaveConsumerGroupRequest) Append(dst []byte) []byte {
	return appendGroupTarget(dst, q.Stream, q.Topic, q.Group)
}

// DecodeLeaveConsumerGroupRequest decodes code 605.
func DecodeLeaveConsumerGroupRequest(body []byte) (LeaveConsumerGroupRequest, error) {
	s, t, g, err := decodeGroupTarget(body, "LeaveConsumerGroup")
	return LeaveConsumerGroupRequest{s, t, g}, err
}

// SyncConsumerGroupRequest is code 606.
type SyncConsumerGroupRequest struct{ Stream, Topic, Group Identifier }

// Code returns CodeSyncConsumerGroup.
func (SyncConsumerGroupRequest) Code() Code { return CodeSyncConsumerGroup }

// Append appends the encoding of the SyncConsumerGroupRequest to dst.
func (q SyncConsumerGroupRequest) Append(dst []byte) []byte {
	return appendGroupTarget(dst, q.Stream, q.Topic, q.Group)
}

// DecodeSyncConsumerGroupRequest decodes code 606.
func DecodeSyncConsumerGroupRequest(body []byte) (SyncConsumerGroupRequest, error) {
	s, t, g, err := decodeGroupTarget(body, "SyncConsumerGroup")
	return SyncConsumerGroupRequest{s, t, g}, err
}

func appendGroupTarget(dst []byte, s, t, g Identifier) []byte {
	return AppendIdentifier(AppendIdentifier(AppendIdentifier(dst, s), t), g)
}

func decodeGroupTarget(body []byte, what string) (s, t, g Identifier, err error) {
	r := NewReader(body)
	s, t, g = r.Identifier(), r.Identifier(), r.Identifier()
	return s, t, g, finish(&r, what)
}

// GroupHeader is [id u32][partitions_count u32 (the topic's)][members_count u32][name Name].
type GroupHeader struct {
	ID              uint32
	PartitionsCount uint32
	MembersCount    uint32
	Name            string
}

// Append appends the encoding of the GroupHeader to dst.
func (g GroupHeader) Append(dst []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, g.ID)
	dst = binary.LittleEndian.AppendUint32(dst, g.PartitionsCount)
	dst = binary.LittleEndian.AppendUint32(dst, g.MembersCount)
	return AppendName(dst, g.Name)
}

func (r *Reader) groupHeader() GroupHeader {
	return GroupHeader{r.U32(), r.U32(), r.U32(), r.Name()}
}

// AppendGroups encodes a GetConsumerGroups reply payload.
func AppendGroups(dst []byte, groups []GroupHeader) []byte {
	for _, g := range groups {
		dst = g.Append(dst)
	}
	return dst
}

// DecodeGroups decodes a GetConsumerGroups reply payload (headers to the end).
func DecodeGroups(p []byte) ([]GroupHeader, error) {
	r := NewReader(p)
	var out []GroupHeader
	for r.Remaining() > 0 {
		out = append(out, r.groupHeader())
	}
	return out, finish(&r, "GetConsumerGroups reply")
}

// GroupMember is one member of GroupDetails: [member_id u32][count u32][partition u32 ×
// count] (owned partitions, pending revocations included).
type GroupMember struct {
	ID         uint32
	Partitions []uint32
}

// GroupDetails is GroupHeader followed by MembersCount members. Append writes
// MembersCount = len(Members).
type GroupDetails struct {
	GroupHeader
	Members []GroupMember
}

// Append appends the encoding of the GroupDetails to dst.
func (g GroupDetails) Append(dst []byte) []byte {
	g.MembersCount = uint32(len(g.Members))
	dst = g.GroupHeader.Append(dst)
	for _, m := range g.Members {
		dst = binary.LittleEndian.AppendUint32(dst, m.ID)
		dst = appendU32s(dst, m.Partitions)
	}
	return dst
}

// DecodeGroupDetails decodes a GetConsumerGroup or CreateConsumerGroup reply payload;
// found is false (and err nil) for the empty payload that means "no such group".
func DecodeGroupDetails(p []byte) (g GroupDetails, found bool, err error) {
	if len(p) == 0 {
		return GroupDetails{}, false, nil
	}
	r := NewReader(p)
	g.GroupHeader = r.groupHeader()
	if n := r.boundCount(g.MembersCount, 8); n > 0 {
		g.Members = make([]GroupMember, n)
		for i := range g.Members {
			g.Members[i] = GroupMember{ID: r.U32(), Partitions: r.u32s()}
		}
	}
	return g, true, finish(&r, "GroupDetails")
}

// SyncAssignment is the SyncConsumerGroup reply: [generation u64][count u32]
// [partition_id u32 × count]. Its size is exactly 12 + 4·count.
type SyncAssignment struct {
	Generation uint64
	Partitions []uint32
}

// Append appends the encoding of the SyncAssignment to dst.
func (s SyncAssignment) Append(dst []byte) []byte {
	return appendU32s(binary.LittleEndian.AppendUint64(dst, s.Generation), s.Partitions)
}

// DecodeSyncAssignment decodes a SyncConsumerGroup reply payload; found is false (and err
// nil) for the empty payload that means "not a member".
func DecodeSyncAssignment(p []byte) (s SyncAssignment, found bool, err error) {
	if len(p) == 0 {
		return SyncAssignment{}, false, nil
	}
	r := NewReader(p)
	s = SyncAssignment{Generation: r.U64(), Partitions: r.u32s()}
	return s, true, finish(&r, "SyncAssignment")
}

func appendU32s(dst []byte, v []uint32) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(v)))
	for _, x := range v {
		dst = binary.LittleEndian.AppendUint32(dst, x)
	}
	return dst
}

// u32s reads [count u32][u32 × count].
func (r *Reader) u32s() []uint32 {
	n := r.boundCount(r.U32(), 4)
	if n == 0 {
		return nil
	}
	out := make([]uint32, n)
	for i := range out {
		out[i] = r.U32()
	}
	return out
}
