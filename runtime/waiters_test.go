package runtime

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
)

func TestWaitersBoundEachTenantAndReleaseOnce(t *testing.T) {
	t.Parallel()
	w := NewWaiters(2)
	first, err := w.Admit("acme")
	require.NoError(t, err)
	_, err = w.Admit("acme")
	require.NoError(t, err)
	_, err = w.Admit("acme")
	require.Equal(t, contract.CodeRateLimited, ErrorCode(err))
	_, err = w.Admit("globex")
	require.NoError(t, err, "another tenant's waiters are its own")

	require.Equal(t, 3, w.Count())
	first()
	first()
	require.Equal(t, 2, w.Count())
	_, err = w.Admit("acme")
	require.NoError(t, err, "a released place is free")
	_, err = w.Admit("acme")
	require.Equal(t, contract.CodeRateLimited, ErrorCode(err), "a release called twice frees one place")
	require.Equal(t, 256, NewWaiters(0).max)
}
