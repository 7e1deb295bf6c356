package pgmetrics

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestScrapeCacheReadsOncePerInterval: scrapes within the interval answer from the
// last read, a failed one included, and concurrent scrapes that find it stale share
// one read.
func TestScrapeCacheReadsOncePerInterval(t *testing.T) {
	t.Parallel()
	reads := 0
	fail := errors.New("down")
	c := newScrapeCache(time.Hour, func() (int, error) {
		reads++
		if reads == 1 {
			return 0, fail
		}
		return reads, nil
	})
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			_, err := c.get()
			require.ErrorIs(t, err, fail)
		})
	}
	wg.Wait()
	require.Equal(t, 1, reads, "one read for ten scrapes, its failure kept")

	c.readAt = time.Now().Add(-time.Hour)
	v, err := c.get()
	require.NoError(t, err)
	require.Equal(t, 2, v, "a stale read is read again")
	require.Equal(t, DefaultRefresh, newScrapeCache(0, c.read).interval, "0 is the default")
}
