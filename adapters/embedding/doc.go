// Package embedding groups the adapters of the runtime's Embedder port (docs/embeddings.md,
// "Embeddings and the vector projection"), chosen by AGENT_CONTEXT_EMBEDDER:
//
//   - local: Universal Sentence Encoder Lite run in-process in pure Go (the default;
//     offline, semantic, English);
//   - hash: hashed word and character n-grams (lexical, deterministic, no model);
//   - openai: any OpenAI-compatible /v1/embeddings endpoint.
//
// embeddingtest holds the contract suite every adapter passes.
package embedding
