package contract

import (
	"errors"
	"regexp"
)

// RouteCosts is the cost attribution report (docs/costs.md).
var RouteCosts = Route{MethodPost, PrefixA2A + "/costs", []string{CapCostsRead}}

// Groupings of a cost report (CostsRequest.GroupBy).
const (
	CostsByAgent        = "agent"
	CostsByTool         = "tool"
	CostsByModel        = "model"
	CostsByConversation = "conversation"
)

// CostGroupings lists every grouping.
var CostGroupings = []string{CostsByAgent, CostsByTool, CostsByModel, CostsByConversation}

// Bounds of a cost report's topN.
const (
	DefaultCostsTopN = 10
	MaxCostsTopN     = 100
)

// How an invocation's model found its price (CostGroup.PricingMatch), from the
// strongest to the weakest: its own entry in the pricing file, an alias of one, the
// fallback price, or none at all (it then costs 0).
const (
	PricingExact    = "exact"
	PricingAlias    = "alias"
	PricingFallback = "fallback"
	PricingNone     = "none"
)

// CostsRequest is the body of POST /costs. FromMs (inclusive) and ToMs (exclusive)
// bound the invocations' startedAtMs; absent bounds are open.
type CostsRequest struct {
	FromMs  *int64 `json:"fromMs"`
	ToMs    *int64 `json:"toMs"`
	GroupBy string `json:"groupBy"`
	TopN    *int   `json:"topN"`
}

// CostsResponse is the report: totals over every invocation in the range, and the
// topN groups by cost (highest first, ties by key).
type CostsResponse struct {
	Totals CostTotals  `json:"totals"`
	Groups []CostGroup `json:"groups"`
}

// CostTotals sums every invocation of the range.
type CostTotals struct {
	Calls        int64   `json:"calls"`
	InputTokens  int64   `json:"inputTokens"`
	OutputTokens int64   `json:"outputTokens"`
	CachedTokens int64   `json:"cachedTokens"`
	CostUSD      Decimal `json:"costUsd"`
}

// CostGroup sums the invocations of one agent, tool, model or conversation. Key is
// null for the invocations that name no tool (groupBy tool). PricingMatch is the
// weakest match among the group's invocations.
type CostGroup struct {
	Key             *string `json:"key"`
	Calls           int64   `json:"calls"`
	InputTokens     int64   `json:"inputTokens"`
	OutputTokens    int64   `json:"outputTokens"`
	CachedTokens    int64   `json:"cachedTokens"`
	AvgInputTokens  Decimal `json:"avgInputTokens"`
	AvgOutputTokens Decimal `json:"avgOutputTokens"`
	CostUSD         Decimal `json:"costUsd"`
	PricingMatch    string  `json:"pricingMatch"`
}

// Decimal is an exact decimal number, written on the wire as a JSON number with
// exactly these digits (never through a float), such as 1234.5678901234.
type Decimal string

var decimalSyntax = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?$`)

// ErrNotDecimal is the error of a Decimal that is not a plain decimal number.
var ErrNotDecimal = errors.New("not a decimal number")

// MarshalJSON writes d as a JSON number.
func (d Decimal) MarshalJSON() ([]byte, error) {
	if !decimalSyntax.MatchString(string(d)) {
		return nil, ErrNotDecimal
	}
	return []byte(d), nil
}

// UnmarshalJSON reads a JSON number without converting it.
func (d *Decimal) UnmarshalJSON(b []byte) error {
	if !decimalSyntax.Match(b) {
		return ErrNotDecimal
	}
	*d = Decimal(b)
	return nil
}

// PricingFile is the format of the file AGENT_CONTEXT_PRICING_FILE names (docs/costs.md):
// prices in USD per million tokens by model name, aliases (another name → a model of
// Models) and the price of every other model. Prices are plain decimal numbers such
// as 0.4.
type PricingFile struct {
	Models   map[string]ModelPrice `json:"models"`
	Aliases  map[string]string     `json:"aliases"`
	Fallback *ModelPrice           `json:"fallback"`
}

// ModelPrice is one model's price. Without CachedInputPerMTok, cached input costs the
// input price.
type ModelPrice struct {
	InputPerMTok       *Decimal `json:"inputPerMTok"`
	OutputPerMTok      *Decimal `json:"outputPerMTok"`
	CachedInputPerMTok *Decimal `json:"cachedInputPerMTok"`
}
