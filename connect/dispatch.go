package connect

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/connect/plugin"
	"github.com/ferryio/ferry/sdk"
)

// maxInFlight is how many batches of one topic a sink may have inside Consume at once,
// for different partitions: the connector's max_in_flight, at most what the sink accepts
// (sdk.ConcurrentSink; a native plugin accepts what its file says, the user's statement
// that the plugin allows it). Unset, it is config.DefaultMaxInFlight for a Go sink that
// accepts concurrent calls and 1 for any other: a native plugin's ABI cannot declare that
// its calls may overlap, so only its file can. A sink that does not accept concurrent calls
// refuses max_in_flight > 1: a restart cannot fix that.
func maxInFlight(cfg *config.Sink, sink sdk.Sink, log *slog.Logger) (int, error) {
	cs, ok := sink.(sdk.ConcurrentSink)
	_, native := sink.(*plugin.Sink)
	return inFlightLimit(cfg.MaxInFlight, "sink", ok && !native, ok, func() int { return cs.MaxInFlight() },
		fmt.Sprintf("the sink %s does not accept concurrent Consume calls (sdk.ConcurrentSink)", cfg.Path), log)
}

// inFlightLimit is the file's max_in_flight (asked), at most what a connector of kind
// accepts: accepts says it declares a limit, limit returns it. One that declares none (or
// less than 1) refuses more than 1 with refusal; above its limit the limit is used, with a
// warning. asked 0 (unset) is config.DefaultMaxInFlight, at most the limit, when declared
// says the connector itself declared that it accepts more than one; 1 otherwise.
func inFlightLimit(asked uint32, kind string, declared, accepts bool, limit func() int, refusal string, log *slog.Logger) (int, error) {
	if asked == 0 {
		if !declared {
			return 1, nil
		}
		return max(min(limit(), config.DefaultMaxInFlight()), 1), nil
	}
	n := int(asked)
	if n == 1 {
		return 1, nil
	}
	if !accepts || limit() < 1 {
		return 0, fmt.Errorf("%w: max_in_flight = %d: %s", errPermanent, n, refusal)
	}
	if most := limit(); n > most {
		log.Warn("max_in_flight is more than the "+kind+" accepts; using the "+kind+"'s limit", "max_in_flight", n, kind+"_limit", most)
		n = most
	}
	return n, nil
}

// consumeConcurrently is consumeLoop for max_in_flight = n > 1: up to n batches inside
// Consume at once, never two of one partition, each partition's batches delivered in the
// order they were polled. Batches that cannot start yet (their partition is busy, or n
// are in flight) wait in a queue of at most 2n, taken from the (unbuffered) channel while
// it has room, and start oldest first. The partition table (pollAhead = 2) pauses polling
// a partition while two batches of it wait, so the poll goroutine fetches the next
// batches of the partitions whose current one is in Consume, and, as fewer than n
// partitions busy leave fewer than 2n batches waiting, the queue always has room when a
// slot is free: one partition's waiting batches never stall another's. Memory stays
// bounded (n in Consume, 2n waiting, one in the poller's hand), a single busy partition
// holds what it holds with n = 1 (one in Consume, one waiting, one polled behind it), and
// max_uncommitted still pauses each partition. The stop rules are consumeLoop's: once the
// soft stop began no new batch starts (except under after_polling), and every batch taken
// is released.
func (tc *topicConsumer) consumeConcurrently(soft, hard context.Context) {
	n := len(tc.convs)
	free := make(chan *converter, n)
	for _, c := range tc.convs {
		free <- c
	}
	done := make(chan uint32, n)
	busy := make(map[uint32]bool, n)
	var queue []polledBatch
	inFlight := 0
	start := func() {
		for i := 0; i < len(queue) && inFlight < n; {
			b := queue[i]
			if busy[b.Partition] {
				i++
				continue
			}
			queue = slices.Delete(queue, i, i+1)
			if !tc.deliverable(soft, hard) {
				b.release()
				continue
			}
			busy[b.Partition] = true
			inFlight++
			conv := <-free
			go func() {
				tc.deliver(hard, b, conv)
				b.release()
				free <- conv
				done <- b.Partition
			}()
		}
	}
	in := tc.batches
	for in != nil || inFlight > 0 {
		var recv <-chan polledBatch
		if in != nil && len(queue) < 2*n {
			recv = in
		}
		select {
		case b, ok := <-recv:
			if !ok {
				in = nil
				break
			}
			queue = append(queue, b)
		case p := <-done:
			busy[p] = false
			inFlight--
		}
		start()
	}
	for _, b := range queue { // never started: the stop came first
		b.release()
	}
}
