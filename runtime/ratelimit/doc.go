// Package ratelimit holds the rate-limit budgets (agent, tool, global) checked after
// authentication, and the port the limiters implement.
package ratelimit
