package etcdstore

import (
	"errors"
	"fmt"
	"strings"

	"github.com/eru-extend/resources/types"
)

// Credentials etcd refuses are the operator's to fix, not a reason to retry:
// they are unauthenticated (who the client is was not accepted) or
// permission_denied (who it is may not do this), never unavailable. The
// messages name the config keys to look at and never a credential.

// refusedCredentials classifies err when it is etcd refusing the client's
// user name, password or token; it returns nil for any other error.
func refusedCredentials(endpoint string, err error) error {
	var (
		class types.Class
		why   string
	)
	switch {
	case errors.Is(err, errAuthFailed):
		class, why = types.Unauthenticated, "authentication failed: the user name or password is wrong (etcd.auth.username, etcd.auth.password)"
	case errors.Is(err, errUserEmpty):
		class, why = types.Unauthenticated, "etcd requires a user name and password, and none is configured (etcd.auth.username, etcd.auth.password)"
	case errors.Is(err, errInvalidAuthToken):
		class, why = types.Unauthenticated, "etcd refused the client's auth token"
	case errors.Is(err, errPermissionDenied):
		class, why = types.PermissionDenied, "permission denied: the etcd user has no role granting this on the key prefix (etcd.prefix)"
	default:
		return nil
	}
	return types.Wrap(class, errors.New(why), "etcd "+endpoint)
}

// refusedCertificate classifies cause, the reason given for a call whose
// connection never came up, when diagnose found a certificate refused, by
// etcd (the client certificate) or by the client (etcd's certificate); it
// returns nil for any other reason.
func refusedCertificate(endpoint string, cause error) error {
	_, detail, ok := strings.Cut(cause.Error(), "TLS: ")
	if !ok {
		return nil
	}
	var hint string
	switch {
	case strings.Contains(detail, "x509: "), strings.Contains(detail, "failed to verify certificate"):
		hint = "etcd's certificate is not trusted (etcd.ca)"
	case strings.Contains(detail, "certificate"):
		// etcd's alert: certificate required, bad certificate, unknown
		// certificate authority, certificate expired or revoked.
		hint = "etcd refused the client certificate (etcd.cert, etcd.key)"
	default:
		return nil
	}
	return types.Wrap(types.Unauthenticated, fmt.Errorf("%w: %s", cause, hint), "etcd "+endpoint)
}
