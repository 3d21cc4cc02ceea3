package conformance

import (
	"fmt"
	"math/rand"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// ProxyFaults are the faults a Proxy injects. Zero values turn a fault off.
type ProxyFaults struct {
	// Latency delays every chunk forwarded in either direction.
	Latency time.Duration
	// ResetEvery resets (RST) one random open connection about this often.
	ResetEvery time.Duration
	// StallEvery holds the server's replies on one random connection about this often,
	// for Stall.
	StallEvery, Stall time.Duration
	// Seed makes the choice of victims repeatable.
	Seed int64
}

// ProxyStats counts the faults injected so far.
type ProxyStats struct {
	Connections, Resets, Stalls, Drops int64
}

// Proxy is a TCP fault proxy: it forwards connections to a target and injects faults.
type Proxy struct {
	ln     net.Listener
	target string
	faults ProxyFaults

	mu     sync.Mutex
	conns  map[*pair]struct{}
	rng    *rand.Rand
	closed bool

	conns64, resets, stalls, drops atomic.Int64
	down                           atomic.Bool
	stop                           chan struct{}
	wg                             sync.WaitGroup
}

type pair struct {
	client, server net.Conn
	stallUntil     atomic.Int64 // unix nanos
}

// StartProxy listens on a free loopback port and forwards to target.
func StartProxy(target string, faults ProxyFaults) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	p := &Proxy{ln: ln, target: target, faults: faults, conns: map[*pair]struct{}{},
		rng: rand.New(rand.NewSource(faults.Seed)), stop: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	if faults.ResetEvery > 0 {
		p.wg.Add(1)
		go p.every(faults.ResetEvery, p.reset)
	}
	if faults.StallEvery > 0 && faults.Stall > 0 {
		p.wg.Add(1)
		go p.every(faults.StallEvery, p.stall)
	}
	return p, nil
}

// Addr is the address runtimes dial instead of the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Stats returns the faults injected so far.
func (p *Proxy) Stats() ProxyStats {
	return ProxyStats{Connections: p.conns64.Load(), Resets: p.resets.Load(), Stalls: p.stalls.Load(), Drops: p.drops.Load()}
}

// DropAll closes every open connection (a dropped network).
func (p *Proxy) DropAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.client.Close()
		_ = c.server.Close()
		p.drops.Add(1)
	}
}

// SetDown takes the server away (true) — every open connection is dropped and new ones
// are closed as soon as they are accepted — or brings it back (false).
func (p *Proxy) SetDown(down bool) {
	p.down.Store(down)
	if down {
		p.DropAll()
	}
}

// Close stops accepting, closes every connection and waits for the proxy's goroutines.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	close(p.stop)
	p.mu.Unlock()
	_ = p.ln.Close()
	p.DropAll()
	p.wg.Wait()
}

func (p *Proxy) every(d time.Duration, fn func()) {
	defer p.wg.Done()
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			fn()
		}
	}
}

// victim picks a random open connection (nil when none); p.mu must be held.
func (p *Proxy) victim() *pair {
	if len(p.conns) == 0 {
		return nil
	}
	i := p.rng.Intn(len(p.conns))
	for c := range p.conns {
		if i == 0 {
			return c
		}
		i--
	}
	return nil
}

// ResetAll resets (RST) every open connection.
func (p *Proxy) ResetAll() {
	p.mu.Lock()
	var all []*pair
	for c := range p.conns {
		all = append(all, c)
	}
	p.mu.Unlock()
	for _, c := range all {
		p.resetConn(c)
	}
}

// StallAll holds the server's replies on every open connection for d.
func (p *Proxy) StallAll(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.stallUntil.Store(time.Now().Add(d).UnixNano())
		p.stalls.Add(1)
	}
}

// Release ends every stall now.
func (p *Proxy) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.stallUntil.Store(0)
	}
}

func (p *Proxy) reset() {
	p.mu.Lock()
	c := p.victim()
	p.mu.Unlock()
	if c != nil {
		p.resetConn(c)
	}
}

func (p *Proxy) resetConn(c *pair) {
	if tc, ok := c.client.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // close sends RST
	}
	_ = c.client.Close()
	_ = c.server.Close()
	p.resets.Add(1)
}

func (p *Proxy) stall() {
	p.mu.Lock()
	c := p.victim()
	p.mu.Unlock()
	if c == nil {
		return
	}
	c.stallUntil.Store(time.Now().Add(p.faults.Stall).UnixNano())
	p.stalls.Add(1)
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		cc, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.down.Load() {
			_ = cc.Close()
			p.drops.Add(1)
			continue
		}
		sc, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = cc.Close()
			continue
		}
		c := &pair{client: cc, server: sc}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = cc.Close()
			_ = sc.Close()
			return
		}
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		p.conns64.Add(1)
		p.wg.Add(2)
		go p.pipe(c, sc, cc, true)
		go p.pipe(c, cc, sc, false)
	}
}

// pipe copies src to dst with the configured faults; replies (server to client) honour
// stalls. When either side ends, both are closed.
func (p *Proxy) pipe(c *pair, dst, src net.Conn, reply bool) {
	defer p.wg.Done()
	defer func() {
		_ = c.client.Close()
		_ = c.server.Close()
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if d := p.faults.Latency; d > 0 {
				if !p.sleep(d) {
					return
				}
			}
			// A stall is checked every few milliseconds, so that Release ends it at once.
			for reply && time.Now().Before(time.Unix(0, c.stallUntil.Load())) {
				if !p.sleep(5 * time.Millisecond) {
					return
				}
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil { // EOF or a reset: both sides end
			return
		}
	}
}

// sleep waits d or until the proxy closes (false).
func (p *Proxy) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-p.stop:
		return false
	}
}
