package storage

import (
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/engine"
	"github.com/eru-extend/resources/nodes"
	"github.com/eru-extend/resources/storage/pool"
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

func TestRestoreHoldersFindsTheRecordsKeepingWhatARestoreNames(t *testing.T) {
	const obj = "v-00000000000000aa"
	const capacity = `{"volumes":{},"disks":[],"storage":1099511627776,"pools":{"ceph-a":{"path":"/mnt/a"}}}`
	rec := func(objects string) []byte {
		return []byte(`{"capacity":` + capacity + `,"usage":{"volumes":{},"disks":[],"storage":0` + objects + `}}`)
	}
	holding := rec(`,"pool_objects":{"` + obj + `":{"pool":"ceph-a","bytes":10,"held":true}}`)
	prefix := nodes.RecordPrefix("storage")
	stored := map[string][]byte{prefix + "n1": rec(""), prefix + "n2": holding, prefix + "n3": rec("")}
	link := func(named ...string) engine.Link {
		return engine.Link{Node: "n1",
			Named: func(k string) bool { return slices.Contains(named, k) },
			Get:   func(k string) ([]byte, bool) { v, ok := stored[k]; return v, ok && slices.Contains(named, k) },
			Scan:  func(string) (map[string][]byte, error) { return stored, nil }}
	}
	before := mustNode(t, capacity, "")
	restoring := before.Clone()
	restoring.pending = &poolChange{change: pool.Change{Mode: pool.Absolute, Objects: map[string]pool.Amount{obj: {Pool: "ceph-a", Bytes: 10}}}, restore: true}

	t.Run("a record the transaction did not read is asked for", func(t *testing.T) {
		err := restoreHolders(link(), before, restoring, map[string]*Node{})
		require.EqualError(t, err, `engine: the write needs linked keys it did not read: ["`+prefix+`n2"]`)
	})
	t.Run("once read, the record is one of the holders the admission sees", func(t *testing.T) {
		holders := map[string]*Node{}
		require.NoError(t, restoreHolders(link(prefix+"n2"), before, restoring, holders))
		require.Equal(t, []string{"n2"}, slices.Sorted(maps.Keys(holders)))
		require.Contains(t, holders["n2"].Usage.PoolObjects, obj)
	})
	t.Run("a delta write scans nothing", func(t *testing.T) {
		delta := before.Clone()
		delta.pending = &poolChange{change: pool.Change{Mode: pool.Incr, Objects: map[string]pool.Amount{obj: {Pool: "ceph-a", Bytes: 10}}}}
		l := link()
		l.Scan = func(string) (map[string][]byte, error) { t.Fatal("scanned"); return nil, nil }
		require.NoError(t, restoreHolders(l, before, delta, map[string]*Node{}))
	})
	t.Run("an object the node's record keeps scans nothing", func(t *testing.T) {
		mine := mustNode(t, capacity, `{"volumes":{},"disks":[],"storage":0,"pool_objects":{"`+obj+`":{"pool":"ceph-a","bytes":10,"held":true}}}`)
		l := link()
		l.Scan = func(string) (map[string][]byte, error) { t.Fatal("scanned"); return nil, nil }
		require.NoError(t, restoreHolders(l, mine, restoring, map[string]*Node{}))
	})
}

func TestPoolChangeOfAttachesOnlyWhatADeployPlanned(t *testing.T) {
	const obj = "v-00000000000000aa"
	key := "POOL@ceph-a/" + obj + ":/data:rw:0:0:0:0:0"
	for _, c := range []struct {
		name      string
		plan      pool.Plan
		attaching map[string]string
		bytes     int64
	}{
		{"a deploy's attach plan takes the object as it is from the node it names",
			pool.Plan{Pool: "ceph-a", Object: obj, Bytes: 10, From: "n1"}, map[string]string{obj: "n1"}, 0},
		{"a realloc's delta on the same binding adds its signed bytes",
			pool.Plan{Pool: "ceph-a", Object: obj, Bytes: -4}, map[string]string{}, -4},
	} {
		t.Run(c.name, func(t *testing.T) {
			pc, err := poolChangeOf(nil, []*Workload{{PoolPlanRequest: pool.Plans{key: c.plan}}}, true, true)
			require.NoError(t, err)
			require.Equal(t, c.attaching, pc.attaching)
			require.Equal(t, pool.Amount{Pool: "ceph-a", Bytes: c.bytes}, pc.change.Objects[obj])
		})
	}
}

func TestLinkedPoolKeysNameEveryPoolBeforeAndAfter(t *testing.T) {
	const capacity = `{"volumes":{},"disks":[],"storage":1099511627776,"pools":{"ceph-a":{"path":"/mnt/a"},"nfs1":{"path":"/mnt/n"}}}`
	usage := func(objects string) string {
		return `{"volumes":{},"disks":[],"storage":0,"pool_objects":{` + objects + `}}`
	}
	inA := `"v-00000000000000aa":{"pool":"ceph-a","bytes":10,"held":true}`
	inNfs := `"v-00000000000000bb":{"pool":"nfs1","bytes":10,"held":true}`
	for _, c := range []struct {
		name          string
		before, after string
		want          []string
	}{
		{"a record written verbatim on a node without objects reads the pools it puts objects in", "", usage(inNfs), []string{PoolKey("nfs1")}},
		{"one that drops every object reads the pools they lived in", usage(inA), "", []string{PoolKey("ceph-a")}},
		{"one that trades an object for one in another pool reads both", usage(inA), usage(inNfs), []string{PoolKey("ceph-a"), PoolKey("nfs1")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, linkedPoolKeys(mustNode(t, capacity, c.before), mustNode(t, capacity, c.after)))
		})
	}
}
