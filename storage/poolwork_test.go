package storage

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/nodes"
)

func TestDrawsLeavesOutAttachmentsAHeartbeatFoundFailing(t *testing.T) {
	n := mustNode(t, `{"volumes":{},"disks":[],"storage":1099511627776,"pools":{"ceph-a":{"path":"/mnt/a"},"nfs1":{"path":"/mnt/n"}},"default_pool":"ceph-a"}`, "")
	w := mustRequest(t, `{"volumes":["POOL:/a:rw:1G","POOL@nfs1:/b:rw:1G","POOL@other:/c:rw:1G"]}`, false)
	observed := func(checks map[string]nodes.PoolCheck) *nodes.Entry {
		return &nodes.Entry{Reg: &nodes.Registration{Observation: &nodes.Observation{Pools: checks}}}
	}
	for _, c := range []struct {
		name string
		reg  *nodes.Entry
		want []string
	}{
		{"a node that never heartbeat draws on every pool it declares", nil, []string{"ceph-a", "nfs1", unreachable}},
		{"a registration without an observation is the same", &nodes.Entry{Reg: &nodes.Registration{}}, []string{"ceph-a", "nfs1", unreachable}},
		{"a path found available is drawn on", observed(map[string]nodes.PoolCheck{"ceph-a": {Available: true}}), []string{"ceph-a", "nfs1", unreachable}},
		{"a path found failing is unreachable, the others stay", observed(map[string]nodes.PoolCheck{"nfs1": {Available: false, Reason: "/mnt/n is not a mount point"}}), []string{"ceph-a", unreachable, unreachable}},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, Rules{}.Draws(n, w, c.reg))
		})
	}
}
