package contract

// Limits of docs/api.md.
const (
	MaxRequestBodyBytes = 32 << 20
	MaxIDChars          = 191
	MaxMetadataBytes    = 64 << 10
	MaxRequestIDChars   = 128
)
