package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/types"
)

// scripted is a Scoper whose commits answer from a script, for the rules
// Update applies to each answer.
type scripted struct {
	answers []func(ctx context.Context) error
	commits int
}

func (s *scripted) Read(context.Context, []string, []string) (*store.Snapshot, error) {
	return &store.Snapshot{Items: map[string]store.Item{}}, nil
}
func (s *scripted) Txn(context.Context, []store.Cond, []store.Op) error { return errors.New("unused") }
func (s *scripted) Close() error                                        { return nil }
func (s *scripted) Scope(ctx context.Context) store.Scope               { return &scriptedScope{s: s, ctx: ctx} }

type scriptedScope struct {
	s   *scripted
	ctx context.Context
}

func (sc *scriptedScope) Context() context.Context { return sc.ctx }
func (sc *scriptedScope) Close()                   {}
func (sc *scriptedScope) Commit(ctx context.Context, _ []store.Cond, _ []store.Op, _ []string) (*store.Snapshot, error) {
	i := sc.s.commits
	sc.s.commits++
	return nil, sc.s.answers[i](ctx)
}

func TestUpdateReportsOnlyWhatItKnows(t *testing.T) {
	conflict := func(context.Context) error { return store.ErrConflict }
	unknownAtDeadline := func(ctx context.Context) error {
		<-ctx.Done()
		return types.Errorf(types.OutcomeUnknown, "the answer was lost")
	}
	notApplied := func(context.Context) error {
		return types.Wrap(types.Unavailable, store.ErrNotApplied, "etcd")
	}
	landed := func(context.Context) error { return nil }
	put := func(tx *store.Tx) error {
		tx.Put("/k", []byte("v"))
		return nil
	}

	t.Run("an attempt that may have landed after conflicts is outcome unknown, never aborted", func(t *testing.T) {
		s := &scripted{answers: []func(context.Context) error{conflict, conflict, unknownAtDeadline}}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		err := store.Update(ctx, s, []string{"/k"}, put)
		require.Equal(t, types.OutcomeUnknown, types.ClassOf(err), "%v", err)
		require.NotErrorIs(t, err, store.ErrContention)
	})

	t.Run("an attempt found not to have landed is tried again, and the next one lands", func(t *testing.T) {
		s := &scripted{answers: []func(context.Context) error{notApplied, landed}}
		calls := 0
		err := store.Update(context.Background(), s, []string{"/k"}, func(tx *store.Tx) error {
			calls++
			return put(tx)
		})
		require.NoError(t, err)
		require.Equal(t, 2, calls, "decided afresh on a fresh read")
	})

	t.Run("an attempt found not to have landed with no time left is a definite failure", func(t *testing.T) {
		late := func(ctx context.Context) error {
			<-ctx.Done()
			return notApplied(ctx)
		}
		s := &scripted{answers: []func(context.Context) error{late}}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		err := store.Update(ctx, s, []string{"/k"}, put)
		require.ErrorIs(t, err, store.ErrNotApplied)
		require.Equal(t, types.Unavailable, types.ClassOf(err))
	})

	t.Run("conflicts until the deadline are contention, aborted", func(t *testing.T) {
		answers := make([]func(context.Context) error, 0, 1<<16)
		for range cap(answers) {
			answers = append(answers, conflict)
		}
		s := &scripted{answers: answers}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		err := store.Update(ctx, s, []string{"/k"}, put)
		require.ErrorIs(t, err, store.ErrContention)
		require.Equal(t, types.Aborted, types.ClassOf(err))
	})
}
