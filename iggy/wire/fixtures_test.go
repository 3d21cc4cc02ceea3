package wire

import "math"

// Shared fixtures: one or more rich values per request and reply, used by the round-trip
// tests and as fuzz seeds.

var (
	sOrders = NamedID("orders")
	sNum    = NumericID(3)
	tEvents = NamedID("events")
	gWorker = NamedID("workers")
	opts    = []KV{StringKV(OptMessageExpiry, Uint64Value(60_000_000)), StringKV(OptCompressionAlgorithm, StringValue("gzip"))}
)

func sampleRequests() []Request {
	single := Consumer{Kind: ConsumerSingle, ID: NumericID(42)}
	group := Consumer{Kind: ConsumerGroup, ID: gWorker}
	batch, err := AppendBatch(nil, sampleMessages(3, 10), nil)
	if err != nil {
		panic(err)
	}
	return []Request{
		PingRequest{}, GetMeRequest{}, GetStatsRequest{}, GetClusterMetadataRequest{},
		FlushUnsavedBufferRequest{Stream: sOrders, Topic: tEvents, PartitionID: 2, Fsync: true},
		LoginPasswordRequest{Client: ClientVersionInfo{ProtocolVersion, "ferry", "0.1.0"},
			PasswordCredentials: PasswordCredentials{Username: "iggy", Password: "secret", Context: "ctx"}},
		LoginPATRequest{Client: ClientVersionInfo{ProtocolVersion, "ferry", "0.1.0"},
			TokenCredentials: TokenCredentials{Token: "dG9rZW4=", Context: ""}},
		LogoutRequest{},
		GetStreamRequest{sOrders}, GetStreamsRequest{},
		CreateStreamRequest{Name: "orders"}, CreateStreamRequest{Name: "orders", Options: opts},
		DeleteStreamRequest{sNum}, UpdateStreamRequest{Stream: sNum, Name: "renamed"}, PurgeStreamRequest{sOrders},
		GetTopicRequest{sOrders, tEvents}, GetTopicsRequest{sNum},
		CreateTopicRequest{Stream: sOrders, PartitionsCount: 3, Name: "events", Options: opts},
		CreateTopicRequest{Stream: sNum, Name: "t"},
		DeleteTopicRequest{sOrders, NumericID(0)},
		UpdateTopicRequest{Stream: sOrders, Topic: tEvents, Name: "events", Options: opts[:1]},
		PurgeTopicRequest{sOrders, tEvents},
		CreatePartitionsRequest{sOrders, tEvents, 4}, DeletePartitionsRequest{sNum, NumericID(1), 1},
		PollMessagesRequest{Consumer: single, Stream: sOrders, Topic: tEvents, Partition: PartitionID(1),
			Strategy: PollOffset(100), Count: 10, AutoCommit: true},
		PollMessagesRequest{Consumer: group, Stream: sNum, Topic: NumericID(0), Strategy: PollNext(), Count: 1},
		SendMessagesRequest{Stream: sOrders, Topic: tEvents, Partitioning: ToPartition(2), MessagesCount: 3, Batch: batch},
		SendMessagesRequest{Stream: sNum, Topic: tEvents, Partitioning: ByKey([]byte("key-1")), MessagesCount: 3, Batch: batch},
		SendMessagesRequest{Stream: sNum, Topic: tEvents, Partitioning: Balanced(), MessagesCount: 3, Batch: batch},
		GetConsumerOffsetRequest{single, sOrders, tEvents, PartitionID(0)},
		GetConsumerOffsetRequest{group, sOrders, tEvents, OptionalPartition{}},
		StoreConsumerOffsetRequest{single, sOrders, tEvents, PartitionID(1), 99, AckQuorum},
		DeleteConsumerOffsetRequest{group, sNum, tEvents, PartitionID(1), AckNone},
		GetConsumerGroupRequest{sOrders, tEvents, gWorker}, GetConsumerGroupsRequest{sOrders, tEvents},
		CreateConsumerGroupRequest{sOrders, tEvents, "workers"},
		DeleteConsumerGroupRequest{sOrders, tEvents, NumericID(0)},
		JoinConsumerGroupRequest{sOrders, tEvents, gWorker}, LeaveConsumerGroupRequest{sOrders, tEvents, gWorker},
		SyncConsumerGroupRequest{sNum, NumericID(1), NumericID(2)},
		GetPATsRequest{}, CreatePATRequest{"ci", 3_600_000_000}, DeletePATRequest{"ci"},
	}
}

// sampleMessages returns n messages with payloads of size bytes; every other one has
// user headers.
func sampleMessages(n, size int) []SendMessage {
	hdrs := AppendKVs(nil, []KV{StringKV("trace", StringValue("abc")), StringKV("n", Uint64Value(7))})
	msgs := make([]SendMessage, n)
	for i := range msgs {
		p := make([]byte, size)
		for j := range p {
			p[j] = byte(i + j)
		}
		msgs[i] = SendMessage{ID: Uint128{Lo: uint64(i + 1), Hi: 0xAB}, OriginTimestamp: 1_700_000_000_000_000 + uint64(i)*1000, Payload: p}
		if i%2 == 1 {
			msgs[i].Headers = hdrs
		}
	}
	return msgs
}

// replyCase is one reply payload with its decoder, re-encoder and (optional) strictness.
type replyCase struct {
	name string
	enc  []byte
	dec  func([]byte) ([]byte, error) // decode and re-encode
}

func reenc[T interface{ Append([]byte) []byte }](f func([]byte) (T, error)) func([]byte) ([]byte, error) {
	return func(b []byte) ([]byte, error) {
		v, err := f(b)
		if err != nil {
			return nil, err
		}
		return v.Append(nil), nil
	}
}

func reencFound[T interface{ Append([]byte) []byte }](f func([]byte) (T, bool, error)) func([]byte) ([]byte, error) {
	return func(b []byte) ([]byte, error) {
		v, found, err := f(b)
		if err != nil || !found {
			return nil, err
		}
		return v.Append(nil), nil
	}
}

func reencList[T any](f func([]byte) ([]T, error), enc func([]byte, []T) []byte) func([]byte) ([]byte, error) {
	return func(b []byte) ([]byte, error) {
		v, err := f(b)
		if err != nil {
			return nil, err
		}
		return enc(nil, v), nil
	}
}

func sampleTopic() TopicHeader {
	return TopicHeader{ID: 1, CreatedAt: 1_700_000_000_000_000, PartitionsCount: 2, MessageExpiry: ExpiryNever,
		Compression: CompressionNone, MaxTopicSize: SizeUnlimited, SizeBytes: 1024, MessagesCount: 12, Name: "events",
		ExplicitOptions: opts[:1], DerivedOptions: []KV{StringKV(OptSegmentSize, Uint64Value(1<<30)), StringKV(OptEnforceFsync, BoolValue(false))}}
}

func sampleReplies() []replyCase {
	stream := StreamResponse{ID: 0, CreatedAt: 1_700_000_000_000_000, TopicsCount: 1, SizeBytes: 10, MessagesCount: 2, Name: "orders", Options: opts}
	topic := sampleTopic()
	parts := []PartitionResponse{{0, 1, 1, 5, 100, 6}, {1, 1, 1, 0, 0, 0}}
	return []replyCase{
		{"ClientDetails", ClientDetails{ClientID: 5, UserID: NoUser, Transport: TransportTCP, Address: "127.0.0.1:5000",
			ConsumerGroups: []ClientGroup{{1, 2, 3}}}.Append(nil), reenc(DecodeClientDetails)},
		{"Stats", Stats{ProcessID: 1, CPUUsage: 1.5, MemoryUsage: 1 << 20, Hostname: "h", OSName: "linux", ServerVersion: "0.9.0",
			ServerSemver: 9000, CacheMetrics: []CacheMetric{{1, 2, 3, 4, 5, 0.5}}, ThreadsCount: 8, TotalDiskSpace: 1 << 40,
			TotalCPUUsage: float32(math.Inf(1))}.Append(nil), reenc(DecodeStats)},
		{"LoginReply", LoginReply{UserID: 0, Session: 17, ServerProtocolVersion: ProtocolVersion, ServerVersion: ServerVersion}.Append(nil), reenc(DecodeLoginReply)},
		{"StreamResponse", stream.Append(nil), reenc(DecodeStreamResponse)},
		{"Streams", AppendStreams(nil, []StreamResponse{stream, {ID: 1, Name: "b"}}), reencList(DecodeStreams, AppendStreams)},
		{"StreamDetails", StreamDetails{StreamResponse: stream, Topics: []TopicHeader{topic, {Name: "x"}}}.Append(nil), reencFound(DecodeStreamDetails)},
		{"TopicDetails", TopicDetails{TopicHeader: topic, Partitions: parts}.Append(nil), reencFound(DecodeTopicDetails)},
		{"Topics", AppendTopics(nil, []TopicHeader{topic, topic}), reencList(DecodeTopics, AppendTopics)},
		{"ConsumerOffsetInfo", ConsumerOffsetInfo{1, 100, 42}.Append(nil), reencFound(DecodeConsumerOffsetInfo)},
		{"GroupDetails", GroupDetails{GroupHeader: GroupHeader{ID: 0, PartitionsCount: 3, Name: "workers"},
			Members: []GroupMember{{0, []uint32{0, 1}}, {1, []uint32{2}}, {2, nil}}}.Append(nil), reencFound(DecodeGroupDetails)},
		{"Groups", AppendGroups(nil, []GroupHeader{{0, 3, 2, "a"}, {1, 3, 0, "b"}}), reencList(DecodeGroups, AppendGroups)},
		{"SyncAssignment", SyncAssignment{Generation: 4, Partitions: []uint32{3, 2}}.Append(nil), reencFound(DecodeSyncAssignment)},
		{"RawToken", RawToken{"dG9rZW4="}.Append(nil), reenc(DecodeRawToken)},
		{"PATs", AppendPATs(nil, []PATInfo{{"ci", 0}, {"cd", 1_800_000_000_000_000}}), reencList(DecodePATs, AppendPATs)},
		{"SendMessagesReply", SendMessagesReply{[]SendConfirmation{{0, 1, 2, 300}}}.Append(nil), reenc(DecodeSendMessagesReply)},
	}
}
