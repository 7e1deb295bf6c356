package console

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
)

// Each ancestor sits a column left of the window it was derived into, the longest path
// deciding, so that every edge points right; every derivation is drawn once.
func TestLayoutLineage(t *testing.T) {
	t.Parallel()
	l := contract.Lineage{
		Windows: []contract.LineageWindow{{ID: "a", CreatedAtMs: 1}, {ID: "b", CreatedAtMs: 2}, {ID: "c", CreatedAtMs: 3}, {ID: "d", CreatedAtMs: 4}},
		Derivations: []contract.Derivation{
			{SourceWindowID: "a", TargetWindowID: "b", Kind: "assemble"},
			{SourceWindowID: "b", TargetWindowID: "d", Kind: "compress"},
			{SourceWindowID: "a", TargetWindowID: "d", Kind: "trim"},
			{SourceWindowID: "c", TargetWindowID: "d", Kind: "reorder"},
		},
	}
	g := layoutLineage(l, "d")
	x := map[string]int{}
	for _, n := range g.Nodes {
		x[n.ID] = n.X
		require.Equal(t, n.ID == "d", n.Focus)
	}
	require.Less(t, x["a"], x["b"])
	require.Less(t, x["b"], x["d"])
	require.Less(t, x["c"], x["d"])
	require.Len(t, g.Edges, 4)
	for _, e := range g.Edges {
		require.Less(t, e.X1, e.X2, e.Kind)
	}
	require.Equal(t, []graphNode{{ID: "x", Label: "x", Stage: " · ", X: graphPad, Y: graphPad, Focus: true}},
		layoutLineage(contract.Lineage{Windows: []contract.LineageWindow{{ID: "x"}}}, "x").Nodes)
}

// Bars are as long as their share of the most expensive group, a zero cost none; a key
// that is absent shows as (none), a long one is cut.
func TestCostChart(t *testing.T) {
	t.Parallel()
	long := "a-very-long-agent-name-that-does-not-fit-the-label-column"
	ch := costChart([]contract.CostGroup{{Key: &long, CostUSD: "2"}, {CostUSD: "0.5"}, {CostUSD: "0"}})
	require.Len(t, ch.Bars, 3)
	require.Equal(t, chartBarWidth, ch.Bars[0].Width)
	require.Equal(t, chartBarWidth/4, ch.Bars[1].Width)
	require.Zero(t, ch.Bars[2].Width)
	require.Equal(t, "(none)", ch.Bars[1].Label)
	require.Equal(t, 32, len([]rune(ch.Bars[0].Label)))
	require.Equal(t, "$2", ch.Bars[0].Value)
}
