package connect

import (
	"context"
	"errors"
	"fmt"

	"github.com/ferryio/ferry/sdk"
)

// errEarlierUndelivered is the ack error of a batch read after one that was not delivered:
// it was not sent, so that nothing past the gap reaches Iggy or is acknowledged.
var errEarlierUndelivered = errors.New("an earlier batch was not delivered")

// pipelined is loop for max_in_flight = n > 1 (an sdk.PipelinedSource): up to n batches
// read and not yet acked. Three goroutines, each in read order: this one reads and encodes,
// a sender sends the batches in order (each batch's partitions at once; the batches waiting
// when it is free together, as one send), an acker saves each batch's state and acks it once
// it and every earlier batch were sent. A batch that leaves a gap (not delivered, or
// rejected under on_failure = stop) stops the sender: every later batch is nacked unsent and
// reading ends.
func (s *sourceRunner) pipelined(n int) error {
	slots := make(chan struct{}, n) // one per batch read and not yet finished
	toSend := make(chan *pendingBatch, n)
	toFinish := make(chan *pendingBatch, n)
	// reading ends at the stop, or when the acker ends the loop (a failure).
	reading, halt := context.WithCancel(s.life.soft)
	defer halt()
	go func() {
		defer close(toFinish)
		var gap error
		for p := range toSend {
			group := append(make([]*pendingBatch, 0, n), p)
		waiting:
			for len(group) < n {
				select {
				case q, ok := <-toSend:
					if !ok {
						break waiting
					}
					group = append(group, q)
				default:
					break waiting
				}
			}
			gap = s.sendGroup(group, gap)
			for _, q := range group {
				toFinish <- q
			}
		}
	}()
	var stop error
	acked := make(chan struct{})
	go func() {
		defer close(acked)
		ended := false
		for p := range toFinish {
			if ended {
				s.ack(p.ack, fmt.Errorf("%w: %w", errStopping, errEarlierUndelivered))
			} else if ok, err := s.finish(p); !ok || err != nil {
				ended, stop = true, err
				halt()
			}
			<-slots
		}
	}()
	var end error // ErrEndOfInput, or a permanent read error
	for reading.Err() == nil {
		select {
		case slots <- struct{}{}:
		case <-reading.Done():
			continue
		}
		var (
			batch sdk.SourceBatch
			ack   sdk.AckFunc
		)
		err := s.read(reading, &batch, &ack)
		// read returns nil without a batch only when reading ended: then a batch is one that
		// carries something to send or ack.
		if err == nil && (reading.Err() == nil || ack != nil || batch.Messages != nil || batch.State != nil) {
			// A batch, even one returned as reading ended: the sender sends it (or nacks it
			// after a gap) and the acker finishes it in its turn.
			if ack == nil {
				ack = sdk.NoAck
			}
			toSend <- s.prepare(batch, ack)
			continue
		}
		<-slots
		if errors.Is(err, sdk.ErrEndOfInput) || (err != nil && reading.Err() == nil) {
			end = err
		}
		break
	}
	close(toSend)
	<-acked
	if stop != nil {
		return stop
	}
	return end
}

// sendGroup sends a group of batches read one after another: each run of batches with
// messages to send goes as one send (sendBatches). gap is the error of an earlier batch
// that left a gap (nil: none); once one did, the batches after it are not sent but marked
// undelivered. It returns the gap after the group.
func (s *sourceRunner) sendGroup(group []*pendingBatch, gap error) error {
	for i := 0; i < len(group); {
		if gap != nil {
			group[i].unsent = fmt.Errorf("%w: %w", errEarlierUndelivered, gap)
			i++
			continue
		}
		j := i + 1
		for group[i].toSend() && j < len(group) && group[j].toSend() {
			j++
		}
		s.sendBatches(group[i:j], false)
		for _, p := range group[i:j] {
			if gap == nil && p.blocksLater(s.failure) {
				gap = errors.Join(p.unsent, p.badErr, p.rejected)
			}
		}
		i = j
	}
	return gap
}
