package storetest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/mocks"
	"github.com/eru-extend/resources/store"
)

// Opener opens a fresh, empty store for one test; stores it opens with the
// same name share their keys (two processes of one host), others do not.
type Opener func(t *testing.T, name string) store.Store

// Run checks the contract of store.Store against an implementation.
// expiry is how long a key put with a one-second TTL may take to vanish
// (etcd rounds leases up to its minimum TTL).
func Run(t *testing.T, open Opener, expiry time.Duration) {
	ctx := context.Background()

	t.Run("a fresh store reads as empty", func(t *testing.T) {
		s := open(t, "empty")
		snap, err := s.Read(ctx, []string{"/a"}, []string{"/"})
		require.NoError(t, err)
		require.Empty(t, snap.Items)
	})

	t.Run("a key created only if absent is created once", func(t *testing.T) {
		s := open(t, "create")
		require.NoError(t, s.Txn(ctx, []store.Cond{{Key: "/k"}}, []store.Op{{Key: "/k", Value: []byte("1")}}))
		err := s.Txn(ctx, []store.Cond{{Key: "/k"}}, []store.Op{{Key: "/k", Value: []byte("2")}})
		require.ErrorIs(t, err, store.ErrConflict)
		v, ok, err := store.Get(ctx, s, "/k")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "1", string(v))
	})

	t.Run("a stale revision on one key fails the whole transaction", func(t *testing.T) {
		s := open(t, "stale")
		require.NoError(t, s.Txn(ctx, nil, []store.Op{{Key: "/a", Value: []byte("a1")}, {Key: "/b", Value: []byte("b1")}}))
		snap, err := store.GetMany(ctx, s, "/a", "/b")
		require.NoError(t, err)
		require.Equal(t, snap.Items["/a"].ModRevision, snap.Items["/b"].ModRevision, "one transaction, one revision")
		require.NoError(t, s.Txn(ctx, []store.Cond{{Key: "/b", ModRevision: snap.Items["/b"].ModRevision}}, []store.Op{{Key: "/b", Value: []byte("b2")}}))
		err = s.Txn(ctx,
			[]store.Cond{{Key: "/a", ModRevision: snap.Items["/a"].ModRevision}, {Key: "/b", ModRevision: snap.Items["/b"].ModRevision}},
			[]store.Op{{Key: "/a", Value: []byte("a3")}, {Key: "/c", Value: []byte("c3")}})
		require.ErrorIs(t, err, store.ErrConflict)
		after, err := store.GetMany(ctx, s, "/a", "/b", "/c")
		require.NoError(t, err)
		require.Equal(t, "a1", string(after.Items["/a"].Value))
		require.Equal(t, "b2", string(after.Items["/b"].Value))
		require.NotContains(t, after.Items, "/c", "nothing of a failed transaction is applied")
		require.Greater(t, after.Items["/b"].ModRevision, snap.Items["/b"].ModRevision)
	})

	t.Run("puts and deletes of one transaction land together", func(t *testing.T) {
		s := open(t, "multi")
		require.NoError(t, s.Txn(ctx, nil, []store.Op{{Key: "/x", Value: []byte("1")}, {Key: "/y", Value: []byte("1")}}))
		require.NoError(t, s.Txn(ctx, nil, []store.Op{{Key: "/x", Delete: true}, {Key: "/z", Value: []byte("2")}}))
		items, err := store.Range(ctx, s, "/")
		require.NoError(t, err)
		var keys []string
		for _, it := range items {
			keys = append(keys, it.Key)
		}
		require.Equal(t, []string{"/y", "/z"}, keys)
	})

	t.Run("a range reads only what is under its prefix", func(t *testing.T) {
		s := open(t, "range")
		var ops []store.Op
		for _, k := range []string{"/nodes/a", "/nodes/b", "/nodesx", "/resource/storage/a"} {
			ops = append(ops, store.Op{Key: k, Value: []byte(k)})
		}
		require.NoError(t, s.Txn(ctx, nil, ops))
		snap, err := s.Read(ctx, []string{"/resource/storage/a", "/missing"}, []string{"/nodes/"})
		require.NoError(t, err)
		require.Len(t, snap.Items, 3)
		require.Equal(t, []store.Item{snap.Items["/nodes/a"], snap.Items["/nodes/b"]}, snap.Under("/nodes/"))
		other := open(t, "range-other")
		theirs, err := store.Range(ctx, other, "/")
		require.NoError(t, err)
		require.Empty(t, theirs, "another store keeps its own keys")
	})

	t.Run("a read of more keys than one etcd transaction holds is whole", func(t *testing.T) {
		s := open(t, "wide")
		keys := make([]string, 300)
		for i := range keys {
			keys[i] = fmt.Sprintf("/wide/%03d", i)
			require.NoError(t, s.Txn(ctx, nil, []store.Op{{Key: keys[i], Value: []byte(strconv.Itoa(i))}}))
		}
		snap, err := s.Read(ctx, keys, nil)
		require.NoError(t, err)
		require.Len(t, snap.Items, 300)
		require.Equal(t, "299", string(snap.Items["/wide/299"].Value))
	})

	t.Run("a read of many names hands each name's keys over once, with the extras, at one revision", func(t *testing.T) {
		s := open(t, "names")
		const stored = 1500
		var ops []store.Op
		flush := func() {
			require.NoError(t, s.Txn(ctx, nil, ops))
			ops = ops[:0]
		}
		for i := range stored {
			n := fmt.Sprintf("n%04d", i)
			ops = append(ops, store.Op{Key: "/rec/" + n, Value: []byte("r" + n)})
			if i%3 != 0 { // every third name has no key under /reg/
				ops = append(ops, store.Op{Key: "/reg/" + n, Value: []byte("g" + n)})
			}
			if len(ops) >= 100 {
				flush()
			}
		}
		ops = append(ops, store.Op{Key: "/setting", Value: []byte("s")}, store.Op{Key: "/pools/a", Value: []byte("a")}, store.Op{Key: "/pools/b", Value: []byte("b")})
		flush()
		// Every other name, backwards, and one name nothing is stored under.
		var names []string
		for i := stored - 1; i >= 0; i -= 2 {
			names = append(names, fmt.Sprintf("n%04d", i))
		}
		names = append(names, "absent")
		r := store.NameRead{Keys: []string{"/setting", "/unset"}, Prefixes: []string{"/pools/"}, Names: names, Under: []string{"/rec/", "/reg/"}}
		var rev int64
		seen := make([]int, len(names))
		pages := 0
		err := store.ReadNames(ctx, s, r, func(snap *store.Snapshot) error {
			require.Zero(t, pages, "the head comes first")
			rev = snap.Revision
			v, ok := snap.Get("/setting")
			require.True(t, ok)
			require.Equal(t, "s", string(v))
			_, ok = snap.Get("/unset")
			require.False(t, ok)
			require.Len(t, snap.Under("/pools/"), 2)
			return nil
		}, func(snap *store.Snapshot, idx []int) error {
			pages++
			require.Equal(t, rev, snap.Revision)
			for _, i := range idx {
				seen[i]++
				n := names[i]
				v, ok := snap.Get("/rec/" + n)
				require.Equal(t, n != "absent", ok, n)
				if ok {
					require.Equal(t, "r"+n, string(v))
				}
				var num int
				_, scanErr := fmt.Sscanf(n, "n%d", &num)
				v, ok = snap.Get("/reg/" + n)
				require.Equal(t, scanErr == nil && num%3 != 0, ok, n)
				if ok {
					require.Equal(t, "g"+n, string(v))
				}
			}
			return nil
		})
		require.NoError(t, err)
		require.NotZero(t, rev)
		for i, c := range seen {
			require.Equal(t, 1, c, "name %s handed over %d times", names[i], c)
		}
		stop := errors.New("stop")
		calls := 0
		err = store.ReadNames(ctx, s, r, func(*store.Snapshot) error { return nil }, func(*store.Snapshot, []int) error {
			calls++
			return stop
		})
		require.ErrorIs(t, err, stop, "an error from a page ends the read")
		require.Equal(t, 1, calls)
	})

	t.Run("a key put with a time to live vanishes after it", func(t *testing.T) {
		s := open(t, "ttl")
		require.NoError(t, s.Txn(ctx, nil, []store.Op{{Key: "/session", Value: []byte("live"), TTL: time.Second}}))
		_, ok, err := store.Get(ctx, s, "/session")
		require.NoError(t, err)
		require.True(t, ok)
		require.Eventually(t, func() bool {
			_, ok, err := store.Get(ctx, s, "/session")
			return err == nil && !ok
		}, expiry, 100*time.Millisecond)
		require.NoError(t, s.Txn(ctx, []store.Cond{{Key: "/session"}}, []store.Op{{Key: "/session", Value: []byte("again")}}),
			"an expired key counts as absent")
	})

	t.Run("concurrent updates of one key lose nothing", func(t *testing.T) {
		const workers, each = 8, 25
		var wg sync.WaitGroup
		errs := make(chan error, workers*each)
		for w := range workers {
			s := open(t, "counter") // one store per worker, as separate processes would have
			wg.Go(func() {
				for range each {
					errs <- store.Update(ctx, s, []string{"/counter"}, func(tx *store.Tx) error {
						n := 0
						if v, ok := tx.Get("/counter"); ok {
							n, _ = strconv.Atoi(string(v))
						}
						tx.Put("/counter", []byte(strconv.Itoa(n+1)))
						return nil
					})
				}
			})
			_ = w
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		v, _, err := store.Get(ctx, open(t, "counter"), "/counter")
		require.NoError(t, err)
		require.Equal(t, strconv.Itoa(workers*each), string(v))
	})

	t.Run("an update retries after a conflict and commits once", func(t *testing.T) {
		s := &mocks.FlakyStore{Store: open(t, "retry"), Conflicts: 3}
		calls := 0
		err := store.Update(ctx, s, []string{"/k"}, func(tx *store.Tx) error {
			calls++
			tx.Put("/k", []byte("v"))
			return nil
		})
		require.NoError(t, err)
		require.Equal(t, 4, calls)
		require.Equal(t, 4, s.Txns)
	})

	t.Run("an update that keeps conflicting gives up with contention when its deadline passes", func(t *testing.T) {
		s := &mocks.FlakyStore{Store: open(t, "contention"), Conflicts: 1 << 30}
		cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := store.Update(cctx, s, []string{"/k"}, func(tx *store.Tx) error {
			tx.Put("/k", []byte("v"))
			return nil
		})
		require.ErrorIs(t, err, store.ErrContention)
		require.Less(t, time.Since(start), 2*time.Second)
		require.Greater(t, s.Txns, 3, "it retried")
	})

	t.Run("a competing write between read and commit is seen by the retry", func(t *testing.T) {
		inner := open(t, "compete")
		s := &mocks.FlakyStore{Store: inner}
		once := sync.Once{}
		s.BeforeTxn = func() {
			once.Do(func() {
				require.NoError(t, inner.Txn(ctx, nil, []store.Op{{Key: "/n", Value: []byte("10")}}))
			})
		}
		err := store.Update(ctx, s, []string{"/n"}, func(tx *store.Tx) error {
			n := 0
			if v, ok := tx.Get("/n"); ok {
				n, _ = strconv.Atoi(string(v))
			}
			tx.Put("/n", []byte(strconv.Itoa(n+1)))
			return nil
		})
		require.NoError(t, err)
		v, _, err := store.Get(ctx, inner, "/n")
		require.NoError(t, err)
		require.Equal(t, "11", string(v), "the increment applied on top of the competing write")
	})

	t.Run("reading a key not named to an update fails it and writes nothing", func(t *testing.T) {
		s := open(t, "unnamed")
		require.NoError(t, s.Txn(ctx, nil, []store.Op{{Key: "/other", Value: []byte("1")}}))
		calls := 0
		err := store.Update(ctx, s, []string{"/k"}, func(tx *store.Tx) error {
			calls++
			if _, ok := tx.Get("/other"); ok {
				return errors.New("an unnamed key must not read as present")
			}
			tx.Put("/k", []byte("v"))
			return nil
		})
		require.ErrorIs(t, err, store.ErrUnnamedRead)
		require.Contains(t, err.Error(), `"/other"`, "the error names the key")
		require.Equal(t, 1, calls, "not retried")
		_, ok, err := store.Get(ctx, s, "/k")
		require.NoError(t, err)
		require.False(t, ok, "nothing written")
	})

	t.Run("a key written earlier in the same update reads back without being named", func(t *testing.T) {
		s := open(t, "written")
		err := store.Update(ctx, s, []string{"/k"}, func(tx *store.Tx) error {
			tx.Put("/new", []byte("n"))
			v, ok := tx.Get("/new")
			require.True(t, ok)
			require.Equal(t, "n", string(v))
			tx.Put("/k", v)
			return nil
		})
		require.NoError(t, err)
	})

	t.Run("an error from the decision writes nothing", func(t *testing.T) {
		s := open(t, "refuse")
		boom := errors.New("refused")
		err := store.Update(ctx, s, []string{"/k"}, func(tx *store.Tx) error {
			tx.Put("/k", []byte("v"))
			return boom
		})
		require.ErrorIs(t, err, boom)
		_, ok, err := store.Get(ctx, s, "/k")
		require.NoError(t, err)
		require.False(t, ok)
	})
}
