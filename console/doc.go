// Package console is the operator console: server-rendered HTML pages onto the same
// use cases, credentials and tenant isolation as the JSON API. It is a door beside
// server (which mounts it at /console/), reads only through the runtime's use cases,
// and writes nothing but its own sign-in sessions.
package console
