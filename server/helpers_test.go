package server_test

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/server"
	"github.com/ferryio/ferry/server/servertest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// tclient is a minimal lock-step raw-frame client built on wire, so the server's tests
// do not depend on the iggy client package.
type tclient struct {
	t       testing.TB
	nc      net.Conn
	client  wire.ClientID
	session uint64
	counter uint64 // metadata request counter
}

func newClientID() wire.ClientID {
	var b [16]byte
	_, _ = rand.Read(b[:])
	id := wire.ClientID{Lo: binary.LittleEndian.Uint64(b[:]), Hi: binary.LittleEndian.Uint64(b[8:])}
	if id.IsZero() {
		id.Lo = 1
	}
	return id
}

func dial(t testing.TB, s *server.Server) *tclient {
	t.Helper()
	nc, err := net.DialTimeout("tcp", s.Addr(), 5*time.Second)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	return &tclient{t: t, nc: nc, client: newClientID(), counter: 1}
}

// login dials and logs in as root.
func login(t testing.TB, s *server.Server) *tclient {
	t.Helper()
	c := dial(t, s)
	if _, err := c.login(servertest.Username, servertest.Password); err != nil {
		t.Fatalf("login: %v", err)
	}
	return c
}

func (c *tclient) login(user, pass string) (wire.LoginReply, error) {
	return c.loginRaw(wire.LoginPasswordRequest{
		Client:              wire.ClientVersionInfo{ProtocolVersion: wire.ProtocolVersion, SDKName: "ferry-test", SDKVersion: "0.0.1"},
		PasswordCredentials: wire.PasswordCredentials{Username: user, Password: pass},
	}.Append(nil))
}

func (c *tclient) loginRaw(body []byte) (wire.LoginReply, error) {
	h := wire.RequestHeader{Client: c.client, Operation: wire.OpRegister}
	_, p, err := c.roundTrip(h, body)
	if err != nil {
		return wire.LoginReply{}, err
	}
	lr, err := wire.DecodeLoginReply(p)
	if err == nil {
		c.session = lr.Session
	}
	return lr, err
}

// header builds the header for code: request numbers count up from 1 per session, the
// login being 0.
func (c *tclient) header(code wire.Code) wire.RequestHeader {
	h := wire.RequestHeader{Client: c.client, Session: c.session, Operation: code.Operation(), Request: c.counter}
	if h.Operation == wire.OpNonReplicated {
		h.Code = code
	}
	if h.Operation.IsMetadata() || h.Operation == wire.OpLogout {
		c.counter++
		h.Request = c.counter
	}
	return h
}

// call sends r and returns the reply payload (or the error the reply maps to).
func (c *tclient) call(r wire.Request) ([]byte, error) {
	_, p, err := c.roundTrip(c.header(r.Code()), r.Append(nil))
	return p, err
}

// must is call that fails the test on error.
func (c *tclient) must(r wire.Request) []byte {
	c.t.Helper()
	p, err := c.call(r)
	if err != nil {
		c.t.Fatalf("%v: %v", r.Code(), err)
	}
	return p
}

// wantErr calls r and checks the error is want (errors.Is).
func (c *tclient) wantErr(r wire.Request, want error) {
	c.t.Helper()
	_, err := c.call(r)
	if !errors.Is(err, want) {
		c.t.Fatalf("%v: got error %v, want %v", r.Code(), err, want)
	}
}

func (c *tclient) roundTrip(h wire.RequestHeader, body []byte) (wire.ReplyHeader, []byte, error) {
	c.t.Helper()
	frame := wire.AppendRequestHeader(nil, h, len(body))
	frame = append(frame, body...)
	hdr, rbody, err := c.rawRoundTrip(frame)
	if err != nil {
		return wire.ReplyHeader{}, nil, err
	}
	rh, p, err := wire.DecodeReplyFrame(hdr, rbody)
	if err == nil && rh.Request != h.Request {
		c.t.Fatalf("reply request %d, sent %d", rh.Request, h.Request)
	}
	if err == nil && rh.Operation != h.Operation.CommittedForm() {
		// A success is committed: it carries the committed form (CreateTopic →
		// CreateTopicWithAssignments), as a real server's does.
		c.t.Fatalf("reply operation %v, sent %v", rh.Operation, h.Operation)
	}
	return rh, p, err
}

func (c *tclient) rawRoundTrip(frame []byte) ([]byte, []byte, error) {
	_ = c.nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.nc.Write(frame); err != nil {
		return nil, nil, err
	}
	return c.readFrame()
}

func (c *tclient) readFrame() ([]byte, []byte, error) {
	_ = c.nc.SetDeadline(time.Now().Add(10 * time.Second))
	hdr := make([]byte, wire.HeaderSize)
	if _, err := io.ReadFull(c.nc, hdr); err != nil {
		return nil, nil, err
	}
	fi, err := wire.ReadFrameInfo(hdr, 0)
	if err != nil {
		return nil, nil, err
	}
	body := make([]byte, fi.BodyLen())
	if _, err := io.ReadFull(c.nc, body); err != nil {
		return nil, nil, err
	}
	return hdr, body, nil
}

// evictionReason returns the reason of an *wire.EvictionError, or 0.
func evictionReason(err error) wire.EvictionReason {
	var ev *wire.EvictionError
	if errors.As(err, &ev) {
		return ev.Reason
	}
	return 0
}

// send sends msgs (payloads) to the partition and returns the base offset.
func (c *tclient) send(stream, topic wire.Identifier, p wire.Partitioning, payloads ...string) uint64 {
	c.t.Helper()
	msgs := make([]wire.SendMessage, len(payloads))
	for i, pl := range payloads {
		msgs[i] = wire.SendMessage{Payload: []byte(pl), OriginTimestamp: uint64(time.Now().UnixMicro())}
	}
	body, err := wire.AppendSendMessages(nil, stream, topic, p, msgs, newClientID)
	if err != nil {
		c.t.Fatalf("encode send: %v", err)
	}
	_, pl, err := c.roundTrip(c.header(wire.CodeSendMessages), body)
	if err != nil {
		c.t.Fatalf("send: %v", err)
	}
	r, err := wire.DecodeSendMessagesReply(pl)
	if err != nil || len(r.Confirmations) != 1 {
		c.t.Fatalf("send reply %v: %v", r, err)
	}
	return r.Confirmations[0].BaseOffset
}

type polled struct {
	head     wire.PollReply
	offsets  []uint64
	payloads []string
}

func (c *tclient) poll(q wire.PollMessagesRequest) polled {
	c.t.Helper()
	p := c.must(q)
	head, msgs, err := wire.DecodePollReply(p, nil)
	if err != nil {
		c.t.Fatalf("decode poll: %v", err)
	}
	if err := wire.VerifyPollChecksums(p); err != nil {
		c.t.Fatalf("poll checksums: %v", err)
	}
	out := polled{head: head}
	for _, m := range msgs {
		out.offsets = append(out.offsets, m.Offset)
		out.payloads = append(out.payloads, string(m.Payload))
	}
	return out
}

// setup creates stream "s" (id 0) and topic "t" (id 0) with n partitions.
func setup(t testing.TB, c *tclient, partitions uint32) (wire.Identifier, wire.Identifier) {
	t.Helper()
	c.must(wire.CreateStreamRequest{Name: "s"})
	c.must(wire.CreateTopicRequest{Stream: wire.NamedID("s"), PartitionsCount: partitions, Name: "t"})
	return wire.NamedID("s"), wire.NamedID("t")
}

func closeServer(t testing.TB, s *server.Server) {
	t.Helper()
	if err := s.Close(context.Background()); err != nil {
		t.Fatalf("close: %v", err)
	}
}
