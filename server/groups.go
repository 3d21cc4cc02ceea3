package server

import (
	"slices"
	"sync"
	"time"

	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/server/store"
)

// Consumer-group membership and assignment, kept in memory: definitions and
// offsets live in the store, memberships end with the server (as upstream).

type groupKey struct{ stream, topic, group uint32 }

type member struct {
	id     uint32
	client wire.ClientID
	parts  []uint32 // owned partitions in assignment order, pending revocations included
}

// revocation is a partition that moves from one member to another once the group has
// committed what it polled (or the rebalancing timeout passes).
type revocation struct {
	from, to uint32 // member ids
	deadline time.Time
}

type groupState struct {
	generation uint64
	members    []*member             // ascending id
	pending    map[uint32]revocation // partition → revocation
	polled     map[uint32]uint64     // partition → highest offset a group poll returned
}

type groups struct {
	s  *Server
	mu sync.Mutex
	m  map[groupKey]*groupState
}

func newGroups(s *Server) *groups { return &groups{s: s, m: make(map[groupKey]*groupState)} }

func (g *groups) state(k groupKey) *groupState {
	gs := g.m[k]
	if gs == nil {
		gs = &groupState{pending: map[uint32]revocation{}, polled: map[uint32]uint64{}}
		g.m[k] = gs
	}
	return gs
}

func (gs *groupState) member(client wire.ClientID) *member {
	for _, m := range gs.members {
		if m.client == client {
			return m
		}
	}
	return nil
}

func (gs *groupState) byID(id uint32) *member {
	for _, m := range gs.members {
		if m.id == id {
			return m
		}
	}
	return nil
}

// active returns m's partitions that are not pending revocation (what Sync returns).
func (gs *groupState) active(m *member) []uint32 {
	out := make([]uint32, 0, len(m.parts))
	for _, p := range m.parts {
		if _, ok := gs.pending[p]; !ok {
			out = append(out, p)
		}
	}
	return out
}

// fullRebalance: generation += 1; partition i goes to the (i mod M)-th member.
func (gs *groupState) fullRebalance(parts []uint32) {
	gs.generation++
	clear(gs.pending)
	for _, m := range gs.members {
		m.parts = nil
	}
	if len(gs.members) == 0 {
		return
	}
	for i, p := range parts {
		m := gs.members[i%len(gs.members)]
		m.parts = append(m.parts, p)
	}
}

// join adds client (a no-op when it is a member) with the cooperative algorithm.
// inFlight reports whether a partition has data polled past the group's committed
// offset. It returns false when the client was already a member.
func (gs *groupState) join(client wire.ClientID, parts []uint32, inFlight func(uint32) bool, deadline time.Time) bool {
	if gs.member(client) != nil {
		return false
	}
	id := uint32(0)
	for gs.byID(id) != nil {
		id++
	}
	gs.members = append(gs.members, &member{id: id, client: client})
	slices.SortFunc(gs.members, func(a, b *member) int { return int(a.id) - int(b.id) })
	gs.generation++
	P, M := len(parts), len(gs.members)
	if P == 0 || M == 0 {
		return true
	}
	// (1) Unassigned partitions go round-robin to members holding none.
	owned := map[uint32]bool{}
	for _, m := range gs.members {
		for _, p := range m.parts {
			owned[p] = true
		}
	}
	var idle []*member
	for _, m := range gs.members {
		if len(m.parts) == 0 {
			idle = append(idle, m)
		}
	}
	if len(idle) == 0 {
		idle = gs.members
	}
	i := 0
	for _, p := range parts {
		if !owned[p] {
			m := idle[i%len(idle)]
			m.parts = append(m.parts, p)
			i++
		}
	}
	// (2) Members holding nothing (and not awaiting a revocation) take the surplus.
	targets := map[uint32]bool{}
	for _, r := range gs.pending {
		targets[r.to] = true
	}
	idle = idle[:0:0]
	for _, m := range gs.members {
		if len(m.parts) == 0 && !targets[m.id] {
			idle = append(idle, m)
		}
	}
	if len(idle) == 0 {
		return true
	}
	fair, rem := P/M, P%M
	var surplus []struct {
		p    uint32
		from *member
	}
	for _, m := range gs.members {
		own := gs.active(m)
		n := len(own)
		allow := fair
		if rem > 0 {
			allow = fair + 1
		}
		if n > fair && rem > 0 {
			rem--
		}
		for k := 0; k < n-allow; k++ {
			surplus = append(surplus, struct {
				p    uint32
				from *member
			}{own[n-1-k], m})
		}
	}
	for i, sp := range surplus {
		to := idle[i%len(idle)]
		if inFlight(sp.p) {
			gs.pending[sp.p] = revocation{from: sp.from.id, to: to.id, deadline: deadline}
			continue
		}
		sp.from.parts = slices.DeleteFunc(sp.from.parts, func(x uint32) bool { return x == sp.p })
		to.parts = append(to.parts, sp.p)
	}
	return true
}

// completeRevocation moves a pending partition to its target.
func (gs *groupState) completeRevocation(p uint32) {
	r, ok := gs.pending[p]
	if !ok {
		return
	}
	delete(gs.pending, p)
	if from := gs.byID(r.from); from != nil {
		from.parts = slices.DeleteFunc(from.parts, func(x uint32) bool { return x == p })
	}
	if to := gs.byID(r.to); to != nil {
		to.parts = append(to.parts, p)
	}
	gs.generation++
}

// remove drops client from the group; it reports whether it was a member.
func (gs *groupState) remove(client wire.ClientID) bool {
	n := len(gs.members)
	gs.members = slices.DeleteFunc(gs.members, func(m *member) bool { return m.client == client })
	return len(gs.members) != n
}

// --- registry operations (callers hold Server.meta where noted) ---

// topicParts returns the topic's partition ids, or nil if it is gone.
func (g *groups) topicParts(stream, topic uint32) []uint32 {
	t, err := g.s.st.Topic(stream, topic)
	if err != nil {
		return nil
	}
	return partitionIDs(t)
}

// inFlight reports whether the group polled partition p past its committed offset.
func (g *groups) inFlight(k groupKey, gs *groupState, p uint32) bool {
	polled, ok := gs.polled[p]
	if !ok {
		return false
	}
	stored, found, err := g.s.st.ConsumerOffset(store.PartitionKey{Stream: k.stream, Topic: k.topic, Partition: p},
		store.Consumer{Kind: store.KindGroup, ID: k.group})
	return err == nil && (!found || stored < polled)
}

// join adds client to the group (caller holds Server.meta).
func (g *groups) join(k groupKey, client wire.ClientID) {
	parts := g.topicParts(k.stream, k.topic)
	g.mu.Lock()
	defer g.mu.Unlock()
	gs := g.state(k)
	deadline := time.Now().Add(g.s.cfg.RebalancingTimeout)
	gs.join(client, parts, func(p uint32) bool { return g.inFlight(k, gs, p) }, deadline)
}

// leave removes client from the group with a full rebalance; false if not a member
// (caller holds Server.meta).
func (g *groups) leave(k groupKey, client wire.ClientID) bool {
	parts := g.topicParts(k.stream, k.topic)
	g.mu.Lock()
	defer g.mu.Unlock()
	gs := g.m[k]
	if gs == nil || !gs.remove(client) {
		return false
	}
	gs.fullRebalance(parts)
	return true
}

// removeClient drops client from every group (logout, disconnect, eviction).
func (g *groups) removeClient(client wire.ClientID) {
	g.mu.Lock()
	var keys []groupKey
	for k, gs := range g.m {
		if gs.member(client) != nil {
			keys = append(keys, k)
		}
	}
	g.mu.Unlock()
	for _, k := range keys {
		g.leave(k, client)
	}
}

// rebalanceTopic fully rebalances every group of a topic whose partitions changed.
func (g *groups) rebalanceTopic(stream, topic uint32) {
	parts := g.topicParts(stream, topic)
	g.mu.Lock()
	defer g.mu.Unlock()
	for k, gs := range g.m {
		if k.stream == stream && k.topic == topic {
			for p := range gs.polled {
				if !slices.Contains(parts, p) {
					delete(gs.polled, p)
				}
			}
			gs.fullRebalance(parts)
		}
	}
}

func (g *groups) dropWhere(match func(groupKey) bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for k := range g.m {
		if match(k) {
			delete(g.m, k)
		}
	}
}

// forgetPolled clears the in-flight tracking of matching groups (after a purge).
func (g *groups) forgetPolled(match func(groupKey) bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for k, gs := range g.m {
		if match(k) {
			clear(gs.polled)
			for p := range gs.pending {
				gs.completeRevocation(p)
			}
		}
	}
}

func (g *groups) isMember(client wire.ClientID) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, gs := range g.m {
		if gs.member(client) != nil {
			return true
		}
	}
	return false
}

// memberships lists the groups client belongs to (GetMe).
func (g *groups) memberships(client wire.ClientID) []wire.ClientGroup {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []wire.ClientGroup
	for k, gs := range g.m {
		if gs.member(client) != nil {
			out = append(out, wire.ClientGroup{StreamID: k.stream, TopicID: k.topic, GroupID: k.group})
		}
	}
	slices.SortFunc(out, func(a, b wire.ClientGroup) int {
		if a.StreamID != b.StreamID {
			return int(a.StreamID) - int(b.StreamID)
		}
		if a.TopicID != b.TopicID {
			return int(a.TopicID) - int(b.TopicID)
		}
		return int(a.GroupID) - int(b.GroupID)
	})
	return out
}

// members returns the group's members for GroupDetails.
func (g *groups) members(k groupKey) []wire.GroupMember {
	g.mu.Lock()
	defer g.mu.Unlock()
	gs := g.m[k]
	if gs == nil {
		return nil
	}
	out := make([]wire.GroupMember, 0, len(gs.members))
	for _, m := range gs.members {
		out = append(out, wire.GroupMember{ID: m.id, Partitions: slices.Clone(m.parts)})
	}
	return out
}

// assignment answers Sync: found is false when client is not a member.
func (g *groups) assignment(k groupKey, client wire.ClientID) (wire.SyncAssignment, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	gs := g.m[k]
	if gs == nil {
		return wire.SyncAssignment{}, false
	}
	m := gs.member(client)
	if m == nil {
		return wire.SyncAssignment{}, false
	}
	return wire.SyncAssignment{Generation: gs.generation, Partitions: gs.active(m)}, true
}

// canPoll reports whether client may poll partition p of the group (owned, not pending).
func (g *groups) canPoll(k groupKey, client wire.ClientID, p uint32) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	gs := g.m[k]
	if gs == nil {
		return false
	}
	m := gs.member(client)
	if m == nil || !slices.Contains(m.parts, p) {
		return false
	}
	_, pending := gs.pending[p]
	return !pending
}

// owns reports whether client owns p, pending revocations included (offset commits).
func (g *groups) owns(k groupKey, client wire.ClientID, p uint32) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	gs := g.m[k]
	if gs == nil {
		return false
	}
	m := gs.member(client)
	return m != nil && slices.Contains(m.parts, p)
}

// polled records that a group poll returned messages up to offset last on p.
func (g *groups) polled(k groupKey, p uint32, last uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	gs := g.state(k)
	if cur, ok := gs.polled[p]; !ok || last > cur {
		gs.polled[p] = last
	}
}

// committed completes a pending revocation of p once the group's stored offset covers
// what it polled.
func (g *groups) committed(k groupKey, p uint32, stored uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	gs := g.m[k]
	if gs == nil {
		return
	}
	if _, ok := gs.pending[p]; ok && stored >= gs.polled[p] {
		gs.completeRevocation(p)
	}
}

// expireRevocations completes every revocation whose deadline passed.
func (g *groups) expireRevocations(now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, gs := range g.m {
		for p, r := range gs.pending {
			if !now.Before(r.deadline) {
				gs.completeRevocation(p)
			}
		}
	}
}
