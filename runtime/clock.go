package runtime

import (
	"time"

	"github.com/google/uuid"
)

// Clock tells the time. Tests that need a fixed time pass their own.
type Clock interface {
	Now() time.Time
}

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns time.Now.
func (SystemClock) Now() time.Time { return time.Now() }

// NewID returns a server-generated record ID: a UUIDv7, which sorts by creation time.
func NewID() string {
	return uuid.Must(uuid.NewV7()).String()
}
