package a2a_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime/a2a"
)

// The state machine of docs/a2a.md, every pair of states.
func TestTaskStateMachine(t *testing.T) {
	t.Parallel()
	allowed := map[string][]string{
		contract.TaskCreated:       {contract.TaskWorking, contract.TaskCanceled, contract.TaskFailed},
		contract.TaskWorking:       {contract.TaskInputRequired, contract.TaskCompleted, contract.TaskFailed, contract.TaskCanceled},
		contract.TaskInputRequired: {contract.TaskWorking, contract.TaskCanceled, contract.TaskFailed},
	}
	for _, from := range contract.TaskStates {
		_, open := allowed[from]
		require.Equal(t, !open, a2a.TaskTerminal(from), from)
		for _, to := range contract.TaskStates {
			want := false
			for _, s := range allowed[from] {
				want = want || s == to
			}
			require.Equal(t, want, a2a.TransitionAllowed(from, to), "%s -> %s", from, to)
		}
	}
}
