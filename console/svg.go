package console

import (
	"slices"
	"strconv"

	"github.com/agent-context/agent-context/contract"
)

// Sizes of the lineage graph: a column per derivation step, oldest on the left.
const (
	nodeWidth  = 200
	nodeHeight = 52
	colGap     = 90
	rowGap     = 24
	graphPad   = 16
)

// lineageGraph is a window's lineage laid out for SVG: windows as boxes, derivations
// as labelled arrows from source to target.
type lineageGraph struct {
	Width, Height int
	Nodes         []graphNode
	Edges         []graphEdge
}

type graphNode struct {
	ID, Label, Stage string
	X, Y             int
	Tokens           int64
	Focus            bool
}

type graphEdge struct {
	X1, Y1, X2, Y2 int
	LabelX, LabelY int
	Kind           string
}

// layoutLineage places the window focus at the right and each ancestor one column
// further left per derivation step (the longest path wins, so every edge points
// right).
func layoutLineage(l contract.Lineage, focus string) lineageGraph {
	depth := map[string]int{focus: 0}
	// Ancestors lie at most len(windows) steps back; relaxing that often settles
	// every depth without recursion.
	for range l.Windows {
		changed := false
		for _, d := range l.Derivations {
			td, ok := depth[d.TargetWindowID]
			if !ok {
				continue
			}
			if sd, known := depth[d.SourceWindowID]; !known || sd < td+1 {
				depth[d.SourceWindowID] = td + 1
				changed = true
			}
		}
		if !changed {
			break
		}
	}
	maxDepth := 0
	for _, d := range depth {
		maxDepth = max(maxDepth, d)
	}
	windows := slices.Clone(l.Windows)
	slices.SortStableFunc(windows, func(a, b contract.LineageWindow) int {
		if a.CreatedAtMs != b.CreatedAtMs {
			return int(a.CreatedAtMs - b.CreatedAtMs)
		}
		return compareStrings(a.ID, b.ID)
	})
	rows := map[int]int{}
	pos := map[string]graphNode{}
	g := lineageGraph{}
	for _, w := range windows {
		d, ok := depth[w.ID]
		if !ok {
			continue
		}
		col := maxDepth - d
		n := graphNode{ID: w.ID, Label: short(w.ID), Stage: w.Stage + " · " + w.Purpose, Tokens: w.TokenCount,
			X: graphPad + col*(nodeWidth+colGap), Y: graphPad + rows[col]*(nodeHeight+rowGap), Focus: w.ID == focus}
		rows[col]++
		pos[w.ID] = n
		g.Nodes = append(g.Nodes, n)
		g.Width = max(g.Width, n.X+nodeWidth+graphPad)
		g.Height = max(g.Height, n.Y+nodeHeight+graphPad)
	}
	for _, d := range l.Derivations {
		s, okS := pos[d.SourceWindowID]
		t, okT := pos[d.TargetWindowID]
		if !okS || !okT {
			continue
		}
		e := graphEdge{X1: s.X + nodeWidth, Y1: s.Y + nodeHeight/2, X2: t.X - 6, Y2: t.Y + nodeHeight/2, Kind: d.Kind}
		e.LabelX, e.LabelY = (e.X1+e.X2)/2, (e.Y1+e.Y2)/2-6
		g.Edges = append(g.Edges, e)
	}
	return g
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// short is an ID cut to fit a node.
func short(id string) string { return clip(id, 22) }

// clip cuts s to at most n characters, the last an ellipsis when it was cut.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// Sizes of the cost chart: a horizontal bar per group.
const (
	chartLabelWidth = 220
	chartBarWidth   = 460
	chartRow        = 28
	chartValueWidth = 120
)

// barChart is a cost report laid out for SVG.
type barChart struct {
	Width, Height int
	Bars          []chartBar
}

type chartBar struct {
	Label, Value string
	Y, Width     int
	TextY        int
}

// costChart draws each group's cost as a bar as long as its share of the largest.
// The exact decimal is what the bar's label shows; the float only scales the bar.
func costChart(groups []contract.CostGroup) barChart {
	ch := barChart{Width: chartLabelWidth + chartBarWidth + chartValueWidth, Height: max(1, len(groups))*chartRow + 8}
	top := 0.0
	costs := make([]float64, len(groups))
	for i, g := range groups {
		costs[i], _ = strconv.ParseFloat(string(g.CostUSD), 64)
		top = max(top, costs[i])
	}
	for i, g := range groups {
		width := 0
		if top > 0 && costs[i] > 0 {
			// A cost too small to see at this scale still shows as a sliver.
			width = max(2, int(costs[i]/top*chartBarWidth))
		}
		label := clip(derefOr(g.Key, "(none)"), 32)
		ch.Bars = append(ch.Bars, chartBar{Label: label, Value: "$" + string(g.CostUSD), Y: 4 + i*chartRow,
			Width: width, TextY: 4 + i*chartRow + chartRow/2 + 4})
	}
	return ch
}
