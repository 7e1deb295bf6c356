// Package knowledge is the facade in front of external knowledge providers: capability
// listing, queries and resource resolution, with the requirement (optional or required)
// deciding whether an outage degrades or fails a request.
package knowledge
