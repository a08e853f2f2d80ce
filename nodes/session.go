package nodes

import (
	"context"
	"time"

	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/types"
)

// EndSession ends the node's live session on purpose (an agent stopping,
// an operator taking the host down): the node is UNAVAILABLE at once
// instead of when the lease would have lapsed. Ending no session changes
// nothing.
func (r *Registry) EndSession(ctx context.Context, node string, cmd Command) (Answer[*View], error) {
	now := r.Clock.Now()
	return Run(ctx, r.Store, cmd, r.nodeKeys(node), now, func(tx *store.Tx) (*View, error) {
		st, shared, before, err := r.load(tx, node, cmd, now)
		if err != nil {
			return nil, err
		}
		if st.session == nil {
			return before, nil
		}
		tx.Delete(SessionKey(node))
		st.session = nil
		return st.view(r.Resources, shared, r.Policy)
	})
}

// MaxSessionTTL bounds a heartbeat's session: a node whose host died is
// isolable at most this long after its last heartbeat.
const MaxSessionTTL = 10 * time.Minute

// SessionTTL checks a session's time to live and rounds it up to whole
// seconds (etcd counts leases in seconds), so that expires_at says when the
// session really ends on both stores, for a TTL at least etcd's minimum
// lease (2 s with its default election timeout; etcd stretches a shorter
// one to it, docs/nodes.md).
func SessionTTL(ttl time.Duration) (time.Duration, error) {
	if ttl <= 0 || ttl > MaxSessionTTL {
		return 0, types.Invalid("session ttl %s: want more than 0 and at most %s", ttl, MaxSessionTTL)
	}
	return (ttl + time.Second - 1).Truncate(time.Second), nil
}
