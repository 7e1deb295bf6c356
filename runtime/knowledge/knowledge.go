package knowledge

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// Credentials is all of the caller a knowledge provider ever receives.
type Credentials struct {
	// RuntimeToken is the caller's runtime token; empty for the static token and in
	// open mode.
	RuntimeToken string
	// UserAuthorization is the x-infra-user-authorization value: verified against the
	// token's binding in runtime-token mode, as it came otherwise; empty when absent.
	UserAuthorization string
}

// Query is a validated query for one provider.
type Query struct {
	Text string
	// ScopeRef is the provider's opaque scope, nil for none.
	ScopeRef *string
	TopK     int
	// Filters is a compact JSON object, nil for none.
	Filters []byte
}

// ProviderInfo describes a configured provider and what is known of it.
type ProviderInfo struct {
	Name string
	// DefaultRequirement applies to queries that name no requirement.
	DefaultRequirement string
	QueryModes         []string
	ResourceResolution bool
	MaxHits            int
	// Status is contract.ProviderUp, ProviderDown or ProviderUnknown.
	Status string
}

// Providers is the port to the external knowledge providers.
type Providers interface {
	// Providers describes every configured provider, in configuration order.
	Providers() []ProviderInfo
	// Provider describes one provider; false when name is not configured.
	Provider(name string) (ProviderInfo, bool)
	// Default names the default provider, "" when there is none.
	Default() string
	// Query asks a configured provider for at most q.TopK hits, excerpts cut to
	// contract.MaxKnowledgeExcerptBytes. Errors: *ProviderError, or ctx's
	// error when the caller went away.
	Query(ctx context.Context, provider string, creds Credentials, q Query) ([]contract.KnowledgeHit, error)
	// Resolve asks a configured provider for the resources of refs; what it returns
	// may be in any order, repeat refs or hold refs not asked for. Errors as Query.
	Resolve(ctx context.Context, provider string, creds Credentials, refs []string) ([]contract.KnowledgeResource, error)
}

// ProviderError is a provider call that failed; Reason is one of the
// contract's degradation reasons (contract.ReasonProviderTimeout, ...). Err, the
// cause, is logged and never sent.
type ProviderError struct {
	Provider string
	Reason   string
	Err      error
}

// Error implements error.
func (e *ProviderError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("knowledge provider %q: %s: %v", e.Provider, e.Reason, e.Err)
	}
	return fmt.Sprintf("knowledge provider %q: %s", e.Provider, e.Reason)
}

// Unwrap returns the cause.
func (e *ProviderError) Unwrap() error { return e.Err }

// failureCodes is the failure table of docs/knowledge.md for a required provider: it
// could not be reached (503) or it answered wrongly (502).
var failureCodes = map[string]string{
	contract.ReasonProviderUnavailable:     contract.CodeKnowledgeUnavailable,
	contract.ReasonProviderTimeout:         contract.CodeKnowledgeUnavailable,
	contract.ReasonCircuitOpen:             contract.CodeKnowledgeUnavailable,
	contract.ReasonProviderNotConfigured:   contract.CodeKnowledgeUnavailable,
	contract.ReasonProviderError:           contract.CodeKnowledgeUpstreamError,
	contract.ReasonProviderInvalidResponse: contract.CodeKnowledgeUpstreamError,
}

// Service holds the use cases of the knowledge facade (docs/knowledge.md): it
// validates, picks the provider, forwards the caller's credentials and normalizes
// failure. It stores nothing.
type Service struct {
	providers Providers
}

// New returns the facade over providers.
func New(providers Providers) *Service {
	return &Service{providers: providers}
}

// Capabilities lists the configured providers and their status. It calls no provider.
func (k *Service) Capabilities() *contract.KnowledgeCapabilities {
	out := &contract.KnowledgeCapabilities{Providers: []contract.KnowledgeProviderInfo{}}
	if d := k.providers.Default(); d != "" {
		out.Default = &d
	}
	for _, p := range k.providers.Providers() {
		modes := p.QueryModes
		if modes == nil {
			modes = []string{}
		}
		out.Providers = append(out.Providers, contract.KnowledgeProviderInfo{
			Provider: p.Name, QueryModes: modes, ResourceResolution: p.ResourceResolution,
			MaxHits: p.MaxHits, Status: p.Status,
		})
	}
	return out
}

// Query validates a query and asks the provider, answering a failure as its
// requirement says: required → KNOWLEDGE_UNAVAILABLE or KNOWLEDGE_UPSTREAM_ERROR,
// optional → no hits with degraded and the reason, disabled → no call at all.
func (k *Service) Query(ctx context.Context, p runtime.Principal, req *contract.KnowledgeQueryRequest) (*contract.KnowledgeQueryResponse, error) {
	if err := runtime.ValidateQuery("query", req.Query, contract.MaxKnowledgeQueryBytes); err != nil {
		return nil, err
	}
	if req.Requirement != "" && !slices.Contains(contract.Requirements, req.Requirement) {
		return nil, runtime.OneOf("requirement", contract.Requirements)
	}
	info, err := k.pick(req.Provider)
	if err != nil {
		return nil, err
	}
	q := Query{Text: req.Query}
	if q.TopK, err = runtime.OptionalCount("topK", req.TopK, contract.DefaultKnowledgeTopK, contract.MaxKnowledgeTopK); err != nil {
		return nil, err
	}
	if req.ScopeRef != nil {
		if err := runtime.ValidateRef("scopeRef", *req.ScopeRef); err != nil {
			return nil, err
		}
		q.ScopeRef = req.ScopeRef
	}
	if q.Filters, err = validateFilters(req.Filters); err != nil {
		return nil, err
	}
	requirement := req.Requirement
	if requirement == "" {
		requirement = info.DefaultRequirement
	}
	res := &contract.KnowledgeQueryResponse{Hits: []contract.KnowledgeHit{}}
	if info.Name != "" {
		res.Provider = &info.Name
	}
	if requirement == contract.RequirementDisabled {
		res.DegradationReason = ptr(contract.ReasonDisabled)
		return res, nil
	}
	var hits []contract.KnowledgeHit
	if info.Name == "" {
		err = &ProviderError{Reason: contract.ReasonProviderNotConfigured}
	} else {
		hits, err = k.providers.Query(ctx, info.Name, credentials(p), q)
	}
	if err != nil {
		var failed *ProviderError
		if requirement == contract.RequirementRequired || !errors.As(err, &failed) {
			return nil, knowledgeFailure(err)
		}
		res.Degraded, res.DegradationReason = true, ptr(failed.Reason)
		return res, nil
	}
	if hits != nil {
		res.Hits = hits
	}
	return res, nil
}

// Resolve validates the refs and asks the provider for their resources; a provider
// failure is answered as for a required query. Resources come back in request order,
// once each, and Missing lists the refs the provider did not resolve.
func (k *Service) Resolve(ctx context.Context, p runtime.Principal, req *contract.ResolveResourcesRequest) (*contract.ResolveResourcesResponse, error) {
	if err := runtime.ListSize("resourceRefs", len(req.ResourceRefs), contract.MaxResourceRefs, "ref"); err != nil {
		return nil, err
	}
	refs := make([]string, 0, len(req.ResourceRefs))
	for i, ref := range req.ResourceRefs {
		if err := runtime.ValidateRef(fmt.Sprintf("resourceRefs[%d]", i), ref); err != nil {
			return nil, err
		}
		if !slices.Contains(refs, ref) {
			refs = append(refs, ref)
		}
	}
	info, err := k.pick(req.Provider)
	if err != nil {
		return nil, err
	}
	if info.Name == "" {
		return nil, knowledgeFailure(&ProviderError{Reason: contract.ReasonProviderNotConfigured})
	}
	resources, err := k.providers.Resolve(ctx, info.Name, credentials(p), refs)
	if err != nil {
		return nil, knowledgeFailure(err)
	}
	byRef := make(map[string]contract.KnowledgeResource, len(resources))
	for _, r := range resources {
		if _, seen := byRef[r.ResourceRef]; !seen {
			byRef[r.ResourceRef] = r
		}
	}
	res := &contract.ResolveResourcesResponse{Provider: info.Name,
		Resources: []contract.KnowledgeResource{}, Missing: []string{}}
	for _, ref := range refs {
		if r, ok := byRef[ref]; ok {
			res.Resources = append(res.Resources, r)
		} else {
			res.Missing = append(res.Missing, ref)
		}
	}
	return res, nil
}

// pick returns the named provider, or the default one when name is nil; the zero info
// (with the optional requirement) when neither is configured.
func (k *Service) pick(name *string) (ProviderInfo, error) {
	if name == nil {
		if d := k.providers.Default(); d != "" {
			if info, ok := k.providers.Provider(d); ok {
				return info, nil
			}
		}
		return ProviderInfo{DefaultRequirement: contract.RequirementOptional}, nil
	}
	info, ok := k.providers.Provider(*name)
	if !ok {
		return ProviderInfo{}, runtime.Invalid("provider", "provider %q is not configured", *name)
	}
	return info, nil
}

// knowledgeFailure turns a failed provider call into the contract's error for a
// required provider. An error that is not a provider's (the caller went away) passes
// through.
func knowledgeFailure(err error) error {
	var failed *ProviderError
	if !errors.As(err, &failed) {
		return err
	}
	code, ok := failureCodes[failed.Reason]
	if !ok {
		return &runtime.Error{Code: contract.CodeInternal, Message: "internal error", Err: err}
	}
	e := &runtime.Error{Code: code, Err: err}
	if code == contract.CodeKnowledgeUnavailable {
		e.Message = "the knowledge provider is unavailable"
	} else {
		e.Message = "the knowledge provider answered with an error"
	}
	if failed.Provider != "" {
		e.With("provider", failed.Provider)
	}
	return e.With("reason", failed.Reason)
}

// validateFilters checks a query's filters: absent, null or a JSON object, at most
// 64 KiB compacted like any free-form JSON value of the contract. It returns the
// compacted object or nil.
func validateFilters(raw []byte) ([]byte, error) {
	filters, err := runtime.NormalizeMetadata("filters", raw)
	if err != nil {
		return nil, err
	}
	if filters != nil && filters[0] != '{' {
		return nil, runtime.Invalid("filters", "filters must be a JSON object")
	}
	return filters, nil
}

func credentials(p runtime.Principal) Credentials {
	return Credentials{RuntimeToken: p.RuntimeToken, UserAuthorization: p.UserAuthorization}
}

func ptr[T any](v T) *T { return &v }
