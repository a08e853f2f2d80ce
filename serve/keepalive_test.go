package serve

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/internal/forward"
)

type beats struct {
	mu   sync.Mutex
	got  []byte
	fail bool
}

func (b *beats) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.got = append(b.got, p...)
	if b.fail {
		return 0, errors.New("the client went away")
	}
	return len(p), nil
}

func (b *beats) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.got)
}

func TestKeepalive(t *testing.T) {
	const every = 10 * time.Millisecond
	t.Run("a call answered within one interval is sent nothing", func(t *testing.T) {
		w := &beats{}
		startKeepalive(w, every).stop()
		time.Sleep(3 * every)
		require.Zero(t, w.count())
	})
	t.Run("a call held longer is sent a Waiting byte every interval, and none once stopped", func(t *testing.T) {
		w := &beats{}
		k := startKeepalive(w, every)
		require.Eventually(t, func() bool { return w.count() >= 3 }, time.Second, time.Millisecond)
		k.stop()
		n := w.count()
		time.Sleep(3 * every)
		require.Equal(t, n, w.count(), "nothing after stop")
		for _, b := range w.got {
			require.Equal(t, forward.Waiting, b)
		}
	})
	t.Run("a client gone ends the beats", func(t *testing.T) {
		w := &beats{fail: true}
		k := startKeepalive(w, every)
		defer k.stop()
		require.Eventually(t, func() bool { return w.count() == 1 }, time.Second, time.Millisecond)
		time.Sleep(3 * every)
		require.Equal(t, 1, w.count())
	})
}
