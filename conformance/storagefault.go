package conformance

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ferryio/ferry/iggy/wire"
)

// storage-fault: the server cannot write (its disk is full) while the runtime delivers,
// so every offset store is refused with 4006 CannotSaveMessagesToSegment. A runtime must
// keep the partition and retry the store: a runtime that takes the refusal for a lost
// partition and polls it again from the stored offset redelivers the same messages for as
// long as the fault lasts (Ferry did: 10 s of it wrote 243,000 lines for 26,000 offsets).
//
// With the suite's embedded server the fault is the server's own (server.Config.WriteFault:
// every write refused, as on a full disk); with --server, or another Config.StorageFaultCode,
// the runtime's connections go through a storeGate that answers every offset store with
// that code itself.

const (
	faultMessages = 300 // produced before the start
	faultBegins   = 250 // recorded messages when the fault begins; the rest are delivered through it
	faultAttempts = 20  // offset stores refused before the fault ends, at least
)

// storageFault is the suite's storage fault on its embedded server: while on, the server
// refuses every write (WriteFault), and the offset stores that arrive meanwhile are
// counted (ReplyDelay, which holds nothing).
type storageFault struct {
	on     atomic.Bool
	stores atomic.Int64
}

var errDiskFull = fmt.Errorf("no space left on device (conformance storage-fault)")

func (s *storageFault) write() error {
	if s.on.Load() {
		return errDiskFull
	}
	return nil
}

func (s *storageFault) request(code wire.Code) time.Duration {
	if code == wire.CodeStoreConsumerOffset && s.on.Load() {
		s.stores.Add(1)
	}
	return 0
}

// faultSwitch turns one run's fault on and off and counts the stores it refused.
type faultSwitch struct {
	how     string
	set     func(on bool)
	refused func() int
}

func runStorageFault(ctx context.Context, r *Runner, mode string) Result {
	expected := fmt.Sprintf("offset stores refused with %d (a full disk) for %d attempts while %d messages are delivered: "+
		"after it every offset stored, lost 0, duplicated at most the messages unstored when it began, however long it lasted",
		r.cfg.StorageFaultCode, faultAttempts, faultMessages)
	sw, addr, closeGate, err := r.faultSwitch()
	if err != nil {
		return broken(expected, err)
	}
	defer closeGate()
	defer sw.set(false)
	// The probe sleeps in every consume, so the fault begins with messages still to
	// deliver. A runtime that polls a partition again after each refused store delivers
	// at least one batch again per refusal: far more than the window of unstored messages.
	f, p, err := r.begin(ctx, "storage-fault", mode, setup{partitions: 1, before: faultMessages, addr: addr,
		conn: connector{batch: 10, maxRetries: 3, probe: map[string]string{"sleep_ms": "20"}}})
	if err != nil {
		return outcome(expected, err)
	}
	defer p.kill()
	if err := f.wait(ctx, fmt.Sprintf("%d recorded messages", faultBegins), func() bool { return f.count('M') >= faultBegins }); err != nil {
		return broken(expected, err)
	}
	sw.set(true)
	// A store sent before the fault began may still land; after the first refused one the
	// stored offset is the fault's.
	if err := f.wait(ctx, "a refused offset store", func() bool { return sw.refused() > 0 }); err != nil {
		return broken(expected, err)
	}
	s, err := f.stored(ctx)
	if err != nil {
		return broken(expected, err)
	}
	atStart := s[0]
	err = f.wait(ctx, fmt.Sprintf("%d refused offset stores", faultAttempts), func() bool { return sw.refused() >= faultAttempts })
	if err != nil {
		return broken(expected, fmt.Errorf("%w (%s; stored offset %d when it began; %s)", err, sw.how, atStart, f.tally()))
	}
	s, err = f.stored(ctx)
	if err != nil {
		return broken(expected, err)
	}
	if s[0] != atStart {
		return broken(expected, fmt.Errorf("the stored offset moved from %d to %d during the fault: it did not hold (%s)", atStart, s[0], sw.how))
	}
	during := f.tally()
	refused := sw.refused()
	sw.set(false)
	window := faultMessages - int(atStart+1) // delivered or to deliver, not stored, when the fault began
	return f.finish(ctx, expected, func(t tally) (string, bool) {
		obs := fmt.Sprintf("%s; %d offset stores refused; stored offset %d when it began (%d messages unstored); "+
			"during the fault delivered %d, duplicated %d; at the end %s", sw.how, refused, atStart, window, during.delivered, during.duplicated, t)
		return obs, t.clean() && t.lost == 0 && t.duplicated <= window
	}, p)
}

// faultSwitch returns the storage fault of this run and the address the runtime dials:
// the embedded server's own fault, or a storeGate in front of --server (closeGate closes
// it; a no-op without one).
func (r *Runner) faultSwitch() (sw faultSwitch, addr string, closeGate func(), err error) {
	code := r.cfg.StorageFaultCode
	if r.server != nil && code == wire.ErrCannotSaveMessagesToSegment.Code {
		base := r.fault.stores.Load()
		return faultSwitch{
			how:     "the embedded server refused every write",
			set:     func(on bool) { r.fault.on.Store(on) },
			refused: func() int { return int(r.fault.stores.Load() - base) },
		}, "", func() {}, nil
	}
	g, err := startStoreGate(r.addr)
	if err != nil {
		return faultSwitch{}, "", nil, err
	}
	return faultSwitch{
		how: fmt.Sprintf("a proxy answered every offset store with %d", code),
		set: func(on bool) {
			if on {
				g.refuseStores(code)
			} else {
				g.refuseStores(0)
			}
		},
		refused: g.refusedStores,
	}, g.addr(), g.close, nil
}
