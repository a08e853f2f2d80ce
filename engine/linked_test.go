package engine

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMoreKeysCarriesTheKeysThroughWrapping(t *testing.T) {
	err := fmt.Errorf("pool admission: %w", MoreKeys("/resource/storage/n2", "/resource/storage/n3"))
	var mk *moreKeys
	require.True(t, errors.As(err, &mk))
	require.Equal(t, []string{"/resource/storage/n2", "/resource/storage/n3"}, mk.keys)
	require.Equal(t, []string{"/resource/storage/n3"}, missing([]string{"/a", "/resource/storage/n2"}, mk.keys), "only keys not yet read start a new attempt")
	require.ErrorContains(t, err, `needs linked keys it did not read: ["/resource/storage/n2" "/resource/storage/n3"]`)
}
