// Package console is the operator console: server-rendered HTML pages onto the same
// use cases, credentials and tenant isolation as the JSON API. It is a door beside the
// others (the host routes /console/ to it): the gate verifies its sign-in tokens,
// admits each page against the capabilities of the contract.Routes it reads and
// bounds its bodies; it reads only through the runtime's use cases and writes nothing
// but its own sign-in sessions.
package console
