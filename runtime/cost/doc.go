// Package cost holds the cost attribution report: model invocations priced from a
// pricing file and summed by agent, tool, model or conversation over a range.
package cost
