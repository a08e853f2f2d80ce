package flowcontrol

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAnAbsentSectionGivesTheDefaultConfiguration(t *testing.T) {
	cfg, err := Decode(strings.NewReader(""))
	require.NoError(t, err)
	require.Equal(t, DefaultConfig().WithDefaults(), cfg)
	require.Equal(t, 64, *cfg.ServerConcurrency)
	require.Len(t, cfg.Levels, 5)
	require.Len(t, cfg.Schemas, 5)
}

func TestTheSpecsExampleDecodesToTheDefaults(t *testing.T) {
	doc := `
server_concurrency: 64
levels:
  - name: exempt
    type: Exempt
    nominal_concurrency_shares: 0
    lendable_percent: 0
  - name: placement
    type: Limited
    nominal_concurrency_shares: 40
    lendable_percent: 25
    limit_response: {type: Queue, queues: 64, hand_size: 6, queue_length_limit: 50}
  - name: operator
    type: Limited
    nominal_concurrency_shares: 10
    lendable_percent: 50
    limit_response: {type: Queue, queues: 16, hand_size: 4, queue_length_limit: 50}
  - name: metrics
    type: Limited
    nominal_concurrency_shares: 10
    lendable_percent: 90
    borrowing_limit_percent: 0
    limit_response: {type: Reject}
  - name: catch-all
    type: Limited
    nominal_concurrency_shares: 5
    lendable_percent: 0
    limit_response: {type: Reject}
schemas:
  - {name: health, precedence: 1, level: exempt, match: {paths: ["/healthz", "/readyz"]}}
  - {name: placement, precedence: 100, level: placement, distinguisher: pod,
     match: {verbs: [get-nodes-deploy-capacity, calculate-deploy, calculate-realloc, calculate-remap,
             set-node-resource-usage, get-most-idle-node]}}
  - {name: metrics, precedence: 200, level: metrics, distinguisher: caller, match: {verbs: [get-metrics], paths: ["/metrics"]}}
  - {name: operator, precedence: 300, level: operator, distinguisher: caller, match: {paths: ["/v1/*"], commands: ["*"]}}
  - {name: catch-all, precedence: 10000, level: catch-all, distinguisher: caller, match: {any: true}}
`
	cfg, err := Decode(strings.NewReader(doc))
	require.NoError(t, err)
	require.Equal(t, DefaultConfig().WithDefaults(), cfg)
}

func TestAbsentLevelFieldsTakeTheSeedsDefaults(t *testing.T) {
	cfg, err := Decode(strings.NewReader(`
levels:
  - {name: busy, type: Limited, limit_response: {type: Queue}}
  - {name: free, type: Exempt}
schemas:
  - {name: all, precedence: 5, level: busy, match: {any: true}}
`))
	require.NoError(t, err)
	busy := cfg.Levels[0]
	require.Equal(t, 30, *busy.NominalConcurrencyShares)
	require.Equal(t, 0, *busy.LendablePercent)
	require.Nil(t, busy.BorrowingLimitPercent, "no borrowing limit means unlimited")
	require.Equal(t, 64, *busy.LimitResponse.Queues)
	require.Equal(t, 8, *busy.LimitResponse.HandSize)
	require.Equal(t, 50, *busy.LimitResponse.QueueLengthLimit)
	require.Equal(t, 0, *cfg.Levels[1].NominalConcurrencyShares)
	require.Equal(t, 64, *cfg.ServerConcurrency)
}

func TestServerConcurrencyTakesTheDefaultOnlyWhenLeftOut(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      int
	}{
		{"an absent key gives the default", "levels: null\n", DefaultServerConcurrency},
		{"a key set to nothing gives the default", "server_concurrency:\n", DefaultServerConcurrency},
		{"a key set to ~ gives the default", "server_concurrency: ~\n", DefaultServerConcurrency},
		{"a key set to 1 is taken as written", "server_concurrency: 1\n", 1},
		{"a key set to 8 is taken as written", "server_concurrency: 8\n", 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Decode(strings.NewReader(tc.doc))
			require.NoError(t, err)
			require.Equal(t, tc.want, *cfg.ServerConcurrency)
		})
	}
}

func TestMalformedConfigurationsAreRefusedNamingTheKey(t *testing.T) {
	const schemas = `
schemas:
  - {name: all, precedence: 5, level: a, match: {any: true}}
`
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"an unknown key is refused", "levels:\n  - {name: a, type: Limited, colour: red, limit_response: {type: Reject}}\n" + schemas,
			"field colour not found"},
		{"a schema naming an unknown level is refused", `
levels: [{name: a, type: Limited, limit_response: {type: Reject}}]
schemas: [{name: all, precedence: 5, level: b, match: {any: true}}]`,
			`flowcontrol.schemas[0].level: unknown level "b"`},
		{"a hand larger than the queues is refused", `
levels: [{name: a, type: Limited, limit_response: {type: Queue, queues: 4, hand_size: 5}}]` + schemas,
			"flowcontrol.levels[0].limit_response.hand_size: 5 exceeds queues 4"},
		{"a hand needing more than 60 bits of entropy is refused", `
levels: [{name: a, type: Limited, limit_response: {type: Queue, queues: 1024, hand_size: 7}}]` + schemas,
			"flowcontrol.levels[0].limit_response.hand_size: hand of 7 out of 1024 queues needs 70 bits of entropy, more than 60"},
		{"a negative lendable percentage is refused", `
levels: [{name: a, type: Limited, lendable_percent: -1, limit_response: {type: Reject}}]` + schemas,
			"flowcontrol.levels[0].lendable_percent: -1: must be within [0, 100]"},
		{"a lendable percentage over 100 is refused", `
levels: [{name: a, type: Limited, lendable_percent: 101, limit_response: {type: Reject}}]` + schemas,
			"flowcontrol.levels[0].lendable_percent: 101: must be within [0, 100]"},
		{"a negative borrowing percentage is refused", `
levels: [{name: a, type: Limited, borrowing_limit_percent: -5, limit_response: {type: Reject}}]` + schemas,
			"flowcontrol.levels[0].borrowing_limit_percent: -5: must not be negative"},
		{"negative shares are refused", `
levels: [{name: a, type: Limited, nominal_concurrency_shares: -2, limit_response: {type: Reject}}]` + schemas,
			"flowcontrol.levels[0].nominal_concurrency_shares: -2: must not be negative"},
		{"a level defined twice is refused", `
levels: [{name: a, type: Limited, limit_response: {type: Reject}}, {name: a, type: Exempt}]` + schemas,
			`flowcontrol.levels[1].name: "a" is defined twice`},
		{"a schema defined twice is refused", `
levels: [{name: a, type: Limited, limit_response: {type: Reject}}]
schemas: [{name: s, precedence: 5, level: a, match: {any: true}}, {name: s, precedence: 6, level: a, match: {any: true}}]`,
			`flowcontrol.schemas[1].name: "s" is defined twice`},
		{"an unknown level type is refused", `
levels: [{name: a, type: Unlimited}]` + schemas,
			`flowcontrol.levels[0].type: "Unlimited": must be Exempt or Limited`},
		{"a Limited level without a limit response is refused", `
levels: [{name: a, type: Limited}]` + schemas,
			"flowcontrol.levels[0].limit_response: missing"},
		{"an Exempt level with a limit response is refused", `
levels: [{name: a, type: Exempt, limit_response: {type: Reject}}, {name: b, type: Limited, limit_response: {type: Reject}}]` + schemas,
			"flowcontrol.levels[0].limit_response: an Exempt level never queues or rejects"},
		{"queuing parameters on a Reject level are refused", `
levels: [{name: a, type: Limited, limit_response: {type: Reject, queues: 3}}]` + schemas,
			"flowcontrol.levels[0].limit_response: type Reject takes no queues"},
		{"an unknown limit response is refused", `
levels: [{name: a, type: Limited, limit_response: {type: Drop}}]` + schemas,
			`flowcontrol.levels[0].limit_response.type: "Drop": must be Queue or Reject`},
		{"a zero queue length limit is refused", `
levels: [{name: a, type: Limited, limit_response: {type: Queue, queue_length_limit: 0}}]` + schemas,
			"flowcontrol.levels[0].limit_response.queue_length_limit: 0: must be at least 1"},
		{"shares summing to zero are refused", `
levels: [{name: a, type: Limited, nominal_concurrency_shares: 0, limit_response: {type: Reject}}]` + schemas,
			"flowcontrol.levels: the nominal_concurrency_shares sum to 0"},
		{"a negative server concurrency is refused", "server_concurrency: -1\n",
			"flowcontrol.server_concurrency: -1: must be at least 1"},
		{"a zero server concurrency is refused, not taken for the default", "server_concurrency: 0\n",
			"flowcontrol.server_concurrency: 0: must be at least 1"},
		{"zero queues are refused, not taken for the default", `
levels: [{name: a, type: Limited, limit_response: {type: Queue, queues: 0}}]` + schemas,
			"flowcontrol.levels[0].limit_response.queues: 0: must be at least 1"},
		{"a zero hand size is refused, not taken for the default", `
levels: [{name: a, type: Limited, limit_response: {type: Queue, hand_size: 0}}]` + schemas,
			"flowcontrol.levels[0].limit_response.hand_size: 0: must be at least 1"},
		{"an unknown distinguisher is refused", `
levels: [{name: a, type: Limited, limit_response: {type: Reject}}]
schemas: [{name: s, precedence: 5, level: a, distinguisher: user, match: {any: true}}]`,
			`flowcontrol.schemas[0].distinguisher: "user": must be pod, caller or none`},
		{"a precedence out of range is refused", `
levels: [{name: a, type: Limited, limit_response: {type: Reject}}]
schemas: [{name: s, precedence: 0, level: a, match: {any: true}}]`,
			"flowcontrol.schemas[0].precedence: 0: must be within [1, 10000]"},
		{"a schema matching nothing is refused", `
levels: [{name: a, type: Limited, limit_response: {type: Reject}}]
schemas: [{name: s, precedence: 5, level: a, match: {}}, {name: t, precedence: 6, level: a, match: {any: true}}]`,
			"flowcontrol.schemas[0].match: matches nothing"},
		{"a glob in the middle of a path is refused", `
levels: [{name: a, type: Limited, limit_response: {type: Reject}}]
schemas: [{name: s, precedence: 5, level: a, match: {paths: ["/v1/*/x"]}}, {name: t, precedence: 6, level: a, match: {any: true}}]`,
			`flowcontrol.schemas[0].match.paths[0]: "/v1/*/x": "*" is allowed only as a final "/*"`},
		{"schemas without a catch-all are refused", `
levels: [{name: a, type: Limited, limit_response: {type: Reject}}]
schemas: [{name: s, precedence: 5, level: a, match: {verbs: [x]}}]`,
			"flowcontrol.schemas: no schema matches every request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(strings.NewReader(tc.doc))
			require.ErrorContains(t, err, tc.want)
			require.NotContains(t, err.Error(), "\n", "the error is one line")
		})
	}
}
