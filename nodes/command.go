package nodes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/types"
)

// CommandTTL is how long an operator command's answer is kept for replays.
const CommandTTL = 24 * time.Hour

// Command identifies one operator command for replays and guards it with an
// expected version.
type Command struct {
	// ID, when set, makes the command replayable: the same ID with the same
	// Args answers the first answer and writes nothing; with other Args it
	// is already_exists.
	ID string
	// Args is the command and its arguments, canonical.
	Args string
	// IfVersion, when set, refuses the command with aborted unless the
	// version it guards is this one.
	IfVersion *int64
	// DryRun decides the command on the current records and answers what
	// it would do, or its refusal, writing nothing (and keeping nothing
	// for replays).
	DryRun bool
}

// errDryRun ends a dry run's transaction before it commits.
var errDryRun = errors.New("dry run: nothing written")

// commandRecord is what is kept of a command at /commands/<id>.
type commandRecord struct {
	Args   string          `json:"args"`
	Answer json.RawMessage `json:"answer"`
	At     time.Time       `json:"at"`
}

// CommandKey is where a command's answer is kept.
func CommandKey(id string) string { return CommandPrefix + id }

// CheckVersion refuses with aborted when the command expects another version.
func (c Command) CheckVersion(what string, have int64) error {
	if c.IfVersion != nil && *c.IfVersion != have {
		return types.Errorf(types.Aborted, "%s is at version %d, not %d", what, have, *c.IfVersion)
	}
	return nil
}

// Answer is an operator command's answer: the typed value, and the JSON
// it is printed as (for a replay, the first answer exactly as it was kept).
type Answer[T any] struct {
	Value T
	JSON  json.RawMessage
	// ReplayOf, set on a replay, is when the kept answer was first given.
	ReplayOf *time.Time
}

// Run runs one operator command as a transaction over keys: fn decides and
// returns the answer; its writes, together with the answer kept for
// replays, commit only if none of the keys changed. A replay of the command
// answers the kept answer without calling fn.
func Run[T any](ctx context.Context, s store.Store, cmd Command, keys []string, now time.Time, fn func(tx *store.Tx) (T, error)) (Answer[T], error) {
	if cmd.DryRun {
		return dryRun(ctx, s, keys, fn)
	}
	if cmd.ID != "" {
		keys = append(keys, CommandKey(cmd.ID))
	}
	var answer Answer[T]
	err := store.Update(ctx, s, keys, func(tx *store.Tx) error {
		answer = Answer[T]{}
		if cmd.ID != "" {
			if data, ok := tx.Get(CommandKey(cmd.ID)); ok {
				var rec commandRecord
				if err := json.Unmarshal(data, &rec); err != nil {
					return types.Wrap(types.Internal, err, "command "+cmd.ID+" record is corrupt")
				}
				if rec.Args != cmd.Args {
					return types.Errorf(types.AlreadyExists, "command id %s was used for %q", cmd.ID, rec.Args)
				}
				if err := json.Unmarshal(rec.Answer, &answer.Value); err != nil {
					return types.Wrap(types.Internal, err, "command "+cmd.ID+" answer is corrupt")
				}
				answer.JSON = rec.Answer
				at := rec.At
				answer.ReplayOf = &at
				return nil
			}
		}
		out, err := fn(tx)
		if err != nil {
			return err
		}
		data, err := encode(out)
		if err != nil {
			return err
		}
		answer = Answer[T]{Value: out, JSON: data}
		if cmd.ID != "" {
			rec, err := encode(commandRecord{Args: cmd.Args, Answer: data, At: now.UTC()}) // not json.Marshal: it would HTML-escape the kept answer
			if err != nil {
				return err
			}
			tx.PutTTL(CommandKey(cmd.ID), rec, CommandTTL)
		}
		return nil
	})
	return answer, err
}

// dryRun decides fn on a consistent read of keys and discards its writes.
func dryRun[T any](ctx context.Context, s store.Store, keys []string, fn func(tx *store.Tx) (T, error)) (Answer[T], error) {
	var answer Answer[T]
	err := store.Update(ctx, s, keys, func(tx *store.Tx) error {
		out, err := fn(tx)
		if err != nil {
			return err
		}
		data, err := encode(out)
		if err != nil {
			return err
		}
		answer = Answer[T]{Value: out, JSON: data}
		return errDryRun
	})
	if errors.Is(err, errDryRun) {
		return answer, nil
	}
	return Answer[T]{}, err
}

func encode(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSpace(buf.Bytes()), nil
}
