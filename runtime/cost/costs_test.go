package cost_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime/cost"
)

// A model pays its own price, or the one its alias names, matched case and all; any
// other model pays the fallback, or nothing when there is none.
func TestPriceOf(t *testing.T) {
	t.Parallel()
	pricing, err := cost.ParsePricing([]byte(`{
		"models": {"m": {"inputPerMTok": 3, "outputPerMTok": 15, "cachedInputPerMTok": 0.3},
		           "plain": {"inputPerMTok": 1.5, "outputPerMTok": 2.25}},
		"aliases": {"m-2025": "m"},
		"fallback": {"inputPerMTok": 1, "outputPerMTok": 4}}`))
	require.NoError(t, err)
	for model, want := range map[string]struct {
		price cost.Price
		match string
	}{
		"m":      {cost.Price{Input: "3", Output: "15", CachedInput: "0.3"}, contract.PricingExact},
		"plain":  {cost.Price{Input: "1.5", Output: "2.25", CachedInput: "1.5"}, contract.PricingExact},
		"m-2025": {cost.Price{Input: "3", Output: "15", CachedInput: "0.3"}, contract.PricingAlias},
		"M":      {cost.Price{Input: "1", Output: "4", CachedInput: "1"}, contract.PricingFallback},
		"other":  {cost.Price{Input: "1", Output: "4", CachedInput: "1"}, contract.PricingFallback},
	} {
		price, match := pricing.PriceOf(model)
		require.Equal(t, want.price, price, model)
		require.Equal(t, want.match, match, model)
	}
	price, match := cost.Pricing{}.PriceOf("m")
	require.Equal(t, cost.Price{Input: "0", Output: "0", CachedInput: "0"}, price)
	require.Equal(t, contract.PricingNone, match)
}

// One invocation costs what the report would charge it: uncached input, cached input
// and output at their prices per million tokens, exactly, without trailing zeros.
func TestInvocationCost(t *testing.T) {
	t.Parallel()
	pricing, err := cost.ParsePricing([]byte(`{
		"models": {"m": {"inputPerMTok": 3, "outputPerMTok": 15, "cachedInputPerMTok": 0.3}},
		"fallback": {"inputPerMTok": 1, "outputPerMTok": 4}}`))
	require.NoError(t, err)
	costs := cost.NewAttribution(nil, pricing)
	for _, c := range []struct {
		model                 string
		input, cached, output int64
		want                  contract.Decimal
		match                 string
	}{
		// (1000 − 200) × 3 + 200 × 0.3 + 500 × 15 = 9960 per million.
		{"m", 1000, 200, 500, "0.00996", contract.PricingExact},
		{"m", 1_000_000, 0, 0, "3", contract.PricingExact},
		{"other", 3, 0, 1, "0.000007", contract.PricingFallback},
		{"m", 0, 0, 0, "0", contract.PricingExact},
	} {
		got, match := costs.InvocationCost(contract.ModelInvocation{Model: c.model, InputTokens: c.input,
			CachedTokens: c.cached, OutputTokens: c.output})
		require.Equal(t, c.want, got, "%+v", c)
		require.Equal(t, c.match, match)
	}
	got, match := cost.NewAttribution(nil, cost.Pricing{}).InvocationCost(contract.ModelInvocation{Model: "m", InputTokens: 10})
	require.Equal(t, contract.Decimal("0"), got)
	require.Equal(t, contract.PricingNone, match)
}
