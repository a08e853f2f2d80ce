package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/types"
)

func TestTakeLedger(t *testing.T) {
	stored := func(raw string) types.Change {
		c, err := types.ChangeOf(&types.Request{Resource: json.RawMessage(raw)}, true)
		require.NoError(t, err)
		return c
	}
	for _, c := range []struct {
		name    string
		change  types.Change
		want    types.Amounts
		rest    string
		invalid string
	}{
		{name: "a change without the key is left alone", change: stored(`{"storage":1}`), rest: `{"storage":1}`},
		{name: "the key is taken out of a stored change", change: stored(`{"storage":1,"isolation_ledger":{"storage":5}}`),
			want: types.Amounts{"storage": 5}, rest: `{"storage":1}`},
		{name: "an empty snapshot is an empty ledger, not none", change: stored(`{"isolation_ledger":{}}`),
			want: types.Amounts{}, rest: `{}`},
		{name: "workloads are never a snapshot", change: types.Change{Form: types.WorkloadsForm, Raw: json.RawMessage(`[{"isolation_ledger":{}}]`)}, rest: `[{"isolation_ledger":{}}]`},
		{name: "a negative amount is refused", change: stored(`{"isolation_ledger":{"storage":-1}}`), invalid: "storage is -1, below 0"},
		{name: "an amount of 2^53 is the largest taken", change: stored(`{"isolation_ledger":{"storage":9007199254740992}}`),
			want: types.Amounts{"storage": 1 << 53}, rest: `{}`},
		{name: "an amount above 2^53 is refused naming the limit", change: stored(`{"isolation_ledger":{"storage":9007199254740993}}`),
			invalid: "isolation_ledger: storage is 9007199254740993, above 2^53 (9007199254740992)"},
		{name: "an amount beyond int64 is refused naming the limit", change: stored(`{"isolation_ledger":{"storage":1e30}}`),
			invalid: "want an object of integers from 0 to 2^53 (9007199254740992)"},
		{name: "a snapshot that is not an object of integers is refused", change: stored(`{"isolation_ledger":[1]}`), invalid: "want an object"},
		{name: "null is refused", change: stored(`{"isolation_ledger":null}`), invalid: "want an object"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ch := c.change
			got, err := takeLedger(&ch)
			if c.invalid != "" {
				require.Equal(t, types.InvalidArgument, types.ClassOf(err))
				require.ErrorContains(t, err, c.invalid)
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.want, got)
			rest := []byte(ch.Raw)
			if ch.Members != nil {
				rest, err = json.Marshal(ch.Members)
				require.NoError(t, err)
			}
			require.JSONEq(t, c.rest, string(rest))
		})
	}
}

func TestCheckLedgerKeys(t *testing.T) {
	// check stands for a resource whose usage has the one component "cpu".
	check := func(k string) error {
		if k == "cpu" {
			return nil
		}
		return types.Invalid("%s is not a usage component (cpu)", k)
	}
	for _, c := range []struct {
		name    string
		snap    types.Amounts
		invalid string
	}{
		{name: "a snapshot of the resource's own components is accepted", snap: types.Amounts{"cpu": 5}},
		{name: "an empty snapshot is accepted", snap: types.Amounts{}},
		{name: "any other key is refused as the resource says, under the ledger's name", snap: types.Amounts{"cpu": 1, "junk": 1},
			invalid: "isolation_ledger: junk is not a usage component (cpu)"},
		{name: "of several bad keys the first in order is named", snap: types.Amounts{"zz": 1, "aa": 1},
			invalid: "isolation_ledger: aa is not a usage component (cpu)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := checkLedgerKeys(c.snap, check)
			if c.invalid == "" {
				require.NoError(t, err)
				return
			}
			require.Equal(t, types.InvalidArgument, types.ClassOf(err))
			require.EqualError(t, err, c.invalid)
		})
	}
}

func TestWithLedgerAddsTheSnapshotToTheUsage(t *testing.T) {
	out, err := withLedger(struct {
		CPU int64 `json:"cpu_millis"`
	}{1000}, nil)
	require.NoError(t, err)
	data, err := json.Marshal(out)
	require.NoError(t, err)
	require.JSONEq(t, `{"cpu_millis":1000,"isolation_ledger":{}}`, string(data))
}

func TestLeftOutLinesAreBounded(t *testing.T) {
	var buf bytes.Buffer
	e := &Engine[int, int]{Log: slog.New(slog.NewJSONHandler(&buf, nil))}
	names := make([]string, maxLeftOutLines+5)
	why := make([]string, len(names))
	for i := range names {
		names[i] = fmt.Sprintf("n%d", i)
		if i != 3 {
			why[i] = "node is draining"
		}
	}
	e.logLeftOut("get-nodes-deploy-capacity", names, why)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, maxLeftOutLines+1, "one line a node up to the bound, then one counting the rest")
	require.Contains(t, lines[0], `"node":"n0","reason":"node is draining"`)
	require.Contains(t, lines[len(lines)-1], `"msg":"more nodes left out","verb":"get-nodes-deploy-capacity","count":4`)
}
