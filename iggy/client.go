package iggy

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"

	"github.com/ferryio/ferry/iggy/wire"
)

// Identifier names a stream, topic, consumer group or consumer: numeric (server ids,
// 0-based) or by name.
type Identifier = wire.Identifier

// ID returns the numeric identifier n.
func ID(n uint32) Identifier { return wire.NumericID(n) }

// Name returns the identifier that matches the name s exactly.
func Name(s string) Identifier { return wire.NamedID(s) }

// Client is a connection pool to one Iggy server. It is safe for concurrent use. Plain
// requests are spread over WithPoolSize connections, each with one request in flight;
// every Consumer has its own connection. Connections that fail are replaced with
// backoff and a new login (a new client id); callers only notice a delay, except for
// the errors documented on each method.
//
// Group-scoped low-level calls (JoinConsumerGroup, LeaveConsumerGroup,
// SyncConsumerGroup, and PollMessages, StoreOffset and DeleteOffset with a group
// consumer) always use the first pool connection: the Client is one group member. The
// high-level Consumer is the usual way to be a member.
type Client struct {
	cfg   config
	addr  string // as given to Dial
	route route
	// tlsNamed: the TLS config names the server; otherwise each dial uses its host.
	tlsNamed bool

	life context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup

	pool []*link
	rr   atomic.Uint32

	mu        sync.Mutex
	closed    bool
	groups    map[groupKey]struct{} // joined through the primary link
	links     map[*link]struct{}    // every open link: the pool and each Consumer's
	consumers map[*Consumer]struct{}
	producers map[*Producer]struct{}

	bufs chan *pollBuf // free list of poll reply buffers
}

type groupKey struct{ stream, topic, group wire.Identifier }

// Dial connects to addr, logs in and returns a Client. addr is "host:port", or several
// seed addresses of one cluster separated by commas ("a:8090,b:8090"): a connection
// tries them in order until one accepts it. After login every connection reads the
// cluster metadata and, when the node is not the cluster leader, reconnects to the
// leader's TCP address (see the package comment, "Leader awareness"). ctx bounds only
// the first connection; the Client lives until Close. Errors: login refusals
// (errors.Is wire.ErrInvalidCredentials, wire.ErrInvalidPAT), a protocol-version
// mismatch (wire.ErrIncompatibleProtocolVersion, naming both versions), ErrNotConnected
// for dial failures (every seed, or the leader a roster named), or invalid options or
// addresses.
func Dial(ctx context.Context, addr string, opts ...Opt) (*Client, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o.apply(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	seeds, err := parseSeeds(addr)
	if err != nil {
		return nil, fmt.Errorf("iggy: %w", err)
	}
	c := &Client{
		cfg:       cfg,
		addr:      addr,
		route:     route{seeds: seeds},
		tlsNamed:  cfg.tls != nil && cfg.tls.ServerName != "",
		links:     map[*link]struct{}{},
		groups:    map[groupKey]struct{}{},
		consumers: map[*Consumer]struct{}{},
		producers: map[*Producer]struct{}{},
		bufs:      make(chan *pollBuf, 16),
	}
	c.life, c.stop = context.WithCancel(context.Background())
	for i := range cfg.poolSize {
		l := newLink(c, fmt.Sprintf("pool-%d", i))
		c.pool = append(c.pool, l)
	}
	c.pool[0].onConnect = c.rejoin
	first := c.pool[0]
	first.mu.Lock()
	first.dialing = make(chan struct{})
	first.mu.Unlock()
	conn, err := c.connect(ctx, first)
	first.mu.Lock()
	close(first.dialing)
	first.dialing = nil
	if err == nil {
		first.epoch++
		conn.epoch = first.epoch
		first.cur = conn
	}
	first.mu.Unlock()
	if err != nil {
		c.stop()
		c.wg.Wait()
		if errors.Is(err, ErrOutcomeUnknown) || !permanent(err) {
			err = &notConnectedError{err}
		}
		return nil, opErr("connect", addr, err)
	}
	for _, l := range c.pool {
		c.spawn(l.heartbeat)
	}
	return c, nil
}

// spawn runs f in a goroutine counted by Close.
func (c *Client) spawn(f func(ctx context.Context)) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f(c.life)
	}()
}

// Close closes every Consumer and Producer made from c (abandoning their pending
// work), every connection, and waits for every goroutine. Idempotent; requests in
// flight fail with ErrClosed or ErrOutcomeUnknown.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	cons := make([]*Consumer, 0, len(c.consumers))
	for cn := range c.consumers {
		cons = append(cons, cn)
	}
	prods := make([]*Producer, 0, len(c.producers))
	for p := range c.producers {
		prods = append(prods, p)
	}
	c.mu.Unlock()
	done, cancel := context.WithCancel(context.Background())
	cancel() // already expired: abandon pending work
	for _, p := range prods {
		_ = p.Close(done)
	}
	for _, cn := range cons {
		_ = cn.Close(done)
	}
	c.stop()
	for _, l := range c.pool {
		l.close()
	}
	c.wg.Wait()
	return nil
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// connect connects to the first candidate of the route that accepts (the leader if one
// is known, then the seeds in order), logs in with a fresh client id, settles on the
// cluster leader (settle) and runs onConnect there.
func (c *Client) connect(ctx context.Context, l *link) (*conn, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(c.life, cancel)
	defer stop()
	if c.life.Err() != nil {
		return nil, ErrClosed
	}
	addrs, _ := c.route.candidates()
	var cn *conn
	var errs []error
	for _, a := range addrs {
		var err error
		if cn, err = c.dialLogin(ctx, a); err == nil {
			break
		}
		if permanent(err) || ctx.Err() != nil {
			return nil, err
		}
		errs = append(errs, err)
	}
	if cn == nil {
		return nil, errors.Join(errs...)
	}
	cn, err := c.settle(ctx, l, cn)
	if err != nil {
		return nil, err
	}
	_, cn.routeGen = c.route.current()
	if l.onConnect != nil {
		if err := l.onConnect(ctx, cn); err != nil {
			cn.kill(err)
			return nil, fmt.Errorf("after login: %w", err)
		}
	}
	c.cfg.logger.Debug("iggy: connected", "link", l.name, "addr", cn.node, "server", cn.serverV)
	return cn, nil
}

// dialLogin dials addr (TLS if configured), starts the conn's goroutines and logs in.
func (c *Client) dialLogin(ctx context.Context, addr string) (*conn, error) {
	d := net.Dialer{Timeout: c.cfg.timeout}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	if c.cfg.tls != nil {
		cfg := c.cfg.tls
		if !c.tlsNamed {
			cfg = cfg.Clone()
			cfg.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tc := tls.Client(nc, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = nc.Close()
			return nil, fmt.Errorf("tls handshake with %s: %w", addr, err)
		}
		nc = tc
	}
	cn := newConn(nc, c.cfg.maxFrame)
	cn.node = addr
	cn.start(func(f func()) {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			f()
		}()
	})
	if err := c.login(ctx, cn); err != nil {
		cn.kill(err)
		return nil, err
	}
	return cn, nil
}

// login registers cn with a new client id on the calling goroutine.
func (c *Client) login(ctx context.Context, cn *conn) error {
	var id [16]byte
	for {
		if _, err := rand.Read(id[:]); err != nil {
			return fmt.Errorf("client id: %w", err)
		}
		cn.client = wire.Uint128{Lo: binary.LittleEndian.Uint64(id[:8]), Hi: binary.LittleEndian.Uint64(id[8:])}
		if !cn.client.IsZero() {
			break
		}
	}
	info := wire.ClientVersionInfo{ProtocolVersion: c.cfg.protocolVersion, SDKName: c.cfg.sdkName, SDKVersion: c.cfg.sdkVersion}
	var req wire.Request = wire.LoginPasswordRequest{Client: info,
		PasswordCredentials: wire.PasswordCredentials{Username: c.cfg.user, Password: c.cfg.pass}}
	if c.cfg.token != "" {
		req = wire.LoginPATRequest{Client: info, TokenCredentials: wire.TokenCredentials{Token: c.cfg.token}}
	}
	cl := newCall(ctx, c.cfg.timeout, req)
	if err := cn.do(cl); err != nil {
		return fmt.Errorf("login as %q: %w", c.loginName(), err)
	}
	if cl.err != nil {
		var ev *wire.EvictionError
		if errors.As(cl.err, &ev) && ev.Reason == wire.EvictionIncompatibleProtocol {
			return fmt.Errorf("login: protocol version mismatch: client speaks %s, server accepts %s..%s: %w",
				wire.FormatVersion(c.cfg.protocolVersion), wire.FormatVersion(ev.ServerMin), wire.FormatVersion(ev.ServerMax), cl.err)
		}
		return fmt.Errorf("login as %q: %w", c.loginName(), cl.err)
	}
	lr, err := wire.DecodeLoginReply(cl.payload)
	if err != nil {
		return fmt.Errorf("login reply: %w", &protoError{err})
	}
	if lr.Session == 0 {
		return fmt.Errorf("login reply: %w", protocolErrorf("session 0"))
	}
	cn.session, cn.counter, cn.serverV = lr.Session, 1, lr.ServerVersion
	return nil
}

func (c *Client) loginName() string {
	if c.cfg.token != "" {
		return "<token>"
	}
	return c.cfg.user
}

// rejoin is the primary link's onConnect: join again every group joined through it.
func (c *Client) rejoin(ctx context.Context, cn *conn) error {
	c.mu.Lock()
	keys := make([]groupKey, 0, len(c.groups))
	for k := range c.groups {
		keys = append(keys, k)
	}
	c.mu.Unlock()
	for _, k := range keys {
		if _, err := c.onConn(ctx, cn, wire.JoinConsumerGroupRequest{Stream: k.stream, Topic: k.topic, Group: k.group}); err != nil {
			return fmt.Errorf("rejoin group %s: %w", k.group, err)
		}
	}
	return nil
}

// onConn runs req on a specific conn (used by onConnect hooks) and returns a copy-free
// payload valid until the next call on the same buffer (metadata decoders copy).
func (c *Client) onConn(ctx context.Context, cn *conn, req wire.Request) ([]byte, error) {
	cl := newCall(ctx, c.cfg.timeout, req)
	if err := cn.do(cl); err != nil {
		return nil, err
	}
	return cl.payload, cl.err
}

// frameOf appends HeaderSize bytes of header space and req's body to dst[:0].
func frameOf(dst []byte, req wire.Request) []byte {
	dst = append(dst[:0], zeroHeader[:]...)
	return req.Append(dst)
}

var zeroHeader [wire.HeaderSize]byte

// bufPool holds request frames and reply bodies of metadata calls.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// pick returns the pool link with the fewest requests in flight.
func (c *Client) pick() *link {
	if len(c.pool) == 1 {
		return c.pool[0]
	}
	start := int(c.rr.Add(1))
	best := c.pool[start%len(c.pool)]
	for i := 1; i < len(c.pool); i++ {
		l := c.pool[(start+i)%len(c.pool)]
		if l.inflight.Load() < best.inflight.Load() {
			best = l
		}
	}
	return best
}

// call runs req on l (nil = pick from the pool) and hands the payload to decode (which
// must copy what it keeps). idem marks requests safe to repeat after an unknown outcome.
func (c *Client) call(ctx context.Context, l *link, req wire.Request, idem bool, decode func([]byte) error) error {
	if c.isClosed() {
		return ErrClosed
	}
	if l == nil {
		l = c.pick()
	}
	fp := bufPool.Get().(*[]byte)
	bp := bufPool.Get().(*[]byte)
	frame := frameOf(*fp, req)
	r := l.roundTrip(ctx, req.Code(), frame, *bp, idem)
	var err error
	if r.err == nil && decode != nil {
		err = decode(r.payload)
	} else {
		err = r.err
	}
	if r.abandoned {
		return err // the conn kept both buffers
	}
	*fp, *bp = frame[:0], r.body[:0]
	bufPool.Put(fp)
	bufPool.Put(bp)
	return err
}

// simple runs a request whose reply payload is ignored.
func (c *Client) simple(ctx context.Context, l *link, req wire.Request, idem bool, _ any) error {
	return c.call(ctx, l, req, idem, nil)
}

// Ping checks the connection (allowed before login; here it also keeps the session
// alive). Safe for concurrent use.
func (c *Client) Ping(ctx context.Context) error {
	if err := c.simple(ctx, nil, wire.PingRequest{}, true, nil); err != nil {
		return opErr("ping", "", err)
	}
	return nil
}

// GetMe returns the server's view of one pooled connection (client id, user, groups).
func (c *Client) GetMe(ctx context.Context) (wire.ClientDetails, error) {
	var out wire.ClientDetails
	err := c.call(ctx, c.pool[0], wire.GetMeRequest{}, true, func(p []byte) (err error) {
		out, err = wire.DecodeClientDetails(p)
		return decodeErr(err)
	})
	if err != nil {
		return wire.ClientDetails{}, opErr("get me", "", err)
	}
	return out, nil
}

// decodeErr marks a payload that did not decode as a protocol violation.
func decodeErr(err error) error {
	if err == nil {
		return nil
	}
	return &protoError{err}
}
