package storage

import (
	"context"
	"encoding/json"
	"path"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/eru-extend/resources/types"
)

// deepJSON is n nested lists inside an object's key.
func deepJSON(key string, n int) []byte {
	return []byte(`{"` + key + `":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}`)
}

// commonJSONSeeds are hostile inputs every JSON fuzz target starts from.
func commonJSONSeeds() [][]byte {
	return [][]byte{
		nil,
		[]byte(""),
		[]byte("null"),
		[]byte("{}"),
		[]byte("[]"),
		[]byte(`[{"storage":1}]`),
		[]byte("\xff\xfe{"),
		[]byte(`{"storage":"\xff"}`),
		[]byte(`{"storage":"99999999999999999999P"}`),
		[]byte(`{"storage":9223372036854775807}`),
		[]byte(`{"storage":"9223372036854775807"}`),
		[]byte(`{"storage":-1}`),
		[]byte(`{"storage":1e400}`),
		[]byte(`{"storage":"-0"}`),
		deepJSON("volumes", 20000),
	}
}

// requireExact checks that a value stays within what core reads back
// exactly, and is not negative.
func requireExact(t *testing.T, v int64, what string, args ...any) {
	require.GreaterOrEqual(t, v, int64(0), append([]any{what + " is negative"}, args...)...)
	require.LessOrEqual(t, v, int64(types.MaxExact), append([]any{what + " is above 2^53"}, args...)...)
}

// requireRecordExact checks every figure of a validated record.
func requireRecordExact(t *testing.T, n *Node) {
	for _, r := range []Resource{n.Capacity, n.Usage} {
		requireExact(t, r.Storage, "storage")
		requireExact(t, r.volumeTotal(), "volume total")
		for dev, v := range r.Volumes {
			requireExact(t, v, "volume", dev)
		}
		for _, d := range r.Disks {
			for _, q := range d.Quota() {
				requireExact(t, q, "disk quota", d.Device)
			}
		}
	}
}

func FuzzParseBinding(f *testing.F) {
	for _, s := range []string{
		"/host:/dst", "/host:/dst:ro", "AUTO:/data:rw:100G", "AUTO:/data:wr:1T:1k:1KiB:100GiB:1m",
		"AUTO:/data:rwm:1", ":/data::0", "/data/AUTO:/d:mow:5", "AUTO:/d:rw:-10G:-1:-2:-3:-4",
		"AUTO:/d:rw:99999999999999999999P", "AUTO:/d:rw:9223372036854775807", "AUTO:/d:rw:9007199254740993",
		"AUTO:/d:rw:8P:8P:8P:8P:8P", "\xff\xfe:/\xff", "", ":", ":::::::", "::::::::", "AUTO::rw:1",
		"AUTO:/d:rwx:1", "AUTO:/d:rw:1.5", "AUTO:/d:rw: +1 ", "AUTO:/d:rw:-", "AUTO:/d:rw:--1",
		// the forms the upstream plugin stores
		"AUTO:/d:rowo:1", "AUTO:/d:ro:1", "AUTO:/d:wo:1", "AUTO:/d:mrowo:1", "AUTO:/d:oo:1", "AUTO:/d:roo:1", "AUTO:/d:owo:1",
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, s string, signed bool) {
		b, err := ParseBinding(s, signed)
		if err != nil {
			require.Nil(t, b)
			return
		}
		for i, v := range append([]int64{b.Size}, b.Quota[:]...) {
			require.LessOrEqual(t, v, int64(types.MaxExact), "part %d", i)
			require.GreaterOrEqual(t, v, -int64(types.MaxExact), "part %d", i)
			if !signed {
				require.GreaterOrEqual(t, v, int64(0), "part %d is negative though unsigned", i)
			}
		}
		require.NotEmpty(t, b.Destination)
		require.NotEmpty(t, b.Flags)
		require.NotPanics(t, func() { _ = b.Kind().String() })

		again, err := ParseBinding(b.String(), signed)
		require.NoError(t, err, "the full form %q of %q parses", b.String(), s)
		require.Equal(t, b, again)
		require.Equal(t, b.String(), again.String())

		if b.Validate() == nil {
			require.False(t, b.Kind() == Monopoly && b.Size == 0 && b.Quota.IsZero())
		}
		form := b.EngineForm("/dev", b.Size)
		require.True(t, strings.HasPrefix(form, "/dev:"+b.Destination), "engine form %q", form)
		if parts := strings.Split(form, ":"); len(parts) > 2 {
			require.NotContains(t, parts[2], "m", "engine form %q keeps m", form)
			if strings.Contains(b.Flags, "o") && strings.ContainsAny(b.Flags, "rw") {
				// o is written after the letter it qualifies, and the
				// engine form reads back as the same binding.
				require.NotEqual(t, byte('o'), parts[2][0], "engine form %q", form)
				back, err := ParseBinding(strings.Replace(form, "/dev", b.Source, 1), signed)
				require.NoError(t, err, "engine form %q parses", form)
				require.Equal(t, strings.ReplaceAll(b.Flags, "m", ""), back.Flags)
			}
		}
	})
}

// fuzzNode is a fixed populated node for the capacity and usage targets.
func fuzzNode(t testing.TB) *Node {
	return mustNode(t,
		`{"volumes":{"/data0":1000,"/data1":2000},
		  "disks":[{"device":"/dev/vda","mounts":["/","/data0"],"read_IOPS":100,"write_IOPS":100,"read_bps":1000,"write_bps":1000}],
		  "storage":5000}`,
		`{"volumes":{"/data0":100,"/data1":0},
		  "disks":[{"device":"/dev/vda","mounts":["/","/data0"],"read_IOPS":10,"write_IOPS":0,"read_bps":0,"write_bps":0}],
		  "storage":100}`)
}

// FuzzCheckDevicePath: a device accepted is an absolute, clean path with no
// ':' and no control character, not AUTO; and a volume request names a
// device exactly when the check accepts it.
func FuzzCheckDevicePath(f *testing.F) {
	for _, s := range []string{"/data0", "/", "/a:b", "data0", "/data\x000", "/data0/../etc", "AUTO", "/x/AUTO",
		"/data0/", "//data0", "/data/./0", "/d\u0085", "/d\x7f", "/\xff\xfe", "", "/data0 ", " /data0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		err := CheckDevicePath("device", p)
		if err == nil {
			require.True(t, strings.HasPrefix(p, "/"))
			require.Equal(t, path.Clean(p), p)
			require.NotContains(t, p, ":")
			require.False(t, strings.ContainsFunc(p, unicode.IsControl))
			require.NotEqual(t, "AUTO", p)
		} else {
			require.NotContains(t, err.Error(), "\n")
		}
		if !utf8.ValidString(p) {
			return // JSON cannot carry it (stdin that is not UTF-8 is refused whole)
		}
		body, jerr := json.Marshal(map[string]any{"volumes": []string{p + ":1"}})
		require.NoError(t, jerr)
		m, derr := types.DecodeObject(body, "resource")
		require.NoError(t, derr)
		q, perr := ParseNodeRequest(m, false)
		if err != nil {
			require.Error(t, perr, "a volume on %q is refused", p)
			return
		}
		require.NoError(t, perr)
		require.Equal(t, []VolumeSize{{Device: p, Size: 1}}, q.Volumes)
	})
}

func FuzzSetCapacity(f *testing.F) {
	seeds := append(commonJSONSeeds(),
		[]byte(`{"volumes":["/data0:1T","/data1:1T"],"disks":["/dev/vda:/,/data0:1000:1000:1G:1G"],"storage":"2T"}`),
		[]byte(`{"volumes":{"/data0":1000,"/data9":7},"disks":[{"device":"/dev/vda","mounts":["/"],"read_IOPS":11}],"storage":4200}`),
		[]byte(`{"volumes":null,"disks":null,"storage":null}`),
		[]byte(`{"volumes":{"/data1":"3000"},"disks":[],"storage":"100"}`),
		[]byte(`{"volumes":["/data1:0"],"rm-disks":"/dev/vda"}`),
		[]byte(`{"volumes":["/data1:8P"],"storage":"8P"}`),
		[]byte(`{"disks":["/dev/vda:/:1:1:1"]}`),
		[]byte(`{"disks":[{"device":"/dev/vda","read_IOPS":-1}]}`),
		[]byte(`{"volumes":["/d:-1"]}`),
		[]byte(`{"storage":"2T"}`),
		[]byte(`{"rm-disks":["/dev/vda"]}`),
		// negative deltas as eru-cli sends them, and device names that are not paths
		[]byte(`{"volumes":["/data0:-100"],"storage":"-10","disks":["/dev/vda:/data0:-10:0:0:0"]}`),
		[]byte(`{"volumes":["/data1:-2001"]}`),
		[]byte(`{"disks":["/dev/vda:/,/data0:-100:-100:-1000:-1000"]}`),
		[]byte(`{"volumes":["/a:b:1G"]}`),
		[]byte(`{"volumes":["data0:1G"]}`),
		[]byte("{\"volumes\":[\"/d\\u00000:1\"]}"),
		[]byte(`{"volumes":["/data0/../etc:1"]}`),
		[]byte(`{"volumes":["AUTO:1"]}`),
		[]byte(`{"volumes":{"/data0/":1},"disks":[],"storage":1}`),
		[]byte(`{"disks":["vda:/:1:1:1:1"]}`),
		deepJSON("disks", 20000),
	)
	for _, s := range seeds {
		f.Add(s, false, false)
		f.Add(s, true, true)
		f.Add(s, true, false)
	}
	empty, populated := NewNode(), fuzzNode(f)
	f.Fuzz(func(t *testing.T, request []byte, delta, incr bool) {
		for _, n := range []*Node{empty, populated} {
			before := n.Clone()
			for _, asResource := range []bool{false, true} {
				var out *Node
				var err error
				if asResource {
					out, err = setCapacity(n, request, nil, delta, incr)
				} else {
					out, err = setCapacity(n, nil, request, delta, incr)
				}
				require.Equal(t, before, n, "SetCapacity changed the node it was given")
				if err != nil {
					continue
				}
				require.NoError(t, out.Validate())
				requireRecordExact(t, out)
				for dev := range out.Capacity.Volumes {
					require.NoError(t, CheckDevicePath("volume", dev))
				}
				for _, d := range out.Capacity.Disks {
					require.NoError(t, checkDiskPaths(d))
				}
			}

			next, err := nextUsage(n, nil, request, nil, delta, incr)
			require.Equal(t, before, n, "NextUsage changed the node it was given")
			if err == nil {
				if settled, err := next.Settle(); err == nil {
					require.NoError(t, settled.Validate())
					requireRecordExact(t, settled)
					require.Equal(t, n.Capacity, settled.Capacity, "a usage write changed capacity")
				}
			}
		}

		added, err := AddNode(request, &types.EngineInfo{StorageTotal: 1 << 40})
		if err == nil {
			require.NoError(t, added.Validate())
			requireExact(t, added.Capacity.Storage, "storage")
			require.GreaterOrEqual(t, added.Capacity.Storage, added.Capacity.volumeTotal())
		}

		if m, err := types.DecodeObject(request, "resource"); err == nil {
			if q, err := ParseNodeRequest(m, false); err == nil {
				total := q.Storage
				for _, v := range q.Volumes {
					requireExact(t, v.Size, "volume", v.Device)
					total += v.Size // no wrap: each step is checked
					requireExact(t, total, "storage and volumes")
				}
				for _, d := range q.Disks {
					for _, v := range d.Quota() {
						requireExact(t, v, "disk quota", d.Device)
					}
				}
			}
		}
	})
}

func FuzzParseWorkloadRequest(f *testing.F) {
	seeds := append(commonJSONSeeds(),
		[]byte(`{"volumes":["AUTO:/data:rw:100G"]}`),
		[]byte(`{"volumes-request":["AUTO:/a:rw:1","AUTO:/b:wr:2"],"volumes":["AUTO:/b:rw:20","AUTO:/a:rw:10"]}`),
		[]byte(`{"volume-request":["AUTO:/a:rw:100:10:20:30:40"],"volume-limit":["AUTO:/a:rw:50:5:25:30:1"]}`),
		[]byte(`{"storage-request":"2G","storage-limit":"1G"}`),
		[]byte(`{"storage-limit":"1G"}`),
		[]byte(`{"volumes":["AUTO:/a:rw:-10G"],"storage":"-1G"}`),
		[]byte(`{"volumes":["AUTO:/a:rw:8P"],"storage":"8P"}`),
		[]byte(`{"volumes":["AUTO:/a:rw:-8P"],"storage":"-8P"}`),
		[]byte(`{"volumes":"AUTO:/a:mrw:0"}`),
		[]byte(`{"volumes":["AUTO:/a:rw:1"],"volume":["AUTO:/a:rw:1"]}`),
		[]byte(`{"volumes":[1]}`),
		[]byte(`{"size":"1G"}`),
		deepJSON("volumes", 20000),
	)
	for _, s := range seeds {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, data []byte, signed bool) {
		w, err := ParseWorkloadRequest(data, signed)
		if err != nil {
			return
		}
		require.Len(t, w.Limit, len(w.Request))
		total := w.FlatRequest
		for i, b := range w.Request {
			l := w.Limit[i]
			require.Equal(t, b.identity(), l.identity(), "limit %d pairs with its request", i)
			for _, x := range []*VolumeBinding{b, l} {
				again, err := ParseBinding(x.String(), signed)
				require.NoError(t, err)
				require.Equal(t, x, again)
			}
			if !signed {
				require.NoError(t, b.Validate())
				require.NoError(t, l.Validate())
				require.GreaterOrEqual(t, l.Size, b.Size, "limit %d below its request", i)
				require.True(t, l.Quota.Covers(b.Quota), "limit %d quota below its request", i)
			}
			total += b.Size
		}
		require.Equal(t, total, w.StorageRequest, "the bindings are added to storage_request exactly once")
		for _, bs := range [][]*VolumeBinding{w.Request, w.Limit} {
			// all of them may land on one disk: the stored disk quota is
			// their sum, and must stay exact.
			var sum Quota
			for _, b := range bs {
				sum = sum.Plus(b.Quota)
				for _, v := range sum {
					require.LessOrEqual(t, v, int64(types.MaxExact), "quotas add up beyond 2^53")
					require.GreaterOrEqual(t, v, -int64(types.MaxExact), "quotas add up below -2^53")
				}
			}
		}
		for _, v := range []int64{w.StorageRequest, w.StorageLimit, w.FlatRequest, w.FlatLimit} {
			require.LessOrEqual(t, v, int64(types.MaxExact))
			require.GreaterOrEqual(t, v, -int64(types.MaxExact))
		}
		if !signed {
			requireExact(t, w.StorageRequest, "storage request")
			requireExact(t, w.StorageLimit, "storage limit")
			require.GreaterOrEqual(t, w.StorageLimit, w.StorageRequest)
			require.GreaterOrEqual(t, w.FlatLimit, w.FlatRequest)
		}
	})
}

func FuzzDecodeWorkloads(f *testing.F) {
	seeds := append(commonJSONSeeds(),
		[]byte(normalWorkload),
		[]byte(monoWorkload),
		[]byte(`[`+otherWorkload+`,null,`+normalWorkload+`]`),
		[]byte(`{"volumes_request":["AUTO:/a:rw:-1:0:0:0:0"],"volume_plan_request":{"AUTO:/a:rw:-1:0:0:0:0":{"/data0":-1}},"storage_request":-1}`),
		[]byte(`{"volume_plan_request":{"k":{"/data0":9007199254740992,"/data1":9007199254740992}}}`),
		[]byte(`[{"volume_plan_request":{"k":{"/data0":9007199254740992}}},{"volume_plan_request":{"k":{"/data0":9007199254740992}}}]`),
		[]byte(`{"volume_plan_request":{"k":null},"disks_request":[null]}`),
		[]byte(`{"storage_request":1.5}`),
		[]byte(`{"volumes_request":[null]}`),
		// as the upstream plugin stores them
		[]byte(`{"volumes_request":["AUTO:/n:rowo:1:0:0:0:0"],"volumes_limit":["AUTO:/n:rowo:1:0:0:0:0"],"volume_plan_limit":{"AUTO:/n:rowo:1:0:0:0:0":{"/data0":1}},"disks_request":[{"device":"","mounts":null,"read_IOPS":0,"write_IOPS":0,"read_bps":0,"write_bps":0}]}`),
		[]byte(`{"disks_request":[{"device":"","mounts":null,"read_IOPS":1}]}`),
		[]byte(`{"volume_plan_request":{"AUTO:/u:rw:0:0:0:0:0":{"/data0":0}},"zero_byte_bindings":{"/data0":-1}}`),
		deepJSON("volumes_request", 20000),
	)
	for _, s := range seeds {
		f.Add(s)
	}
	node := fuzzNode(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		if w, err := DecodeWorkload(data); err == nil {
			out, err := json.Marshal(w)
			require.NoError(t, err)
			again, err := DecodeWorkload(out)
			require.NoError(t, err, "the encoded form %s decodes", out)
			out2, err := json.Marshal(again)
			require.NoError(t, err)
			require.JSONEq(t, string(out), string(out2))
			require.NotPanics(t, func() { _, _ = w.EngineParams() })
		}
		ws, err := DecodeWorkloads(data)
		if err != nil {
			return
		}
		before := node.Clone()
		if _, _, err := node.Recompute(ws, nil); err == nil {
			require.Equal(t, before, node)
		}
		if next, err := nextUsage(node, nil, nil, data, false, false); err == nil {
			if settled, err := next.Settle(); err == nil {
				requireRecordExact(t, settled)
			}
		}
		_, _, _ = Rules{}.Recompute(node, data, nil)
		require.Equal(t, before, node, "decoding and summing workloads changed the node")
	})
}

func FuzzRealloc(f *testing.F) {
	seeds := append(commonJSONSeeds(),
		[]byte(`{"volumes":["AUTO:/a:rw:200"]}`),
		[]byte(`{"volumes":["AUTO:/a:rw:-300"]}`),
		[]byte(`{"volumes":["AUTO:/a:rw:-301"]}`),
		[]byte(`{"volumes":["AUTO:/q:rw:0:30:0:0:0"]}`),
		[]byte(`{"volumes":["AUTO:/q:rw:0:-60:0:0:0"]}`),
		[]byte(`{"volumes":["AUTO:/b:rw:100","AUTO:/c:mrw:100","AUTO:/u"]}`),
		[]byte(`{"volumes":["AUTO:/m2:mrw:100"]}`),
		[]byte(`{"volumes":["AUTO:/m3:mrw:500"]}`),
		[]byte(`{"volumes":["AUTO:/m1:mrw:-100","AUTO:/m2:mrw:-300"]}`),
		[]byte(`{"volumes":["/data0/x:/x:rw:0:10:0:0:0"]}`),
		[]byte(`{"volumes":["/etc/x:/x:rw:0:10:0:0:0"]}`),
		[]byte(`{"volumes":["/host:/h:rw:10"],"storage":"100"}`),
		[]byte(`{"volumes-request":["AUTO:/a:rw:0"],"volumes":["AUTO:/a:rw:0:0:0:0:8P"]}`),
		[]byte(`{"volumes-request":["AUTO:/a:rw:0:0:0:8P:0"],"volumes":["AUTO:/a:rw:0:0:0:8P:0"]}`),
		[]byte(`{"volumes":["AUTO:/a:rw:8P"]}`),
		[]byte(`{"volumes-request":["AUTO:/q:rw:0"],"volumes":["AUTO:/q:rw:0:8P:0:0:0"]}`),
		[]byte(`{"storage":"-8P"}`),
		[]byte(`{"storage-limit":"8P"}`),
	)
	for _, s := range seeds {
		for which := range uint8(4) {
			f.Add(s, which)
		}
	}
	node := reallocNode(f)
	f.Fuzz(func(t *testing.T, request []byte, which uint8) {
		req, err := ParseWorkloadRequest(request, true)
		if err != nil {
			return
		}
		checkRealloc(t, node, reallocFixtures[int(which)%len(reallocFixtures)], req)
	})
}

// FuzzReallocBindings drives Realloc with fuzzed binding strings and
// storage, so that the fuzzer explores values rather than JSON syntax.
func FuzzReallocBindings(f *testing.F) {
	for _, s := range []struct{ a, b, storage string }{
		{"AUTO:/a:rw:200", "", "0"},
		{"AUTO:/a:rw:-300", "AUTO:/q:rw:0:-60:0:0:0", "-100"},
		{"AUTO:/m1:mrw:-100", "AUTO:/m2:mrw:1", "0"},
		{"AUTO:/m3:mrw:500:1:0:0:0", "AUTO:/u", "1"},
		{"/data0/x:/x:rw:0:10:0:0:0", "/host:/h:rw:10", "8P"},
		{"AUTO:/q:rw:0:40:0:0:0", "AUTO:/b:rw:1", "-8P"},
	} {
		for which := range uint8(4) {
			f.Add(s.a, s.b, s.storage, which)
		}
	}
	node := reallocNode(f)
	f.Fuzz(func(t *testing.T, a, b, storage string, which uint8) {
		list := []string{a}
		if b != "" {
			list = append(list, b)
		}
		body, err := json.Marshal(map[string]any{"volumes": list, "storage": storage})
		require.NoError(t, err)
		req, err := ParseWorkloadRequest(body, true)
		if err != nil {
			return
		}
		checkRealloc(t, node, reallocFixtures[int(which)%len(reallocFixtures)], req)
	})
}

var reallocFixtures = []string{normalWorkload, monoWorkload, otherWorkload, "null"}

// checkRealloc reallocs one of the fixture workloads on the fixture node and
// checks what comes out: nothing given is changed, the new resource is one
// core can store and hand back, its delta commits, and the node then
// agrees with the workloads.
func checkRealloc(t *testing.T, node *Node, oldRaw string, req *WorkloadRequest) {
	old := mustWorkload(t, oldRaw)
	before := node.Clone()
	res, err := node.Realloc(context.Background(), old, req)
	require.Equal(t, before, node, "Realloc changed the node it was given")
	require.Equal(t, mustWorkload(t, oldRaw), old, "Realloc changed the workload it was given")
	if err != nil {
		return
	}

	// the new resource is one core can store and hand back.
	out, err := json.Marshal(res.Workload)
	require.NoError(t, err)
	again, err := DecodeWorkload(out)
	require.NoError(t, err, "the new workload resource %s decodes", out)
	for _, b := range append(again.VolumesRequest, again.VolumesLimit...) {
		require.NoError(t, b.Validate())
		for _, v := range b.Quota {
			requireExact(t, v, "quota", b)
		}
		requireExact(t, b.Size, "size", b)
	}
	requireExact(t, again.StorageRequest, "storage request")
	require.GreaterOrEqual(t, again.StorageLimit, again.StorageRequest)
	for _, d := range append(again.DisksRequest, again.DisksLimit...) {
		for _, v := range d.Quota() {
			requireExact(t, v, "disk quota", d.Device)
		}
	}

	// the engine never gets an AUTO source.
	for _, v := range res.Engine.Volumes {
		src := strings.SplitN(v, ":", 2)[0]
		require.False(t, src == "" || strings.HasSuffix(src, "AUTO"), "engine volume %q", v)
	}

	// the delta commits, and the node then agrees with the workloads.
	delta, err := json.Marshal([]*Workload{res.Delta})
	require.NoError(t, err)
	next, err := nextUsage(node, nil, nil, delta, true, true)
	require.NoError(t, err)
	committed, err := next.Settle()
	require.NoError(t, err, "committing the delta %s", delta)
	after := []*Workload{res.Workload}
	for _, s := range []string{otherWorkload, normalWorkload, monoWorkload} {
		if s != oldRaw {
			after = append(after, mustWorkload(t, s))
		}
	}
	_, diffs, err := committed.Recompute(after, nil)
	require.NoError(t, err)
	require.Empty(t, diffs)

	held, err := sumWorkloads([]*Workload{res.Delta})
	require.NoError(t, err)
	grows := false
	for _, v := range held.amounts() {
		grows = grows || v > 0
	}
	require.Equal(t, grows, res.Grows)
}
