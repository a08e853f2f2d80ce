package etcdstore

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/status"
)

// TestEtcdsErrorsAreEtcdsOwn: the statuses the store tells apart are the
// codes and messages etcd sends (its rpctypes).
func TestEtcdsErrorsAreEtcdsOwn(t *testing.T) {
	for _, c := range []struct {
		name string
		ours Status
		etcd error
	}{
		{"an empty key", errEmptyKey, rpctypes.ErrGRPCEmptyKey},
		{"too many operations", errTooManyOps, rpctypes.ErrGRPCTooManyOps},
		{"a duplicate key", errDuplicateKey, rpctypes.ErrGRPCDuplicateKey},
		{"a request too large", errRequestTooLarge, rpctypes.ErrGRPCRequestTooLarge},
		{"too many requests", errTooManyRequests, rpctypes.ErrTooManyRequests}, // what v3rpc's togRPCError answers
		{"too many requests as a status", errTooManyRequestsStatus, rpctypes.ErrGRPCRequestTooManyRequests},
		{"a lease not found", errLeaseNotFound, rpctypes.ErrGRPCLeaseNotFound},
		{"no space", errNoSpace, rpctypes.ErrGRPCNoSpace},
		{"an empty user name", errUserEmpty, rpctypes.ErrGRPCUserEmpty},
		{"failed authentication", errAuthFailed, rpctypes.ErrGRPCAuthFailed},
		{"a permission denied", errPermissionDenied, rpctypes.ErrGRPCPermissionDenied},
		{"auth not enabled", errAuthNotEnabled, rpctypes.ErrGRPCAuthNotEnabled},
		{"an invalid auth token", errInvalidAuthToken, rpctypes.ErrGRPCInvalidAuthToken},
		{"an old auth revision", errAuthOldRevision, rpctypes.ErrGRPCAuthOldRevision},
		{"no leader", errNoLeader, rpctypes.ErrGRPCNoLeader},
		{"a leader change", errLeaderChanged, rpctypes.ErrGRPCLeaderChanged},
		{"a timeout", errTimeout, rpctypes.ErrGRPCTimeout},
		{"a timeout after a leader failed", errTimeoutDueToLeaderFail, rpctypes.ErrGRPCTimeoutDueToLeaderFail},
		{"a timeout after a connection was lost", errTimeoutDueToConnectionLost, rpctypes.ErrGRPCTimeoutDueToConnectionLost},
	} {
		t.Run(c.name+" is etcd's code and message", func(t *testing.T) {
			st := status.Convert(c.etcd)
			require.Equal(t, uint32(st.Code()), uint32(c.ours.Code))
			require.Equal(t, st.Message(), c.ours.Message)
			require.Equal(t, st.Code().String(), c.ours.Code.String())
		})
	}
}
