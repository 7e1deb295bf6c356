package postgres_test

import (
	"testing"

	"github.com/agent-context/agent-context/adapters/postgres/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }
