package a2a

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"regexp"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// Redaction replaces secrets in exported text with [REDACTED:<label>] (docs/a2a.md):
// private-key blocks, credentials inside URLs, Authorization and Cookie values, bearer
// tokens, JWTs, AWS access keys, GitHub tokens, the values of names ending in key,
// token, password or secret however they are assigned (key=v, key: v, "key": "v",
// YAML and HTTP-header lines), and long high-entropy strings. docs/a2a.md lists the
// exact rules.

// redactRule replaces every match of pattern with repl, a regexp template that may
// keep submatches around the label (a name and its separator, a URL's user).
type redactRule struct {
	pattern *regexp.Regexp
	repl    string
}

var redactRules = []redactRule{
	{regexp.MustCompile(`(?s)-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?:.*?-----END [A-Z0-9 ]*PRIVATE KEY-----|.*)`), "[REDACTED:private_key]"},
	// scheme://user:password@host keeps the user and the host. The password runs to
	// the last @ of the authority, so one holding an unescaped @ goes whole.
	{regexp.MustCompile(`\b([A-Za-z][A-Za-z0-9+.-]*://)([^\s:/?#@]*):([^\s/?#]+)@`), "${1}${2}:[REDACTED:password]@"},
	{regexp.MustCompile(`(?i)(\bauthorization"?\s*[:=]\s*"?)(?:[A-Za-z]+\s+)?[^\s"',;]+`), "${1}[REDACTED:authorization]"},
	// A Cookie or Set-Cookie header line carries session secrets under any name.
	{regexp.MustCompile(`(?im)^([ \t]*(?:set-)?cookie[ \t]*:[ \t]*)\S[^\r\n]*`), "${1}[REDACTED:cookie]"},
	{regexp.MustCompile(`(?i)(\bbearer\s+)[A-Za-z0-9._~+/=-]+`), "${1}[REDACTED:bearer]"},
	{regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}`), "[REDACTED:jwt]"},
	{regexp.MustCompile(`\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b`), "[REDACTED:aws_access_key]"},
	{regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})\b`), "[REDACTED:github_token]"},
}

// secretLine matches a YAML, .env or HTTP-header line assigning with a colon to a name
// that ends in key, token, password (passwd, pwd) or secret: `password: hunter2`,
// `  DB_PASSWORD: "x y"`, `- api_key: k`, `X-Api-Key: sk-live-...`. Such a value runs
// to the end of the line (a YAML scalar may hold spaces), unless it is quoted.
var secretLine = regexp.MustCompile(`(?im)^([ \t]*(?:-[ \t]+)?["']?)([A-Za-z0-9_.-]*?(password|passwd|pwd|secret|token|key))(["']?[ \t]*:[ \t]*)([^\s:][^\r\n]*)`)

// assignment matches name=value, name: value and "name": "value" in running text where
// the name ends in key, token, password (passwd, pwd) or secret; the value is what
// follows up to a quote, space or separator. A "::" (a path in code) is no assignment.
var assignment = regexp.MustCompile(`(?i)\b([A-Za-z0-9_.-]*?(password|passwd|pwd|secret|token|key))("?\s*[=:]\s*)("[^"]*"|'[^']*'|[^\s"',;&}\]:][^\s"',;&}\]]*)`)

// highEntropyCandidate is a run of token characters long enough to be a credential.
var highEntropyCandidate = regexp.MustCompile(`[A-Za-z0-9+/_=-]{32,}`)

// Redact returns s with every secret the rules recognize replaced by its label.
func Redact(s string) string {
	for _, r := range redactRules {
		s = r.pattern.ReplaceAllString(s, r.repl)
	}
	s = secretLine.ReplaceAllStringFunc(s, func(m string) string {
		sub := secretLine.FindStringSubmatch(m)
		value, label := strings.TrimRight(sub[5], " \t"), secretLabel(sub[3])
		if strings.Contains(value, "[REDACTED:") {
			return m
		}
		// A quoted value keeps its quotes and what follows them (a comma in a JSON
		// line, a comment); an unquoted one goes to the end of the line.
		if q := value[0]; q == '"' || q == '\'' {
			if end := strings.IndexByte(value[1:], q); end >= 0 {
				return sub[1] + sub[2] + sub[4] + value[:1] + "[REDACTED:" + label + "]" + value[1+end:]
			}
		}
		return sub[1] + sub[2] + sub[4] + "[REDACTED:" + label + "]"
	})
	s = assignment.ReplaceAllStringFunc(s, func(m string) string {
		sub := assignment.FindStringSubmatch(m)
		value, label := sub[4], secretLabel(sub[2])
		if strings.HasPrefix(value, "[REDACTED:") {
			return m
		}
		quote := ""
		if len(value) >= 2 && (value[0] == '"' || value[0] == '\'') {
			quote = value[:1]
		}
		return sub[1] + sub[3] + quote + "[REDACTED:" + label + "]" + quote
	})
	return highEntropyCandidate.ReplaceAllStringFunc(s, func(m string) string {
		if !highEntropy(m) {
			return m
		}
		return "[REDACTED:high_entropy]"
	})
}

// secretLabel names the kind of secret an assignment's name ends in.
func secretLabel(suffix string) string {
	switch strings.ToLower(suffix) {
	case "password", "passwd", "pwd":
		return "password"
	case "secret":
		return "secret"
	case "token":
		return "token"
	}
	return "key"
}

// highEntropy reports whether s looks random: letters and digits mixed, and a Shannon
// entropy above what hex digests and UUIDs (at most 4 bits per character) reach.
func highEntropy(s string) bool {
	var letters, digits bool
	counts := map[rune]int{}
	for _, r := range s {
		counts[r]++
		switch {
		case r >= '0' && r <= '9':
			digits = true
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
			letters = true
		}
	}
	if !letters || !digits {
		return false
	}
	var entropy float64
	n := float64(len(s))
	for _, c := range counts {
		p := float64(c) / n
		entropy -= p * math.Log2(p)
	}
	return entropy > 4.2
}

// sensitiveName reports whether a JSON member of that name holds a secret whatever its
// value looks like, and its label.
func sensitiveName(name string) (string, bool) {
	n := strings.NewReplacer("_", "", "-", "", ".", "").Replace(strings.ToLower(name))
	for _, s := range []struct{ part, label string }{
		{"password", "password"}, {"passwd", "password"}, {"secret", "secret"}, {"token", "token"},
		{"authorization", "authorization"}, {"apikey", "key"}, {"accesskey", "key"}, {"privatekey", "private_key"},
		{"credential", "secret"},
	} {
		if strings.Contains(n, s.part) {
			return s.label, true
		}
	}
	return "key", n == "key"
}

// RedactJSON returns the JSON value raw with every string redacted and the value of
// every member whose name is sensitive (password, token, apiKey, ...) replaced by its
// label, keeping member order. nil stays nil; text that is not JSON is redacted as a
// string value would be, since it must not leak either.
func RedactJSON(raw json.RawMessage) json.RawMessage {
	if raw == nil {
		return nil
	}
	out, err := redactJSON(raw)
	if err != nil {
		b, _ := json.Marshal(Redact(string(raw)))
		return b
	}
	return out
}

func redactJSON(raw []byte) ([]byte, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(raw))
	var buf bytes.Buffer
	enc := jsontext.NewEncoder(&buf)
	for {
		tok, err := dec.ReadToken()
		if errors.Is(err, io.EOF) {
			return bytes.TrimSpace(buf.Bytes()), nil
		}
		if err != nil {
			return nil, err
		}
		if tok.Kind() != '"' {
			if err := enc.WriteToken(tok); err != nil {
				return nil, err
			}
			continue
		}
		s := tok.String()
		kind, length := dec.StackIndex(dec.StackDepth())
		// Inside an object the tokens alternate name, value: an odd count read so far
		// means s was a member name.
		if kind == '{' && length%2 == 1 {
			if err := enc.WriteToken(jsontext.String(s)); err != nil {
				return nil, err
			}
			if label, ok := sensitiveName(s); ok {
				if _, err := dec.ReadValue(); err != nil {
					return nil, err
				}
				if err := enc.WriteToken(jsontext.String("[REDACTED:" + label + "]")); err != nil {
					return nil, err
				}
			}
			continue
		}
		if err := enc.WriteToken(jsontext.String(Redact(s))); err != nil {
			return nil, err
		}
	}
}
