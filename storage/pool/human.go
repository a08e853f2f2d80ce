package pool

import (
	"strconv"
	"strings"
)

// Human writes a byte count in binary units for messages: "200 GiB",
// "1.5 TiB", "512 B". At most three decimals, trailing zeros dropped.
func Human(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	neg := n < 0
	v := float64(n)
	if neg {
		v = -v
	}
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	s := strconv.FormatFloat(v, 'f', 3, 64)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if neg {
		s = "-" + s
	}
	return s + " " + units[i]
}
