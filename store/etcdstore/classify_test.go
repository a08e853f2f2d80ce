package etcdstore

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/types"
)

func TestRefusedCredentials(t *testing.T) {
	for _, c := range []struct {
		name  string
		err   error
		class types.Class
		want  string
	}{
		{"a wrong password", errAuthFailed, types.Unauthenticated, "authentication failed: the user name or password is wrong"},
		{"a wrong password, wrapped", fmt.Errorf("call: %w", errAuthFailed), types.Unauthenticated, "authentication failed"},
		{"no user name on an etcd with auth on", errUserEmpty, types.Unauthenticated, "etcd requires a user name and password"},
		{"a token etcd no longer accepts", fmt.Errorf("get: %w", errInvalidAuthToken), types.Unauthenticated, "etcd refused the client's auth token"},
		{"a user without a role on the prefix", errPermissionDenied, types.PermissionDenied, "permission denied: the etcd user has no role"},
	} {
		t.Run(c.name+" is "+string(c.class), func(t *testing.T) {
			err := refusedCredentials("http://e:2379", c.err)
			require.Equal(t, c.class, types.ClassOf(err))
			require.ErrorContains(t, err, "etcd http://e:2379: "+c.want)
		})
	}
	t.Run("anything else is not a refusal of credentials", func(t *testing.T) {
		require.NoError(t, refusedCredentials("e", errors.New("connection reset by peer")))
		require.NoError(t, refusedCredentials("e", errTimeout))
		require.NoError(t, refusedCredentials("e", Status{codeInvalidArgument, "authentication failed"}), "not etcd's message")
	})
}

func TestRefusedCertificate(t *testing.T) {
	for _, c := range []struct{ name, why, want string }{
		{"no client certificate", "TLS: tls: certificate required", "tls: certificate required: etcd refused the client certificate (etcd.cert, etcd.key)"},
		{"a client certificate of another CA", "TLS: tls: unknown certificate authority", "tls: unknown certificate authority: etcd refused the client certificate"},
		{"a bad client certificate, as a remote alert", "TLS: remote error: tls: bad certificate", "etcd refused the client certificate"},
		{"a server certificate of another CA", "TLS: tls: failed to verify certificate: x509: certificate signed by unknown authority", "x509: certificate signed by unknown authority: etcd's certificate is not trusted (etcd.ca)"},
	} {
		t.Run(c.name+" is unauthenticated", func(t *testing.T) {
			err := refusedCertificate("https://e:2379", fmt.Errorf("unreachable: no connection within 2s: %s", c.why))
			require.Equal(t, types.Unauthenticated, types.ClassOf(err))
			require.ErrorContains(t, err, "etcd https://e:2379: unreachable: no connection within 2s: TLS: ")
			require.ErrorContains(t, err, c.want)
		})
	}
	for _, why := range []string{"connection refused", "the port answers, but etcd did not", "TLS: EOF", "TLS: i/o timeout"} {
		t.Run(fmt.Sprintf("%q is not a refused certificate", why), func(t *testing.T) {
			require.NoError(t, refusedCertificate("e", fmt.Errorf("unreachable: no connection within 1s: %s", why)))
		})
	}
}
