package conformance

import (
	"fmt"
	"io"
	"net"
	"sync"

	"github.com/ferryio/ferry/iggy/wire"
)

// storeGate is a TCP proxy between the runtime and the server that can hold or refuse the
// runtime's offset stores. Armed, it stops forwarding a connection at the next
// StoreConsumerOffset request (the frames after it on that connection wait behind it),
// until drop closes the held connections without forwarding anything. Refusing, it
// answers every StoreConsumerOffset request itself with an error status, as a server
// whose storage cannot take the write does, and forwards nothing of it (Iggy's clients
// wait for each reply before the next request, so the answer cannot cross one of the
// server's). Frames it cannot parse are forwarded as they come.
type storeGate struct {
	ln      net.Listener
	target  string
	mu      sync.Mutex
	armed   chan struct{} // non-nil while armed; closed when a store is held
	refuse  uint32        // non-zero: the status every store is answered with
	refused int           // stores answered with refuse
	conns   map[net.Conn]net.Conn
	held    [][2]net.Conn // client and server side of each held connection
	closed  bool
	wg      sync.WaitGroup
}

func startStoreGate(target string) (*storeGate, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("store gate: %w", err)
	}
	g := &storeGate{ln: ln, target: target, conns: map[net.Conn]net.Conn{}}
	g.wg.Add(1)
	go g.accept()
	return g, nil
}

func (g *storeGate) addr() string { return g.ln.Addr().String() }

// arm makes the gate hold the next offset store; the channel is closed when it does.
func (g *storeGate) arm() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed = make(chan struct{})
	return g.armed
}

// refuseStores makes the gate answer every offset store with code (0: forward them
// again).
func (g *storeGate) refuseStores(code uint32) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.refuse = code
}

// refusedStores is how many offset stores the gate answered with an error.
func (g *storeGate) refusedStores() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.refused
}

// drop disarms the gate and closes the connections it held, discarding the held stores.
func (g *storeGate) drop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed = nil
	for _, c := range g.held {
		_ = c[0].Close()
		_ = c[1].Close()
	}
	g.held = nil
}

func (g *storeGate) close() {
	_ = g.ln.Close()
	g.mu.Lock()
	g.closed = true
	for c, sc := range g.conns {
		_ = c.Close()
		_ = sc.Close()
	}
	g.mu.Unlock()
	g.wg.Wait()
}

func (g *storeGate) accept() {
	defer g.wg.Done()
	for {
		cc, err := g.ln.Accept()
		if err != nil {
			return
		}
		sc, err := net.Dial("tcp", g.target)
		if err != nil {
			_ = cc.Close()
			continue
		}
		g.mu.Lock()
		if g.closed {
			g.mu.Unlock()
			_ = cc.Close()
			_ = sc.Close()
			return
		}
		g.conns[cc] = sc
		g.mu.Unlock()
		g.wg.Add(2)
		go func() {
			defer g.wg.Done()
			_, _ = io.Copy(cc, sc)
			_ = cc.Close()
		}()
		go func() {
			defer g.wg.Done()
			g.requests(cc, sc)
			_ = sc.Close()
			_ = cc.Close()
			g.mu.Lock()
			delete(g.conns, cc)
			g.mu.Unlock()
		}()
	}
}

// storeOp is the operation of StoreConsumerOffset requests (a replicated operation: the
// header names it instead of a command code).
var storeOp = wire.CodeStoreConsumerOffset.Operation()

// requests forwards client frames to the server one by one, holding a store when armed
// and answering it when refusing.
func (g *storeGate) requests(cc, sc net.Conn) {
	hdr := make([]byte, wire.HeaderSize)
	for {
		if _, err := io.ReadFull(cc, hdr); err != nil {
			return
		}
		fi, err := wire.ReadFrameInfo(hdr, 0)
		if err != nil { // not a frame the gate understands: plain forwarding from here
			if _, err := sc.Write(hdr); err == nil {
				_, _ = io.Copy(sc, cc)
			}
			return
		}
		frame := make([]byte, fi.Size)
		copy(frame, hdr)
		if _, err := io.ReadFull(cc, frame[wire.HeaderSize:]); err != nil {
			return
		}
		if h, err := wire.DecodeRequestHeader(hdr); err == nil && h.Operation == storeOp {
			g.mu.Lock()
			if g.armed != nil {
				close(g.armed)
				g.armed = nil
				g.held = append(g.held, [2]net.Conn{cc, sc})
				g.mu.Unlock()
				// Held: nothing more of this connection is forwarded; drop closes it.
				_, _ = io.Copy(io.Discard, cc)
				return
			}
			if code := g.refuse; code != 0 {
				g.refused++
				g.mu.Unlock()
				if _, err := cc.Write(wire.AppendStatusReply(nil, h, code)); err != nil {
					return
				}
				continue
			}
			g.mu.Unlock()
		}
		if _, err := sc.Write(frame); err != nil {
			return
		}
	}
}
