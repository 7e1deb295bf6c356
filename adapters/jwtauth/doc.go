// Package jwtauth verifies runtime tokens (docs/auth.md): JWTs signed by the runtime
// identity service with a key from a JWKS that this service reads from a file or fetches
// from a URL. It is an outbound adapter: it touches the file system and the network,
// and it knows lestrrat-go/jwx; the server only sees the verified Claims.
//
// It also mints tokens (Mint, GenerateKey) for the `agent-context token` command and
// for tests: the same rules on both sides keep a locally minted token verifiable.
package jwtauth
