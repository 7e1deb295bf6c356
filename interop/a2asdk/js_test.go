package a2asdk

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// jsSDKVersion is the pinned @a2a-js/sdk the JavaScript interop test installs.
const jsSDKVersion = "1.3.0"

// jsStreamScript follows one sendMessageStream of the SDK's default client and writes
// each event as a JSON line.
const jsStreamScript = `import { Role, TaskState } from '@a2a-js/sdk';
import { ClientFactory } from '@a2a-js/sdk/client';
const [base, token] = process.argv.slice(2);
const client = await new ClientFactory().createFromUrl(base);
const options = { serviceParameters: { Authorization: 'Bearer ' + token } };
const params = {
  tenant: '',
  message: { messageId: 'js-1', contextId: '', taskId: '', role: Role.ROLE_USER, metadata: undefined, extensions: [],
    referenceTaskIds: [], parts: [{ content: { $case: 'text', value: 'summarize the design' }, metadata: undefined,
      filename: '', mediaType: '' }] },
  configuration: undefined,
  metadata: { toAgent: 'bob' },
};
for await (const event of client.sendMessageStream(params, options)) {
  const { $case, value } = event.payload;
  const out = { case: $case };
  if ($case === 'task') { out.id = value.id; out.state = TaskState[value.status.state]; }
  if ($case === 'statusUpdate') {
    out.state = TaskState[value.status.state];
    const part = value.status.message?.parts?.[0]?.content;
    if (part) { out.text = part.value; }
  }
  if ($case === 'artifactUpdate') { out.artifactId = value.artifact.artifactId; }
  process.stdout.write(JSON.stringify(out) + '\n');
}
`

// jsSDK installs @a2a-js/sdk with npm into a cache directory (once) and returns the
// directory, with the stream script in it. Without node and npm (Debian's nodejs and
// npm packages) the test is skipped.
func jsSDK(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (apt-get install nodejs npm)", tool)
		}
	}
	cache, err := os.UserCacheDir()
	require.NoError(t, err)
	dir := filepath.Join(cache, "agent-context-interop", "a2a-js-sdk-"+jsSDKVersion)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@a2a-js", "sdk", "package.json")); err != nil {
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"private": true, "type": "module"}`), 0o644))
		install := exec.Command("npm", "install", "--no-audit", "--no-fund", "--save-exact", "@a2a-js/sdk@"+jsSDKVersion)
		install.Dir = dir
		out, err := install.CombinedOutput()
		require.NoError(t, err, "npm install: %s", out)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "stream.mjs"), []byte(jsStreamScript), 0o644))
	return dir
}

func TestJSSDKSendMessageStream(t *testing.T) {
	t.Parallel()
	dir := jsSDK(t)
	svc := startService(t)
	replica := svc.replica()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "stream.mjs", svc.base, svc.token("alice"))
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	var steps []string
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		var e struct {
			Case, ID, State, Text, ArtifactID string
		}
		require.NoError(t, json.Unmarshal(lines.Bytes(), &e), lines.Text())
		switch {
		case e.Case == "task":
			steps = append(steps, "task:"+e.State)
			bobWorks(svc, replica, e.ID)
		case e.Text != "":
			steps = append(steps, "message:"+e.Text)
		case e.Case == "statusUpdate":
			steps = append(steps, "status:"+e.State)
		default:
			steps = append(steps, "artifact:"+e.ArtifactID)
		}
	}
	require.NoError(t, cmd.Wait(), "the stream ends after the terminal state")
	require.Equal(t, []string{"task:TASK_STATE_SUBMITTED", "status:TASK_STATE_WORKING", "message:on it",
		"artifact:summary", "status:TASK_STATE_COMPLETED"}, steps)
}
