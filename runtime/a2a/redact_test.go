package a2a_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/runtime/a2a"
)

func TestRedact(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"Authorization: Basic dXNlcjpwYXNz, then":     "Authorization: [REDACTED:authorization], then",
		`{"authorization": "Bearer abc.def"}`:         `{"authorization": "[REDACTED:authorization]"}`,
		"curl -H 'bearer abc123' x":                   "curl -H 'bearer [REDACTED:bearer]' x",
		"token eyJhbGciOi.eyJzdWIiOi.c2lnbmF0 end":    "token [REDACTED:jwt] end",
		"id AKIAIOSFODNN7EXAMPLE here":                "id [REDACTED:aws_access_key] here",
		"ci ghp_abcdefghijklmnopqrstuvwxyz0123456789": "ci [REDACTED:github_token]",
		"db password=hunter2; ok":                     "db password=[REDACTED:password]; ok",
		"api_key = 'abc def'":                         "api_key = '[REDACTED:key]'",
		`{"client_secret": "x y"}`:                    `{"client_secret": "[REDACTED:secret]"}`,
		"SESSION_TOKEN=abc&next=1":                    "SESSION_TOKEN=[REDACTED:token]&next=1",
		"a\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n-----END OPENSSH PRIVATE KEY-----\nz": "a\n[REDACTED:private_key]\nz",
		"cut -----BEGIN PRIVATE KEY-----\nMIIE":                                                "cut [REDACTED:private_key]",
		"random dGhpcyBpcyBhIHZlcnkgc2VjcmV0IHRva2VuIHZhbHVlIQ9x":                              "random [REDACTED:high_entropy]",
		// What looks structured but not secret stays: digests, UUIDs, plain words.
		"sha e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855": "sha e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		"id 0190f5a2-7c3e-7b1a-9f00-3c2d1e0f4a5b":                              "id 0190f5a2-7c3e-7b1a-9f00-3c2d1e0f4a5b",
		"the key point is consistency":                                         "the key point is consistency",
	} {
		require.Equal(t, want, a2a.Redact(in), in)
	}
}

func TestRedactJSON(t *testing.T) {
	t.Parallel()
	require.Nil(t, a2a.RedactJSON(nil))
	got := a2a.RedactJSON([]byte(`{"z":1.50,"password":{"nested":true},"list":["password=x",2],"Api-Key":"k","key":"v","keys":["a"]}`))
	require.Equal(t, `{"z":1.50,"password":"[REDACTED:password]","list":["password=[REDACTED:password]",2],"Api-Key":"[REDACTED:key]","key":"[REDACTED:key]","keys":["a"]}`, string(got))
	require.Equal(t, `"Bearer [REDACTED:bearer]"`, string(a2a.RedactJSON([]byte(`"Bearer abc"`))))
}
