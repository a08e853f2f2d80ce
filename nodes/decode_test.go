package nodes

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func sampleRegistrations() []*Registration {
	now := time.Date(2026, 11, 30, 23, 1, 2, 345678900, time.UTC)
	seen := now.Add(time.Minute)
	fresh := NewRegistration("node-1", now)
	busy := NewRegistration("nöde-2", now)
	busy.Admission, busy.Drain, busy.Isolated, busy.IsolatedIncarnation = Admitted, true, true, 3
	busy.Incarnation, busy.BootID, busy.Version, busy.SessionEver, busy.LastSeen = 7, "boot-a", 42, true, &seen
	busy.UpdatedAt = now.In(time.FixedZone("x", 3600))
	return []*Registration{fresh, busy, {}}
}

func TestDecodeRegistrationFast(t *testing.T) {
	t.Run("a registration as json.Marshal writes it takes the fast path and reads as encoding/json reads it", func(t *testing.T) {
		for _, r := range sampleRegistrations() {
			data, err := json.Marshal(r)
			require.NoError(t, err)
			got, ok := decodeRegistrationFast(data)
			require.True(t, ok, string(data))
			want := &Registration{}
			require.NoError(t, json.Unmarshal(data, want))
			require.Equal(t, want, got, string(data))
		}
	})
	for _, tc := range []struct{ name, data string }{
		{"an observation is left to encoding/json", `{"node_id":"n","observation":{}}`},
		{"an isolation ledger is left to encoding/json", `{"node_id":"n","released":{}}`},
		{"a key in another case is left to encoding/json", `{"Node_ID":"n"}`},
		{"a repeated key is left to encoding/json", `{"drain":true,"drain":false}`},
		{"a time that does not parse is left to encoding/json", `{"created_at":"yesterday"}`},
		{"a null time is left to encoding/json", `{"last_seen":null}`},
		{"a quoted boolean is left to encoding/json", `{"drain":"true"}`},
		{"whitespace is left to encoding/json", `{"drain": true}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ok := decodeRegistrationFast([]byte(tc.data))
			require.False(t, ok)
		})
	}
}

func FuzzDecodeRegistrationFast(f *testing.F) {
	for _, r := range sampleRegistrations() {
		data, err := json.Marshal(r)
		require.NoError(f, err)
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := decodeRegistrationFast(data)
		if !ok {
			return
		}
		want := &Registration{}
		require.NoError(t, json.Unmarshal(data, want), "the fast path took what encoding/json refuses")
		require.Equal(t, want, got)
	})
}
