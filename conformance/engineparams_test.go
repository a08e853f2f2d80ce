package conformance

import (
	"testing"

	"github.com/mitchellh/mapstructure"
	"github.com/projecteru2/core/engine"
	resourcetypes "github.com/projecteru2/core/resource/types"
	"github.com/stretchr/testify/require"
)

// asEngineReadsIt is what core's docker and virt engines make of one
// workload's engine params (VirtualizationCreate and
// VirtualizationUpdateResource): every plugin's params decoded with
// mapstructure into one engine.VirtualizationResource, in map order. core's
// mock:// engine does the same but drops the error, so the end-to-end
// suite cannot see a params shape a real engine would refuse.
func asEngineReadsIt(t *testing.T, params resourcetypes.Resources) engine.VirtualizationResource {
	t.Helper()
	var out engine.VirtualizationResource
	require.NoError(t, engine.MakeVirtualizationResource(params, &out, func(p resourcetypes.Resources, d *engine.VirtualizationResource) error {
		for _, v := range p {
			if err := mapstructure.Decode(v, d); err != nil {
				return err
			}
		}
		return nil
	}), "the engine refuses the params %v", params)
	return out
}

func TestEnginesReadThePluginsEngineParams(t *testing.T) {
	e := newEnv(t)
	m := e.manager(t)
	_, err := m.AddNode(t.Context(), "n1", nodeResources("300G"), engineInfo("engine-n1"))
	require.NoError(t, err)

	request := resourcetypes.Resources{
		"cpumem":  {"cpu-request": 0.5, "memory-request": 512 << 20},
		"compute": {"cpu": 0.5, "memory": "512M"},
		"storage": {"volumes": []string{"AUTO:/data:rw:10G:100:50:1M:1M"}, "storage": "1G"},
	}
	// want is cpumem's part, which ours must neither overwrite nor blank,
	// with storage's keys set as given
	want := func(params resourcetypes.Resources, volumes []string, storage int64, changed bool) engine.VirtualizationResource {
		w := asEngineReadsIt(t, resourcetypes.Resources{"cpumem": params["cpumem"]})
		w.Volumes, w.Storage, w.VolumeChanged = volumes, storage, changed
		w.IOPSOptions = map[string]string{"/dev/vda": "100:50:1048576:1048576"}
		return w
	}

	var deployed resourcetypes.Resources
	step(t, "a deploy's params give the engine the volume on its device, the storage limit and the disk quota, beside cpumem's", func(t *testing.T) {
		workloads, engines, err := m.Alloc(t.Context(), "n1", 1, request)
		require.NoError(t, err)
		require.ElementsMatch(t, []string{"cpumem", "compute", "storage"}, keys(engines[0]))
		// the engine ranges over the plugins in map order: read it a few times
		for range 8 {
			require.Equal(t, want(engines[0], []string{"/data0:/data:rw:10737418240:100:50:1048576:1048576"}, 11*GiB, false), asEngineReadsIt(t, engines[0]))
		}
		deployed = workloads[0]
	})

	step(t, "a realloc's params give the engine the resized volume and say no volume is new", func(t *testing.T) {
		engines, _, _, err := m.Realloc(t.Context(), "n1", deployed, resourcetypes.Resources{"storage": {"volumes": []string{"AUTO:/data:rw:5G"}}})
		require.NoError(t, err)
		for range 8 {
			require.Equal(t, want(engines, []string{"/data0:/data:rw:16106127360:100:50:1048576:1048576"}, 16*GiB, false), asEngineReadsIt(t, engines))
		}
	})

	step(t, "a realloc that binds a new volume says so", func(t *testing.T) {
		engines, _, _, err := m.Realloc(t.Context(), "n1", deployed, resourcetypes.Resources{"storage": {"volumes": []string{"AUTO:/logs:rw:1G"}}})
		require.NoError(t, err)
		got := asEngineReadsIt(t, engines)
		require.True(t, got.VolumeChanged)
		require.ElementsMatch(t, []string{"/data0:/data:rw:10737418240:100:50:1048576:1048576", "/data0:/logs:rw:1073741824"}, got.Volumes)
		require.Equal(t, 12*GiB, got.Storage)
	})
}
