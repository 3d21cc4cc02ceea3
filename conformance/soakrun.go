package conformance

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand"
	"path/filepath"
	"time"
)

// A sink soak (postgres-soak, s3-soak) runs one sink into a target the suite reads back
// (soakTarget), SIGKILLs the runtime again and again while data flows, and judges the
// target's tally at the end. What the two share is here: the start, the stream between
// kills and the judgement; each picks its own kills.

// soakStart builds the soak's fixture for c (bind hands it to the target before anything
// starts), puts a store gate between the runtime and the server, starts the first
// instance and produces the first 10 messages. The caller closes the gate and kills the
// instance running at its end; on an error nothing is left running.
func (r *Runner) soakStart(ctx context.Context, scenario, mode string, c connector, bind func(*fixture)) (*fixture, *storeGate, *proc, error) {
	f, err := r.newFixture(ctx, scenario, mode, 2, c)
	if err != nil {
		return nil, nil, nil, err
	}
	bind(f)
	gate, err := startStoreGate(r.addr)
	if err != nil {
		return nil, nil, nil, err
	}
	f.addr = gate.addr()
	p, err := startInstance(f)
	if err == nil {
		if err = f.produce(ctx, 10, nil); err != nil {
			p.kill()
		}
	}
	if err != nil {
		gate.close()
		return nil, nil, nil, err
	}
	return f, gate, p, nil
}

// startInstance writes the fixture's config and starts one runtime instance.
func startInstance(f *fixture) (*proc, error) {
	path, err := f.writeConfig(nil)
	if err != nil {
		return nil, err
	}
	return f.r.startRuntime(path, filepath.Join(filepath.Dir(path), "runtime.log"))
}

// soakStream produces between two kills: four batches of 10 to 29 messages spread over a
// random 100–400 ms, so a kill lands while data flows (a pace, not a wait).
func soakStream(ctx context.Context, f *fixture, rng *mrand.Rand) error {
	interval := 100*time.Millisecond + time.Duration(rng.Int63n(int64(300*time.Millisecond)))
	for range 4 {
		if err := f.produce(ctx, 10+rng.Intn(20), nil); err != nil {
			return err
		}
		time.Sleep(interval / 4)
	}
	return nil
}

// soakFinish produces the last 50 messages, waits until the target holds everything (a
// run that never completes, a sink stuck on its errors, is judged too: the tally after
// the stop says what is missing), stops the runtime and judges the tally. how says how
// the kills went; noStore counts the held-store kills that saw no store in time.
func soakFinish(ctx context.Context, expected string, f *fixture, s soakTarget, p *proc, kills, noStore int, how string) Result {
	if err := f.produce(ctx, 50, nil); err != nil {
		return broken(expected, err)
	}
	waitErr := waitWritten(ctx, f, s, p)
	if err := p.term(20 * time.Second); errors.Is(err, errNoExit) {
		return broken(expected, fmt.Errorf("stopping the runtime at the end: %w", err))
	}
	t, err := s.tally(ctx)
	if err != nil {
		return broken(expected, err)
	}
	if noStore > 0 {
		how += fmt.Sprintf(", %d of them after no offset store came within %s", noStore, heldStoreWait)
	}
	obs := fmt.Sprintf("%d SIGKILLs (%s); %s", kills, how, t)
	if waitErr != nil {
		obs += "; " + waitErr.Error()
	}
	res := Result{Expected: expected, Observed: obs, Lost: t.lost, Duplicated: t.duplicated, Kills: kills, Verdict: Fail}
	if waitErr == nil && t.lost == 0 && t.duplicated == 0 && t.unknown == 0 && t.corrupt == 0 {
		res.Verdict = Pass
	}
	return res
}

// alternateKills streams and kills kills times, alternating a random moment (even kills)
// and a held offset store (odd ones), restarting the runtime after each; it returns the
// instance running at the end and how the held-store kills went.
func alternateKills(ctx context.Context, f *fixture, s soakTarget, p *proc, gate *storeGate, rng *mrand.Rand, kills int) (last *proc, held, ahead, noStore int, err error) {
	for k := 0; k < kills; k++ {
		if err := soakStream(ctx, f, rng); err != nil {
			return p, held, ahead, noStore, err
		}
		if k%2 == 1 {
			seen, past, err := killAtHeldStore(ctx, f, s, p, gate)
			if err != nil {
				return p, held, ahead, noStore, fmt.Errorf("kill %d: %w", k+1, err)
			}
			if !seen {
				noStore++
			} else {
				held++
				if past {
					ahead++
				}
			}
		} else {
			p.kill()
		}
		if p, err = startInstance(f); err != nil {
			return p, held, ahead, noStore, fmt.Errorf("restart after kill %d: %w", k+1, err)
		}
	}
	return p, held, ahead, noStore, nil
}
