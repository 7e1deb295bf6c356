package knowledge_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agent-context/agent-context/adapters/knowledge"
	"github.com/agent-context/agent-context/contract"
)

// FuzzCutExcerpt: a cut excerpt is a prefix of the original, at most 64 KiB, valid
// UTF-8 when the original was, and cut exactly when the original was longer.
func FuzzCutExcerpt(f *testing.F) {
	f.Add("short", 0)
	f.Add("é", contract.MaxKnowledgeExcerptBytes)
	f.Add("a🙂", contract.MaxKnowledgeExcerptBytes/4)
	f.Fuzz(func(t *testing.T, unit string, repeat int) {
		if unit == "" || repeat < 0 || repeat > 3*contract.MaxKnowledgeExcerptBytes/len(unit) {
			return
		}
		s := strings.Repeat(unit, repeat)
		got, cut := knowledge.CutExcerpt(s)
		if !strings.HasPrefix(s, got) || len(got) > contract.MaxKnowledgeExcerptBytes {
			t.Fatalf("cut %d bytes to %d", len(s), len(got))
		}
		if cut != (len(s) > contract.MaxKnowledgeExcerptBytes) || (!cut && got != s) {
			t.Fatalf("cut=%v for %d bytes", cut, len(s))
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatal("the cut split a character")
		}
		if cut && utf8.ValidString(s) && len(got) < contract.MaxKnowledgeExcerptBytes-utf8.UTFMax {
			t.Fatalf("cut too much: %d bytes", len(got))
		}
	})
}

// FuzzParseConfig: any file either is refused with at least one problem or gives a
// configuration every part of which is within its bounds.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(`{"default": "a", "providers": [{"name": "a", "baseUrl": "http://127.0.0.1:1", "timeoutMs": 5}]}`), true)
	f.Add([]byte("providers:\n  - name: a\n    baseUrl: https://x/y/\n    maxHits: 3\n"), false)
	f.Add([]byte(`{"providers": [{"name": "a"}, {"name": "a"}]}`), true)
	f.Fuzz(func(t *testing.T, data []byte, isJSON bool) {
		cfg, err := knowledge.ParseConfig(data, isJSON)
		if err != nil {
			if cfgErr, ok := err.(*knowledge.ConfigError); !ok || len(cfgErr.Problems) == 0 {
				t.Fatalf("not a ConfigError with problems: %v", err)
			}
			return
		}
		names := map[string]bool{}
		for _, p := range cfg.Providers {
			if names[p.Name] || p.Name == "" || p.Timeout <= 0 || p.Timeout > knowledge.MaxTimeout ||
				p.MaxHits < 1 || p.MaxHits > contract.MaxKnowledgeTopK || p.CircuitFailures < 1 || p.CircuitOpen <= 0 ||
				strings.HasSuffix(p.BaseURL, "/") {
				t.Fatalf("accepted %+v", p)
			}
			names[p.Name] = true
		}
		if cfg.Default != "" && !names[cfg.Default] {
			t.Fatalf("default %q names no provider", cfg.Default)
		}
	})
}
