package server

import (
	"context"
	"net/http"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/labstack/echo/v4"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/a2a"
)

// envelopeRoutes registers POST /handoff and GET /versions (docs/a2a-protocol.md).
func (s *Server) envelopeRoutes() {
	s.handle(contract.RouteA2AHandoff, s.handoff)
	s.handle(contract.RouteA2AVersions, noBody(func(_ context.Context, _ runtime.Principal) (int, any, error) {
		return http.StatusOK, s.a2a.Envelopes.SupportedVersions(), nil
	}))
}

// handoff checks that the body is one JSON object and leaves the rest to the use case,
// which verifies the signature over it before decoding the envelope and its payload
// strictly: a byte changed anywhere in a signed envelope is SIGNATURE_INVALID as long
// as the body is still JSON.
func (s *Server) handoff(c echo.Context) error {
	raw, release, err := s.gate.ReadJSON(c.Request(), 0)
	defer release()
	if err != nil {
		return err
	}
	var syntax jsontext.Value
	if err := runtime.DecodeJSON(raw, &syntax); err != nil {
		return err
	}
	ack, err := s.a2a.Envelopes.Handoff(c.Request().Context(), principal(c), &a2a.Handoff{Raw: raw, Decode: runtime.DecodeJSON})
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, ack)
}
