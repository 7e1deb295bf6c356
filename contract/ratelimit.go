package contract

// Levels of the rate limits (docs/rate-limits.md), named by details.level of a RATE_LIMITED
// refusal: one bucket for the whole service, one per agent (tenant + subject), and one
// per tool (tenant + route).
const (
	RateLevelGlobal = "global"
	RateLevelAgent  = "agent"
	RateLevelTool   = "tool"
)
