package cost

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strings"

	"github.com/go-json-experiment/json"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// CostStore is the storage of the cost report.
type CostStore interface {
	// CostReport sums the model invocations of scope whose startedAtMs is in
	// [q.FromMs, q.ToMs), leaving out those of deleted conversations: the totals, and
	// the q.TopN groups of q.GroupBy by cost (highest first, ties by key, no key
	// last), priced by q.Pricing with exact decimal arithmetic. Errors:
	// SERVICE_UNAVAILABLE.
	CostReport(ctx context.Context, scope runtime.Scope, q CostQuery) (contract.CostsResponse, error)
}

// CostQuery is a validated cost report request.
type CostQuery struct {
	FromMs, ToMs int64
	GroupBy      string
	TopN         int
	Pricing      Pricing
}

// Price is a model's price in USD per million tokens, each an exact decimal;
// CachedInput is the input price where the file gives none.
type Price struct {
	Input, Output, CachedInput contract.Decimal
}

// PriceEntry is the price an invocation of Model pays, and how it was found: exact
// (the model's own) or alias (the model it is an alias of).
type PriceEntry struct {
	Model string
	Match string
	Price
}

// Pricing is the validated pricing file: an entry per model and alias, sorted by
// model, and the fallback price of every other model (nil: they cost 0, with
// pricingMatch none).
type Pricing struct {
	Entries  []PriceEntry
	Fallback *Price
}

// PriceOf returns the price an invocation of model pays and how it was found: its
// entry (exact or alias), else the fallback (fallback), else nothing (a zero price,
// none). Models match exactly, case included.
func (p Pricing) PriceOf(model string) (Price, string) {
	if i, ok := slices.BinarySearchFunc(p.Entries, model, func(e PriceEntry, m string) int {
		return strings.Compare(e.Model, m)
	}); ok {
		return p.Entries[i].Price, p.Entries[i].Match
	}
	if p.Fallback != nil {
		return *p.Fallback, contract.PricingFallback
	}
	return Price{Input: "0", Output: "0", CachedInput: "0"}, contract.PricingNone
}

// Bounds of a price in the pricing file: a decimal with at most 7 digits before the
// point and 12 after it.
const (
	maxPriceIntDigits  = 7
	maxPriceFracDigits = 12
)

// ParsePricing reads a pricing file (contract.PricingFile, JSON) and checks it: no
// unknown or duplicate members, model names and aliases that could be an invocation's
// model, both prices of every entry, non-negative plain decimals, and aliases that
// name a model of the file without being one.
func ParsePricing(data []byte) (Pricing, error) {
	var f contract.PricingFile
	if err := json.Unmarshal(data, &f, json.RejectUnknownMembers(true)); err != nil {
		var semantic *json.SemanticError
		if errors.As(err, &semantic) && errors.Is(semantic.Err, contract.ErrNotDecimal) {
			return Pricing{}, fmt.Errorf("%s must be a plain non-negative decimal number such as 0.4", semantic.JSONPointer)
		}
		return Pricing{}, err
	}
	var p Pricing
	for model, mp := range f.Models {
		if err := runtime.ValidateID("model", model); err != nil {
			return Pricing{}, fmt.Errorf("models: %q is not a model name", model)
		}
		price, err := checkPrice("models."+model, mp)
		if err != nil {
			return Pricing{}, err
		}
		p.Entries = append(p.Entries, PriceEntry{Model: model, Match: contract.PricingExact, Price: price})
	}
	for alias, model := range f.Aliases {
		if err := runtime.ValidateID("alias", alias); err != nil {
			return Pricing{}, fmt.Errorf("aliases: %q is not a model name", alias)
		}
		if _, ok := f.Models[alias]; ok {
			return Pricing{}, fmt.Errorf("aliases.%s: %q is a model of its own", alias, alias)
		}
		target, ok := f.Models[model]
		if !ok {
			return Pricing{}, fmt.Errorf("aliases.%s: %q is not in models", alias, model)
		}
		price, err := checkPrice("models."+model, target)
		if err != nil {
			return Pricing{}, err
		}
		p.Entries = append(p.Entries, PriceEntry{Model: alias, Match: contract.PricingAlias, Price: price})
	}
	slices.SortFunc(p.Entries, func(a, b PriceEntry) int { return strings.Compare(a.Model, b.Model) })
	if f.Fallback != nil {
		price, err := checkPrice("fallback", *f.Fallback)
		if err != nil {
			return Pricing{}, err
		}
		p.Fallback = &price
	}
	return p, nil
}

func checkPrice(path string, mp contract.ModelPrice) (Price, error) {
	for _, c := range []struct {
		name string
		v    *contract.Decimal
	}{{"inputPerMTok", mp.InputPerMTok}, {"outputPerMTok", mp.OutputPerMTok}, {"cachedInputPerMTok", mp.CachedInputPerMTok}} {
		if c.v == nil {
			if c.name == "cachedInputPerMTok" {
				continue
			}
			return Price{}, fmt.Errorf("%s.%s is required", path, c.name)
		}
		intPart, frac, _ := strings.Cut(string(*c.v), ".")
		if strings.HasPrefix(intPart, "-") {
			return Price{}, fmt.Errorf("%s.%s must not be negative", path, c.name)
		}
		if len(intPart) > maxPriceIntDigits || len(frac) > maxPriceFracDigits {
			return Price{}, fmt.Errorf("%s.%s must have at most %d digits before the point and %d after it",
				path, c.name, maxPriceIntDigits, maxPriceFracDigits)
		}
	}
	price := Price{Input: *mp.InputPerMTok, Output: *mp.OutputPerMTok, CachedInput: *mp.InputPerMTok}
	if mp.CachedInputPerMTok != nil {
		price.CachedInput = *mp.CachedInputPerMTok
	}
	return price, nil
}

// Attribution is the cost attribution report (docs/costs.md): what the model invocations of a
// scope cost, priced from the pricing file.
type Attribution struct {
	store   CostStore
	pricing Pricing
}

// NewAttribution returns the report over db, priced by pricing.
func NewAttribution(store CostStore, pricing Pricing) *Attribution {
	return &Attribution{store: store, pricing: pricing}
}

// Report validates a cost report request and computes the report.
func (c *Attribution) Report(ctx context.Context, scope runtime.Scope, req *contract.CostsRequest) (contract.CostsResponse, error) {
	q, err := ValidateCostsRequest(req)
	if err != nil {
		return contract.CostsResponse{}, err
	}
	q.Pricing = c.pricing
	return c.store.CostReport(ctx, scope, q)
}

// ValidateCostsRequest checks a cost report request and returns its query (without
// pricing): a range within the wire's integers whose start is not after its end, a
// known grouping, and topN 1–100 (default 10).
func ValidateCostsRequest(req *contract.CostsRequest) (CostQuery, error) {
	q := CostQuery{FromMs: 0, ToMs: math.MaxInt64}
	for _, b := range []struct {
		field string
		v     *int64
		dst   *int64
	}{{"fromMs", req.FromMs, &q.FromMs}, {"toMs", req.ToMs, &q.ToMs}} {
		if b.v == nil {
			continue
		}
		if *b.v < 0 || *b.v > runtime.MaxSequence {
			return CostQuery{}, runtime.TooMany(b.field, runtime.MaxSequence, "%s must be between 0 and %d", b.field, int64(runtime.MaxSequence))
		}
		*b.dst = *b.v
	}
	if q.FromMs > q.ToMs {
		return CostQuery{}, runtime.Invalid("fromMs", "fromMs must not be after toMs")
	}
	if req.GroupBy == "" {
		return CostQuery{}, runtime.Invalid("groupBy", "groupBy is required: one of %s", strings.Join(contract.CostGroupings, ", "))
	}
	if !slices.Contains(contract.CostGroupings, req.GroupBy) {
		return CostQuery{}, runtime.OneOf("groupBy", contract.CostGroupings)
	}
	q.GroupBy = req.GroupBy
	topN, err := runtime.OptionalCount("topN", req.TopN, contract.DefaultCostsTopN, contract.MaxCostsTopN)
	q.TopN = topN
	return q, err
}

// InvocationCost prices one model invocation as the report prices each of them, and
// says how its model found its price. The decimal is exact, without trailing zeros.
func (c *Attribution) InvocationCost(m contract.ModelInvocation) (contract.Decimal, string) {
	price, match := c.pricing.PriceOf(m.Model)
	perMTok := new(big.Rat)
	for _, term := range []struct {
		tokens int64
		price  contract.Decimal
	}{{m.InputTokens - m.CachedTokens, price.Input}, {m.CachedTokens, price.CachedInput}, {m.OutputTokens, price.Output}} {
		p, ok := new(big.Rat).SetString(string(term.price))
		if !ok {
			continue
		}
		perMTok.Add(perMTok, p.Mul(p, new(big.Rat).SetInt64(term.tokens)))
	}
	usd := perMTok.Quo(perMTok, big.NewRat(1_000_000, 1))
	s := usd.FloatString(maxPriceFracDigits + 6)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	if s == "-0" {
		s = "0"
	}
	return contract.Decimal(s), match
}
