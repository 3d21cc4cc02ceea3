package iggy

// Leader awareness. Every new connection reads the cluster metadata (GetClusterMetadata,
// code 12) right after login, before its onConnect hook: a roster of more than one node
// whose healthy leader is another node makes the client close it and connect to the
// leader's address for the transport in use (its TCP port), at most maxLeaderRedirects
// times per connect. The leader it learns is the Client's route: later connections go
// there first, then to the seed addresses of Dial in order. A request the server refuses
// with 58 TransientNotAccepted (what a follower answers to replicated requests) makes
// the link read the roster again on that connection; when it names another leader,
// every connection of the Client not on the leader is retired (closed once its request
// in flight is answered) and the request goes to the leader (58 means it was not
// executed). See the package comment, "Leader awareness".

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ferryio/ferry/iggy/wire"
)

const (
	// maxLeaderRedirects bounds the redirects of one connect (upstream's SDKs: 3); then
	// the connection stays where it is.
	maxLeaderRedirects = 3
	// leaderlessPoll is how often a roster with no healthy leader is read again while
	// the client waits for an election (upstream: 250 ms, within 5 s).
	leaderlessPoll = 250 * time.Millisecond
	// leaderRecheck is the least time between two roster reads of one request that
	// keeps being answered 58 (upstream re-checks after 2 s of replays).
	leaderRecheck = 2 * time.Second
)

// parseSeeds splits Dial's address list ("host:port[,host:port...]", spaces around
// entries ignored) into its entries, each checked as host:port.
func parseSeeds(addr string) ([]string, error) {
	var out []string
	for _, a := range strings.Split(addr, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			return nil, fmt.Errorf("address list %q: empty entry", addr)
		}
		if _, _, err := net.SplitHostPort(a); err != nil {
			return nil, fmt.Errorf("address %q: %w", a, err)
		}
		if !containsAddr(out, a) {
			out = append(out, a)
		}
	}
	return out, nil
}

// route is where the Client's connections go: the seeds, and the cluster leader once a
// roster named one. Its mutex is a leaf.
type route struct {
	seeds []string // immutable

	mu     sync.Mutex
	leader string // "" until a multi-node roster named a healthy leader
	gen    uint64 // bumped on every change of leader
}

// candidates returns the addresses a new connection tries in order (the leader, then
// the seeds) and the route's generation.
func (r *route) candidates() ([]string, uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.seeds)+1)
	if r.leader != "" {
		out = append(out, r.leader)
	}
	for _, s := range r.seeds {
		if !containsAddr(out, s) {
			out = append(out, s)
		}
	}
	return out, r.gen
}

// current returns the leader ("" if none is known) and the generation.
func (r *route) current() (string, uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.leader, r.gen
}

// setLeader records addr as the leader and reports whether that changed it.
func (r *route) setLeader(addr string) (changed bool, gen uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.leader != "" && sameAddr(r.leader, addr) {
		return false, r.gen
	}
	r.leader = addr
	r.gen++
	return true, r.gen
}

// verdict is what one roster says about the node a connection is on.
type verdict int

const (
	stayHere        verdict = iota // the node leads, the cluster has one node, or no roster
	leaderHere                     // a multi-node roster names this node the leader
	leaderElsewhere                // a multi-node roster names another healthy leader
	leaderless                     // a multi-node roster with no healthy leader
)

// rosterVerdict reads the roster on cn and judges it. leader is the leader's TCP address
// for leaderElsewhere (and leaderHere); name its node name. An error status or an
// undecodable roster is stayHere (logged at WARN), as upstream: a server that does not
// serve code 12 is used as it is. A leader that serves no TCP port is an error.
func (c *Client) rosterVerdict(ctx context.Context, cn *conn) (v verdict, leader, name string, err error) {
	p, err := c.onConn(ctx, cn, wire.GetClusterMetadataRequest{})
	var m wire.ClusterMetadata
	if err == nil {
		m, err = wire.DecodeClusterMetadata(p)
	}
	if err != nil {
		if ctx.Err() != nil || connLevel(err) {
			return stayHere, "", "", fmt.Errorf("read cluster metadata: %w", err)
		}
		c.cfg.logger.Warn("iggy: cluster metadata unavailable, staying on this node", "node", cn.node, "err", err)
		return stayHere, "", "", nil
	}
	if len(m.Nodes) <= 1 {
		return stayHere, "", "", nil // a single node leads by definition (upstream)
	}
	for _, n := range m.Nodes {
		if n.Role != wire.NodeLeader || n.Status != wire.NodeHealthy {
			continue
		}
		if n.TCPPort == 0 {
			return stayHere, "", n.Name, fmt.Errorf("cluster leader %q at %s serves no TCP port", n.Name, n.IP)
		}
		addr := net.JoinHostPort(n.IP, strconv.Itoa(int(n.TCPPort)))
		if sameAddr(addr, cn.node) || sameAddr(addr, cn.nc.RemoteAddr().String()) {
			return leaderHere, cn.node, n.Name, nil
		}
		return leaderElsewhere, addr, n.Name, nil
	}
	return leaderless, "", "", nil
}

// settle keeps cn if its node leads (or cannot tell) and otherwise replaces it by a
// connection to the leader, logged at INFO with both addresses. A leaderless roster is
// read again every leaderlessPoll for the leaderless wait (then cn stays, logged at
// WARN). It returns the connection to use; cn is closed when it is not that one. An
// unreachable leader is an error naming the leader and the node that named it.
func (c *Client) settle(ctx context.Context, l *link, cn *conn) (*conn, error) {
	waitUntil := time.Now().Add(c.cfg.leaderWait)
	for redirects := 0; ; {
		v, leader, name, err := c.rosterVerdict(ctx, cn)
		if err != nil {
			cn.kill(err)
			return nil, err
		}
		switch v {
		case stayHere:
			return cn, nil
		case leaderHere:
			c.leaderIs(leader)
			return cn, nil
		case leaderless:
			if !time.Now().Before(waitUntil) {
				c.cfg.logger.Warn("iggy: the cluster has no healthy leader, staying on this node",
					"link", l.name, "node", cn.node, "waited", c.cfg.leaderWait)
				return cn, nil
			}
			t := time.NewTimer(leaderlessPoll)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				cn.kill(ctx.Err())
				return nil, ctx.Err()
			}
			continue
		}
		if redirects == maxLeaderRedirects {
			c.cfg.logger.Warn("iggy: too many leader redirects, staying on this node",
				"link", l.name, "node", cn.node, "leader", leader, "redirects", redirects)
			return cn, nil
		}
		redirects++
		c.cfg.logger.Info("iggy: connected to a node that is not the cluster leader, reconnecting to the leader",
			"link", l.name, "node", cn.node, "leader", leader, "leader_name", name)
		from := cn.node
		cn.close()
		cn, err = c.dialLogin(ctx, leader)
		if err != nil {
			return nil, fmt.Errorf("cluster leader %s (named by %s) unreachable: %w", leader, from, err)
		}
		c.leaderIs(leader) // reached: the route changes only now
	}
}

// leaderIs records addr as the leader and, when that changed it, retires every
// connection of the Client that is on another node.
func (c *Client) leaderIs(addr string) {
	changed, _ := c.route.setLeader(addr)
	if !changed {
		return
	}
	c.mu.Lock()
	links := make([]*link, 0, len(c.links))
	for l := range c.links {
		links = append(links, l)
	}
	c.mu.Unlock()
	for _, l := range links {
		l.retireOffLeader()
	}
}

// errLeaderMoved ends a connection to a node that is no longer the leader.
var errLeaderMoved = errors.New("iggy: the cluster leader moved")

// retireOffLeader retires the link's connection if it is on a node other than the
// route's leader: the link reconnects (to the leader) at its next request.
func (l *link) retireOffLeader() {
	leader, gen := l.cl.route.current()
	l.mu.Lock()
	c := l.cur
	if c == nil || c.routeGen == gen || leader == "" || sameAddr(c.node, leader) {
		l.mu.Unlock()
		return
	}
	l.cur = nil
	l.mu.Unlock()
	l.cl.cfg.logger.Info("iggy: the cluster leader moved, moving the connection", "link", l.name, "node", c.node, "leader", leader)
	c.retire(fmt.Errorf("%w to %s", errLeaderMoved, leader))
}

// notAccepted handles a 58 TransientNotAccepted answer on cn: at most every
// leaderRecheck (at once the first time, when *last is zero) it reads the roster on cn,
// and when another node leads it moves the Client there (cn is retired). It returns
// after the transient pause (or ctx's end) so that the caller sends the request again.
func (l *link) notAccepted(ctx context.Context, cn *conn, last *time.Time) {
	if now := time.Now(); last.IsZero() || now.Sub(*last) >= leaderRecheck {
		*last = now
		v, leader, name, err := l.cl.rosterVerdict(ctx, cn)
		if err == nil && v == leaderElsewhere {
			l.cl.cfg.logger.Info("iggy: the server is not the cluster leader (58 TransientNotAccepted), reconnecting to the leader",
				"link", l.name, "node", cn.node, "leader", leader, "leader_name", name)
			l.cl.leaderIs(leader)
			return // cn is retired: the request goes to the leader at once
		}
	}
	t := time.NewTimer(transientPause)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// sameAddr reports whether two host:port addresses name the same endpoint: equal IPs
// (localhost counts as 127.0.0.1) and ports, or equal text.
func sameAddr(a, b string) bool {
	if strings.EqualFold(a, b) {
		return true
	}
	ha, pa, err1 := net.SplitHostPort(a)
	hb, pb, err2 := net.SplitHostPort(b)
	if err1 != nil || err2 != nil || pa != pb {
		return false
	}
	ia, ib := hostIP(ha), hostIP(hb)
	if ia == nil || ib == nil {
		return strings.EqualFold(ha, hb)
	}
	return ia.Equal(ib)
}

func hostIP(h string) net.IP {
	if strings.EqualFold(h, "localhost") {
		return net.IPv4(127, 0, 0, 1)
	}
	return net.ParseIP(h)
}

func containsAddr(list []string, a string) bool {
	for _, x := range list {
		if sameAddr(x, a) {
			return true
		}
	}
	return false
}
