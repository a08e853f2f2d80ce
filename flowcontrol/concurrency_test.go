package flowcontrol

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/flowcontrol/clock"
)

func TestConcurrentCallersNeverExceedTheLimit(t *testing.T) {
	c, err := New(oneLevel(4, &LimitResponse{Type: ResponseQueue, Queues: ptr(16), HandSize: ptr(2), QueueLengthLimit: ptr(100)}), clock.Real{}, nil)
	require.NoError(t, err)
	defer c.Close()
	limit, _ := c.Limits("only")
	callers, calls := 32, 200
	if testing.Short() {
		calls = 50
	}
	var running, peak, served atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range calls {
				err := c.Handle(context.Background(), Request{Caller: fmt.Sprint(i % 5)}, func() {
					n := running.Add(1)
					for {
						p := peak.Load()
						if n <= p || peak.CompareAndSwap(p, n) {
							break
						}
					}
					// Held a while, so that callers overlap in their seats
					// whatever the number of CPUs: without the limit, far
					// more than it would be here at once.
					time.Sleep(50 * time.Microsecond)
					running.Add(-1)
					served.Add(1)
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, int64(callers*calls), served.Load(), "every call ran")
	require.LessOrEqual(t, peak.Load(), int64(limit.Current), "never more than the limit at once")
	require.Equal(t, int64(limit.Current), peak.Load(), "the seats were all taken at once: the check had something to see")
	require.Zero(t, c.waitingCount())
	c.mu.Lock()
	defer c.mu.Unlock()
	require.Zero(t, c.levels["only"].qs.SeatsInUse(), "every seat was returned")
}

// TestCallersBeyondTheSeatsWait: with every seat held, the next callers
// wait in the queue, not in a seat; each freed seat lets one in.
func TestCallersBeyondTheSeatsWait(t *testing.T) {
	c, err := New(oneLevel(4, &LimitResponse{Type: ResponseQueue, Queues: ptr(16), HandSize: ptr(2), QueueLengthLimit: ptr(100)}), clock.Real{}, nil)
	require.NoError(t, err)
	defer c.Close()
	limit, _ := c.Limits("only")
	seats := int(limit.Current)
	const callers = 10
	var running atomic.Int64
	release := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for i := range callers {
		wg.Go(func() {
			errs <- c.Handle(context.Background(), Request{Caller: fmt.Sprint(i)}, func() {
				running.Add(1)
				<-release
				running.Add(-1)
			})
		})
	}
	eventually(t, func() bool { return int(running.Load()) == seats && c.waitingCount() == callers-seats }, "every seat held, the others queued")
	time.Sleep(20 * time.Millisecond)
	require.Equal(t, int64(seats), running.Load(), "no one beyond the seats runs")
	release <- struct{}{} // one call ends
	eventually(t, func() bool { return c.waitingCount() == callers-seats-1 && int(running.Load()) == seats }, "one queued caller took the freed seat")
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Zero(t, c.waitingCount())
}
