package main

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/mcpserver"
)

// minMCPBodyBytes is the least MCP body bound: below it a tool call at its arguments'
// own bounds (a 64 KiB memory and its metadata) could not be sent.
const minMCPBodyBytes = 256 << 10

// loadMCPConfig reads AGENT_CONTEXT_MCP_MAX_BODY, the bound of an MCP request body in
// bytes, and AGENT_CONTEXT_MCP_AUTHORIZATION_SERVERS, the comma-separated URLs of the
// OAuth authorization servers that the MCP endpoint's protected resource metadata
// names (none when unset), and returns one message per bad value.
func loadMCPConfig(getenv func(string) string, cfg *Config) []string {
	var errs []string
	cfg.MCPMaxBodyBytes = mcpserver.DefaultMaxBodyBytes
	if v := getenv("AGENT_CONTEXT_MCP_MAX_BODY"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < minMCPBodyBytes || n > contract.MaxRequestBodyBytes {
			errs = append(errs, fmt.Sprintf("AGENT_CONTEXT_MCP_MAX_BODY must be a number of bytes from %d to %d, got %q",
				minMCPBodyBytes, contract.MaxRequestBodyBytes, v))
		} else {
			cfg.MCPMaxBodyBytes = n
		}
	}
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
