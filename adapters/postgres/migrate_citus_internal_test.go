package postgres

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Reference tables come first, and every table after the tables its foreign keys
// point at, whatever the names say; a reference to a table outside the list (already
// distributed) orders nothing, and a cycle still yields every table once.
func TestDistributionOrder(t *testing.T) {
	names := func(tables []citusTable) []string {
		out := make([]string, len(tables))
		for i, t := range tables {
			out[i] = t.name
		}
		return out
	}
	order := distributionOrder([]citusTable{
		{name: "a_items", tenant: true, references: []string{"z_parents"}},
		{name: "z_parents", tenant: true, references: []string{"models"}},
		{name: "models"},
		{name: "b_loose", tenant: true, references: []string{"elsewhere"}},
		{name: "secrets"},
	})
	require.Equal(t, []string{"models", "secrets", "b_loose", "z_parents", "a_items"}, names(order))

	cycle := distributionOrder([]citusTable{
		{name: "x", tenant: true, references: []string{"y"}},
		{name: "y", tenant: true, references: []string{"x"}},
		{name: "w", tenant: true},
	})
	require.Equal(t, []string{"w", "x", "y"}, names(cycle))
}
