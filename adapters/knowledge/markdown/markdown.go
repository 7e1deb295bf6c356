// Package markdown is a reference knowledge provider: it serves a folder of Markdown
// files over the provider wire protocol (docs/knowledge-provider-protocol.md) with
// plain keyword scoring, so that the facade can be tried end to end without a real
// knowledge system (`agent-context knowledge serve-example DIR`). It is an example of
// the protocol, not a search engine: the folder is read once, at start.
package markdown

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode"

	"github.com/go-json-experiment/json"

	"github.com/agent-context/agent-context/adapters/knowledge"
	"github.com/agent-context/agent-context/contract"
)

// Bounds of the example.
const (
	MaxFiles        = 10000
	MaxFileBytes    = 4 << 20
	MaxRequestBytes = 1 << 20
)

// Provider is the loaded folder; it is an http.Handler of the protocol.
type Provider struct {
	docs  []*document
	byRef map[string]*document
}

type document struct {
	ref      string
	title    string
	revision string
	uri      string
	size     int
	sections []section
}

// section is a heading and the text up to the next heading: the unit a hit points at.
type section struct {
	ref   string
	text  string
	terms map[string]int
}

// Load reads every *.md file below dir (hidden files and folders skipped). A file's
// resourceRef is its slash-separated path relative to dir.
func Load(dir string) (*Provider, error) {
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	p := &Provider{byRef: map[string]*document{}}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path != root && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() || !strings.EqualFold(filepath.Ext(path), ".md") {
			return nil
		}
		if len(p.docs) == MaxFiles {
			return fmt.Errorf("more than %d Markdown files", MaxFiles)
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		doc, err := readDocument(path, filepath.ToSlash(rel))
		if err != nil {
			return err
		}
		p.docs = append(p.docs, doc)
		p.byRef[doc.ref] = doc
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", dir, err)
	}
	return p, nil
}

// Documents is the number of files served.
func (p *Provider) Documents() int { return len(p.docs) }

func readDocument(path, ref string) (*document, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, MaxFileBytes)
	}
	sum := sha256.Sum256(data)
	doc := &document{ref: ref, revision: hex.EncodeToString(sum[:6]), size: len(data),
		uri: (&url.URL{Scheme: "file", Path: filepath.ToSlash(path)}).String()}
	for i, text := range splitSections(strings.ToValidUTF8(string(data), "\uFFFD")) {
		doc.sections = append(doc.sections, section{ref: fmt.Sprintf("s%d", i), text: text, terms: termCounts(text)})
		if doc.title == "" {
			if heading, ok := strings.CutPrefix(strings.SplitN(text, "\n", 2)[0], "# "); ok {
				doc.title = strings.TrimSpace(heading)
			}
		}
	}
	if doc.title == "" {
		doc.title = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	}
	return doc, nil
}

// splitSections cuts Markdown at its ATX headings (lines starting with #), outside
// fenced code blocks. Blank sections are dropped.
func splitSections(text string) []string {
	var sections []string
	var cur strings.Builder
	fenced := false
	flush := func() {
		if s := strings.TrimSpace(cur.String()); s != "" {
			sections = append(sections, s)
		}
		cur.Reset()
	}
	for line := range strings.Lines(text) {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fenced = !fenced
		}
		if !fenced && strings.HasPrefix(line, "#") {
			flush()
		}
		cur.WriteString(line)
	}
	flush()
	return sections
}

// terms splits text into lower-case words of letters and digits.
func terms(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

// occurrences counts the words of the section that start with word, so that "deploy"
// also finds "deploys" and "deployment".
func (s *section) occurrences(word string) int {
	n := 0
	for term, count := range s.terms {
		if strings.HasPrefix(term, word) {
			n += count
		}
	}
	return n
}

func termCounts(text string) map[string]int {
	counts := map[string]int{}
	for _, t := range terms(text) {
		counts[t]++
	}
	return counts
}

// ServeHTTP answers the three routes of the protocol.
func (p *Provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	route := map[string]struct {
		method string
		serve  func(http.ResponseWriter, *http.Request)
	}{
		knowledge.PathCapabilities: {http.MethodGet, p.capabilities},
		knowledge.PathQuery:        {http.MethodPost, p.query},
		knowledge.PathResolve:      {http.MethodPost, p.resolve},
	}[r.URL.Path]
	switch {
	case route.serve == nil:
		writeError(w, http.StatusNotFound, "no such route")
	case r.Method != route.method:
		w.Header().Set("Allow", route.method)
		writeError(w, http.StatusMethodNotAllowed, "method not allowed")
	default:
		route.serve(w, r)
	}
}

func (p *Provider) capabilities(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, knowledge.ProviderCapabilities{
		QueryModes: []string{"keyword"}, ResourceResolution: true, MaxHits: contract.MaxKnowledgeTopK,
	})
}

type scored struct {
	doc   *document
	sec   *section
	score float64
	freq  int
}

// query scores every section by the share of the query's distinct words it contains,
// as words or word beginnings (ties: more occurrences first, then path and section
// order). scopeRef, when set,
// keeps the documents in that folder.
func (p *Provider) query(w http.ResponseWriter, r *http.Request) {
	var req knowledge.ProviderQuery
	if !decode(w, r, &req) {
		return
	}
	if req.TopK < 1 || req.TopK > contract.MaxKnowledgeTopK {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("topK must be between 1 and %d", contract.MaxKnowledgeTopK))
		return
	}
	words := terms(req.Query)
	slices.Sort(words)
	words = slices.Compact(words)
	var found []scored
	for _, doc := range p.docs {
		if req.ScopeRef != nil && !strings.HasPrefix(doc.ref, strings.TrimSuffix(*req.ScopeRef, "/")+"/") {
			continue
		}
		for i := range doc.sections {
			sec := &doc.sections[i]
			matched, freq := 0, 0
			for _, word := range words {
				if n := sec.occurrences(word); n > 0 {
					matched, freq = matched+1, freq+n
				}
			}
			if matched > 0 {
				found = append(found, scored{doc: doc, sec: sec, score: float64(matched) / float64(len(words)), freq: freq})
			}
		}
	}
	slices.SortStableFunc(found, func(a, b scored) int {
		switch {
		case a.score != b.score:
			return cmp.Compare(b.score, a.score)
		case a.freq != b.freq:
			return b.freq - a.freq
		default:
			return strings.Compare(a.doc.ref, b.doc.ref)
		}
	})
	hits := make([]contract.KnowledgeHit, 0, min(len(found), req.TopK))
	for _, f := range found[:min(len(found), req.TopK)] {
		excerpt, truncated := knowledge.CutExcerpt(f.sec.text)
		hits = append(hits, contract.KnowledgeHit{
			ResourceRef: f.doc.ref, RevisionRef: &f.doc.revision, SegmentRef: &f.sec.ref, Title: &f.doc.title,
			Excerpt: excerpt, Truncated: truncated, Score: &f.score, URI: &f.doc.uri,
		})
	}
	writeJSON(w, http.StatusOK, knowledge.ProviderQueryResult{Hits: hits})
}

func (p *Provider) resolve(w http.ResponseWriter, r *http.Request) {
	var req knowledge.ProviderResolve
	if !decode(w, r, &req) {
		return
	}
	res := knowledge.ProviderResolveResult{Resources: []contract.KnowledgeResource{}, Missing: []string{}}
	for _, ref := range req.ResourceRefs {
		doc, ok := p.byRef[ref]
		if !ok {
			res.Missing = append(res.Missing, ref)
			continue
		}
		metadata, err := json.Marshal(map[string]int{"bytes": doc.size, "sections": len(doc.sections)})
		if err != nil {
			writeError(w, http.StatusInternalServerError, "encoding failed")
			return
		}
		res.Resources = append(res.Resources, contract.KnowledgeResource{
			ResourceRef: doc.ref, RevisionRef: &doc.revision, Title: &doc.title, URI: &doc.uri, Metadata: metadata,
		})
	}
	writeJSON(w, http.StatusOK, res)
}

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxRequestBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeError(w, http.StatusRequestEntityTooLarge, "the request body is too large")
			return false
		}
		writeError(w, http.StatusBadRequest, "the request body could not be read")
		return false
	}
	if err := json.Unmarshal(bytes.TrimSpace(data), v); err != nil {
		writeError(w, http.StatusBadRequest, "the request body is not valid JSON of the protocol")
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		status, data = http.StatusInternalServerError, []byte(`{"error":"encoding failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

func writeError(w http.ResponseWriter, status int, message string) {
	writeJSON(w, status, map[string]string{"error": message})
}
