package types

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// encodingJSON is the answer as encoding/json writes it without the
// method: what the plugins printed before AppendJSON, HTML escaping off.
func encodingJSON(t *testing.T, d DeployCapacity) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(plainDeployCapacity(d)))
	return b.String()
}

func TestACapacityAnswerIsEncodedAsEncodingJSONEncodesIt(t *testing.T) {
	floats := []float64{0, 1, -1, 0.5, 1.0 / 3, 2.5e-7, 1e-6, 9.99e-7, 1e21, 1e20, 123456789.125, -3e-9, math.MaxFloat64, math.SmallestNonzeroFloat64, math.Copysign(0, -1)}
	names := []string{"n1", "node-007.example.com", "", "a<b>&c", "quo\"te", "back\\slash", "tab\there", "nl\nx", "ctl\x01\x1f\x7f", "\b\f\r", "é ü 漢字", "bad\xffutf8", "line\u2028sep\u2029", "z", "A"}
	for _, c := range []struct {
		name string
		d    DeployCapacity
	}{
		{"an empty map", DeployCapacity{Nodes: map[string]NodeCapacity{}, Total: 0}},
		{"a nil map (null)", DeployCapacity{Total: 3}},
		{"one node", DeployCapacity{Nodes: map[string]NodeCapacity{"n1": {Capacity: 4, Usage: 0.25, Rate: 0.5, Weight: 1}}, Total: 4}},
		{"names that need escaping, in encoding/json's order", func() DeployCapacity {
			d := DeployCapacity{Nodes: map[string]NodeCapacity{}, Total: -7}
			for i, n := range names {
				d.Nodes[n] = NodeCapacity{Capacity: i - 3, Usage: floats[i%len(floats)], Rate: floats[(i+5)%len(floats)], Weight: floats[(i+9)%len(floats)]}
			}
			return d
		}()},
		{"a thousand random nodes", func() DeployCapacity {
			r := rand.New(rand.NewPCG(1, 2))
			d := DeployCapacity{Nodes: map[string]NodeCapacity{}, Total: 1 << 40}
			for range 1000 {
				name := make([]byte, 1+r.IntN(12))
				for j := range name {
					name[j] = byte(r.IntN(256))
				}
				d.Nodes[string(name)] = NodeCapacity{Capacity: r.IntN(1 << 20), Usage: r.Float64() * math.Pow(10, float64(r.IntN(50)-25)), Rate: -r.Float64(), Weight: float64(r.IntN(100)) / 7}
			}
			return d
		}()},
	} {
		t.Run(c.name, func(t *testing.T) {
			want := encodingJSON(t, c.d)
			got, err := c.d.AppendJSON([]byte("prefix:"))
			require.NoError(t, err)
			require.Equal(t, "prefix:"+want, string(got)+"\n", "appended after what the buffer held")
			var b bytes.Buffer
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false)
			require.NoError(t, enc.Encode(c.d))
			require.Equal(t, want, b.String(), "through encoding/json's Encoder, HTML escaping off")
			plain, err := json.Marshal(plainDeployCapacity(c.d))
			require.NoError(t, err)
			marshalled, err := json.Marshal(c.d)
			require.NoError(t, err)
			require.Equal(t, string(plain), string(marshalled), "through json.Marshal, HTML escaped")
		})
	}
	t.Run("a float encoding/json refuses is refused with its error", func(t *testing.T) {
		for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
			d := DeployCapacity{Nodes: map[string]NodeCapacity{"n1": {Weight: f}}}
			_, want := json.Marshal(plainDeployCapacity(d))
			require.Error(t, want)
			_, err := d.AppendJSON(nil)
			require.EqualError(t, err, want.Error())
		}
	})
}

func TestACapacityAnswerToldItsNamesIsEncodedAsWithout(t *testing.T) {
	nodes := map[string]NodeCapacity{"n1": {Capacity: 1}, "n2": {Capacity: 2, Usage: 0.5}, "n3": {Capacity: 3, Rate: 1.0 / 3}}
	d := DeployCapacity{Nodes: nodes, Total: 6}
	want := encodingJSON(t, d)
	for _, c := range []struct {
		name  string
		order []string
	}{
		{"the names sorted, as the engine tells them", []string{"n1", "n2", "n3"}},
		{"the names unsorted", []string{"n3", "n1", "n2"}},
		{"sorted names of which one is no node of the answer", []string{"n1", "n2", "n4"}},
		{"sorted names of which one is missing and one is another node", []string{"n0", "n1", "n2"}},
		{"a name twice", []string{"n1", "n1", "n3"}},
		{"fewer names than nodes", []string{"n1", "n2"}},
		{"more names than nodes", []string{"n1", "n2", "n3", "n4"}},
		{"no names", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := d.InOrder(c.order).AppendJSON([]byte("prefix:"))
			require.NoError(t, err)
			require.Equal(t, "prefix:"+want, string(got)+"\n")
		})
	}
	t.Run("a float encoding/json refuses is refused with its error in order too", func(t *testing.T) {
		bad := DeployCapacity{Nodes: map[string]NodeCapacity{"n1": {}, "n2": {Usage: math.NaN()}}}
		_, want := json.Marshal(plainDeployCapacity(bad))
		require.Error(t, want)
		got, err := bad.InOrder([]string{"n1", "n2"}).AppendJSON([]byte("prefix:"))
		require.EqualError(t, err, want.Error())
		require.Equal(t, "prefix:", string(got), "nothing appended")
	})
}
