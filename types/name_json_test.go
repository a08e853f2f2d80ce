package types

import (
	"bytes"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestANameAnswerIsEncodedAsEncodingJSONEncodesAString(t *testing.T) {
	for _, name := range []string{"storage", "compute", "", "a<b>&c", "quo\"te", "back\\slash", "nl\nx", "ctl\x01\x7f", "é 漢字", "bad\xffutf8", "line\u2028sep"} {
		t.Run("the name "+strconv.Quote(name)+" encodes as encoding/json encodes it", func(t *testing.T) {
			var b bytes.Buffer
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false)
			require.NoError(t, enc.Encode(name))
			got, err := NameAnswer(name).AppendJSON([]byte("prefix:"))
			require.NoError(t, err)
			require.Equal(t, "prefix:"+b.String(), string(got)+"\n")
			b.Reset()
			require.NoError(t, enc.Encode(NameAnswer(name)))
			require.Equal(t, string(got[len("prefix:"):])+"\n", b.String(), "the type through encoding/json is still a string")
		})
	}
}
