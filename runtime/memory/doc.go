// Package memory holds context entries (create, get, correct, merge, expire), recall
// (vector, text and hybrid) and the vector projection that background jobs keep with
// the configured embedder.
package memory
