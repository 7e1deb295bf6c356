package server

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// envelopeRoutes registers POST /handoff and GET /versions (07-a2a.md, Envelopes).
func (s *Server) envelopeRoutes() {
	s.handle(contract.RouteA2AHandoff, numberBounds(s.handoff,
		fieldBounds(map[string]int64{"ttl_ms": contract.MaxEnvelopeTTLMs})))
	s.handle(contract.RouteA2AVersions, noBody(func(_ context.Context, _ runtime.Principal) (int, any, error) {
		return http.StatusOK, s.a2a.SupportedVersions(), nil
	}))
}

// handoff decodes an envelope strictly, keeping the body its signature covers, and
// leaves the payload to the use case, which decodes it (strictly too) once the
// signature has verified and the content type is known.
func (s *Server) handoff(c echo.Context) error {
	hold := &bodyHold{budget: s.maxBody.budget}
	defer hold.release()
	raw, err := readBody(c.Request(), s.maxBody, hold)
	if err != nil {
		return err
	}
	var env contract.Envelope
	if err := decodeJSON(raw, &env); err != nil {
		return err
	}
	p, _ := c.Get(ctxKeyPrincipal).(runtime.Principal)
	ack, err := s.a2a.Handoff(c.Request().Context(), p, &runtime.Handoff{
		Envelope: &env, Raw: raw,
		DecodePayloadFunc: func(v any) error { return decodeJSON(env.Payload, v) },
	})
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, ack)
}
