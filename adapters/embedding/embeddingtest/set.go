package embeddingtest

import (
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/memory"
)

// Named is an embedder with the name a rebuild request gives it.
type Named struct {
	Name     string
	Embedder memory.Embedder
}

// Set is a memory.Embedders of fixed embedders for tests and benchmarks of the
// projection and recall: the first is the configured one, Named finds each by its
// name and ForModel by its model ID.
type Set struct {
	names     []string
	embedders []memory.Embedder
}

// NewSet returns the set of configured and more.
func NewSet(configured Named, more ...Named) *Set {
	s := &Set{}
	for _, n := range append([]Named{configured}, more...) {
		s.names = append(s.names, n.Name)
		s.embedders = append(s.embedders, n.Embedder)
	}
	return s
}

// Configured implements memory.Embedders.
func (s *Set) Configured() memory.Embedder { return s.embedders[0] }

// Named implements memory.Embedders.
func (s *Set) Named(name string) (memory.Embedder, error) {
	for i, n := range s.names {
		if n == name {
			return s.embedders[i], nil
		}
	}
	return nil, runtime.Invalid("embedder", "the %s embedder is not in this set", name)
}

// ForModel implements memory.Embedders.
func (s *Set) ForModel(id string) (memory.Embedder, bool) {
	for _, e := range s.embedders {
		if e.Model().ID == id {
			return e, true
		}
	}
	return nil, false
}
