// Package knowledge is the outbound adapter to external knowledge providers
// (docs/knowledge.md): a bounded HTTP client per provider speaking the provider wire
// protocol of docs/knowledge-provider-protocol.md. Each provider has its own timeout,
// response-size bound, hit cap and circuit breaker (sony/gobreaker); excerpts over
// 64 KiB are cut. Only the caller's runtime token and, where configured, its
// x-infra-user-authorization reach a provider; nothing else of the caller does.
//
// It also reads the providers file (LoadConfig) and exports Prometheus metrics of
// provider latency and circuit state.
package knowledge
