// Package transfer moves a scope's context as one document: exports into chunked
// artifacts, imports from them or inline, and the advanced operations (purging expired
// entries, reindexing text search, verifying integrity). It is the one area that reads
// several others.
package transfer
