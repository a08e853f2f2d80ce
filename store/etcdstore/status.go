package etcdstore

import (
	"errors"
	"fmt"
)

// Status is an error status of a gRPC call: its code and message, as etcd
// (or the client, for a call it could not make) gives them. Two statuses
// are the same error when both are equal, so that errors.Is finds etcd's
// errors below (their messages are etcd's, etcdserver/api/v3rpc/rpctypes).
type Status struct {
	Code    Code
	Message string
}

func (s Status) Error() string {
	return fmt.Sprintf("rpc error: code = %s desc = %s", s.Code, s.Message)
}

// Code is a gRPC status code.
type Code uint32

// The gRPC codes the store tells apart.
const (
	codeOK                 Code = 0
	codeCanceled           Code = 1
	codeUnknown            Code = 2
	codeInvalidArgument    Code = 3
	codeDeadlineExceeded   Code = 4
	codeNotFound           Code = 5
	codePermissionDenied   Code = 7
	codeResourceExhausted  Code = 8
	codeFailedPrecondition Code = 9
	codeInternal           Code = 13
	codeUnavailable        Code = 14
	codeUnauthenticated    Code = 16
)

var codeNames = map[Code]string{
	codeOK: "OK", codeCanceled: "Canceled", codeUnknown: "Unknown", codeInvalidArgument: "InvalidArgument",
	codeDeadlineExceeded: "DeadlineExceeded", codeNotFound: "NotFound", 6: "AlreadyExists",
	codePermissionDenied: "PermissionDenied", codeResourceExhausted: "ResourceExhausted",
	codeFailedPrecondition: "FailedPrecondition", 10: "Aborted", 11: "OutOfRange", 12: "Unimplemented",
	codeInternal: "Internal", codeUnavailable: "Unavailable", 15: "DataLoss", codeUnauthenticated: "Unauthenticated",
}

func (c Code) String() string {
	if n, ok := codeNames[c]; ok {
		return n
	}
	return fmt.Sprintf("Code(%d)", uint32(c))
}

// etcd's errors the store tells apart.
var (
	errEmptyKey        = Status{codeInvalidArgument, "etcdserver: key is not provided"}
	errTooManyOps      = Status{codeInvalidArgument, "etcdserver: too many operations in txn request"}
	errDuplicateKey    = Status{codeInvalidArgument, "etcdserver: duplicate key given in txn request"}
	errRequestTooLarge = Status{codeInvalidArgument, "etcdserver: request is too large"}
	// etcd refuses a request before proposing it while its applied index
	// lags: its KV service answers rpctypes.ErrTooManyRequests, which is
	// no gRPC status, so that grpc sends it with code Unknown.
	errTooManyRequests = Status{codeUnknown, "etcdserver: too many requests"}
	// The same refusal as rpctypes names its status.
	errTooManyRequestsStatus = Status{codeResourceExhausted, "etcdserver: too many requests"}
	errLeaseNotFound         = Status{codeNotFound, "etcdserver: requested lease not found"}
	// A write refused for --quota-backend-bytes (before it is proposed, or
	// when applied once the NOSPACE alarm is up: nothing was applied), or
	// one applied as the quota ran out (quotaApplierV3: it landed). See
	// scope.noSpace.
	errNoSpace = Status{codeResourceExhausted, "etcdserver: mvcc: database space exceeded"}

	errUserEmpty        = Status{codeInvalidArgument, "etcdserver: user name is empty"}
	errAuthFailed       = Status{codeInvalidArgument, "etcdserver: authentication failed, invalid user ID or password"}
	errPermissionDenied = Status{codePermissionDenied, "etcdserver: permission denied"}
	errAuthNotEnabled   = Status{codeFailedPrecondition, "etcdserver: authentication is not enabled"}
	errInvalidAuthToken = Status{codeUnauthenticated, "etcdserver: invalid auth token"}
	errAuthOldRevision  = Status{codeInvalidArgument, "etcdserver: revision of auth store is old"}

	errNoLeader                   = Status{codeUnavailable, "etcdserver: no leader"}
	errLeaderChanged              = Status{codeUnavailable, "etcdserver: leader changed"}
	errTimeout                    = Status{codeUnavailable, "etcdserver: request timed out"}
	errTimeoutDueToLeaderFail     = Status{codeUnavailable, "etcdserver: request timed out, possibly due to previous leader failure"}
	errTimeoutDueToConnectionLost = Status{codeUnavailable, "etcdserver: request timed out, possibly due to connection lost"}
)

// sendLimit is the largest request the client sends (clientv3's default):
// a larger one is refused before anything leaves the process, whatever
// etcd's --max-request-bytes.
const sendLimit = 2 << 20

// tooLargeMessage begins the status of a request refused for sendLimit.
const tooLargeMessage = "trying to send message larger than max"

// codeOf is the status code of err: codeUnknown when it carries none.
func codeOf(err error) Code {
	var st Status
	if errors.As(err, &st) {
		return st.Code
	}
	return codeUnknown
}
