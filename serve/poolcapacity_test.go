package serve

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAPoolCapacityThatIsNoSizeIsRefusedInTheAPIsWords: a capacity the
// command line would read as a flag (a negative size) is refused as a
// capacity, not as "flag provided but not defined", which names a flag the
// HTTP client never gave; and nothing is written.
func TestAPoolCapacityThatIsNoSizeIsRefusedInTheAPIsWords(t *testing.T) {
	srv := poolNodeAPI(t)
	for _, c := range []struct {
		name, body string
		status     int
		says       string
	}{
		{"a negative number of bytes is refused as a capacity", `{"capacity": -5, "if_version": 0}`, 400, `capacity \"-5\" is not a size`},
		{"a negative size is refused as a capacity", `{"capacity": "-1G", "if_version": 0}`, 400, `capacity \"-1G\" is not a size`},
		{"a flag given as the capacity is refused as a capacity", `{"capacity": "--if-version=0", "if_version": 0}`, 400, `capacity \"--if-version=0\" is not a size`},
		{"a size sets the capacity", `{"capacity": "1G", "if_version": 0}`, 200, `"capacity_bytes":1073741824`},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequest("PUT", srv.URL+"/v1/pools/ceph-a/capacity", strings.NewReader(c.body))
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer tok")
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			require.Equal(t, c.status, resp.StatusCode, "%s", body)
			require.Contains(t, string(body), c.says)
			require.NotContains(t, string(body), "flag provided")
		})
	}
}
