package types

import "time"

// Clock tells the time. The zero Clock is the system clock; tests inject
// their own.
type Clock func() time.Time

// Now is the clock's time.
func (c Clock) Now() time.Time {
	if c == nil {
		return time.Now()
	}
	return c()
}
