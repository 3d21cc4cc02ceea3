package wire

import (
	"encoding/binary"
	"fmt"
	"strconv"
)

// Operation is the operation byte of a request header (offset 176), echoed by the reply
// (offset 208). Replicated commands are named by it alone; every read uses
// OpNonReplicated plus a command code at offset 196.
type Operation uint8

// Operation values.
const (
	OpReserved      Operation = 0
	OpRegister      Operation = 1 // login, codes 40 and 45
	OpNonReplicated Operation = 2 // reads, ping, sync group: code at offset 196
	OpLogout        Operation = 3 // code 39

	// Internal operations (64–68): never sent by clients. A real server commits some
	// requests in one of these forms and its reply carries it (see replyForms).
	OpCreateTopicWithAssignments      Operation = 64
	OpCreatePartitionsWithAssignments Operation = 65
	OpRemoveConsumerGroupMember       Operation = 66
	OpCompleteConsumerGroupRevocation Operation = 67
	OpTruncatePartition               Operation = 68

	OpCreateStream         Operation = 128
	OpUpdateStream         Operation = 129
	OpDeleteStream         Operation = 130
	OpPurgeStream          Operation = 131
	OpCreateTopic          Operation = 132
	OpUpdateTopic          Operation = 133
	OpDeleteTopic          Operation = 134
	OpPurgeTopic           Operation = 135
	OpCreatePartitions     Operation = 136
	OpDeletePartitions     Operation = 137
	OpDeleteSegments       Operation = 138
	OpCreateConsumerGroup  Operation = 139
	OpDeleteConsumerGroup  Operation = 140
	OpCreateUser           Operation = 141
	OpUpdateUser           Operation = 142
	OpDeleteUser           Operation = 143
	OpChangePassword       Operation = 144
	OpUpdatePermissions    Operation = 145
	OpCreatePAT            Operation = 146
	OpDeletePAT            Operation = 147
	OpJoinConsumerGroup    Operation = 148
	OpLeaveConsumerGroup   Operation = 149
	OpSendMessages         Operation = 160
	OpStoreConsumerOffset  Operation = 161
	OpDeleteConsumerOffset Operation = 162
)

// IsKnown reports whether o is a defined discriminant (1–3, the internal 64–68,
// 128–149, 160–162). Header validation drops requests with any other value.
func (o Operation) IsKnown() bool {
	return (o >= 1 && o <= 3) || (o >= 64 && o <= 68) || (o >= 128 && o <= 149) || (o >= 160 && o <= 162)
}

// IsInternal reports whether o is one of the replica-internal operations 64–68, which
// clients never send (a bound client sending one is evicted with reason 4).
func (o Operation) IsInternal() bool { return o >= 64 && o <= 68 }

// IsMetadata reports whether o is a replicated metadata operation (128–149).
func (o Operation) IsMetadata() bool { return o >= 128 && o <= 149 }

// IsPartition reports whether o is a partition-plane operation (160–162).
func (o Operation) IsPartition() bool { return o >= 160 && o <= 162 }

// IsResultFramed reports whether a reply echoing op starts with a result section:
// metadata ops 128–149 except 138, the internal ops 64–68 (upstream counts them as
// metadata: a committed CreateTopicWithAssignments reply is framed like CreateTopic's),
// Store/DeleteConsumerOffset (161, 162) and Register. For Register the section is
// present only when the body is non-empty; [ReplyPayload] applies that rule.
func IsResultFramed(op Operation) bool {
	return op == OpRegister || op.IsInternal() || (op.IsMetadata() && op != OpDeleteSegments) ||
		op == OpStoreConsumerOffset || op == OpDeleteConsumerOffset
}

// replyForms pairs each request a real Iggy server (0.9) commits in an internal form
// with that form. The committed reply — success or a result-section rejection — carries
// the internal operation instead of the request's; a denial before execution (a header
// status: bad body, bad option, limits) still echoes the request's. Clients must accept
// both for these requests and nothing else ([Operation.AnsweredBy]).
var replyForms = [...]struct{ request, reply Operation }{
	// The leader assigns each new partition its consensus group before replicating, so
	// every replica applies the same placement: the request is rewritten into
	// CreateTopicWithAssignments, which is what gets committed and answered.
	{OpCreateTopic, OpCreateTopicWithAssignments},
	// The same for partitions added to an existing topic.
	{OpCreatePartitions, OpCreatePartitionsWithAssignments},
	// DeleteSegments names a number of segments, which only the partition's owner can
	// turn into an offset; the owner resolves it and replicates TruncatePartition (the
	// offset below which sealed segments go), so every replica trims to the same point.
	{OpDeleteSegments, OpTruncatePartition},
}

// CommittedForm returns the operation a real server's committed reply to a request sent
// with o carries: o's internal form from the reply-forms table (CreateTopic →
// CreateTopicWithAssignments, CreatePartitions → CreatePartitionsWithAssignments,
// DeleteSegments → TruncatePartition), else o itself.
func (o Operation) CommittedForm() Operation {
	for _, f := range replyForms {
		if f.request == o {
			return f.reply
		}
	}
	return o
}

// AnsweredBy reports whether a reply carrying operation r may answer a request sent with
// o: r is o itself (every reply a server sends before executing, and every reply to an
// operation without an internal form) or o's committed form. Any other operation means
// the stream is desynchronised.
func (o Operation) AnsweredBy(r Operation) bool { return r == o || r == o.CommittedForm() }

// Code returns the command code a replicated operation stands for (OpLogout → 39), or 0
// for OpRegister (40 or 45, told apart only by the body), OpNonReplicated and unknown ops.
func (o Operation) Code() Code { return opCodes[o] }

// String returns a readable name.
func (o Operation) String() string {
	switch o {
	case OpReserved:
		return "Reserved"
	case OpRegister:
		return "Register"
	case OpNonReplicated:
		return "NonReplicated"
	case OpCreateTopicWithAssignments:
		return "CreateTopicWithAssignments"
	case OpCreatePartitionsWithAssignments:
		return "CreatePartitionsWithAssignments"
	case OpRemoveConsumerGroupMember:
		return "RemoveConsumerGroupMember"
	case OpCompleteConsumerGroupRevocation:
		return "CompleteConsumerGroupRevocation"
	case OpTruncatePartition:
		return "TruncatePartition"
	}
	if c := opCodes[o]; c != 0 {
		return c.String()
	}
	return "Operation(" + strconv.Itoa(int(o)) + ")"
}

// Code is a u32 command code; the constants below are the registry of every code.
type Code uint32

// Command codes.
const (
	CodePing                 Code = 1
	CodeGetStats             Code = 10
	CodeGetSnapshot          Code = 11
	CodeGetClusterMetadata   Code = 12
	CodeDescribeOptions      Code = 13
	CodeGetMe                Code = 20
	CodeGetClient            Code = 21
	CodeGetClients           Code = 22
	CodeGetUser              Code = 31
	CodeGetUsers             Code = 32
	CodeCreateUser           Code = 33
	CodeDeleteUser           Code = 34
	CodeUpdateUser           Code = 35
	CodeUpdatePermissions    Code = 36
	CodeChangePassword       Code = 37
	CodeLoginUser            Code = 38 // legacy, rejected (Eviction 15)
	CodeLogoutUser           Code = 39
	CodeLoginRegister        Code = 40
	CodeGetPATs              Code = 41
	CodeCreatePAT            Code = 42
	CodeDeletePAT            Code = 43
	CodeLoginWithPAT         Code = 44 // legacy, rejected (Eviction 15)
	CodeLoginRegisterWithPAT Code = 45
	CodePollMessages         Code = 100
	CodeSendMessages         Code = 101
	CodeFlushUnsavedBuffer   Code = 102
	CodeGetConsumerOffset    Code = 120
	CodeStoreConsumerOffset  Code = 121
	CodeDeleteConsumerOffset Code = 122
	CodeGetStream            Code = 200
	CodeGetStreams           Code = 201
	CodeCreateStream         Code = 202
	CodeDeleteStream         Code = 203
	CodeUpdateStream         Code = 204
	CodePurgeStream          Code = 205
	CodeGetTopic             Code = 300
	CodeGetTopics            Code = 301
	CodeCreateTopic          Code = 302
	CodeDeleteTopic          Code = 303
	CodeUpdateTopic          Code = 304
	CodePurgeTopic           Code = 305
	CodeCreatePartitions     Code = 402
	CodeDeletePartitions     Code = 403
	CodeDeleteSegments       Code = 503
	CodeGetConsumerGroup     Code = 600
	CodeGetConsumerGroups    Code = 601
	CodeCreateConsumerGroup  Code = 602
	CodeDeleteConsumerGroup  Code = 603
	CodeJoinConsumerGroup    Code = 604
	CodeLeaveConsumerGroup   Code = 605
	CodeSyncConsumerGroup    Code = 606
)

type codeInfo struct {
	name string
	op   Operation
}

var codes = map[Code]codeInfo{
	CodePing: {"Ping", OpNonReplicated}, CodeGetStats: {"GetStats", OpNonReplicated},
	CodeGetSnapshot: {"GetSnapshot", OpNonReplicated}, CodeGetClusterMetadata: {"GetClusterMetadata", OpNonReplicated},
	CodeDescribeOptions: {"DescribeOptions", OpNonReplicated}, CodeGetMe: {"GetMe", OpNonReplicated},
	CodeGetClient: {"GetClient", OpNonReplicated}, CodeGetClients: {"GetClients", OpNonReplicated},
	CodeGetUser: {"GetUser", OpNonReplicated}, CodeGetUsers: {"GetUsers", OpNonReplicated},
	CodeCreateUser: {"CreateUser", OpCreateUser}, CodeDeleteUser: {"DeleteUser", OpDeleteUser},
	CodeUpdateUser: {"UpdateUser", OpUpdateUser}, CodeUpdatePermissions: {"UpdatePermissions", OpUpdatePermissions},
	CodeChangePassword: {"ChangePassword", OpChangePassword}, CodeLoginUser: {"LoginUser", OpReserved},
	CodeLogoutUser: {"LogoutUser", OpLogout}, CodeLoginRegister: {"LoginRegister", OpRegister},
	CodeGetPATs: {"GetPersonalAccessTokens", OpNonReplicated}, CodeCreatePAT: {"CreatePersonalAccessToken", OpCreatePAT},
	CodeDeletePAT: {"DeletePersonalAccessToken", OpDeletePAT}, CodeLoginWithPAT: {"LoginWithPersonalAccessToken", OpReserved},
	CodeLoginRegisterWithPAT: {"LoginRegisterWithPersonalAccessToken", OpRegister},
	CodePollMessages:         {"PollMessages", OpNonReplicated}, CodeSendMessages: {"SendMessages", OpSendMessages},
	CodeFlushUnsavedBuffer: {"FlushUnsavedBuffer", OpNonReplicated},
	CodeGetConsumerOffset:  {"GetConsumerOffset", OpNonReplicated}, CodeStoreConsumerOffset: {"StoreConsumerOffset", OpStoreConsumerOffset},
	CodeDeleteConsumerOffset: {"DeleteConsumerOffset", OpDeleteConsumerOffset},
	CodeGetStream:            {"GetStream", OpNonReplicated}, CodeGetStreams: {"GetStreams", OpNonReplicated},
	CodeCreateStream: {"CreateStream", OpCreateStream}, CodeDeleteStream: {"DeleteStream", OpDeleteStream},
	CodeUpdateStream: {"UpdateStream", OpUpdateStream}, CodePurgeStream: {"PurgeStream", OpPurgeStream},
	CodeGetTopic: {"GetTopic", OpNonReplicated}, CodeGetTopics: {"GetTopics", OpNonReplicated},
	CodeCreateTopic: {"CreateTopic", OpCreateTopic}, CodeDeleteTopic: {"DeleteTopic", OpDeleteTopic},
	CodeUpdateTopic: {"UpdateTopic", OpUpdateTopic}, CodePurgeTopic: {"PurgeTopic", OpPurgeTopic},
	CodeCreatePartitions: {"CreatePartitions", OpCreatePartitions}, CodeDeletePartitions: {"DeletePartitions", OpDeletePartitions},
	CodeDeleteSegments:   {"DeleteSegments", OpDeleteSegments},
	CodeGetConsumerGroup: {"GetConsumerGroup", OpNonReplicated}, CodeGetConsumerGroups: {"GetConsumerGroups", OpNonReplicated},
	CodeCreateConsumerGroup: {"CreateConsumerGroup", OpCreateConsumerGroup}, CodeDeleteConsumerGroup: {"DeleteConsumerGroup", OpDeleteConsumerGroup},
	CodeJoinConsumerGroup: {"JoinConsumerGroup", OpJoinConsumerGroup}, CodeLeaveConsumerGroup: {"LeaveConsumerGroup", OpLeaveConsumerGroup},
	CodeSyncConsumerGroup: {"SyncConsumerGroup", OpNonReplicated},
}

// opCodes maps each replicated operation (and Logout) back to its code.
var opCodes = func() [256]Code {
	var t [256]Code
	for c, ci := range codes {
		if ci.op != OpReserved && ci.op != OpRegister && ci.op != OpNonReplicated {
			t[ci.op] = c
		}
	}
	return t
}()

// IsKnown reports whether c is in the command-code registry.
func (c Code) IsKnown() bool { _, ok := codes[c]; return ok }

// Operation returns the operation byte a request with code c is sent with: OpNonReplicated
// for reads (the code then goes at offset 196), OpRegister for 40/45, OpLogout for 39,
// the op byte for replicated commands, and OpReserved for unknown and legacy codes (38, 44),
// which cannot be sent.
func (c Code) Operation() Operation { return codes[c].op }

// IsNonReplicated reports whether c is sent as OpNonReplicated with the code in the header.
func (c Code) IsNonReplicated() bool { return codes[c].op == OpNonReplicated }

// String returns a readable name.
func (c Code) String() string {
	if ci, ok := codes[c]; ok {
		return ci.name
	}
	return "Code(" + strconv.FormatUint(uint64(c), 10) + ")"
}

// Result is one entry of a result section: the index of the command in the request and
// its result code (0 = success).
type Result struct {
	Index, Code uint32
}

// AppendResultOK appends the success result section (count 0). The payload follows.
func AppendResultOK(dst []byte) []byte { return append(dst, 0, 0, 0, 0) }

// AppendResultError appends a rejection result section: count 1, index 0, code. No payload
// follows.
func AppendResultError(dst []byte, code uint32) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, 1)
	dst = binary.LittleEndian.AppendUint32(dst, 0)
	return binary.LittleEndian.AppendUint32(dst, code)
}

// DecodeResultSection splits a result-framed body into its first result code (0 for
// success or an empty section) and the payload after the section. A body shorter than its
// declared section is an error (ErrTruncated), never a success.
func DecodeResultSection(body []byte) (code uint32, payload []byte, err error) {
	r := NewReader(body)
	n := r.boundCount(r.U32(), 8)
	for i := range n {
		r.U32() // index
		c := r.U32()
		if i == 0 {
			code = c
		}
	}
	if err := r.Err(); err != nil {
		return 0, nil, fmt.Errorf("wire: result section: %w", err)
	}
	return code, body[r.Offset():], nil
}

// ReplyPayload applies steps 3–5 of the client's reply-decoding algorithm to a
// Reply: a non-zero status becomes its [CodeError]; for a result-framed operation (or a
// Register with a non-empty body) a non-zero first result becomes its CodeError; otherwise
// it returns the command payload (a sub-slice of body).
func ReplyPayload(h ReplyHeader, body []byte) ([]byte, error) {
	if h.Status != 0 {
		return nil, CodeError(h.Status)
	}
	if !IsResultFramed(h.Operation) || (h.Operation == OpRegister && len(body) == 0) {
		return body, nil
	}
	code, payload, err := DecodeResultSection(body)
	if err != nil {
		return nil, err
	}
	if code != 0 {
		return nil, CodeError(code)
	}
	return payload, nil
}
