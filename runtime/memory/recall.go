package memory

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// RecallFilter selects the entries a recall considers, besides the caller's scope:
// only entries recallable at AtMs (active and not expired), of one of Kinds (empty:
// any), of ConversationID (empty: any) and carrying every one of Tags.
type RecallFilter struct {
	Kinds          []string
	ConversationID string
	Tags           []string
	NowMs          int64
	// AsOfMs, when set, recalls as the scope stood at that instant: over the entries
	// created by then and not yet superseded, merged or expired at it.
	AsOfMs *int64
}

// AtMs is the instant whose recallable entries the filter keeps: AsOfMs, else NowMs.
func (f RecallFilter) AtMs() int64 {
	if f.AsOfMs != nil {
		return *f.AsOfMs
	}
	return f.NowMs
}

// VectorRecall is the vector half of a recall: the Limit entries nearest to Vector
// (cosine) in the scope's Generation, embedded with Model.
type VectorRecall struct {
	RecallFilter
	Generation Generation
	Vector     []float32
	Limit      int
	// ScopeEntries is the scope's active entries when the caller knows them (0
	// otherwise): a store may rank a small scope exactly rather than search an index.
	ScopeEntries int64
}

// TextRecall is the text half of a recall: the Limit entries that best match any
// word of Text.
type TextRecall struct {
	RecallFilter
	Text  string
	Limit int
}

// RecallHit is an entry one half of a recall found, with its score there: the cosine
// similarity in the vector half, the full-text rank in the text half.
type RecallHit struct {
	Entry contract.ContextEntry
	Score float64
	// Coverage is, in the text half, the share of the query's term weight (its terms'
	// idf summed) that the entry's terms hold: 1 when it holds every term.
	Coverage float64
}

// RecallStore searches the entries of a scope. Both searches apply the whole filter
// inside the search, so that a selective filter still returns Limit hits when that
// many match, and skip entries of deleted conversations.
type RecallStore interface {
	// VectorSearch returns the nearest entries, nearest first. Errors:
	// SERVICE_UNAVAILABLE.
	VectorSearch(ctx context.Context, scope runtime.Scope, q VectorRecall) ([]RecallHit, error)
	// TextSearch returns the best matching entries, best first. Errors:
	// SERVICE_UNAVAILABLE.
	TextSearch(ctx context.Context, scope runtime.Scope, q TextRecall) ([]RecallHit, error)
}

// Recall holds the recall use case (docs/entries.md).
type Recall struct {
	store      RecallStore
	projection *Projection
	embedders  Embedders
	clock      runtime.Clock
	queries    *queryEmbedder
}

// RecallOption configures NewRecall.
type RecallOption func(*Recall)

// WithQueryBudget bounds the query embeddings of recalls (the defaults of QueryBudget
// otherwise).
func WithQueryBudget(b QueryBudget) RecallOption {
	return func(r *Recall) { r.queries = newQueryEmbedder(b) }
}

// NewRecall returns the recall use case; projection reports the watermark.
func NewRecall(store RecallStore, projection *Projection, embedders Embedders, clock runtime.Clock, opts ...RecallOption) *Recall {
	if clock == nil {
		clock = runtime.SystemClock{}
	}
	r := &Recall{store: store, projection: projection, embedders: embedders, clock: clock, queries: newQueryEmbedder(QueryBudget{})}
	for _, opt := range opts {
		opt(r)
	}
	return r
}

// A hybrid recall fuses its halves by their scores, not their ranks: a result's fused
// score is textShare × its BM25 score over the text half's best × its coverage (the
// share of the query's term weight, Σ idf, that it holds), plus its cosine similarity's
// margin over the vector half's last candidate, up to vectorMarginCap. Both parts say
// how sure their half is, which ranks cannot: a vector hit standing out from the crowd
// of its candidates counts, one among many alike (a short turn of small talk, close
// to every other) barely does; a text hit counts by how strongly and how fully it
// matches the question, so one sharing an incidental word with it counts little
// whatever its rank. Without a full vector half (degraded, or fewer hits than asked
// for), the text part is not scaled by coverage: it is all there is to rank some
// entries by. The values were measured on the labelled set and on three long
// conversations (docs/recall-quality.md); the text share follows the vector half's
// strength, and came down from 0.6 when entries were embedded in their context.
const (
	textShare       = 0.4
	vectorMarginCap = 0.4
)

// Candidates one half of a hybrid recall contributes, relative to topK: fusion needs
// more than topK from each half, since the best fused results need not be the best of
// either.
const (
	hybridCandidateFactor = 2
	minHybridCandidates   = 20
)

// recallQuery is a validated recall request.
type recallQuery struct {
	text     string
	topK     int
	mode     string
	filter   RecallFilter
	minScore *float64
}

// Recall finds the entries of the caller's scope that best answer the query.
func (r *Recall) Recall(ctx context.Context, p runtime.Principal, req *contract.RecallRequest) (*contract.RecallResponse, error) {
	q, err := validateRecall(req, r.clock.Now().UnixMilli())
	if err != nil {
		return nil, err
	}
	candidates := q.topK
	if q.mode == contract.RecallHybrid {
		candidates = min(max(q.topK*hybridCandidateFactor, minHybridCandidates), 2*contract.MaxRecallTopK)
	}
	var (
		wg                sync.WaitGroup
		textHits          []RecallHit
		textErr           error
		vectorHits        []RecallHit
		vectorErr, embErr error
	)
	if q.mode != contract.RecallVector {
		wg.Add(1)
		go func() {
			defer wg.Done()
			textHits, textErr = r.store.TextSearch(ctx, p.Scope, TextRecall{RecallFilter: q.filter, Text: q.text, Limit: candidates})
		}()
	}
	st, err := r.projection.status(ctx, p.Scope)
	if err == nil && q.mode != contract.RecallText {
		var vec []float32
		vec, embErr = r.embedQuery(ctx, st.Generation.Model, q.text)
		if embErr == nil {
			vectorHits, vectorErr = r.store.VectorSearch(ctx, p.Scope, VectorRecall{
				RecallFilter: q.filter, Generation: st.Generation, Vector: vec, Limit: candidates, ScopeEntries: st.Entries,
			})
		}
	}
	wg.Wait()
	if err = errors.Join(err, textErr, vectorErr); err != nil {
		return nil, err
	}
	res := &contract.RecallResponse{Watermark: contract.RecallWatermark{
		Generation: st.Generation.Number, PendingEntries: st.Pending, IndexedThroughMs: st.IndexedThroughMs,
	}}
	if embErr != nil {
		if q.mode == contract.RecallVector || !errors.Is(embErr, ErrEmbeddingUnavailable) {
			return nil, embErr
		}
		reason := contract.DegradationEmbeddingUnavailable
		res.Degraded, res.DegradationReason = true, &reason
	}
	switch q.mode {
	case contract.RecallVector:
		res.Results = single(vectorHits, q, func(b *contract.RecallBreakdown, rank int, score float64) {
			b.VectorRank, b.VectorScore = &rank, &score
		})
	case contract.RecallText:
		res.Results = single(textHits, q, func(b *contract.RecallBreakdown, rank int, score float64) {
			b.TextRank, b.TextScore = &rank, &score
		})
	default:
		// A vector half that came back short saw every entry it could rank: the text
		// half's other hits (entries not embedded yet, say) are all there is of them.
		res.Results = fuse(vectorHits, textHits, q, embErr == nil && len(vectorHits) == candidates)
	}
	if q.filter.AsOfMs != nil {
		for i := range res.Results {
			res.Results[i].Entry = asItWas(res.Results[i].Entry)
		}
	}
	return res, nil
}

// embedQuery embeds the query with the embedder of the generation's model, within the
// query budget.
func (r *Recall) embedQuery(ctx context.Context, model EmbeddingModel, text string) ([]float32, error) {
	emb, ok := r.embedders.ForModel(model.ID)
	if !ok {
		return nil, EmbeddingUnavailable(fmt.Errorf("no embedder for the projection's model %s", model.ID))
	}
	return r.queries.embed(ctx, emb, model, text)
}

// single ranks the hits of one half: the score is that half's.
func single(hits []RecallHit, q recallQuery, mark func(b *contract.RecallBreakdown, rank int, score float64)) []contract.RecallResult {
	out := []contract.RecallResult{}
	for i, h := range hits {
		if len(out) == q.topK {
			break
		}
		if q.minScore != nil && h.Score < *q.minScore {
			continue
		}
		res := contract.RecallResult{Entry: h.Entry, Score: h.Score}
		mark(&res.Breakdown, i+1, h.Score)
		out = append(out, res)
	}
	return out
}

// fuse merges the two halves of a hybrid recall by the sum of their parts (textShare,
// vectorMarginCap), best first; ties go to the result with the better rank in either
// half, then to the newer entry, then to the smaller ID. Beside a full vector half
// (full), the text part is scaled by the hit's coverage.
func fuse(vector, text []RecallHit, q recallQuery, full bool) []contract.RecallResult {
	type fused struct {
		res  contract.RecallResult
		best int
	}
	byID := map[string]*fused{}
	var order []*fused
	add := func(hits []RecallHit, part func(RecallHit) float64, mark func(b *contract.RecallBreakdown, rank int, score float64)) {
		for i, h := range hits {
			rank, f := i+1, byID[h.Entry.ID]
			if f == nil {
				f = &fused{res: contract.RecallResult{Entry: h.Entry}, best: rank}
				byID[h.Entry.ID] = f
				order = append(order, f)
			}
			f.res.Score += part(h)
			f.best = min(f.best, rank)
			mark(&f.res.Breakdown, rank, h.Score)
		}
	}
	if len(vector) > 0 {
		last := vector[len(vector)-1].Score
		add(vector, func(h RecallHit) float64 { return min(vectorMarginCap, h.Score-last) },
			func(b *contract.RecallBreakdown, rank int, score float64) {
				b.VectorRank, b.VectorScore = &rank, &score
			})
	}
	if len(text) > 0 && text[0].Score > 0 {
		best := text[0].Score
		add(text, func(h RecallHit) float64 {
			if !full {
				return textShare * h.Score / best
			}
			return textShare * h.Score / best * h.Coverage
		}, func(b *contract.RecallBreakdown, rank int, score float64) { b.TextRank, b.TextScore = &rank, &score })
	}
	slices.SortStableFunc(order, func(a, b *fused) int {
		switch {
		case a.res.Score != b.res.Score:
			return cmpDesc(a.res.Score, b.res.Score)
		case a.best != b.best:
			return a.best - b.best
		case a.res.Entry.CreatedAtMs != b.res.Entry.CreatedAtMs:
			return cmpDesc(float64(a.res.Entry.CreatedAtMs), float64(b.res.Entry.CreatedAtMs))
		}
		return strings.Compare(a.res.Entry.ID, b.res.Entry.ID)
	})
	out := []contract.RecallResult{}
	for _, f := range order {
		if len(out) == q.topK {
			break
		}
		if q.minScore != nil && f.res.Score < *q.minScore {
			continue
		}
		out = append(out, f.res)
	}
	return out
}

func cmpDesc(a, b float64) int {
	if a > b {
		return -1
	}
	return 1
}

// validateRecall checks a recall request and returns its normalized form.
func validateRecall(req *contract.RecallRequest, nowMs int64) (recallQuery, error) {
	q := recallQuery{text: req.Query, topK: contract.DefaultRecallTopK, mode: req.Mode, filter: RecallFilter{NowMs: nowMs}}
	if len(req.Query) > contract.MaxRecallQueryBytes {
		return q, runtime.TooLarge("query", contract.MaxRecallQueryBytes)
	}
	if strings.TrimSpace(req.Query) == "" {
		return q, runtime.Invalid("query", "query must not be empty")
	}
	if req.TopK != nil {
		if *req.TopK < 1 || *req.TopK > contract.MaxRecallTopK {
			return q, runtime.TooMany("topK", contract.MaxRecallTopK, "topK must be between 1 and %d", contract.MaxRecallTopK).
				With("minimum", 1)
		}
		q.topK = *req.TopK
	}
	switch req.Mode {
	case "":
		q.mode = contract.RecallHybrid
	case contract.RecallHybrid, contract.RecallVector, contract.RecallText:
	default:
		return q, runtime.OneOf("mode", contract.RecallModes)
	}
	if req.MinScore != nil {
		if math.IsNaN(*req.MinScore) || math.IsInf(*req.MinScore, 0) {
			return q, runtime.Invalid("minScore", "minScore must be a finite number")
		}
		q.minScore = req.MinScore
	}
	if req.AsOfMs != nil {
		switch {
		case *req.AsOfMs < 0:
			return q, runtime.Invalid("asOfMs", "asOfMs must not be negative").With("minimum", 0)
		case *req.AsOfMs > nowMs:
			return q, runtime.Invalid("asOfMs", "asOfMs must not be in the future")
		}
		q.filter.AsOfMs = req.AsOfMs
	}
	if f := req.Filter; f != nil {
		for i, k := range f.Kinds {
			if !slices.Contains(contract.EntryKinds, k) {
				return q, runtime.OneOf(fmt.Sprintf("filter.kinds[%d]", i), contract.EntryKinds)
			}
		}
		q.filter.Kinds = slices.Compact(slices.Sorted(slices.Values(f.Kinds)))
		if f.ConversationID != nil {
			if err := runtime.ValidateID("filter.conversationId", *f.ConversationID); err != nil {
				return q, err
			}
			q.filter.ConversationID = *f.ConversationID
		}
		if len(f.Tags) > contract.MaxEntryTags {
			return q, runtime.TooMany("filter.tags", contract.MaxEntryTags, "filter.tags holds at most %d tags", contract.MaxEntryTags)
		}
		for i, t := range f.Tags {
			if err := runtime.ValidateID(fmt.Sprintf("filter.tags[%d]", i), t); err != nil {
				return q, err
			}
		}
		q.filter.Tags = slices.Compact(slices.Sorted(slices.Values(f.Tags)))
	}
	return q, nil
}

// asItWas is an entry that a recall as of an instant found, as it was then: it was
// active, and nothing changes an active entry but the transition that ends it.
func asItWas(e contract.ContextEntry) contract.ContextEntry {
	if e.Status != contract.EntryActive {
		e.Status, e.SupersededBy, e.MergedInto, e.UpdatedAtMs = contract.EntryActive, nil, nil, e.CreatedAtMs
	}
	return e
}
