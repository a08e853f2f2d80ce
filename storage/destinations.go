package storage

import (
	"maps"
	"path"
	"slices"
	"strconv"

	"github.com/eru-extend/resources/storage/pool"
)

// mount is one thing a workload mounts in its container: where (cleaned,
// as the engine compares mount points), the binding that asks for it as
// an error names it, and what makes it the same binding as another (a
// volume binding's source, destination as written, and flags; every pool
// volume is an object of its own).
type mount struct {
	destination, binding, same string
}

// mountsOf lists the mounts of a workload's volume and pool bindings.
func mountsOf(volumes []*VolumeBinding, pools []*pool.Binding) []mount {
	out := make([]mount, 0, len(volumes)+len(pools))
	for _, b := range volumes {
		out = append(out, mount{path.Clean(b.Destination), b.String(), "volume " + b.Source + ":" + b.Destination + ":" + b.Flags})
	}
	for i, b := range pools {
		out = append(out, mount{path.Clean(b.Destination), b.String(), "pool volume " + strconv.Itoa(i)})
	}
	return out
}

// oneMountPerDestination refuses two different bindings mounting at one
// destination: the engine refuses a container with a duplicate mount point,
// so space reserved for it would be held by a workload that cannot start.
// A binding listed again with its source and flags is not a second mount
// (the request parser refuses it as listed twice; a stored upstream record
// may hold it, and is read as it is).
func oneMountPerDestination(volumes []*VolumeBinding, pools []*pool.Binding) error {
	first := map[string]mount{}
	for _, m := range mountsOf(volumes, pools) {
		prev, ok := first[m.destination]
		switch {
		case !ok:
			first[m.destination] = m
		case prev.same != m.same:
			return errInvalid("destination %s is mounted twice, by %s and %s: a container takes one mount per destination", m.destination, prev.binding, m.binding)
		}
	}
	return nil
}

// poolBindingsOf parses the pool plan keys of a workload, in key order;
// a key that does not parse is left out (it mounts nothing the engine is
// given).
func poolBindingsOf(plans pool.Plans) []*pool.Binding {
	var out []*pool.Binding
	for _, key := range slices.Sorted(maps.Keys(plans)) {
		if b, err := pool.ParseBinding(key, true); err == nil {
			out = append(out, b)
		}
	}
	return out
}
