package jwtauth

import (
	"context"
	"testing"

	"github.com/lestrrat-go/jwx/v2/jwa"
)

// BenchmarkVerify measures one verification of an EdDSA token against a JWKS file
// (key set cached in memory; one stat per call to notice a rotation): "cold" runs the
// full check every time (cache disabled), "cached" answers from the verified-token cache.
func BenchmarkVerify(b *testing.B) {
	for _, bc := range []struct {
		name  string
		cache int
	}{{"cold", -1}, {"cached", DefaultCacheSize}} {
		b.Run(bc.name, func(b *testing.B) {
			key := mustKey(b, jwa.EdDSA, "bench")
			tb := setup(b, Options{CacheSize: bc.cache}, key)
			tok := key.sign(b, validClaims(tb.clock.Now()), nil)
			ctx := context.Background()
			if _, err := tb.v.Verify(ctx, tok); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := tb.v.Verify(ctx, tok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
