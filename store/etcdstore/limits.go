package etcdstore

import (
	"errors"
	"fmt"
	"strings"

	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/types"
)

// A transaction etcd refuses for its size is no outage: sent again it is
// refused again. It is resource_exhausted, naming what the transaction
// held and the limits of a default etcd, so that an operator sees which
// write outgrew which flag.

// txnShape is what one transaction holds: its compares, its operations and
// the bytes of their keys and values.
type txnShape struct {
	compares, ops int
	bytes         int64
}

// shapeOf measures a transaction of conds and ops (the guard's compare and
// put included).
func shapeOf(prefix string, conds []store.Cond, ops []store.Op) txnShape {
	sh := txnShape{compares: len(conds) + 1, ops: len(ops) + 1}
	for _, c := range conds {
		sh.bytes += int64(len(prefix) + len(c.Key))
	}
	for _, op := range ops {
		sh.bytes += int64(len(prefix) + len(op.Key) + len(op.Value))
	}
	return sh
}

// tooLargeToSend reports whether the client refused to send a request above
// its size limit, so that nothing left the process: the client sends at
// most 2 MiB (sendLimit), whatever etcd's --max-request-bytes. (A server
// that could not send its answer says "grpc: trying to send…" after
// applying the request: not this.)
func tooLargeToSend(err error) bool {
	var st Status
	return errors.As(err, &st) && st.Code == codeResourceExhausted && strings.HasPrefix(st.Message, tooLargeMessage)
}

// refusedSize classifies err when it is etcd refusing a transaction as too
// large (--max-txn-ops, --max-request-bytes): nothing was applied. It
// returns nil for any other error.
func refusedSize(endpoint string, err error, sh txnShape) error {
	var which string
	switch {
	case errors.Is(err, errTooManyOps):
		which = "more operations"
	case errors.Is(err, errRequestTooLarge), tooLargeToSend(err):
		which = "more bytes"
	default:
		return nil
	}
	why := fmt.Errorf("the write is one transaction of %d compares and %d operations (%d bytes of keys and values), %s than etcd takes in one transaction (a default etcd takes 128 operations of each kind, --max-txn-ops, and 1.5 MiB, --max-request-bytes); nothing was written: %w",
		sh.compares, sh.ops, sh.bytes, which, reason(err))
	return types.Wrap(types.ResourceExhausted, why, "etcd "+endpoint)
}
