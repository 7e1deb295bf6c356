package main

import (
	"fmt"
	"net/url"
	"strings"
)

// loadMCPConfig reads AGENT_CONTEXT_MCP_AUTHORIZATION_SERVERS, the comma-separated
// URLs of the OAuth authorization servers that the MCP endpoint's protected resource
// metadata names (none when unset), and returns one message per bad URL.
func loadMCPConfig(getenv func(string) string, cfg *Config) []string {
	var errs []string
	cfg.MCPAuthorizationServers = nil
	for _, raw := range strings.Split(getenv("AGENT_CONTEXT_MCP_AUTHORIZATION_SERVERS"), ",") {
		v := strings.TrimSpace(raw)
		if v == "" {
			continue
		}
		if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Sprintf("AGENT_CONTEXT_MCP_AUTHORIZATION_SERVERS must list absolute http or https URLs, got %q", v))
			continue
		}
		cfg.MCPAuthorizationServers = append(cfg.MCPAuthorizationServers, v)
	}
	return errs
}
