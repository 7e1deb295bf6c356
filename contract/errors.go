package contract

// Error codes of the contract's code table (docs/api.md).
const (
	CodeValidationFailed       = "VALIDATION_FAILED"
	CodeInvalidCursor          = "INVALID_CURSOR"
	CodeTokenMissing           = "INTERNAL_TOKEN_MISSING"
	CodeTokenInvalid           = "INTERNAL_TOKEN_INVALID"
	CodeTokenExpired           = "INTERNAL_TOKEN_EXPIRED"
	CodeTokenBindingMismatch   = "TOKEN_BINDING_MISMATCH"
	CodeTokenForbidden         = "INTERNAL_TOKEN_FORBIDDEN"
	CodeScopeForbidden         = "SCOPE_FORBIDDEN"
	CodeNotFound               = "NOT_FOUND"
	CodeRouteNotFound          = "ROUTE_NOT_FOUND"
	CodeMethodNotAllowed       = "METHOD_NOT_ALLOWED"
	CodeIdempotencyConflict    = "IDEMPOTENCY_CONFLICT"
	CodeConflict               = "CONFLICT"
	CodeInvalidTransition      = "INVALID_TRANSITION"
	CodePayloadTooLarge        = "PAYLOAD_TOO_LARGE"
	CodeUnsupportedMediaType   = "UNSUPPORTED_MEDIA_TYPE"
	CodeRateLimited            = "RATE_LIMITED"
	CodeKnowledgeUpstreamError = "KNOWLEDGE_UPSTREAM_ERROR"
	CodeKnowledgeUnavailable   = "KNOWLEDGE_UNAVAILABLE"
	CodeServiceUnavailable     = "SERVICE_UNAVAILABLE"
	CodeEmbeddingUnavailable   = "EMBEDDING_UNAVAILABLE"
	CodeInternal               = "INTERNAL"
	// The codes of the cross-boundary envelopes (docs/a2a-protocol.md).
	CodeVersionNotSupported = "VERSION_NOT_SUPPORTED"
	CodeSignatureInvalid    = "SIGNATURE_INVALID"
	CodeEnvelopeExpired     = "ENVELOPE_EXPIRED"
)

// Error categories.
const (
	CategoryValidation = "validation"
	CategoryAuth       = "auth"
	CategoryNotFound   = "not_found"
	CategoryConflict   = "conflict"
	CategoryLimits     = "limits"
	CategoryRateLimit  = "rate_limit"
	CategoryUpstream   = "upstream"
	CategoryInternal   = "internal"
)

// CodeInfo is one row of the code table: the HTTP status, category and retryability
// every response with that code carries.
type CodeInfo struct {
	Status    int
	Category  string
	Retryable bool
}

// Codes is the complete code table. A code missing here is a programming error and is
// answered as INTERNAL.
var Codes = map[string]CodeInfo{
	CodeValidationFailed:       {400, CategoryValidation, false},
	CodeInvalidCursor:          {400, CategoryValidation, false},
	CodeTokenMissing:           {401, CategoryAuth, false},
	CodeTokenInvalid:           {401, CategoryAuth, false},
	CodeTokenExpired:           {401, CategoryAuth, false},
	CodeTokenBindingMismatch:   {401, CategoryAuth, false},
	CodeTokenForbidden:         {403, CategoryAuth, false},
	CodeScopeForbidden:         {403, CategoryAuth, false},
	CodeNotFound:               {404, CategoryNotFound, false},
	CodeRouteNotFound:          {404, CategoryNotFound, false},
	CodeMethodNotAllowed:       {405, CategoryValidation, false},
	CodeIdempotencyConflict:    {409, CategoryConflict, false},
	CodeConflict:               {409, CategoryConflict, false},
	CodeInvalidTransition:      {409, CategoryConflict, false},
	CodePayloadTooLarge:        {413, CategoryLimits, false},
	CodeUnsupportedMediaType:   {415, CategoryValidation, false},
	CodeRateLimited:            {429, CategoryRateLimit, true},
	CodeKnowledgeUpstreamError: {502, CategoryUpstream, true},
	CodeKnowledgeUnavailable:   {503, CategoryUpstream, true},
	CodeServiceUnavailable:     {503, CategoryInternal, true},
	CodeEmbeddingUnavailable:   {503, CategoryUpstream, true},
	CodeInternal:               {500, CategoryInternal, false},
	CodeVersionNotSupported:    {400, CategoryValidation, false},
	CodeSignatureInvalid:       {401, CategoryAuth, false},
	CodeEnvelopeExpired:        {410, CategoryValidation, false},
}

// ErrorResponse is the body of every non-2xx response. Status and Message repeat the
// envelope's for older clients; new clients read Error.
type ErrorResponse struct {
	Status  int       `json:"status"`
	Message string    `json:"message"`
	Error   ErrorBody `json:"error"`
}

// ErrorBody is the error envelope.
type ErrorBody struct {
	Code      string         `json:"code"`
	Message   string         `json:"message"`
	Category  string         `json:"category"`
	Retryable bool           `json:"retryable"`
	RequestID string         `json:"requestId"`
	Details   map[string]any `json:"details"`
}
