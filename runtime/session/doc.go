// Package session holds the operator console's sign-in sessions: a principal kept on
// the server after its token was verified, found again by a random ID the browser
// holds in a cookie. The ID itself is never stored, only its SHA-256, and neither is
// the token the session came from: a session of the static token keeps a fingerprint
// of it, so that it ends when the service's static token changes.
package session
