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

// TestRedactAssignmentForms: secrets as agents write them — YAML, .env, HTTP headers,
// prose, JSON lines, connection strings — lose their values and keep their names, users
// and hosts; lines that only look similar stay as they were.
func TestRedactAssignmentForms(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		// YAML and colon forms.
		{"password: hunter2", "password: [REDACTED:password]"},
		{"  password: correct horse battery staple", "  password: [REDACTED:password]"},
		{"DB_PASSWORD: s3cr3t!", "DB_PASSWORD: [REDACTED:password]"},
		{`DB_PASSWORD: "p@ss word"`, `DB_PASSWORD: "[REDACTED:password]"`},
		{"    db_password: 'x'  # prod", "    db_password: '[REDACTED:password]'  # prod"},
		{"token: 4f9a1c", "token: [REDACTED:token]"},
		{"- api_key: abc123", "- api_key: [REDACTED:key]"},
		{"client_secret: sEcReT", "client_secret: [REDACTED:secret]"},
		{"aws_secret_access_key: wJalrXUtnFEMI/K7MDENG", "aws_secret_access_key: [REDACTED:key]"},
		{"spring.datasource.password: admin123", "spring.datasource.password: [REDACTED:password]"},
		{"MYSQL_PWD: root", "MYSQL_PWD: [REDACTED:password]"},
		{"config:\n  redis:\n    password: r3dis\n    port: 6379", "config:\n  redis:\n    password: [REDACTED:password]\n    port: 6379"},
		// HTTP headers.
		{"X-Api-Key: sk-live-51HxQ2e", "X-Api-Key: [REDACTED:key]"},
		{"Authorization: Bearer abc.def.ghi", "Authorization: [REDACTED:authorization]"},
		{"Proxy-Authorization: Basic YWxhZGRpbjpvcGVu", "Proxy-Authorization: [REDACTED:authorization]"},
		{"X-Auth-Token: 0123abcd", "X-Auth-Token: [REDACTED:token]"},
		{"Cookie: session=abc; theme=dark", "Cookie: [REDACTED:cookie]"},
		{"Set-Cookie: sid=31d4d96e407aad42; Path=/; Secure", "Set-Cookie: [REDACTED:cookie]"},
		{`curl -H "X-Api-Key: sk-live-abc" https://api.example.com`, `curl -H "X-Api-Key: [REDACTED:key]" https://api.example.com`},
		{"curl -H 'Authorization: token ghp_x' url", "curl -H 'Authorization: [REDACTED:authorization]' url"},
		// Prose, .env and query strings.
		{"the staging password: hunter2 works again", "the staging password: [REDACTED:password] works again"},
		{"use token:abc123 for now", "use token:[REDACTED:token] for now"},
		{"export GITHUB_TOKEN=abc", "export GITHUB_TOKEN=[REDACTED:token]"},
		{"PGPASSWORD=secret psql -h db", "PGPASSWORD=[REDACTED:password] psql -h db"},
		{"GET /cb?code=1&access_token=xyz&state=2", "GET /cb?code=1&access_token=[REDACTED:token]&state=2"},
		{`  "password": "hunter2",`, `  "password": "[REDACTED:password]",`},
		{`{"apiKey": "k-123", "region": "eu"}`, `{"apiKey": "[REDACTED:key]", "region": "eu"}`},
		// Credentials inside URLs keep the user and the host.
		{"postgres://admin:secret@db.internal:5432/app", "postgres://admin:[REDACTED:password]@db.internal:5432/app"},
		{"DATABASE_URL=postgres://admin:secret@host/db", "DATABASE_URL=postgres://admin:[REDACTED:password]@host/db"},
		{"mongodb+srv://svc:p@ss@cluster0.mongodb.net/?retryWrites=true", "mongodb+srv://svc:[REDACTED:password]@cluster0.mongodb.net/?retryWrites=true"},
		{"https://deploy:tok3n@git.example.com/org/repo.git", "https://deploy:[REDACTED:password]@git.example.com/org/repo.git"},
		{"redis://:authpass@cache:6379/0", "redis://:[REDACTED:password]@cache:6379/0"},
		{"amqp://guest:guest@rabbit/vhost", "amqp://guest:[REDACTED:password]@rabbit/vhost"},
		// What only looks like it stays.
		{"status: ok", "status: ok"},
		{"tokens: 1200", "tokens: 1200"},
		{"max_tokens: 512", "max_tokens: 512"},
		{"keyboard: us", "keyboard: us"},
		{"Content-Type: application/json", "Content-Type: application/json"},
		{"Host: api.example.com", "Host: api.example.com"},
		{"password:", "password:"},
		{"ssh git@github.com:org/repo.git", "ssh git@github.com:org/repo.git"},
		{"https://user@example.com/path", "https://user@example.com/path"},
		{"postgres://db.internal:5432/app", "postgres://db.internal:5432/app"},
		{"see https://example.com:8443/a?b=c", "see https://example.com:8443/a?b=c"},
		{"let k = HashKey::new(seed);", "let k = HashKey::new(seed);"},
		{"the key point is consistency", "the key point is consistency"},
		{"time: 12:30:00", "time: 12:30:00"},
	} {
		require.Equal(t, c.want, a2a.Redact(c.in), c.in)
	}
}

func TestRedactJSON(t *testing.T) {
	t.Parallel()
	require.Nil(t, a2a.RedactJSON(nil))
	got := a2a.RedactJSON([]byte(`{"z":1.50,"password":{"nested":true},"list":["password=x",2],"Api-Key":"k","key":"v","keys":["a"]}`))
	require.Equal(t, `{"z":1.50,"password":"[REDACTED:password]","list":["password=[REDACTED:password]",2],"Api-Key":"[REDACTED:key]","key":"[REDACTED:key]","keys":["a"]}`, string(got))
	require.Equal(t, `"Bearer [REDACTED:bearer]"`, string(a2a.RedactJSON([]byte(`"Bearer abc"`))))
}
