package flowcontrol

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

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
	require.Zero(t, c.waitingCount())
	c.mu.Lock()
	defer c.mu.Unlock()
	require.Zero(t, c.levels["only"].qs.SeatsInUse(), "every seat was returned")
}
